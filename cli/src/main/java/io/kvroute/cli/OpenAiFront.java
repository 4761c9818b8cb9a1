package io.kvroute.cli;

import io.kvroute.connector.AllAttemptsFailedException;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.FlowRelay;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.edge.AdminConfig;
import io.kvroute.edge.EdgeLimits;
import io.kvroute.edge.EdgeServer;
import io.kvroute.edge.ErrorRenderer;
import io.kvroute.edge.Exchange;
import io.kvroute.edge.Response;
import io.kvroute.edge.TlsConfig;
import io.kvroute.pd.PdOrchestrator;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The OpenAI-compatible front of {@code kvroute gateway}, {@code proxy} and the demo, on the Netty
 * {@link EdgeServer}: {@code POST /v1/completions} and {@code /v1/chat/completions} go to a {@link
 * Handler} (the router, or the proxy's orchestrator), whose decode stream is relayed to the client
 * with back-pressure; a client that goes away cancels both upstream legs. {@code /healthz}, {@code
 * /readyz} and {@code /metrics} are served beside them, and admin routes on the admin listener.
 *
 * <p>Failures are answered by one table for every connector ({@code docs/http-edge.md}): the
 * client's own mistakes are 4xx {@code invalid_request_error}; an upstream 4xx is relayed as the
 * engine wrote it; an upstream 429 or 503 is 503 ({@code Retry-After} kept); other upstream
 * statuses, resets and protocol errors are 502; upstream timeouts 504; no endpoint 503. A stream
 * that fails after its first byte (including an SSE stream that ends without {@code data: [DONE]})
 * ends with an SSE error event, or a broken connection for other content types.
 *
 * <p>Thread-safe. Handlers run on the edge's event loops and must not block.
 */
final class OpenAiFront implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(OpenAiFront.class);
  private static final Set<String> HOP_BY_HOP =
      Set.of(
          "connection",
          "keep-alive",
          "transfer-encoding",
          "content-length",
          "upgrade",
          "te",
          "trailer",
          "proxy-connection",
          "date",
          "content-type");

  /** Runs one parsed request and completes with the response to relay. */
  @FunctionalInterface
  interface Handler {
    /**
     * Starts serving {@code request}. {@code extraHeaders} receives headers to add to the client's
     * answer before the future completes. May throw a {@link ConnectorException} for a request it
     * cannot take.
     */
    CompletableFuture<? extends StreamingResponse> handle(
        InferenceRequest request, Map<String, String> extraHeaders);
  }

  private final EdgeServer server;
  private final AtomicInteger inFlight = new AtomicInteger();
  private final ConcurrentMap<String, Counter> errors = new ConcurrentHashMap<>();
  private final MeterRegistry registry;
  private final String name;

  private OpenAiFront(Builder b) {
    this.registry = b.registry;
    this.name = b.name;
    Gauge.builder("kvroute.front.inflight", inFlight, AtomicInteger::get)
        .description("OpenAI requests being served by the front")
        .tag("server", name)
        .register(registry);
    EdgeServer.Builder eb =
        EdgeServer.builder()
            .listen(b.host, b.port)
            .limits(b.limits)
            .meterRegistry(registry)
            .metricPrefix("kvroute.edge")
            .threadName("kvroute-" + name);
    if (b.ioThreads > 0) {
      eb.ioThreads(b.ioThreads);
    }
    if (b.tls != null) {
      eb.tls(b.tls);
    }
    Handler h = b.handler;
    for (String path : List.of("/v1/completions", "/v1/chat/completions")) {
      eb.route("POST", path, ex -> serve(ex, h));
    }
    eb.route("GET", "/healthz", ex -> ex.respond(200, "text/plain", OK));
    eb.route("GET", "/health", ex -> ex.respond(200, "text/plain", OK));
    b.routes.forEach(r -> eb.route(r.method(), r.path(), r.handler()));
    if (b.admin != null) {
      eb.admin(b.admin);
      b.adminRoutes.forEach(r -> eb.adminRoute(r.method(), r.path(), r.handler()));
    }
    this.server = eb.build();
  }

  private static final byte[] OK = "ok\n".getBytes(StandardCharsets.US_ASCII);

  /** A builder serving {@code handler}'s answers. */
  static Builder builder(String name, Handler handler) {
    return new Builder(name, handler);
  }

  /**
   * Binds and starts.
   *
   * @throws io.kvroute.edge.EdgeBindException for a port in use or an unknown host
   * @throws io.kvroute.edge.EdgeConfigException for unusable TLS files or admin token
   */
  OpenAiFront start() {
    server.start();
    return this;
  }

  int port() {
    return server.port();
  }

  /** The admin listener's port, or -1. */
  int adminPort() {
    return server.adminPort();
  }

  /** Connections, buffered body bytes and paused connections now. */
  io.kvroute.edge.EdgeStats stats() {
    return server.stats();
  }

  /** Requests being served now. */
  int inFlight() {
    return inFlight.get();
  }

  /** Stops accepting, lets requests in flight finish for up to {@code grace}, then closes. */
  void shutdown(Duration grace) {
    server.shutdown(grace);
  }

  @Override
  public void close() {
    server.close();
  }

  private void serve(Exchange ex, Handler handler) {
    Optional<InferenceRequest.Api> api = InferenceRequest.Api.fromPath(ex.path());
    if (api.isEmpty()) {
      error(ex, 404, "not_found", "no route for " + ex.path());
      return;
    }
    InferenceRequest request =
        InferenceRequest.of(api.get(), ex.body(), ex.headers(), "kvr-" + UUID.randomUUID());
    Map<String, String> extra = new ConcurrentHashMap<>();
    CompletableFuture<? extends StreamingResponse> f;
    try {
      f = handler.handle(request, extra);
    } catch (RuntimeException e) {
      fail(ex, e);
      return;
    }
    inFlight.incrementAndGet();
    ex.onClientGone(() -> f.cancel(true));
    f.whenComplete(
        (response, t) -> {
          if (t != null) {
            inFlight.decrementAndGet();
            if (!ex.answered()) {
              fail(ex, t);
            }
            return;
          }
          if (ex.answered()) {
            response.cancel();
            inFlight.decrementAndGet();
            return;
          }
          relay(ex, response, extra);
        });
  }

  private void relay(Exchange ex, StreamingResponse response, Map<String, String> extra) {
    String contentType = response.contentType().orElse("application/json");
    boolean sse = contentType.startsWith("text/event-stream");
    Response.Builder rb = Response.status(response.status()).contentType(contentType);
    response
        .headers()
        .forEach(
            (k, values) -> {
              if (!HOP_BY_HOP.contains(k.toLowerCase(Locale.ROOT))) {
                values.forEach(v -> rb.header(k, v));
              }
            });
    extra.forEach(rb::header);
    AtomicInteger ended = new AtomicInteger();
    Runnable end =
        () -> {
          if (ended.getAndIncrement() == 0) {
            inFlight.decrementAndGet();
          }
        };
    ex.onClientGone(
        () -> {
          response.cancel();
          end.run();
        });
    FlowRelay<ByteBuffer> watched = FlowRelay.create(error -> end.run());
    response.subscribe(watched);
    rb.stream(watched)
        .streamErrorTail(
            t -> {
              count(502, "upstream_error");
              log.debug("decode stream failed after its first byte", t);
              return sse ? sseError(t) : null;
            });
    try {
      ex.respond(rb.build());
    } catch (IllegalStateException alreadyAnswered) {
      response.cancel();
      end.run();
    }
  }

  /** The SSE event that tells a client why its stream ended early (no {@code [DONE]} follows). */
  static byte[] sseError(Throwable t) {
    StringBuilder b = new StringBuilder("data: {\"error\":{\"message\":");
    ErrorRenderer.Json.quote(b, "upstream stream failed: " + message(t));
    b.append(",\"type\":\"upstream_error\",\"param\":null,\"code\":502}}\n\n");
    return b.toString().getBytes(StandardCharsets.UTF_8);
  }

  private void fail(Exchange ex, Throwable t) {
    Throwable cause = unwrap(t);
    if (cause instanceof CancellationException
        || (cause instanceof UpstreamException u && u.kind() == UpstreamException.Kind.CANCELLED)) {
      return; // the client is gone
    }
    Mapped m = map(cause);
    if (m.body != null) {
      count(m.status, m.type);
      ex.respond(Response.status(m.status).contentType("application/json").body(m.body).build());
      return;
    }
    if (m.status >= 500 && !(cause instanceof ConnectorException)) {
      log.warn("request failed", cause);
    }
    Response.Builder rb = null;
    if (m.retryAfterSeconds > 0) {
      rb = Response.status(m.status).header("Retry-After", Long.toString(m.retryAfterSeconds));
    }
    if (rb == null) {
      error(ex, m.status, m.type, m.message);
    } else {
      count(m.status, m.type);
      ex.respond(
          rb.contentType("application/json")
              .body(ErrorRenderer.OPENAI.render(m.status, m.type, null, m.message))
              .build());
    }
  }

  private void error(Exchange ex, int status, String type, String message) {
    count(status, type);
    ex.error(status, type, null, message);
  }

  private void count(int status, String type) {
    errors
        .computeIfAbsent(
            status + "/" + type,
            k ->
                Counter.builder("kvroute.front.errors")
                    .description("OpenAI requests answered with an error, by status and type")
                    .tag("server", name)
                    .tag("status", Integer.toString(status))
                    .tag("type", type)
                    .register(registry))
        .increment();
  }

  /** How one failure is answered. */
  record Mapped(int status, String type, String message, byte[] body, long retryAfterSeconds) {}

  /**
   * The one mapping of failures to client answers, whatever the connector (the table in {@code
   * docs/http-edge.md}).
   */
  static Mapped map(Throwable cause) {
    String message = message(cause);
    if (cause instanceof AllAttemptsFailedException all && !all.attempts().isEmpty()) {
      // Answered as its last attempt failed, with every attempt in the message.
      Mapped last = map(all.attempts().get(all.attempts().size() - 1).cause());
      return new Mapped(last.status, last.type, message, last.body, last.retryAfterSeconds);
    }
    if (cause instanceof ConnectorException.InvalidRequestException e) {
      return new Mapped(e.httpStatus(), ErrorRenderer.INVALID_REQUEST, message, null, 0);
    }
    if (cause instanceof ConnectorException.ForbiddenTargetException) {
      return new Mapped(403, "forbidden_target", message, null, 0);
    }
    if (cause instanceof ConnectorException.NoAvailableEndpointException) {
      return new Mapped(503, "no_endpoint_available", message, null, 0);
    }
    if (cause instanceof UpstreamException u) {
      long retry = u.retryAfter().map(Duration::getSeconds).orElse(0L);
      switch (u.kind()) {
        case TIMEOUT:
          return new Mapped(504, "upstream_timeout", message, null, 0);
        case STATUS:
          int s = u.upstreamStatus();
          if (s == 429 || s == 503) {
            return new Mapped(503, "upstream_unavailable", message, null, Math.max(retry, 1));
          }
          if (s >= 400 && s < 500) {
            Optional<String> body = u.upstreamBody().filter(OpenAiFront::looksLikeJson);
            return new Mapped(
                s,
                ErrorRenderer.INVALID_REQUEST,
                message,
                body.map(x -> x.getBytes(StandardCharsets.UTF_8)).orElse(null),
                0);
          }
          return new Mapped(502, "upstream_error", message, null, 0);
        default:
          return new Mapped(502, "upstream_error", message, null, 0);
      }
    }
    if (cause instanceof ConnectorException e) {
      int status = e.httpStatus() >= 400 && e.httpStatus() <= 599 ? e.httpStatus() : 500;
      return new Mapped(
          status, status < 500 ? ErrorRenderer.INVALID_REQUEST : "routing_error", message, null, 0);
    }
    return new Mapped(500, "internal_error", "internal error: " + cause, null, 0);
  }

  private static boolean looksLikeJson(String s) {
    String t = s.strip();
    return t.startsWith("{") && t.endsWith("}");
  }

  private static String message(Throwable t) {
    return t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
  }

  private static Throwable unwrap(Throwable t) {
    while ((t instanceof CompletionException
            || t instanceof java.util.concurrent.ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  /**
   * Candidate pairs for round-robin over fixed prefill and decode lists ({@code kvroute proxy}).
   */
  static Function<InferenceRequest, List<PdOrchestrator.Pair>> roundRobin(
      List<Endpoint> prefill, List<Endpoint> decode) {
    return roundRobin(() -> prefill, () -> decode);
  }

  /**
   * {@link #roundRobin(List, List)} over lists read anew for each request (instances that register
   * and expire); no pair while there is no decode endpoint.
   */
  static Function<InferenceRequest, List<PdOrchestrator.Pair>> roundRobin(
      java.util.function.Supplier<List<Endpoint>> prefills,
      java.util.function.Supplier<List<Endpoint>> decodes) {
    AtomicInteger next = new AtomicInteger();
    return request -> {
      List<Endpoint> prefill = prefills.get();
      List<Endpoint> decode = decodes.get();
      if (decode.isEmpty()) {
        return List.of();
      }
      int n = Math.max(prefill.size(), decode.size());
      int start = Math.floorMod(next.getAndIncrement(), n);
      PdOrchestrator.Pair[] out = new PdOrchestrator.Pair[n];
      for (int i = 0; i < n; i++) {
        int k = start + i;
        Endpoint p = prefill.isEmpty() ? null : prefill.get(k % prefill.size());
        out[i] = new PdOrchestrator.Pair(p, decode.get(k % decode.size()));
      }
      return List.of(out);
    };
  }

  /** {@code GET /metrics}: the registry in Prometheus's text format. */
  static io.kvroute.edge.Handler prometheus(
      io.micrometer.prometheusmetrics.PrometheusMeterRegistry meters) {
    return ex ->
        ex.respond(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            meters.scrape().getBytes(StandardCharsets.UTF_8));
  }

  /** A route beside the OpenAI ones. */
  private record Route(String method, String path, io.kvroute.edge.Handler handler) {}

  /** Builds an {@link OpenAiFront}. */
  static final class Builder {
    private final String name;
    private final Handler handler;
    private String host = "127.0.0.1";
    private int port;
    private EdgeLimits limits = EdgeLimits.defaults();
    private TlsConfig tls;
    private AdminConfig admin;
    private MeterRegistry registry = new SimpleMeterRegistry();
    private int ioThreads;
    private final List<Route> routes = new java.util.ArrayList<>();
    private final List<Route> adminRoutes = new java.util.ArrayList<>();

    private Builder(String name, Handler handler) {
      this.name = name;
      this.handler = handler;
    }

    Builder listen(String host, int port) {
      this.host = host;
      this.port = port;
      return this;
    }

    Builder limits(EdgeLimits limits) {
      this.limits = limits;
      return this;
    }

    Builder tls(TlsConfig tls) {
      this.tls = tls;
      return this;
    }

    Builder admin(AdminConfig admin) {
      this.admin = admin;
      return this;
    }

    Builder meterRegistry(MeterRegistry registry) {
      this.registry = registry;
      return this;
    }

    Builder ioThreads(int n) {
      this.ioThreads = n;
      return this;
    }

    /** A route on the traffic listener, e.g. {@code GET /metrics}. */
    Builder route(String method, String path, io.kvroute.edge.Handler handler) {
      routes.add(new Route(method, path, handler));
      return this;
    }

    /** A route on the admin listener (served only with the bearer token). */
    Builder adminRoute(String method, String path, io.kvroute.edge.Handler handler) {
      adminRoutes.add(new Route(method, path, handler));
      return this;
    }

    OpenAiFront build() {
      return new OpenAiFront(this);
    }
  }
}
