package io.kvroute.connector.sglang;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.config.Checks;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.Leg;
import io.kvroute.connector.http.ConcurrentHttpConnector;
import io.kvroute.connector.http.ConnectorParameters;
import io.kvroute.connector.http.HttpParameters;
import io.kvroute.connector.http.OpenAiJson;
import io.kvroute.connector.http.TypedConnectorProvider;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.LongSupplier;

/**
 * The {@code sglang} connector: SGLang's prefill/decode disaggregation with its bootstrap
 * rendezvous, as SGLang's {@code mini_lb} and {@code sgl-model-gateway}, llm-d's {@code sglang},
 * Kthena's and AIBrix's SGLang connectors speak it (spec §2.7).
 *
 * <ol>
 *   <li><b>Decode leg</b>: the client's body (client transfer fields removed) plus the top-level
 *       {@code bootstrap_host} (the prefill endpoint's host, IPv6 in brackets), {@code
 *       bootstrap_port} (see below; JSON {@code null} lets the receiving server use its own {@code
 *       --disaggregation-bootstrap-port}) and {@code bootstrap_room} (a random integer in [0,
 *       2<sup>63</sup>−1], drawn anew for every call, so a retry on another pair never reuses a
 *       room). A completions request whose {@code prompt} is a batch (an array of strings or of
 *       token arrays) gets one list entry per prompt, each with its own room.
 *   <li><b>Prefill leg</b>: the same body with {@code stream=false}, {@code max_tokens=1}, {@code
 *       max_completion_tokens=1} only when present, and without {@code stream_options}, {@code
 *       min_tokens}, {@code min_completion_tokens} (as AIBrix and Kthena send it; {@code mini_lb}
 *       sends the decode body unchanged, which a disaggregated prefill server handles the same
 *       way). The answer is only checked for success.
 *   <li>Both legs are sent <b>at the same time</b>: SGLang's decode receiver contacts the prefill's
 *       bootstrap server keyed by the room, so neither can finish alone.
 * </ol>
 *
 * <p>{@link #proxy} hands out the decode stream once the prefill has succeeded as well (as {@code
 * sgl-model-gateway} does): a prefill failure cancels decode and fails with a retryable {@link
 * io.kvroute.connector.UpstreamException} naming {@link Leg#PREFILL}; a decode failure cancels the
 * prefill; cancelling cancels both. {@link #prepareDecode} <em>starts</em> the prefill (detached,
 * bounded by the prefill timeout, reported to the listener) and returns the decode request, which
 * the gateway must send at once. Both legs carry the same {@code X-Request-Id}.
 *
 * <p>Parameters (the {@code config:} block; {@link Parameters}):
 *
 * <ul>
 *   <li>{@code bootstrapPort} (default: unset, sent as {@code null}): the prefill servers' {@code
 *       --disaggregation-bootstrap-port} (SGLang's default is 8998). An endpoint label {@code
 *       kvroute.io/sglang-bootstrap-port} overrides it per prefill endpoint (AIBrix reads the same
 *       fact from a pod annotation).
 *   <li>{@code maxPrefillResponseBytes} (default 4 MiB).
 * </ul>
 *
 * <p>Logprobs: SGLang's {@code mini_lb} prepends the prefill's {@code
 * meta_info.input_token_logprobs} to the decode's, but only for SGLang's native {@code /generate}
 * ({@code return_logprob}); the OpenAI-style answers of the two APIs kvroute routes carry no {@code
 * meta_info}, so there is nothing to merge. Not handled: per-item bootstrap lists for {@code n > 1}
 * (untested in every reference, spec §8.14).
 *
 * <p>Thread-safe; the room source is {@link ThreadLocalRandom} unless a test injects one.
 */
public final class SglangConnector extends ConcurrentHttpConnector {

  /** The type name. */
  public static final String TYPE = "sglang";

  /** Endpoint label overriding {@code bootstrapPort}. */
  public static final String BOOTSTRAP_PORT_LABEL = "kvroute.io/sglang-bootstrap-port";

  private final Integer bootstrapPort;
  private final LongSupplier rooms;

  /**
   * The parameters of {@code sglang}.
   *
   * @param bootstrapPort the prefill servers' {@code --disaggregation-bootstrap-port} (default:
   *     unset, sent as {@code null} so that each server uses its own); the endpoint label {@value
   *     #BOOTSTRAP_PORT_LABEL} overrides it per prefill endpoint
   * @param maxPrefillResponseBytes as in {@link HttpParameters}
   */
  public record Parameters(Integer bootstrapPort, Integer maxPrefillResponseBytes) {
    /** Fills in the defaults and checks the values. */
    public Parameters {
      if (bootstrapPort != null) {
        Checks.range("bootstrapPort", bootstrapPort, 1, 65535);
      }
      HttpParameters http = HttpParameters.of(maxPrefillResponseBytes);
      maxPrefillResponseBytes = http.maxPrefillResponseBytes();
    }

    /** The common HTTP parameters. */
    public HttpParameters http() {
      return HttpParameters.of(maxPrefillResponseBytes);
    }
  }

  /** A connector in {@code context}; its {@code config:} block binds to {@link Parameters}. */
  public SglangConnector(KVConnectorProvider.Context context) {
    this(context, ConnectorParameters.bind(context.config(), Parameters.class));
  }

  /** A connector in {@code context} with {@code parameters}. */
  public SglangConnector(KVConnectorProvider.Context context, Parameters parameters) {
    this(context, parameters, () -> ThreadLocalRandom.current().nextLong() & Long.MAX_VALUE);
  }

  SglangConnector(KVConnectorProvider.Context context, LongSupplier rooms) {
    this(context, ConnectorParameters.bind(context.config(), Parameters.class), rooms);
  }

  private SglangConnector(
      KVConnectorProvider.Context context, Parameters parameters, LongSupplier rooms) {
    super(context, parameters.http());
    this.rooms = rooms;
    this.bootstrapPort = parameters.bootstrapPort();
  }

  @Override
  public String type() {
    return TYPE;
  }

  private Integer bootstrapPort(Endpoint prefill) {
    return intLabel(prefill, BOOTSTRAP_PORT_LABEL, bootstrapPort);
  }

  /** The batch size of a completions prompt array, or 0 for a single prompt. */
  private static int batchSize(ObjectNode body) {
    JsonNode prompt = body.get("prompt");
    if (prompt == null || !prompt.isArray() || prompt.size() == 0) {
      return 0;
    }
    JsonNode first = prompt.get(0);
    return first.isTextual() || first.isArray() ? prompt.size() : 0;
  }

  /** Adds the bootstrap fields to {@code body} in place; returns the (first) room. */
  private long addBootstrap(ObjectNode body, Endpoint prefill) {
    Integer port = bootstrapPort(prefill);
    String host = prefill.host().indexOf(':') >= 0 ? "[" + prefill.host() + "]" : prefill.host();
    int n = batchSize(body);
    if (n == 0) {
      long room = rooms.getAsLong();
      body.put("bootstrap_host", host);
      if (port == null) {
        body.putNull("bootstrap_port");
      } else {
        body.put("bootstrap_port", port.intValue());
      }
      body.put("bootstrap_room", room);
      return room;
    }
    ArrayNode hosts = body.putArray("bootstrap_host");
    ArrayNode ports = body.putArray("bootstrap_port");
    ArrayNode roomList = body.putArray("bootstrap_room");
    long first = 0;
    for (int i = 0; i < n; i++) {
      hosts.add(host);
      if (port == null) {
        ports.addNull();
      } else {
        ports.add(port.intValue());
      }
      long room = rooms.getAsLong();
      if (i == 0) {
        first = room;
      }
      roomList.add(room);
    }
    return first;
  }

  @Override
  protected CompletableFuture<Attempt> attempt(PdRequest pd, ObjectNode body) {
    long room = addBootstrap(body, pd.prefill());
    Map<String, String> attrs = new LinkedHashMap<>();
    attrs.put("mode", "prefill_decode");
    attrs.put("bootstrap_room", Long.toString(room));
    return CompletableFuture.completedFuture(
        new Attempt(
            legHeaders(pd.request()),
            OpenAiJson.oneTokenPrefill(body, null),
            decodeRequest(pd, body, attrs),
            t -> {}));
  }

  /** The ServiceLoader provider of {@code sglang}. */
  public static final class Provider extends TypedConnectorProvider<Parameters> {
    /** For ServiceLoader. */
    public Provider() {
      super(
          TYPE,
          "SGLang PD: bootstrap_host/port/room on both legs, prefill and decode together",
          Parameters.class,
          SglangConnector::new);
    }
  }
}
