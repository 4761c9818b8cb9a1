package io.kvroute.connector.http;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.EngineUsage;
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
 * The base of every connector that speaks HTTP to vLLM or SGLang: it reads the client body (parsed
 * once per request, {@link OpenAiJson#clientBody}), builds leg headers (the client's, minus
 * hop-by-hop and routing headers, plus {@code X-Request-Id}), sends legs through the shared {@link
 * HttpTransport}, maps failures to {@link UpstreamException}, reports the prefill answer's usage
 * upward ({@link StreamingResponse#prefillUsage()}), and implements {@link #proxy} on top of {@link
 * #prepareDecode}.
 *
 * <p>Subclasses implement {@link #prepareDecode}. Connector parameters understood here (in the
 * {@code config:} block): {@link HttpParameters} ({@code maxPrefillResponseBytes}, default 4 MiB).
 * The client body's size is bounded where the body is read, before a connector sees it.
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

  /**
   * {@link #ROUTING_HEADERS} and {@code X-Request-Id}, matched case-insensitively without a
   * lower-case copy of each header name per leg.
   */
  private static final Set<String> NOT_COPIED_TO_LEGS = notCopiedToLegs();

  private static Set<String> notCopiedToLegs() {
    java.util.TreeSet<String> s = new java.util.TreeSet<>(String.CASE_INSENSITIVE_ORDER);
    s.addAll(ROUTING_HEADERS);
    s.add(InferenceRequest.REQUEST_ID_HEADER);
    return java.util.Collections.unmodifiableSet(s);
  }

  /** The host context. */
  protected final KVConnectorProvider.Context context;

  /** The shared transport. */
  protected final HttpTransport transport;

  /** The listener. */
  protected final ConnectorListener listener;

  private final int maxPrefillResponseBytes;

  /**
   * A connector whose common parameters are {@code parameters} (bound by the connector's own
   * parameter record; see {@link TypedConnectorProvider}).
   */
  protected AbstractHttpConnector(KVConnectorProvider.Context context, HttpParameters parameters) {
    this.context = context;
    this.transport = context.transport();
    this.listener = context.listener();
    this.maxPrefillResponseBytes = parameters.maxPrefillResponseBytes();
  }

  /**
   * Reads the common parameters from {@code context.config()} without checking the other keys: for
   * connectors that do not declare their parameters. Connectors that do use {@link
   * #AbstractHttpConnector(KVConnectorProvider.Context, HttpParameters)}.
   */
  protected AbstractHttpConnector(KVConnectorProvider.Context context) {
    this(context, lenient(context));
  }

  private static HttpParameters lenient(KVConnectorProvider.Context context) {
    try {
      return HttpParameters.of(
          context
              .config()
              .intParam(
                  "maxPrefillResponseBytes", HttpParameters.DEFAULT_MAX_PREFILL_RESPONSE_BYTES));
    } catch (io.kvroute.config.ConfigException e) {
      throw new io.kvroute.connector.ConnectorConfigException(
          ConnectorParameters.PATH + "." + e.path(), e.problem());
    }
  }

  /** The largest prefill (or other non-streamed leg) response read, in bytes. */
  protected int maxPrefillResponseBytes() {
    return maxPrefillResponseBytes;
  }

  /**
   * The client's body, one JSON object, as every reader of the request shares it ({@link
   * OpenAiJson#clientBody}: parsed once per request, not per attempt). Do not modify it; {@link
   * #withClientBody} hands out a copy to rewrite.
   */
  protected ObjectNode parseBody(InferenceRequest request) {
    return OpenAiJson.clientBody(request);
  }

  /**
   * The headers for a leg: the client's, without hop-by-hop, routing and length headers, with
   * {@code X-Request-Id} set (not added) to the request id.
   */
  protected Map<String, List<String>> legHeaders(InferenceRequest request) {
    Map<String, List<String>> h = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    for (Map.Entry<String, List<String>> e : request.headers().entrySet()) {
      if (!NOT_COPIED_TO_LEGS.contains(e.getKey())) {
        h.put(e.getKey(), e.getValue());
      }
    }
    h.put(InferenceRequest.REQUEST_ID_HEADER, List.of(request.requestId()));
    return h;
  }

  /**
   * Continues with {@code then} on a copy of the client's body ({@link OpenAiJson#clientBodyCopy}:
   * the request's one parse, copied so the connector may rewrite it, without client-sent
   * KV-transfer fields). A body that does not parse, or a {@link ConnectorException} that {@code
   * then} throws, fails the future instead.
   */
  protected <T> CompletableFuture<T> withClientBody(
      PdRequest pd, Function<ObjectNode, CompletableFuture<T>> then) {
    try {
      return then.apply(OpenAiJson.clientBodyCopy(pd.request()));
    } catch (ConnectorException e) {
      return failed(e);
    }
  }

  /**
   * {@link #prepareDecode} of a connector that serves a request without a prefill endpoint with
   * {@link #decodeOnly}: for a disaggregated one, {@link #withClientBody withClientBody(pd, then)}.
   */
  protected CompletableFuture<DecodeRequest> prepareDisaggregated(
      PdRequest pd, Function<ObjectNode, CompletableFuture<DecodeRequest>> then) {
    return pd.disaggregated() ? withClientBody(pd, then) : decodeOnly(pd);
  }

  /**
   * Sends the blocking prefill leg of {@code pd}: {@code POST} of {@code body} to the client's path
   * on the prefill endpoint with the leg headers, timed out after the prefill timeout, its JSON
   * answer parsed, its outcome reported to the listener. A non-2xx status, a timeout or an
   * unparsable body fails with {@link UpstreamException}.
   */
  protected CompletableFuture<ObjectNode> sendPrefill(PdRequest pd, ObjectNode body) {
    return sendPrefill(pd, body, legHeaders(pd.request()));
  }

  /**
   * {@link #sendPrefill(PdRequest, ObjectNode)} with the leg's headers given (for connectors whose
   * legs carry something other than the request's own id, such as p2pnccl's addressed id).
   */
  protected CompletableFuture<ObjectNode> sendPrefill(
      PdRequest pd, ObjectNode body, Map<String, List<String>> headers) {
    long start = context.nanoClock().getAsLong();
    return reported(
        requestJson(
            Leg.PREFILL,
            pd.prefill(),
            pd.request().api().path(),
            headers,
            body,
            context.prefillTimeout()),
        listener::prefillEnded,
        pd.prefill(),
        start);
  }

  /** One of the listener's leg-timing callbacks, such as {@code prefillEnded}. */
  @FunctionalInterface
  interface LegTiming {
    void report(String connectorType, String endpointId, String outcome, long nanos);
  }

  /**
   * Reports with {@code timing} how a leg to {@code endpoint} begun at {@code startNanos} ended.
   */
  void reportLeg(LegTiming timing, Endpoint endpoint, long startNanos, Throwable failure) {
    timing.report(
        type(),
        endpoint.id(),
        ConnectorListener.outcome(failure),
        context.nanoClock().getAsLong() - startNanos);
  }

  /** {@code result}, reported with {@code timing} once it completes. */
  private <T> CompletableFuture<T> reported(
      CompletableFuture<T> result, LegTiming timing, Endpoint endpoint, long startNanos) {
    result.whenComplete((r, t) -> reportLeg(timing, endpoint, startNanos, t));
    return result;
  }

  /**
   * The two-step flow: {@link #sendPrefill} of {@code prefillBody}, then the decode request that
   * {@code decode} makes of the prefill's answer, carrying that answer's usage ({@link
   * DecodeRequest#prefillUsage()}). Cancelling the future cancels the prefill.
   */
  protected CompletableFuture<DecodeRequest> afterPrefill(
      PdRequest pd, ObjectNode prefillBody, Function<ObjectNode, DecodeRequest> decode) {
    return cancellable(
        sendPrefill(pd, prefillBody),
        answer -> CompletableFuture.completedFuture(withUsage(decode.apply(answer), answer)));
  }

  /**
   * {@code decode}, reporting the usage of the prefill answer {@code answer} when it has one: what
   * {@link #afterPrefill} does, for connectors that send their prefill themselves.
   */
  protected static DecodeRequest withUsage(DecodeRequest decode, ObjectNode answer) {
    EngineUsage usage = OpenAiJson.usage(answer);
    return usage == null || decode.prefillUsage().isPresent()
        ? decode
        : decode.withPrefillUsage(usage);
  }

  /**
   * Sends a non-streaming leg and parses its JSON answer, without reporting it to the listener (for
   * side calls such as {@code /tokenize} made on a leg's endpoint). A non-2xx status, a timeout or
   * an unparsable body fails with {@link UpstreamException}.
   */
  protected CompletableFuture<ObjectNode> requestJson(
      Leg leg,
      Endpoint endpoint,
      String path,
      Map<String, List<String>> headers,
      ObjectNode body,
      Duration timeout) {
    HttpTransport.Outbound out =
        OpenAiJson.withBytes(
            body,
            bytes ->
                HttpTransport.Outbound.post(endpoint, path, bytes) // copied once, here
                    .leg(leg)
                    .headers(headers)
                    .timeout(timeout)
                    .build());
    return cancellable(
        transport.send(out),
        resp ->
            successful(leg, endpoint, resp)
                .thenCompose(ok -> ok.readAll(maxPrefillResponseBytes))
                .thenApply(bytes -> ConcurrentLegs.jsonObject(leg, endpoint, bytes)));
  }

  /** {@code resp} when its status is 2xx; otherwise a future failed with {@link #errorFrom}. */
  private static CompletableFuture<StreamingResponse> successful(
      Leg leg, Endpoint endpoint, StreamingResponse resp) {
    if (resp.status() / 100 == 2) {
      return CompletableFuture.completedFuture(resp);
    }
    return errorFrom(leg, endpoint, resp)
        .thenApply(
            e -> {
              throw e;
            });
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
    return reported(
        cancellable(
            transport.send(
                decode
                    .toOutbound() // the body and headers shared with decode, not copied
                    .leg(Leg.DECODE)
                    .timeout(context.decodeTimeout())
                    .streaming(true)
                    .build()),
            resp -> successful(Leg.DECODE, decode.endpoint(), resp)),
        listener::decodeHead,
        decode.endpoint(),
        start);
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

  /**
   * Runs {@link #prepareDecode} and then the decode leg; cancelling cancels whichever runs. The
   * response reports the prefill's usage that the decode request carried ({@link
   * StreamingResponse#prefillUsage()}).
   */
  @Override
  public CompletableFuture<StreamingResponse> proxy(PdRequest request) {
    return cancellable(prepareDecode(request), this::sendDecodeReporting);
  }

  /**
   * {@link #sendDecode}, the response reporting the prefill usage {@code decode} carries (when it
   * carries one).
   */
  protected CompletableFuture<StreamingResponse> sendDecodeReporting(DecodeRequest decode) {
    EngineUsage usage = decode.prefillUsage().orElse(null);
    if (usage == null) {
      return sendDecode(decode);
    }
    return cancellable(
        sendDecode(decode),
        resp -> CompletableFuture.completedFuture(StreamingResponse.withPrefillUsage(resp, usage)));
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
    DecodeRequest.Builder b =
        clean
            ? DecodeRequest.builder(pd.decode(), pd.request()) // the client's bytes, shared
            : OpenAiJson.withBytes(
                OpenAiJson.stripTransferFields(body.deepCopy()),
                bytes -> DecodeRequest.builder(pd.decode(), pd.request().api().path(), bytes));
    return CompletableFuture.completedFuture(
        b.headers(legHeaders(pd.request())).attributes(Map.of("mode", "decode_only")).build());
  }

  /**
   * The decode leg of {@code pd} with {@code body}: to the decode endpoint, on the client's path,
   * with the leg headers and the attributes {@code attrs}.
   */
  protected DecodeRequest decodeRequest(PdRequest pd, ObjectNode body, Map<String, String> attrs) {
    return OpenAiJson.withBytes(
            body, bytes -> DecodeRequest.builder(pd.decode(), pd.request().api().path(), bytes))
        .headers(legHeaders(pd.request()))
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
