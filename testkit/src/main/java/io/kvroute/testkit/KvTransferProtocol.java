package io.kvroute.testkit;

/**
 * The KV-transfer connector a simulated pod runs, deciding what its prefill and decode legs accept
 * and return (see {@code spec/pd-connector-protocols.md} §2).
 */
public enum KvTransferProtocol {
  /** No connector: {@code kv_transfer_params} and {@code bootstrap_*} are ignored. */
  NONE,
  /**
   * vLLM {@code NixlConnector}: a prefill with {@code do_remote_decode} that hits the one-token cap
   * returns {@code kv_transfer_params}; a decode with complete params pulls the blocks from the
   * named prefill simulator; incomplete params prefill locally.
   */
  NIXL,
  /**
   * LMCache / shared storage: prefills save their blocks to a {@link SharedKvStore} that several
   * simulators see; requests load the longest stored prefix. No request fields.
   */
  SHARED_STORAGE,
  /**
   * vLLM {@code MooncakeConnector}: a bootstrap server answers {@code GET /query}; prefill keeps
   * its blocks under {@code transfer_id} (returns no params); decode with {@code transfer_id},
   * {@code remote_engine_id} and {@code remote_bootstrap_addr} waits for and takes them.
   */
  MOONCAKE,
  /**
   * SGLang PD: both legs carry top-level {@code bootstrap_host}, {@code bootstrap_port} and {@code
   * bootstrap_room}; the decode waits for the prefill of the same room on the prefill simulator at
   * that bootstrap address.
   */
  SGLANG,
  /**
   * vLLM {@code P2pNcclConnector} (xPyD): the pod binds a KV socket ({@code zmq_address}) and, with
   * {@link VllmSimulator.Builder#p2pNcclProxy}, registers with the proxy every ping; every request
   * must carry {@code X-Request-Id: ___prefill_addr_<P>___decode_addr_<D>_<uuid>} (500 otherwise,
   * where vLLM's {@code parse_request_id} raises). A prefill holds its KV for the decode address
   * the id names; a decode waits for the KV the prefill at the named address holds for its own
   * address and request id (no KV within {@code transferTimeout}: the load-failure policy).
   */
  P2P_NCCL
}
