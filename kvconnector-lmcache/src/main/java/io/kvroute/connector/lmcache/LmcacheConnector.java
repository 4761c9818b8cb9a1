package io.kvroute.connector.lmcache;

import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.http.HttpConnector;

/**
 * The {@code lmcache} connector: vLLM with {@code LMCacheConnectorV1}, where the KV moves below the
 * HTTP layer (LMCache's own NIXL channel configured in its YAML with {@code enable_pd}, or a shared
 * Redis/disk store). The gateway-visible protocol is the sequential two-step of vLLM's bundled
 * LMCache proxy ({@code examples/others/lmcache/disagg_prefill_lmcache_v1/disagg_proxy_server.py}),
 * llm-d's {@code lmcache}/{@code shared-storage} sidecar connectors and Kthena's {@code lmcache}
 * (spec §2.2(a)):
 *
 * <ol>
 *   <li><b>Prefill leg</b>, blocking: the client's body with {@code max_tokens=1} (for chat also
 *       {@code max_completion_tokens=1}), {@code stream=false}, and without {@code stream_options},
 *       {@code min_tokens}, {@code min_completion_tokens}. The answer is checked for a 2xx status
 *       and discarded. (The reference proxy leaves {@code stream} as the client sent it and drains
 *       the stream; forcing {@code false} returns the same KV with one small JSON answer, spec
 *       §8.7.)
 *   <li><b>Decode leg</b>: the client's original body, streamed back as it arrives. No transfer
 *       fields: the decoder finds the KV in LMCache by the prompt's tokens, so both legs must
 *       tokenize identically (same body, same {@code PYTHONHASHSEED} on both engines).
 * </ol>
 *
 * <p>Both legs carry the same {@code X-Request-Id}; client-supplied {@code kv_transfer_params},
 * {@code bootstrap_*} and {@code disaggregated_params} are removed from both. On the wire this is
 * the same flow as the {@code http} connector; the separate type names the deployment (and keeps a
 * configuration that says {@code lmcache} meaning this).
 *
 * <p>Not implemented: LMCache's own first-token PD proxy (spec §2.2(b): {@code /tokenize}, {@code
 * kv_transfer_params.ret_first_tok}/{@code disagg_spec}, a ZMQ "done" wait and a synthetic first
 * chunk). No gateway speaks it (llm-d, Kthena and AIBrix all use the two-step flow), and it needs
 * LMCache's proxy-side ZMQ receiver. llm-d's {@code cache_hit_threshold} decode-first variant is
 * the {@code shared-storage} connector ({@code io.kvroute.connector.http.SharedStorageConnector}).
 *
 * <p>Parameters (the {@code config:} block): {@code maxRequestBytes} (default 16 MiB; larger bodies
 * are rejected with 413) and {@code maxPrefillResponseBytes} (default 4 MiB).
 *
 * <p>Thread-safe and stateless per request.
 */
public final class LmcacheConnector extends HttpConnector {

  /** The type name. */
  public static final String TYPE = "lmcache";

  /** A connector in {@code context}. */
  public LmcacheConnector(KVConnectorProvider.Context context) {
    super(context, TYPE);
  }

  /** The ServiceLoader provider of {@code lmcache}. */
  public static final class Provider implements KVConnectorProvider {
    /** For ServiceLoader. */
    public Provider() {}

    @Override
    public String type() {
      return TYPE;
    }

    @Override
    public String description() {
      return "vLLM LMCacheConnectorV1 (shared store or LMCache PD channel): prefill (max_tokens=1)"
          + " then the original body to decode";
    }

    @Override
    public KVConnector create(Context context) {
      return new LmcacheConnector(context);
    }
  }
}
