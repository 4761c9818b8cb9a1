package io.kvroute.envoy.internal;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.envoy.EndpointPicker;
import io.kvroute.envoy.EndpointPicker.BodyMode;
import io.kvroute.router.FailureAnswer;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RouteDecision;
import io.kvroute.scoring.Decision;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One ext_proc stream, that is one HTTP request and its response as Envoy processes them: the state
 * machine of the endpoint-picker protocol in every body mode.
 *
 * <p>Request side: headers are answered at once (BUFFERED), or held until the body is complete
 * (STREAMED, FULL_DUPLEX_STREAMED); at the end of the body the router decides, and the answers
 * carry the destination as a header mutation and dynamic metadata — on the headers answer, or on
 * the body answer in BUFFERED mode where the headers were already answered. FULL_DUPLEX_STREAMED
 * bodies are sent back in streamed chunks; STREAMED chunks are answered one by one after the
 * headers. Response side: headers, body and trailers are answered in order (streamed chunks echoed
 * in FULL_DUPLEX_STREAMED), usage is read, and the decision completes at the end of the response or
 * of the stream.
 *
 * <p>Thread-safety: gRPC delivers inbound messages one at a time, and the router's decision arrives
 * on another thread; every method holds this object's monitor, which also serializes the outbound
 * stream (not thread-safe by itself). Inbound flow control: the next message is requested only when
 * the outbound side is ready, so a slow Envoy bounds the memory a stream holds.
 */
public final class ExtProcStream implements StreamObserver<ProcessingRequest> {
  private static final Logger log = LoggerFactory.getLogger(ExtProcStream.class);
  private static final String PSEUDO = ":";

  private enum Phase {
    /** Waiting for the request headers. */
    START,
    /** Collecting the request body. */
    REQUEST_BODY,
    /** The router is deciding. */
    DECIDING,
    /** The destination was sent; following the response. */
    ROUTED,
    /** An immediate response was sent, or the stream ended. */
    DONE
  }

  private final KvRouter router;
  private final PickerSettings settings;
  private final EppMetrics metrics;
  private final AtomicLong roundRobin;
  private final ServerCallStreamObserver<ProcessingResponse> out;

  private Phase phase = Phase.START;
  private boolean modesKnown;
  private BodyMode requestMode;
  private BodyMode responseMode;
  private boolean bodyWithoutWaiting = true;

  private Map<String, String> requestHeaders = Map.of();
  private String path = "";
  private String method = "";
  private Set<String> subset;
  private ByteString body = ByteString.EMPTY;
  private int pendingBodyAnswers;
  private int bodyMessages;
  private boolean requestTrailersPending;
  private boolean headersAnswered;
  private long decideStart;

  private RouteDecision decision;
  private long decidedAt;
  private int status = -1;
  private String served;
  private UsageScanner scanner;
  private long firstByteAt = -1;
  private boolean responseEnded;
  private boolean completed;

  private boolean wantMore;
  private boolean inboundClosed;
  private boolean outboundClosed;
  private boolean counted;

  /**
   * A stream answering on {@code out}.
   *
   * @param roundRobin the picker's counter for requests routed without a body
   */
  public ExtProcStream(
      KvRouter router,
      PickerSettings settings,
      EppMetrics metrics,
      AtomicLong roundRobin,
      ServerCallStreamObserver<ProcessingResponse> out) {
    this.router = router;
    this.settings = settings;
    this.metrics = metrics;
    this.roundRobin = roundRobin;
    this.out = out;
    this.requestMode = settings.requestBodyMode();
    this.responseMode = settings.responseBodyMode();
    metrics.streamOpened();
    counted = true;
    out.disableAutoRequest();
    out.setOnCancelHandler(this::cancelled);
    out.setOnReadyHandler(this::ready);
    out.request(1);
  }

  // ------------------------------------------------------------------ inbound

  @Override
  public synchronized void onNext(ProcessingRequest r) {
    if (inboundClosed) {
      return;
    }
    try {
      if (!modesKnown) {
        modesKnown = true;
        if (r.hasProtocolConfig()) {
          ProtocolConfiguration pc = r.getProtocolConfig();
          requestMode = mode(pc.getRequestBodyMode());
          responseMode = mode(pc.getResponseBodyMode());
          bodyWithoutWaiting = pc.getSendBodyWithoutWaitingForHeaderResponse();
        }
      }
      if (r.getObservabilityMode()) {
        return; // Envoy ignores answers in observability mode; nothing to pick.
      }
      switch (r.getRequestCase()) {
        case REQUEST_HEADERS:
          onRequestHeaders(r);
          break;
        case REQUEST_BODY:
          onRequestBody(r.getRequestBody());
          break;
        case REQUEST_TRAILERS:
          onRequestTrailers();
          break;
        case RESPONSE_HEADERS:
          onResponseHeaders(r);
          break;
        case RESPONSE_BODY:
          onResponseBody(r.getResponseBody());
          break;
        case RESPONSE_TRAILERS:
          onResponseTrailers();
          break;
        default:
          metrics.protocolError();
      }
    } finally {
      requestMore();
    }
  }

  @Override
  public synchronized void onError(Throwable t) {
    cancelled();
  }

  @Override
  public synchronized void onCompleted() {
    if (inboundClosed) {
      return;
    }
    inboundClosed = true;
    if (decision != null && !completed) {
      // Envoy ends the stream with the HTTP stream. With no response body sent to us, the response
      // headers are all we will see of the response: their status decides.
      boolean sawAll = responseEnded || (status >= 0 && responseMode == BodyMode.NONE);
      finish(sawAll ? outcome(status) : RouteDecision.Outcome.CANCELLED);
    }
    phase = Phase.DONE;
    closeOutbound();
    uncount();
  }

  private synchronized void cancelled() {
    if (inboundClosed) {
      return;
    }
    inboundClosed = true;
    outboundClosed = true;
    if (decision != null && !completed) {
      finish(responseEnded ? outcome(status) : RouteDecision.Outcome.CANCELLED);
    }
    phase = Phase.DONE;
    uncount();
  }

  private synchronized void ready() {
    if (wantMore && !inboundClosed && out.isReady()) {
      wantMore = false;
      out.request(1);
    }
  }

  private void requestMore() {
    if (inboundClosed) {
      return;
    }
    if (out.isReady()) {
      out.request(1);
    } else {
      wantMore = true;
    }
  }

  private void uncount() {
    if (counted) {
      counted = false;
      metrics.streamClosed();
    }
  }

  // ------------------------------------------------------------------ request side

  private void onRequestHeaders(ProcessingRequest r) {
    if (phase != Phase.START) {
      metrics.protocolError();
      return;
    }
    requestHeaders = Messages.headers(r.getRequestHeaders().getHeaders());
    path = requestHeaders.getOrDefault(":path", "");
    method = requestHeaders.getOrDefault(":method", "");
    subset =
        Messages.list(
                r.getMetadataContext(), EndpointPicker.SUBSET_NAMESPACE, EndpointPicker.SUBSET_KEY)
            .<Set<String>>map(HashSet::new)
            .orElse(null);
    if (r.getRequestHeaders().getEndOfStream() || requestMode == BodyMode.NONE) {
      phase = Phase.DECIDING;
      pickWithoutBody();
      return;
    }
    switch (requestMode) {
      case BUFFERED:
      case BUFFERED_PARTIAL:
        send(Messages.requestHeaders(CommonResponse.getDefaultInstance(), null));
        headersAnswered = true;
        break;
      case STREAMED:
        if (!bodyWithoutWaiting) {
          reject(
              new ConnectorException(
                  "the ext_proc filter's request_body_mode STREAMED needs"
                      + " send_body_without_waiting_for_header_response: true for kvroute to read"
                      + " the body before routing; use FULL_DUPLEX_STREAMED (as GIE does) or"
                      + " BUFFERED",
                  500,
                  null),
              "kvroute_streamed_mode_needs_send_body_without_waiting");
          return;
        }
        break;
      default:
        break;
    }
    phase = Phase.REQUEST_BODY;
  }

  private void onRequestBody(HttpBody b) {
    if (phase == Phase.DONE) {
      return;
    }
    if (phase != Phase.REQUEST_BODY) {
      // Not expected in this state: answer in kind so Envoy is never left waiting.
      metrics.protocolError();
      if (requestMode == BodyMode.FULL_DUPLEX_STREAMED) {
        for (CommonResponse c : Messages.streamedChunks(b.getBody(), b.getEndOfStream())) {
          send(Messages.requestBody(c, null));
        }
      } else {
        send(Messages.requestBody(CommonResponse.getDefaultInstance(), null));
      }
      return;
    }
    if ((long) body.size() + b.getBody().size() > settings.maxRequestBytes()) {
      reject(
          new ConnectorException.InvalidRequestException(
              "request body exceeds " + settings.maxRequestBytes() + " bytes", 413),
          "kvroute_request_too_large");
      return;
    }
    body = body.concat(b.getBody());
    bodyMessages++;
    if (requestMode == BodyMode.STREAMED) {
      pendingBodyAnswers++;
    }
    boolean whole =
        requestMode == BodyMode.BUFFERED
            || requestMode == BodyMode.BUFFERED_PARTIAL
            || b.getEndOfStream();
    if (whole) {
      decide();
    }
  }

  private void onRequestTrailers() {
    switch (phase) {
      case REQUEST_BODY:
        requestTrailersPending = true;
        decide();
        break;
      case DECIDING:
        requestTrailersPending = true;
        break;
      case DONE:
        break;
      default:
        send(Messages.trailers(true));
    }
  }

  private void decide() {
    phase = Phase.DECIDING;
    decideStart = settings.nanoClock().getAsLong();
    Optional<InferenceRequest.Api> api =
        "POST".equalsIgnoreCase(method) ? InferenceRequest.Api.fromPath(path) : Optional.empty();
    if (api.isEmpty()) {
      pickWithoutBody();
      return;
    }
    Map<String, List<String>> headers = new LinkedHashMap<>();
    requestHeaders.forEach(
        (k, v) -> {
          if (!k.startsWith(PSEUDO)) {
            headers.put(k, List.of(v));
          }
        });
    InferenceRequest request =
        InferenceRequest.of(
            api.get(),
            body.toByteArray(),
            headers,
            "epp-" + Long.toHexString(ThreadLocalRandom.current().nextLong()));
    Predicate<Endpoint> filter = subset == null ? e -> true : e -> subset.contains(e.hostPort());
    CompletableFuture<RouteDecision> f;
    try {
      f = router.decideAsync(request, filter);
    } catch (RuntimeException e) {
      f = CompletableFuture.failedFuture(e);
    }
    f.whenComplete((rd, t) -> decided(request, rd, t));
  }

  private synchronized void decided(InferenceRequest request, RouteDecision rd, Throwable t) {
    if (phase != Phase.DECIDING || inboundClosed) {
      if (rd != null) {
        rd.complete(RouteDecision.Outcome.CANCELLED, Duration.ZERO, null);
        metrics.completed(RouteDecision.Outcome.CANCELLED);
      }
      return;
    }
    if (t != null) {
      rejectFor(t instanceof CompletionException && t.getCause() != null ? t.getCause() : t);
      return;
    }
    decision = rd;
    decidedAt = settings.nanoClock().getAsLong();
    metrics.routed(decidedAt - decideStart);
    List<String> targets = new ArrayList<>();
    targets.add(rd.decode().hostPort());
    rd.fallbacks().forEach(e -> targets.add(e.hostPort()));
    Map<String, String> set = new LinkedHashMap<>();
    set.put(EndpointPicker.DESTINATION_ENDPOINT_HEADER, String.join(",", targets));
    set.putAll(rd.requestHeaders());
    if (!requestHeaders.containsKey("x-request-id")) {
      set.put("x-request-id", request.requestId());
    }
    List<String> remove = new ArrayList<>();
    if (!set.containsKey(Decision.PREFILLER_HEADER)) {
      remove.add(Decision.PREFILLER_HEADER);
    }
    Map<String, Object> facts = new LinkedHashMap<>();
    facts.put("decode", rd.decode().id());
    rd.prefill().ifPresent(p -> facts.put("prefill", p.id()));
    facts.put("disaggregated", rd.prefill().isPresent());
    facts.put("predicted_cached_tokens", predictedCachedTokens(rd.decode()));
    facts.put("request_id", request.requestId());
    answerRoute(set, remove, String.join(",", targets), facts);
  }

  private long predictedCachedTokens(Endpoint e) {
    return decision.scheduling().prefixMatch(e).cachedTokens();
  }

  /** Routes a request kvroute does not schedule (no body, another API) round-robin. */
  private void pickWithoutBody() {
    List<Endpoint> eligible = new ArrayList<>();
    for (Endpoint e : router.endpoints()) {
      if (e.role().canDecode() && (subset == null || subset.contains(e.hostPort()))) {
        eligible.add(e);
      }
    }
    if (eligible.isEmpty()) {
      rejectFor(
          new ConnectorException.NoAvailableEndpointException(
              subset == null ? "no ready endpoints" : "no ready endpoint in the proxy's subset"));
      return;
    }
    eligible.sort((a, b) -> a.id().compareTo(b.id()));
    Endpoint e = eligible.get(Math.floorMod(roundRobin.getAndIncrement(), eligible.size()));
    metrics.passthrough();
    Map<String, String> set = new LinkedHashMap<>();
    set.put(EndpointPicker.DESTINATION_ENDPOINT_HEADER, e.hostPort());
    answerRoute(set, List.of(Decision.PREFILLER_HEADER), e.hostPort(), Map.of("decode", e.id()));
  }

  /** Sends the destination in the answers the body mode expects, then releases the body. */
  private void answerRoute(
      Map<String, String> set, List<String> remove, String targets, Map<String, Object> facts) {
    Map<String, Struct> ns = new LinkedHashMap<>();
    ns.put(
        settings.destinationNamespace(),
        Messages.struct(Map.of(EndpointPicker.DESTINATION_ENDPOINT_HEADER, targets)));
    ns.put(EndpointPicker.KVROUTE_NAMESPACE, Messages.struct(facts));
    Struct md = Messages.metadata(ns);
    boolean fullDuplex = requestMode == BodyMode.FULL_DUPLEX_STREAMED && bodyMessages > 0;
    if (fullDuplex && !body.isEmpty() && !requestTrailersPending) {
      set = new LinkedHashMap<>(set);
      set.put("content-length", Integer.toString(body.size()));
    }
    CommonResponse routed =
        CommonResponse.newBuilder()
            .setHeaderMutation(Messages.mutation(set, remove))
            .setClearRouteCache(true)
            .build();
    if (headersAnswered) {
      // BUFFERED: the headers went through already; the body answer carries the mutation.
      send(Messages.requestBody(routed, md));
    } else {
      send(Messages.requestHeaders(routed, md));
      headersAnswered = true;
      if (fullDuplex) {
        // The body we held, back in streamed chunks; the end of stream is the trailers' when
        // there are trailers.
        for (CommonResponse c : Messages.streamedChunks(body, !requestTrailersPending)) {
          send(Messages.requestBody(c, null));
        }
      }
      for (int i = 0; i < pendingBodyAnswers; i++) {
        send(Messages.requestBody(CommonResponse.getDefaultInstance(), null));
      }
    }
    pendingBodyAnswers = 0;
    if (requestTrailersPending) {
      send(Messages.trailers(true));
      requestTrailersPending = false;
    }
    body = ByteString.EMPTY;
    phase = Phase.ROUTED;
  }

  /**
   * Answers a request the router could not route with kvroute's failure table ({@link
   * FailureAnswer}), adding GIE's {@code x-llm-d-request-dropped-reason} when no endpoint could
   * take it.
   */
  private void rejectFor(Throwable t) {
    if (t instanceof ConnectorException.NoAvailableEndpointException e) {
      reject(
          e,
          e.saturated() ? "kvroute_rejected_saturated" : "kvroute_no_endpoints",
          Map.of(
              EndpointPicker.DROPPED_REASON_HEADER,
              e.saturated() ? "rejected-saturated" : "rejected-no-endpoints"));
    } else if (t instanceof ConnectorException) {
      reject(t, "kvroute_rejected");
    } else {
      log.warn("kvroute epp: routing failed unexpectedly", t);
      reject(t, "kvroute_internal_error");
    }
  }

  private void reject(Throwable failure, String details) {
    reject(failure, details, Map.of());
  }

  /** Ends the stream with an immediate response: the table's answer to {@code failure}. */
  private void reject(Throwable failure, String details, Map<String, String> headers) {
    FailureAnswer answer =
        FailureAnswer.of(failure)
            .orElseGet(
                () ->
                    FailureAnswer.of(new ConnectorException("request cancelled", 499, null))
                        .orElseThrow());
    metrics.rejected(answer.status());
    send(Messages.immediate(answer, headers, details));
    phase = Phase.DONE;
    body = ByteString.EMPTY;
    closeOutbound();
  }

  // ------------------------------------------------------------------ response side

  private void onResponseHeaders(ProcessingRequest r) {
    if (phase == Phase.DONE) {
      return;
    }
    if (phase != Phase.ROUTED) {
      metrics.protocolError();
    }
    Map<String, String> h = Messages.headers(r.getResponseHeaders().getHeaders());
    try {
      status = Integer.parseInt(h.getOrDefault(":status", "-1").trim());
    } catch (NumberFormatException e) {
      status = -1;
    }
    served =
        Messages.string(
                r.getMetadataContext(),
                settings.destinationNamespace(),
                EndpointPicker.DESTINATION_ENDPOINT_SERVED_KEY)
            .orElse(null);
    String contentType = h.getOrDefault("content-type", "");
    scanner =
        new UsageScanner(contentType.contains("text/event-stream"), settings.maxUsageScanBytes());
    Map<String, String> set = decision == null ? Map.of() : decision.responseHeaders();
    send(
        Messages.responseHeaders(
            CommonResponse.newBuilder()
                .setHeaderMutation(Messages.mutation(set, List.of()))
                .build()));
    if (r.getResponseHeaders().getEndOfStream()) {
      responseEnded = true;
      finish(outcome(status));
    }
  }

  private void onResponseBody(HttpBody b) {
    if (phase == Phase.DONE) {
      return;
    }
    ByteString chunk = b.getBody();
    if (firstByteAt < 0 && !chunk.isEmpty()) {
      firstByteAt = settings.nanoClock().getAsLong();
    }
    if (decision != null && scanner != null && !chunk.isEmpty()) {
      scanner.feed(chunk.toByteArray());
    }
    boolean last =
        b.getEndOfStream()
            || responseMode == BodyMode.BUFFERED
            || responseMode == BodyMode.BUFFERED_PARTIAL;
    Struct md = null;
    if (last) {
      responseEnded = true;
      md = finish(outcome(status));
    }
    if (responseMode == BodyMode.FULL_DUPLEX_STREAMED) {
      List<CommonResponse> chunks = Messages.streamedChunks(chunk, b.getEndOfStream());
      for (int i = 0; i < chunks.size(); i++) {
        send(Messages.responseBody(chunks.get(i), i == chunks.size() - 1 ? md : null));
      }
    } else {
      send(Messages.responseBody(CommonResponse.getDefaultInstance(), md));
    }
  }

  private void onResponseTrailers() {
    if (phase == Phase.DONE) {
      return;
    }
    responseEnded = true;
    finish(outcome(status));
    send(Messages.trailers(false));
  }

  /**
   * Completes the decision once (usage read, served endpoint resolved); returns the usage metadata
   * to attach to the last answer, or null.
   */
  private Struct finish(RouteDecision.Outcome outcome) {
    if (decision == null || completed) {
      return null;
    }
    completed = true;
    UsageScanner.Usage usage = scanner == null ? UsageScanner.Usage.NONE : scanner.finish();
    metrics.usage(usage);
    Endpoint decode = servedEndpoint();
    long now = settings.nanoClock().getAsLong();
    Duration latency = Duration.ofNanos(Math.max(0, now - decidedAt));
    Duration ttft = firstByteAt < 0 ? null : Duration.ofNanos(Math.max(0, firstByteAt - decidedAt));
    decision.complete(decode, decision.prefill().orElse(null), outcome, latency, ttft);
    metrics.completed(outcome);
    if (!usage.known()) {
      return null;
    }
    Map<String, Object> facts = new LinkedHashMap<>();
    facts.put("served", decode.id());
    facts.put("predicted_cached_tokens", predictedCachedTokens(decode));
    if (usage.promptTokens() >= 0) {
      facts.put("prompt_tokens", usage.promptTokens());
    }
    if (usage.completionTokens() >= 0) {
      facts.put("completion_tokens", usage.completionTokens());
    }
    if (usage.cachedTokens() >= 0) {
      facts.put("cached_tokens", usage.cachedTokens());
    }
    return Messages.metadata(Map.of(EndpointPicker.KVROUTE_NAMESPACE, Messages.struct(facts)));
  }

  /**
   * The endpoint Envoy says served the request, if it is one of the decision's; else the primary.
   */
  private Endpoint servedEndpoint() {
    if (served != null) {
      String first = served.split(",")[0].trim();
      if (decision.decode().hostPort().equals(first)) {
        return decision.decode();
      }
      for (Endpoint e : decision.fallbacks()) {
        if (e.hostPort().equals(first)) {
          return e;
        }
      }
    }
    return decision.decode();
  }

  static RouteDecision.Outcome outcome(int status) {
    if (status >= 200 && status < 400) {
      return RouteDecision.Outcome.SUCCESS;
    }
    if (status == 429 || status >= 500 || status < 0) {
      return RouteDecision.Outcome.ENDPOINT_ERROR;
    }
    return RouteDecision.Outcome.CLIENT_ERROR;
  }

  // ------------------------------------------------------------------ outbound

  private void send(ProcessingResponse r) {
    if (outboundClosed) {
      return;
    }
    try {
      out.onNext(r);
    } catch (RuntimeException e) {
      // The call was cancelled under us; the cancel handler does the accounting.
      outboundClosed = true;
      log.debug("kvroute epp: answer not sent: {}", e.toString());
    }
  }

  private void closeOutbound() {
    if (!outboundClosed) {
      outboundClosed = true;
      try {
        out.onCompleted();
      } catch (RuntimeException e) {
        log.debug("kvroute epp: stream not closed cleanly: {}", e.toString());
      }
    }
  }

  private static BodyMode mode(ProcessingMode.BodySendMode m) {
    switch (m) {
      case STREAMED:
        return BodyMode.STREAMED;
      case BUFFERED:
        return BodyMode.BUFFERED;
      case BUFFERED_PARTIAL:
        return BodyMode.BUFFERED_PARTIAL;
      case FULL_DUPLEX_STREAMED:
        return BodyMode.FULL_DUPLEX_STREAMED;
      default:
        return BodyMode.NONE;
    }
  }
}
