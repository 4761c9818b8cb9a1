package io.kvroute.connector.mooncake;

import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.http.ConnectorParameters;
import io.kvroute.connector.http.HttpConnector;
import io.kvroute.connector.http.HttpParameters;
import io.kvroute.connector.http.TypedConnectorProvider;

/**
 * The {@code mooncake-store} connector: vLLM in front of a shared MooncakeStore (a distributed KV
 * store, like LMCache with a store backend). There is no per-request rendezvous, so the gateway
 * speaks the plain sequential two-step protocol, exactly as the {@code http} connector does (spec
 * §2.3(b)):
 *
 * <ol>
 *   <li><b>Prefill leg</b>, blocking: the client's body with {@code stream=false}, {@code
 *       max_tokens=1} (for chat also {@code max_completion_tokens=1}), without {@code
 *       stream_options}, {@code min_tokens}, {@code min_completion_tokens}; the answer is checked
 *       and discarded.
 *   <li><b>Decode leg</b>: the client's original body, streamed; the decoder loads the KV the
 *       prefill stored.
 * </ol>
 *
 * <p><b>Why a separate type.</b> Early kvroute design notes used {@code mooncake} for this
 * MooncakeStore flow, and Kthena's {@code mooncake} is a NIXL-style copy. In kvroute, {@code
 * mooncake} is upstream vLLM's {@code MooncakeConnector} (bootstrap {@code /query}, shared {@code
 * transfer_id}, both legs in flight together; see {@link MooncakeConnector}). A configuration
 * written for the store must say {@code mooncake-store}, so that no configuration silently changes
 * meaning: pointed at a MooncakeConnector deployment, this connector still works, but every decode
 * prefills locally.
 *
 * <p>Both legs carry the same {@code X-Request-Id}; client-supplied transfer fields are removed.
 * Parameters (the {@code config:} block): {@link HttpParameters} ({@code maxPrefillResponseBytes},
 * default 4 MiB).
 *
 * <p>Thread-safe and stateless per request.
 */
public final class MooncakeStoreConnector extends HttpConnector {

  /** The type name. */
  public static final String TYPE = "mooncake-store";

  /** A connector in {@code context}; its {@code config:} block binds to {@link HttpParameters}. */
  public MooncakeStoreConnector(KVConnectorProvider.Context context) {
    this(context, ConnectorParameters.bind(context.config(), HttpParameters.class));
  }

  /** A connector in {@code context} with {@code parameters}. */
  public MooncakeStoreConnector(KVConnectorProvider.Context context, HttpParameters parameters) {
    super(context, TYPE, parameters);
  }

  /** The ServiceLoader provider of {@code mooncake-store}. */
  public static final class Provider extends TypedConnectorProvider<HttpParameters> {
    /** For ServiceLoader. */
    public Provider() {
      super(
          TYPE,
          "vLLM with a shared MooncakeStore: prefill (max_tokens=1) then the original body to"
              + " decode (the plain two-step flow)",
          HttpParameters.class,
          MooncakeStoreConnector::new);
    }
  }
}
