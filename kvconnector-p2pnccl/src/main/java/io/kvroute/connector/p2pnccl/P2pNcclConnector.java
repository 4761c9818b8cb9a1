package io.kvroute.connector.p2pnccl;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.config.Checks;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.http.AbstractHttpConnector;
import io.kvroute.connector.http.ConnectorParameters;
import io.kvroute.connector.http.HttpParameters;
import io.kvroute.connector.http.OpenAiJson;
import io.kvroute.connector.http.TypedConnectorProvider;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * The {@code p2pnccl} connector: vLLM's {@code P2pNcclConnector} (xPyD), as vLLM's reference proxy
 * ({@code
 * examples/online_serving/disaggregated_serving_p2p_nccl_xpyd/disagg_proxy_p2p_nccl_xpyd.py})
 * drives it. The KV moves between the instances over NCCL; the proxy only tells them where, through
 * the request id.
 *
 * <ol>
 *   <li>Both legs carry {@code X-Request-Id: ___prefill_addr_<P>___decode_addr_<D>_<hex>}: {@code
 *       <P>} and {@code <D>} are the prefill's and the decode's KV ({@code zmq_address}) {@code
 *       host:port} as they registered it, {@code <hex>} a fresh {@code uuid4().hex} per attempt.
 *       The prefill instance sends its KV to {@code <D>} while it prefills; the decode instance
 *       loads it, keyed by the request id.
 *   <li><b>Prefill leg</b>, blocking, to the client's path: the client's body with {@code
 *       max_tokens=1} — the reference's one change — and, as every kvroute connector sends a
 *       prefill, {@code stream=false}, {@code max_completion_tokens=1} when the client sent it, and
 *       without {@code stream_options}, {@code min_tokens}, {@code min_completion_tokens}. (The
 *       reference forwards those unchanged: a streamed one-token prefill it drains, a chat prefill
 *       whose {@code max_completion_tokens} overrides its {@code max_tokens=1}, and a 400 for
 *       {@code min_tokens > 1}.) The answer is only checked for success.
 *   <li><b>Decode leg</b>, streamed: the client's body unchanged.
 * </ol>
 *
 * <p>An instance's KV address is its endpoint's label {@value #KV_ADDRESS_LABEL}, which {@link
 * P2pNcclRegistry} sets from the instance's registration; endpoints configured by hand give it, or
 * the {@code kvPort} parameter (the KV address is then the endpoint's host and that port, as vLLM's
 * {@code kv_port} is the same on every instance of a static deployment).
 *
 * <p>Every request needs a prefill: an instance running the P2pNccl connector addresses every
 * request's KV through its id (a consumer always loads the prompt's KV, and fails on an id without
 * addresses), so a decode-only request (no prefill endpoint) fails with {@link
 * ConnectorException.NoAvailableEndpointException} (503) and nothing is sent. Client-supplied
 * transfer fields ({@code kv_transfer_params}, {@code bootstrap_*}, {@code disaggregated_params})
 * never reach either instance.
 *
 * <p>Parameters (the {@code config:} block of {@code kvConnector}; {@link Parameters}): {@code
 * kvPort}, and {@code maxPrefillResponseBytes} as for every HTTP connector.
 *
 * <p>Thread-safe and stateless per request.
 */
public final class P2pNcclConnector extends AbstractHttpConnector {

  /** The type name. */
  public static final String TYPE = "p2pnccl";

  /**
   * The endpoint label holding an instance's KV ({@code zmq_address}) {@code host:port}; set by
   * {@link P2pNcclRegistry} from the registration.
   */
  public static final String KV_ADDRESS_LABEL = "kvroute.io/p2pnccl-kv-address";

  /**
   * The parameters of {@code p2pnccl}.
   *
   * @param kvPort the KV port of endpoints without {@value #KV_ADDRESS_LABEL} (default none: such
   *     an endpoint cannot be used; 1..65535)
   * @param maxPrefillResponseBytes as in {@link HttpParameters}
   */
  public record Parameters(Integer kvPort, Integer maxPrefillResponseBytes) {
    /** Checks the values and fills in the defaults. */
    public Parameters {
      if (kvPort != null) {
        Checks.range("kvPort", kvPort, 1, 65535);
      }
      HttpParameters http = HttpParameters.of(maxPrefillResponseBytes);
      maxPrefillResponseBytes = http.maxPrefillResponseBytes();
    }

    /** The common HTTP parameters. */
    public HttpParameters http() {
      return HttpParameters.of(maxPrefillResponseBytes);
    }
  }

  private final Parameters params;
  private final Supplier<UUID> ids;

  /** A connector in {@code context}; its {@code config:} block binds to {@link Parameters}. */
  public P2pNcclConnector(KVConnectorProvider.Context context) {
    this(context, ConnectorParameters.bind(context.config(), Parameters.class));
  }

  /** A connector in {@code context} with these parameters. */
  public P2pNcclConnector(KVConnectorProvider.Context context, Parameters parameters) {
    this(context, parameters, UUID::randomUUID);
  }

  P2pNcclConnector(KVConnectorProvider.Context context, Supplier<UUID> ids) {
    this(context, ConnectorParameters.bind(context.config(), Parameters.class), ids);
  }

  P2pNcclConnector(KVConnectorProvider.Context context, Parameters parameters, Supplier<UUID> ids) {
    super(context, parameters.http());
    this.params = parameters;
    this.ids = ids;
  }

  @Override
  public String type() {
    return TYPE;
  }

  /**
   * The KV address of {@code endpoint}: its label, else its host and {@code kvPort}.
   *
   * @throws ConnectorConfigException naming the endpoint when it has neither, or a label that is
   *     not {@code host:port}
   */
  String kvAddress(Endpoint endpoint) {
    String label = endpoint.label(KV_ADDRESS_LABEL);
    if (label != null) {
      if (KvAddress.parse(label).isEmpty()) {
        throw new ConnectorConfigException(
            "endpoint " + endpoint.id() + " label " + KV_ADDRESS_LABEL,
            "must be host:port, was \"" + label + "\"");
      }
      return label.trim();
    }
    if (params.kvPort() == null) {
      throw new ConnectorConfigException(
          "endpoint " + endpoint.id() + " label " + KV_ADDRESS_LABEL,
          "is missing: the instance did not register through the P2pNccl registry; label the"
              + " endpoint with its KV address or set kvConnector.config.kvPort");
    }
    return new KvAddress(endpoint.host(), params.kvPort()).toString();
  }

  @Override
  public CompletableFuture<DecodeRequest> prepareDecode(PdRequest pd) {
    if (!pd.disaggregated()) {
      return failed(
          new ConnectorException.NoAvailableEndpointException(
              "p2pnccl needs a prefill instance for every request (its KV is addressed through the"
                  + " request id); none was chosen for decode "
                  + pd.decode().id()));
    }
    String requestId;
    try {
      requestId = RequestIds.format(kvAddress(pd.prefill()), kvAddress(pd.decode()), ids.get());
    } catch (ConnectorException e) {
      return failed(e);
    }
    Map<String, List<String>> headers = legHeaders(pd.request());
    headers.put(InferenceRequest.REQUEST_ID_HEADER, List.of(requestId));
    return withClientBody(
        pd,
        body ->
            cancellable(
                sendPrefill(pd, OpenAiJson.oneTokenPrefill(body, null), headers),
                answer ->
                    CompletableFuture.completedFuture(
                        withUsage(decode(pd, body, headers, requestId), answer))));
  }

  private DecodeRequest decode(
      PdRequest pd, ObjectNode body, Map<String, List<String>> headers, String requestId) {
    Map<String, String> attrs = new LinkedHashMap<>();
    attrs.put("mode", "prefill_decode");
    attrs.put("p2pnccl_request_id", requestId);
    return DecodeRequest.builder(pd.decode(), pd.request().api().path(), OpenAiJson.toBytes(body))
        .headers(headers)
        .attributes(attrs)
        .build();
  }

  /** The ServiceLoader provider of {@code p2pnccl}. */
  public static final class Provider extends TypedConnectorProvider<Parameters> {
    /** For ServiceLoader. */
    public Provider() {
      super(
          TYPE,
          "vLLM P2pNcclConnector (xPyD): the KV addressed through the request id"
              + " ___prefill_addr_P___decode_addr_D_uuid, prefill then streamed decode",
          Parameters.class,
          P2pNcclConnector::new);
    }
  }
}
