package io.kvroute.spring.gateway;

import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.Leg;
import io.kvroute.connector.UpstreamException;
import io.kvroute.router.FailureAnswer;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RouteDecision;
import io.kvroute.router.RoutedResponse;
import java.net.URI;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.cloud.gateway.filter.GatewayFilterChain;
import org.springframework.cloud.gateway.filter.GlobalFilter;
import org.springframework.cloud.gateway.filter.ReactiveLoadBalancerClientFilter;
import org.springframework.cloud.gateway.support.ServerWebExchangeUtils;
import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferLimitException;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.http.server.reactive.ServerHttpRequestDecorator;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.http.server.reactive.ServerHttpResponseDecorator;
import org.springframework.web.server.ServerWebExchange;
import reactor.adapter.JdkFlowAdapter;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.SignalType;
import reactor.core.scheduler.Schedulers;

/**
 * Routes requests to the OpenAI paths ({@code POST /v1/completions}, {@code POST
 * /v1/chat/completions}) with kvroute, without blocking the event loop: it reads the body (bounded;
 * 413 beyond), asks {@link KvRouter#decideAsync} or {@link KvRouter#route} (tokenizing off the
 * event loop), then
 *
 * <ul>
 *   <li>in {@link KvRouteProperties.Mode#RELAY relay} mode, runs the request through the model's
 *       connector (prefill then decode for a disaggregated decision, retried over pairs before the
 *       first byte) and streams the decode response back with back-pressure; a client that goes
 *       away cancels the upstream call;
 *   <li>in {@link KvRouteProperties.Mode#ROUTE route} mode, points the route's request URL ({@link
 *       ServerWebExchangeUtils#GATEWAY_REQUEST_URL_ATTR}) at the chosen decode endpoint, adds the
 *       decision's request headers ({@code x-prefiller-host-port} for a decode-side PD sidecar;
 *       client-sent copies are removed) and lets the chain proxy it. A connection failure before
 *       any response byte tries the decision's fallback endpoints in order; the outcome is reported
 *       to the router ({@link RouteDecision#complete}) when the exchange completes, fails or is
 *       cancelled.
 * </ul>
 *
 * <p>Other paths pass through untouched. Failures are answered by kvroute's one table ({@link
 * FailureAnswer}, as the CLI gateway and the Envoy picker answer them): OpenAI-style JSON ({@code
 * {"error":{"message":...,"type":...,"param":null,"code":...}}}), {@code Retry-After} where the
 * table says, and an SSE error event for a stream that fails after its first byte. The filter runs
 * after Spring Cloud Gateway's load-balancer filter and before the routing filters ({@link
 * #ORDER}).
 */
public final class KvRouteGlobalFilter implements GlobalFilter, Ordered {
  private static final Logger log = LoggerFactory.getLogger(KvRouteGlobalFilter.class);

  /** The filter's order: right after the load-balancer filter, before the routing filters. */
  public static final int ORDER =
      ReactiveLoadBalancerClientFilter.LOAD_BALANCER_CLIENT_FILTER_ORDER + 1;

  /** The PD sidecar header, never taken from a client. */
  static final String PREFILLER_HEADER = "x-prefiller-host-port";

  /** Response headers that describe one hop, not the response. */
  private static final Set<String> HOP_BY_HOP =
      Set.of(
          "connection",
          "keep-alive",
          "proxy-authenticate",
          "proxy-authorization",
          "te",
          "trailer",
          "transfer-encoding",
          "upgrade",
          "content-length");

  private final KvRouter router;
  private final KvRouteProperties.Mode mode;
  private final int maxRequestBytes;
  private final LongSupplier nanoClock;

  /**
   * A filter routing with {@code router}.
   *
   * @param mode relay (kvroute runs the request) or route (the gateway proxies it)
   * @param maxRequestBytes the largest request body read; larger ones are answered 413
   */
  public KvRouteGlobalFilter(KvRouter router, KvRouteProperties.Mode mode, int maxRequestBytes) {
    this(router, mode, maxRequestBytes, System::nanoTime);
  }

  KvRouteGlobalFilter(
      KvRouter router, KvRouteProperties.Mode mode, int maxRequestBytes, LongSupplier nanoClock) {
    this.router = Objects.requireNonNull(router, "router");
    this.mode = Objects.requireNonNull(mode, "mode");
    if (maxRequestBytes < 1) {
      throw new IllegalArgumentException("maxRequestBytes must be >= 1, was " + maxRequestBytes);
    }
    this.maxRequestBytes = maxRequestBytes;
    this.nanoClock = nanoClock;
  }

  @Override
  public int getOrder() {
    return ORDER;
  }

  @Override
  public Mono<Void> filter(ServerWebExchange exchange, GatewayFilterChain chain) {
    ServerHttpRequest request = exchange.getRequest();
    Optional<InferenceRequest.Api> api =
        InferenceRequest.Api.fromPath(request.getPath().pathWithinApplication().value());
    if (ServerWebExchangeUtils.isAlreadyRouted(exchange)) {
      return chain.filter(exchange);
    }
    if (api.isEmpty()) {
      return request.getPath().pathWithinApplication().value().startsWith("/v1/")
          ? passThrough(exchange, chain)
          : chain.filter(exchange);
    }
    if (!HttpMethod.POST.equals(request.getMethod())) {
      exchange.getResponse().getHeaders().set(HttpHeaders.ALLOW, "POST");
      return OpenAiErrors.write(
          exchange,
          new ConnectorException.InvalidRequestException("use POST for " + api.get().path(), 405));
    }
    long declared = request.getHeaders().getContentLength();
    if (declared > maxRequestBytes) {
      return tooLarge(exchange);
    }
    return DataBufferUtils.join(request.getBody(), maxRequestBytes)
        .map(
            buf -> {
              try {
                byte[] bytes = new byte[buf.readableByteCount()];
                buf.read(bytes);
                return bytes;
              } finally {
                DataBufferUtils.release(buf);
              }
            })
        .defaultIfEmpty(new byte[0])
        .flatMap(
            body -> {
              InferenceRequest ir =
                  InferenceRequest.of(
                      api.get(), body, headers(request.getHeaders()), newRequestId());
              return mode == KvRouteProperties.Mode.RELAY
                  ? relay(exchange, ir)
                  : route(exchange, chain, ir, body);
            })
        .onErrorResume(DataBufferLimitException.class, e -> tooLarge(exchange));
  }

  private Mono<Void> tooLarge(ServerWebExchange exchange) {
    return OpenAiErrors.write(
        exchange,
        new ConnectorException.InvalidRequestException(
            "the request body exceeds " + maxRequestBytes + " bytes", 413));
  }

  private static Map<String, List<String>> headers(HttpHeaders headers) {
    Map<String, List<String>> out = new LinkedHashMap<>();
    headers.forEach((k, v) -> out.put(k, List.copyOf(v)));
    return out;
  }

  // ---------------------------------------------------------------- relay

  private Mono<Void> relay(ServerWebExchange exchange, InferenceRequest request) {
    ServerWebExchangeUtils.setAlreadyRouted(exchange);
    return Mono.fromFuture(() -> router.route(request))
        .subscribeOn(Schedulers.parallel()) // parsing, hashing, local tokenizing: off the loop
        .flatMap(resp -> write(exchange.getResponse(), resp, request.api()))
        .onErrorResume(t -> failed(exchange, t));
  }

  private static Mono<Void> write(
      ServerHttpResponse response, RoutedResponse upstream, InferenceRequest.Api api) {
    try {
      response.setStatusCode(HttpStatusCode.valueOf(upstream.status()));
      HttpHeaders h = response.getHeaders();
      upstream
          .headers()
          .forEach(
              (k, v) -> {
                if (k != null && !HOP_BY_HOP.contains(k.toLowerCase(Locale.ROOT))) {
                  h.put(k, List.copyOf(v));
                }
              });
      upstream.decision().responseHeaders().forEach(h::set);
    } catch (RuntimeException e) {
      upstream.cancel();
      return Mono.error(e);
    }
    boolean streaming =
        upstream
            .contentType()
            .map(t -> t.toLowerCase(Locale.ROOT).startsWith(MediaType.TEXT_EVENT_STREAM_VALUE))
            .orElse(false);
    Flux<DataBuffer> body =
        JdkFlowAdapter.flowPublisherToFlux(upstream)
            .map(bb -> copy(response, bb))
            .doOnCancel(upstream::cancel);
    if (streaming) {
      // A stream that fails after its first byte ends with the table's SSE error event (and no
      // [DONE]); another content type ends with a broken connection.
      body =
          body.onErrorResume(
              t -> Flux.just(response.bufferFactory().wrap(FailureAnswer.sseEvent(t, api))));
    }
    // SSE events go out as they arrive; a JSON body may be written in larger batches.
    return streaming ? response.writeAndFlushWith(body.map(Flux::just)) : response.writeWith(body);
  }

  /** Copies a chunk: the transport may reuse its buffer once onNext returns. */
  private static DataBuffer copy(ServerHttpResponse response, ByteBuffer chunk) {
    DataBuffer b = response.bufferFactory().allocateBuffer(chunk.remaining());
    b.write(chunk);
    return b;
  }

  private Mono<Void> failed(ServerWebExchange exchange, Throwable t) {
    Throwable cause = CancellableFutures.unwrap(t);
    ServerHttpResponse response = exchange.getResponse();
    if (response.isCommitted()) {
      // bytes already reached the client: the connection is closed mid-body
      log.debug("kvroute: response failed after its head was sent: {}", cause.toString());
      return Mono.error(cause);
    }
    if (!(cause instanceof ConnectorException)) {
      log.warn("kvroute: routing failed", cause);
    }
    return OpenAiErrors.write(exchange, cause);
  }

  // ---------------------------------------------------------------- pass-through

  /**
   * A request of an API kvroute does not schedule, under {@code /v1/}: sent unchanged (its body
   * streamed, not read) to an endpoint picked by load only ({@link KvRouter#decidePassThrough}).
   */
  private Mono<Void> passThrough(ServerWebExchange exchange, GatewayFilterChain chain) {
    RouteDecision d;
    try {
      d =
          router.decidePassThrough(
              new byte[0], headers(exchange.getRequest().getHeaders()), e -> true);
    } catch (RuntimeException e) {
      return OpenAiErrors.write(exchange, e);
    }
    long start = nanoClock.getAsLong();
    exchange
        .getAttributes()
        .put(ServerWebExchangeUtils.GATEWAY_REQUEST_URL_ATTR, target(exchange, d.decode()));
    exchange
        .getResponse()
        .beforeCommit(
            () -> {
              d.responseHeaders().forEach(exchange.getResponse().getHeaders()::set);
              return Mono.empty();
            });
    return chain
        .filter(exchange)
        .doFinally(
            signal ->
                d.complete(
                    outcome(signal, exchange.getResponse().getStatusCode()),
                    Duration.ofNanos(nanoClock.getAsLong() - start),
                    null));
  }

  // ---------------------------------------------------------------- route

  private Mono<Void> route(
      ServerWebExchange exchange, GatewayFilterChain chain, InferenceRequest request, byte[] body) {
    return Mono.defer(
            () -> {
              CompletableFuture<RouteDecision> f = router.decideAsync(request);
              // A client gone before the decision arrives: the decision is still counted in
              // flight, so it is completed as cancelled when it comes.
              return Mono.fromFuture(f, true)
                  .doOnCancel(
                      () ->
                          f.thenAccept(
                              d ->
                                  d.complete(
                                      RouteDecision.Outcome.CANCELLED, Duration.ZERO, null)));
            })
        .subscribeOn(Schedulers.parallel()) // parsing, hashing, local tokenizing: off the loop
        .onErrorResume(t -> failed(exchange, t).then(Mono.empty()))
        .flatMap(decision -> proxy(exchange, chain, decision, body));
  }

  private Mono<Void> proxy(
      ServerWebExchange exchange, GatewayFilterChain chain, RouteDecision d, byte[] body) {
    long start = nanoClock.getAsLong();
    AtomicLong firstByte = new AtomicLong(-1);
    List<Endpoint> decodes = new ArrayList<>();
    decodes.add(d.decode());
    decodes.addAll(d.fallbacks());
    Endpoint[] served = {d.decode()};
    ServerHttpRequest original = exchange.getRequest();
    ServerHttpRequest withHeaders =
        original
            .mutate()
            .headers(
                h -> {
                  h.remove(PREFILLER_HEADER);
                  d.requestHeaders().keySet().forEach(h::remove);
                  d.requestHeaders().forEach(h::set);
                })
            .build();
    ServerHttpRequest replayable =
        new ServerHttpRequestDecorator(withHeaders) {
          @Override
          public Flux<DataBuffer> getBody() {
            return Flux.defer(
                () -> Flux.just(exchange.getResponse().bufferFactory().wrap(body.clone())));
          }
        };
    ServerHttpResponse timed =
        new ServerHttpResponseDecorator(exchange.getResponse()) {
          @Override
          public Mono<Void> writeWith(Publisher<? extends DataBuffer> data) {
            return super.writeWith(Flux.from(data).doOnNext(b -> mark()));
          }

          @Override
          public Mono<Void> writeAndFlushWith(
              Publisher<? extends Publisher<? extends DataBuffer>> data) {
            return super.writeAndFlushWith(
                Flux.from(data).map(p -> Flux.from(p).doOnNext(b -> mark())));
          }

          private void mark() {
            firstByte.compareAndSet(-1, nanoClock.getAsLong());
          }
        };
    ServerWebExchange routed = exchange.mutate().request(replayable).response(timed).build();
    routed
        .getResponse()
        .beforeCommit(
            () -> {
              responseHeaders(d, served[0]).forEach(routed.getResponse().getHeaders()::set);
              return Mono.empty();
            });
    return attempt(routed, chain, decodes, 0, served)
        .onErrorResume(
            t -> {
              if (routed.getResponse().isCommitted()) {
                return Mono.error(t);
              }
              log.debug("kvroute: {} failed: {}", served[0].id(), t.toString());
              return OpenAiErrors.write(
                  routed,
                  new UpstreamException(
                      Leg.DECODE,
                      served[0].id(),
                      UpstreamException.Kind.IO,
                      0,
                      null,
                      null,
                      "the model server " + served[0].id() + " failed: " + t.getMessage(),
                      t));
            })
        .doFinally(
            signal -> {
              long end = nanoClock.getAsLong();
              long first = firstByte.get();
              Duration ttft = first < 0 ? null : Duration.ofNanos(first - start);
              d.complete(
                  served[0],
                  d.prefill().orElse(null),
                  outcome(signal, routed.getResponse().getStatusCode()),
                  Duration.ofNanos(end - start),
                  ttft);
            });
  }

  /**
   * The decision's response headers for the endpoint that finally served the request: a fallback
   * gets its own scheduler headers (a session token, say) and observability values.
   */
  static Map<String, String> responseHeaders(RouteDecision d, Endpoint served) {
    Map<String, String> primary = d.responseHeaders();
    if (served.equals(d.decode())) {
      return primary;
    }
    Endpoint prefill = d.prefill().orElse(null);
    Map<String, String> out = new LinkedHashMap<>(primary);
    d.scheduling().responseHeaders().keySet().forEach(out::remove);
    out.putAll(d.scheduling().responseHeaders(served, prefill));
    if (out.containsKey("x-kvroute-decode")) {
      out.put("x-kvroute-decode", served.id());
      out.put(
          "x-kvroute-cached-tokens",
          Long.toString(d.scheduling().prefixMatch(served).cachedTokens()));
    }
    return out;
  }

  /** Sends the request to {@code decodes[i]}; a failure before any response tries the next one. */
  private Mono<Void> attempt(
      ServerWebExchange exchange,
      GatewayFilterChain chain,
      List<Endpoint> decodes,
      int i,
      Endpoint[] served) {
    Endpoint decode = decodes.get(i);
    served[0] = decode;
    exchange
        .getAttributes()
        .put(ServerWebExchangeUtils.GATEWAY_REQUEST_URL_ATTR, target(exchange, decode));
    return chain
        .filter(exchange)
        .onErrorResume(
            t -> {
              if (i + 1 >= decodes.size() || exchange.getResponse().isCommitted()) {
                return Mono.error(t);
              }
              log.debug(
                  "kvroute: {} failed before responding ({}); trying {}",
                  decode.id(),
                  t.toString(),
                  decodes.get(i + 1).id());
              ServerWebExchangeUtils.reset(exchange);
              ServerWebExchangeUtils.removeAlreadyRouted(exchange);
              return attempt(exchange, chain, decodes, i + 1, served);
            });
  }

  /**
   * The decode endpoint's URL for this request: its base URL, then the request's path and query.
   */
  static URI target(ServerWebExchange exchange, Endpoint decode) {
    URI req = exchange.getRequest().getURI();
    String base = decode.baseUrl();
    if (base.endsWith("/")) {
      base = base.substring(0, base.length() - 1);
    }
    String path = exchange.getRequest().getPath().pathWithinApplication().value();
    String query = req.getRawQuery();
    return URI.create(base + path + (query == null ? "" : "?" + query));
  }

  static RouteDecision.Outcome outcome(SignalType signal, HttpStatusCode status) {
    if (signal == SignalType.CANCEL) {
      return RouteDecision.Outcome.CANCELLED;
    }
    if (signal == SignalType.ON_ERROR) {
      return RouteDecision.Outcome.ENDPOINT_ERROR;
    }
    int code = status == null ? 200 : status.value();
    if (code >= 500 || code == 429) {
      return RouteDecision.Outcome.ENDPOINT_ERROR;
    }
    return code >= 400 ? RouteDecision.Outcome.CLIENT_ERROR : RouteDecision.Outcome.SUCCESS;
  }

  /**
   * A fresh request id: {@code kvr-} and a random (version 4) UUID drawn from {@link
   * java.util.concurrent.ThreadLocalRandom}, as the gateway's: ids are not secrets, and {@link
   * UUID#randomUUID()}'s {@code SecureRandom} takes a process-wide lock on every request.
   */
  static String newRequestId() {
    java.util.concurrent.ThreadLocalRandom r = java.util.concurrent.ThreadLocalRandom.current();
    long msb = (r.nextLong() & ~0xF000L) | 0x4000L; // version 4
    long lsb = (r.nextLong() & 0x3FFFFFFFFFFFFFFFL) | 0x8000000000000000L; // IETF variant
    return "kvr-" + new UUID(msb, lsb);
  }
}
