package io.kvroute.connector.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.http.internal.ConcurrentLegs;
import io.kvroute.connector.http.internal.PeekedStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/**
 * The base of every connector that speaks HTTP to vLLM or SGLang: it parses and validates the
 * client body, builds leg headers (the client's, minus hop-by-hop and routing headers, plus {@code
 * X-Request-Id}), sends legs through the shared {@link HttpTransport}, maps failures to {@link
 * UpstreamException}, and implements {@link #proxy} on top of {@link #prepareDecode}.
 *
 * <p>Subclasses implement {@link #prepareDecode}. Connector parameters understood here (in the
 * {@code config:} block): {@code maxRequestBytes} (default 16 MiB), {@code maxPrefillResponseBytes}
 * (default 4 MiB).
 *
 * <p>Thread-safe when subclasses keep no per-request state in fields.
 */
public abstract class AbstractHttpConnector implements KVConnector {

  /** Headers the gateway uses for routing; never forwarded from a client to a model server. */
  public static final Set<String> ROUTING_HEADERS =
      Set.of(
          "x-prefiller-host-port",
          "x-prefiller-url",
          "x-decoder-host-port",
          "x-gateway-destination-endpoint",
          "x-data-parallel-host-port",
          "target-pod");

  /** The host context. */
  protected final KVConnectorProvider.Context context;

  /** The shared transport. */
  protected final HttpTransport transport;

  /** The listener. */
  protected final ConnectorListener listener;

  private final int maxRequestBytes;
  private final int maxPrefillResponseBytes;

  /** Reads the common parameters from {@code context.config()}. */
  protected AbstractHttpConnector(KVConnectorProvider.Context context) {
    this.context = context;
    this.transport = context.transport();
    this.listener = context.listener();
    this.maxRequestBytes = context.config().intParam("maxRequestBytes", 16 * 1024 * 1024);
    this.maxPrefillResponseBytes =
        context.config().intParam("maxPrefillResponseBytes", 4 * 1024 * 1024);
    if (maxRequestBytes < 1) {
      throw new io.kvroute.connector.ConnectorConfigException(
          "kvConnector.config.maxRequestBytes", "must be >= 1, was " + maxRequestBytes);
    }
  }

  /** The largest prefill (or other non-streamed leg) response read, in bytes. */
  protected int maxPrefillResponseBytes() {
    return maxPrefillResponseBytes;
  }

  /** The largest client body accepted, in bytes. */
  protected int maxRequestBytes() {
    return maxRequestBytes;
  }

  /** Parses the client's body: one JSON object within {@code maxRequestBytes}. */
  protected ObjectNode parseBody(InferenceRequest request) {
    return OpenAiJson.parseObject(request.body(), maxRequestBytes);
  }

  /**
   * The headers for a leg: the client's, without hop-by-hop, routing and length headers, with
   * {@code X-Request-Id} set (not added) to the request id.
   */
  protected Map<String, List<String>> legHeaders(InferenceRequest request) {
    Map<String, List<String>> h = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    request
        .headers()
        .forEach(
            (k, v) -> {
              String lower = k.toLowerCase(Locale.ROOT);
              if (!ROUTING_HEADERS.contains(lower) && !lower.equals("x-request-id")) {
                h.put(k, v);
              }
            });
    h.put(InferenceRequest.REQUEST_ID_HEADER, List.of(request.requestId()));
    return h;
  }

  /**
   * Sends a non-streaming leg and parses its JSON answer. A non-2xx status, a timeout or an
   * unparsable body fails with {@link UpstreamException}.
   */
  protected CompletableFuture<ObjectNode> sendJson(
      Leg leg,
      Endpoint endpoint,
      String path,
      Map<String, List<String>> headers,
      ObjectNode body,
      Duration timeout) {
    long start = context.nanoClock().getAsLong();
    CompletableFuture<ObjectNode> result = requestJson(leg, endpoint, path, headers, body, timeout);
    if (leg == Leg.PREFILL) {
      result.whenComplete(
          (r, t) ->
              listener.prefillEnded(
                  type(),
                  endpoint.id(),
                  ConnectorListener.outcome(t),
                  context.nanoClock().getAsLong() - start));
    }
    return result;
  }

  /**
   * Like {@link #sendJson} but not reported to the listener as a prefill: for side calls such as
   * {@code /tokenize} made on a leg's endpoint.
   */
  protected CompletableFuture<ObjectNode> requestJson(
      Leg leg,
      Endpoint endpoint,
      String path,
      Map<String, List<String>> headers,
      ObjectNode body,
      Duration timeout) {
    return cancellable(
        transport.send(
            HttpTransport.Outbound.post(endpoint, path, OpenAiJson.toBytes(body))
                .leg(leg)
                .headers(headers)
                .timeout(timeout)
                .build()),
        resp -> {
          if (resp.status() / 100 != 2) {
            return errorFrom(leg, endpoint, resp)
                .thenApply(
                    e -> {
                      throw e;
                    });
          }
          return resp.readAll(maxPrefillResponseBytes)
              .thenApply(bytes -> parseResponse(leg, endpoint, bytes));
        });
  }

  private static ObjectNode parseResponse(Leg leg, Endpoint endpoint, byte[] bytes) {
    try {
      JsonNode n = OpenAiJson.readTree(bytes);
      if (n != null && n.isObject()) {
        return (ObjectNode) n;
      }
    } catch (java.io.IOException e) {
      // reported below
    }
    throw new UpstreamException(
        leg,
        endpoint.id(),
        UpstreamException.Kind.PROTOCOL,
        0,
        null,
        null,
        leg.name().toLowerCase(Locale.ROOT)
            + " response from "
            + endpoint.baseUrl()
            + " is not a JSON object",
        null);
  }

  /**
   * Reads an error response (up to 8 KiB) into an {@link UpstreamException} that carries the
   * status, the body prefix and {@code Retry-After}.
   */
  protected static CompletableFuture<UpstreamException> errorFrom(
      Leg leg, Endpoint endpoint, StreamingResponse resp) {
    Optional<Duration> retryAfter = resp.header("Retry-After").flatMap(v -> parseRetryAfter(v));
    return resp.readAll(64 * 1024)
        .handle(
            (bytes, t) -> {
              String body = null;
              if (bytes != null) {
                String s = new String(bytes, StandardCharsets.UTF_8);
                body = s.length() > 8192 ? s.substring(0, 8192) : s;
              }
              return new UpstreamException(
                  leg,
                  endpoint.id(),
                  UpstreamException.Kind.STATUS,
                  resp.status(),
                  retryAfter.orElse(null),
                  body,
                  leg.name().toLowerCase(Locale.ROOT)
                      + " leg on "
                      + endpoint.baseUrl()
                      + " answered HTTP "
                      + resp.status(),
                  null);
            });
  }

  /** Parses {@code Retry-After}: delta-seconds or an HTTP date; empty when unparsable. */
  public static Optional<Duration> parseRetryAfter(String value) {
    if (value == null) {
      return Optional.empty();
    }
    String v = value.trim();
    try {
      long secs = Long.parseLong(v);
      return secs < 0 ? Optional.empty() : Optional.of(Duration.ofSeconds(secs));
    } catch (NumberFormatException e) {
      try {
        ZonedDateTime when = ZonedDateTime.parse(v, DateTimeFormatter.RFC_1123_DATE_TIME);
        Duration d = Duration.between(ZonedDateTime.now(when.getZone()), when);
        return Optional.of(d.isNegative() ? Duration.ZERO : d);
      } catch (java.time.DateTimeException e2) {
        return Optional.empty();
      }
    }
  }

  /**
   * Sends the decode leg as a stream. The future completes with the response once its head arrived
   * with a 2xx status; otherwise it fails with {@link UpstreamException}.
   */
  protected CompletableFuture<StreamingResponse> sendDecode(DecodeRequest decode) {
    long start = context.nanoClock().getAsLong();
    CompletableFuture<StreamingResponse> result =
        cancellable(
            transport.send(
                HttpTransport.Outbound.post(decode.endpoint(), decode.path(), decode.body())
                    .leg(Leg.DECODE)
                    .headers(decode.headers())
                    .timeout(context.decodeTimeout())
                    .streaming(true)
                    .build()),
            resp -> {
              if (resp.status() / 100 != 2) {
                return errorFrom(Leg.DECODE, decode.endpoint(), resp)
                    .thenApply(
                        e -> {
                          throw e;
                        });
              }
              return CompletableFuture.completedFuture(resp);
            });
    result.whenComplete(
        (r, t) ->
            listener.decodeHead(
                type(),
                decode.endpoint().id(),
                ConnectorListener.outcome(t),
                context.nanoClock().getAsLong() - start));
    return result;
  }

  /**
   * Healthy when {@code GET /health} answers 200 within the configured health-check timeout (vLLM
   * and SGLang both serve it).
   */
  @Override
  public CompletableFuture<Boolean> checkHealth(Endpoint endpoint) {
    return transport
        .send(
            HttpTransport.Outbound.get(endpoint, "/health")
                .timeout(context.config().timeouts().healthCheck())
                .build())
        .handle(
            (resp, t) -> {
              if (t != null) {
                return false;
              }
              resp.cancel();
              return resp.status() == 200;
            });
  }

  /** Runs {@link #prepareDecode} and then the decode leg; cancelling cancels whichever runs. */
  @Override
  public CompletableFuture<StreamingResponse> proxy(PdRequest request) {
    return cancellable(prepareDecode(request), this::sendDecode);
  }

  /**
   * {@code first.thenCompose(next)}, except that cancelling the result also cancels the stage in
   * flight (plain {@code thenCompose} does not propagate cancellation upstream).
   */
  protected static <A, B> CompletableFuture<B> cancellable(
      CompletableFuture<A> first, Function<A, CompletableFuture<B>> next) {
    return CancellableFutures.compose(first, next);
  }

  /**
   * Starts a prefill leg that runs at the same time as the decode leg (SGLang, vLLM's
   * MooncakeConnector): {@code POST path} of {@code body} to {@code endpoint}, timed out after the
   * prefill timeout, its 2xx JSON answer parsed (at most {@code maxPrefillResponseBytes}), a
   * non-2xx answer turned into an {@link UpstreamException}, its outcome reported to the listener.
   * {@code settled} runs once with the failure (or null) before the future completes. Cancelling
   * the future releases the upstream call at whatever stage it is. Pass it to {@link
   * #joinConcurrentLegs}.
   */
  protected CompletableFuture<ObjectNode> sendConcurrentPrefill(
      Endpoint endpoint,
      String path,
      Map<String, List<String>> headers,
      ObjectNode body,
      java.util.function.Consumer<Throwable> settled) {
    long start = context.nanoClock().getAsLong();
    ConcurrentLegs.PrefillLeg leg =
        ConcurrentLegs.PrefillLeg.send(
            transport,
            HttpTransport.Outbound.post(endpoint, path, OpenAiJson.toBytes(body))
                .leg(Leg.PREFILL)
                .headers(headers)
                .timeout(context.prefillTimeout())
                .build(),
            maxPrefillResponseBytes,
            resp -> errorFrom(Leg.PREFILL, endpoint, resp),
            (answer, t) -> {
              listener.prefillEnded(
                  type(),
                  endpoint.id(),
                  ConnectorListener.outcome(t),
                  context.nanoClock().getAsLong() - start);
              settled.accept(t);
            });
    return leg.result();
  }

  /**
   * The decode response of two legs running together, handed out only once the prefill succeeded
   * too (so a dead prefill is seen before any decode byte reaches the client, and the pair can
   * still be retried). A failure of either leg cancels the other and fails the result with that
   * leg's error; cancelling the result cancels both.
   */
  protected static CompletableFuture<StreamingResponse> joinConcurrentLegs(
      CompletableFuture<ObjectNode> prefill, CompletableFuture<StreamingResponse> decode) {
    return ConcurrentLegs.join(prefill, decode);
  }

  /**
   * A response that sends {@code first} as its first chunk and then {@code rest}'s body, read only
   * as the subscriber asks for it (for a synthetic first chunk, such as a prefill's token).
   */
  protected static StreamingResponse prependChunk(byte[] first, StreamingResponse rest) {
    return PeekedStream.prepend(first, rest);
  }

  /**
   * The decode leg of a request served without a prefill ({@code mode=decode_only}): the client's
   * body with any client-sent KV-transfer fields removed. When it has none, the client's bytes are
   * sent as they came (the same JSON, not encoded again).
   */
  protected CompletableFuture<DecodeRequest> decodeOnly(PdRequest pd) {
    ObjectNode body;
    try {
      body = parseBody(pd.request());
    } catch (ConnectorException e) {
      return CompletableFuture.failedFuture(e);
    }
    boolean clean = true;
    for (String f : OpenAiJson.TRANSFER_FIELDS) {
      clean &= !body.has(f);
    }
    byte[] bytes =
        clean ? pd.request().body() : OpenAiJson.toBytes(OpenAiJson.stripTransferFields(body));
    return CompletableFuture.completedFuture(
        DecodeRequest.builder(pd.decode(), pd.request().api().path(), bytes)
            .headers(legHeaders(pd.request()))
            .attributes(Map.of("mode", "decode_only"))
            .build());
  }

  /** A decode request to {@code endpoint} with {@code body}. */
  protected DecodeRequest decodeRequest(
      InferenceRequest request, Endpoint endpoint, ObjectNode body, Map<String, String> attrs) {
    return DecodeRequest.builder(endpoint, request.api().path(), OpenAiJson.toBytes(body))
        .headers(legHeaders(request))
        .attributes(attrs)
        .build();
  }

  /**
   * An endpoint's integer label (such as a per-pod port override), or {@code dflt} when the label
   * is absent.
   *
   * @throws io.kvroute.connector.ConnectorConfigException naming the endpoint and the label when
   *     the value is not an integer
   */
  protected static Integer intLabel(Endpoint endpoint, String label, Integer dflt) {
    String value = endpoint.label(label);
    if (value == null) {
      return dflt;
    }
    try {
      return Integer.valueOf(value.trim());
    } catch (NumberFormatException e) {
      throw new io.kvroute.connector.ConnectorConfigException(
          "endpoint " + endpoint.id() + " label " + label,
          "must be a port number, was \"" + value + "\"");
    }
  }

  /** Validation failures as a failed future rather than a throw. */
  protected static <T> CompletableFuture<T> failed(ConnectorException e) {
    return CompletableFuture.failedFuture(e);
  }
}
