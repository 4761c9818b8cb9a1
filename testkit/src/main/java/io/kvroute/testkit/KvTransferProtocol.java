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
  SGLANG
}
