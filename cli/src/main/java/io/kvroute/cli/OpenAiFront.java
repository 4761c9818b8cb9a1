package io.kvroute.cli;

import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.FlowRelay;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.edge.AdminConfig;
import io.kvroute.edge.EdgeLimits;
import io.kvroute.edge.EdgeServer;
import io.kvroute.edge.Exchange;
import io.kvroute.edge.Response;
import io.kvroute.edge.TlsConfig;
import io.kvroute.pd.PdOrchestrator;
import io.kvroute.router.FailureAnswer;
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
import java.util.concurrent.CompletableFuture;
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
 * <p>Failures are answered by kvroute's one table, {@link FailureAnswer} ({@code
 * docs/http-edge.md}), which the Spring filter and the Envoy picker use too; each answer counts in
 * {@code kvroute.front.errors{status,type}}. A stream that fails after its first byte (including an
 * SSE stream that ends without {@code data: [DONE]}) ends with the table's SSE error event, or a
 * broken connection for other content types.
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
              return sse ? FailureAnswer.sseEvent(t) : null;
            });
    try {
      ex.respond(rb.build());
    } catch (IllegalStateException alreadyAnswered) {
      response.cancel();
      end.run();
    }
  }

  private void fail(Exchange ex, Throwable t) {
    Optional<FailureAnswer> answer = FailureAnswer.of(t);
    if (answer.isEmpty()) {
      return; // the client is gone
    }
    FailureAnswer a = answer.get();
    if (a.type().equals(FailureAnswer.INTERNAL_ERROR)) {
      log.warn("request failed", t);
    }
    count(a.status(), a.type());
    Response.Builder rb = Response.status(a.status()).contentType("application/json");
    a.headers()
        .forEach(
            (k, v) -> {
              if (!k.equalsIgnoreCase("Content-Type")) {
                rb.header(k, v);
              }
            });
    ex.respond(rb.body(a.body()).build());
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
