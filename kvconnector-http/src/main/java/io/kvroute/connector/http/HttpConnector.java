package io.kvroute.connector.http;

import io.kvroute.connector.KVConnectorProvider;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The default {@code http} connector: the naive two-step flow that works with any KV-transfer
 * backend that moves KV by itself (LMCache store, MooncakeStore, shared storage, P2pNccl with
 * static config).
 *
 * <ol>
 *   <li>Prefill leg: the client's body with {@code stream=false}, {@code max_tokens=1} (and for
 *       chat {@code max_completion_tokens=1}), without {@code stream_options}, {@code min_tokens},
 *       {@code min_completion_tokens}; the answer is checked for a 2xx status and discarded.
 *   <li>Decode leg: the client's original body, streamed back as it arrives.
 * </ol>
 *
 * <p>Parameters (the {@code config:} block): {@link HttpParameters}.
 *
 * <p>Both legs carry the same {@code X-Request-Id}. Client-supplied KV-transfer fields ({@code
 * kv_transfer_params}, {@code bootstrap_*}, {@code disaggregated_params}) are removed from both.
 * Without a prefill endpoint the request goes to decode only. Thread-safe.
 *
 * <p>Backends whose gateway protocol is this same two-step flow (LMCache, MooncakeStore) subclass
 * it under their own type name with {@link #HttpConnector(KVConnectorProvider.Context, String)}.
 */
public class HttpConnector extends AbstractHttpConnector {

  /** The type name. */
  public static final String TYPE = "http";

  private final String type;

  /** A connector in {@code context}; its {@code config:} block binds to {@link HttpParameters}. */
  public HttpConnector(KVConnectorProvider.Context context) {
    this(context, ConnectorParameters.bind(context.config(), HttpParameters.class));
  }

  /** A connector in {@code context} with {@code parameters}. */
  public HttpConnector(KVConnectorProvider.Context context, HttpParameters parameters) {
    this(context, TYPE, parameters);
  }

  /**
   * The two-step flow under another type name (for subclasses), reading the common parameters
   * without checking other keys.
   */
  protected HttpConnector(KVConnectorProvider.Context context, String type) {
    super(context);
    this.type = type;
  }

  /** The two-step flow under another type name (for subclasses), with {@code parameters}. */
  protected HttpConnector(
      KVConnectorProvider.Context context, String type, HttpParameters parameters) {
    super(context, parameters);
    this.type = type;
  }

  @Override
  public String type() {
    return type;
  }

  @Override
  public final CompletableFuture<DecodeRequest> prepareDecode(PdRequest pd) {
    return prepareDisaggregated(
        pd,
        body ->
            afterPrefill(
                pd,
                OpenAiJson.prefillBody(body, pd.request().api()),
                ignored -> decodeRequest(pd, body, Map.of("mode", "prefill_decode"))));
  }

  /** The ServiceLoader provider of {@code http}. */
  public static final class Provider extends TypedConnectorProvider<HttpParameters> {
    /** For ServiceLoader. */
    public Provider() {
      super(
          TYPE,
          "two-step prefill (max_tokens=1) then streamed decode; no transfer fields",
          HttpParameters.class,
          HttpConnector::new);
    }
  }
}
