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
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The OpenAI-compatible front of {@code kvroute gateway}, {@code proxy} and the demo, on the Netty
 * {@link EdgeServer}: {@code POST /v1/completions}, {@code /v1/chat/completions}, {@code
 * /v1/messages} (Anthropic's Messages) and {@code /v1/responses} go to a {@link Handler} (the
 * router, or the proxy's orchestrator), whose decode stream is relayed to the client with
 * back-pressure; a client that goes away cancels both upstream legs. With a {@link PassThrough},
 * other {@code GET} and {@code POST} paths under {@code /v1/} are forwarded to an endpoint picked
 * by load only. Errors of a Messages request are in Anthropic's shape. {@code /healthz}, {@code
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

  /** Matched case-insensitively, without a lower-case copy of each header name per answer. */
  private static final Set<String> HOP_BY_HOP =
      anyCase(
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

  private static Set<String> anyCase(String... names) {
    java.util.TreeSet<String> s = new java.util.TreeSet<>(String.CASE_INSENSITIVE_ORDER);
    s.addAll(List.of(names));
    return java.util.Collections.unmodifiableSet(s);
  }

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

  /**
   * Serves a request of an API kvroute does not schedule (any other {@code GET} or {@code POST}
   * under {@code /v1/}): picks an endpoint by load only and forwards the request unchanged.
   */
  @FunctionalInterface
  interface PassThrough {
    /**
     * Starts forwarding. {@code extraHeaders} receives headers to add to the client's answer before
     * the future completes. May throw a {@link ConnectorException} for a request it cannot take.
     */
    CompletableFuture<? extends StreamingResponse> forward(
        String method,
        String pathAndQuery,
        byte[] body,
        Map<String, List<String>> headers,
        Map<String, String> extraHeaders);
  }

  /**
   * The edge's own error bodies (413, 405, 408, 404...): Anthropic's shape for a request of {@code
   * /v1/messages}, as every other answer of that API; OpenAI's for any other path.
   */
  static final io.kvroute.edge.ErrorRenderer ERRORS =
      new io.kvroute.edge.ErrorRenderer() {
        @Override
        public byte[] render(int status, String type, String param, String message) {
          return io.kvroute.edge.ErrorRenderer.OPENAI.render(status, type, param, message);
        }

        @Override
        public byte[] render(String path, int status, String type, String param, String message) {
          if (InferenceRequest.Api.fromPath(path).orElse(null) == InferenceRequest.Api.MESSAGES) {
            return FailureAnswer.anthropicJson(
                status, FailureAnswer.anthropicType(status), message);
          }
          return render(status, type, param, message);
        }
      };

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
            .threadName("kvroute-" + name)
            .errorRenderer(ERRORS);
    if (b.ioThreads > 0) {
      eb.ioThreads(b.ioThreads);
    }
    if (b.tls != null) {
      eb.tls(b.tls);
    }
    Handler h = b.handler;
    for (InferenceRequest.Api api : InferenceRequest.Api.values()) {
      eb.route("POST", api.path(), ex -> serve(ex, h, api));
    }
    if (b.passThrough != null) {
      PassThrough pt = b.passThrough;
      eb.route("GET", "/v1/*", ex -> passThrough(ex, pt));
      eb.route("POST", "/v1/*", ex -> passThrough(ex, pt));
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

  /** A request of {@code api}, the API whose path its route is. */
  private void serve(Exchange ex, Handler handler, InferenceRequest.Api api) {
    InferenceRequest request = InferenceRequest.of(api, ex.body(), ex.headers(), newRequestId());
    Map<String, String> extra = new ConcurrentHashMap<>();
    CompletableFuture<? extends StreamingResponse> f;
    try {
      f = handler.handle(request, extra);
    } catch (RuntimeException e) {
      fail(ex, e, api);
      return;
    }
    answer(ex, f, extra, api);
  }

  /**
   * A fresh request id: {@code kvr-} and a random (version 4) UUID, drawn from {@link
   * ThreadLocalRandom}. Ids are not secrets (a client may send its own {@code X-Request-Id}), and
   * {@link UUID#randomUUID()}'s {@code SecureRandom} takes a process-wide lock and reads {@code
   * /dev/urandom} on every request.
   */
  static String newRequestId() {
    ThreadLocalRandom r = ThreadLocalRandom.current();
    long msb = (r.nextLong() & ~0xF000L) | 0x4000L; // version 4
    long lsb = (r.nextLong() & 0x3FFFFFFFFFFFFFFFL) | 0x8000000000000000L; // IETF variant
    return "kvr-" + new UUID(msb, lsb);
  }

  /** A request of another API under {@code /v1/}: load-only routing, forwarded unchanged. */
  private void passThrough(Exchange ex, PassThrough pt) {
    String q = ex.query();
    String pathAndQuery = q == null || q.isEmpty() ? ex.path() : ex.path() + "?" + q;
    Map<String, String> extra = new ConcurrentHashMap<>();
    CompletableFuture<? extends StreamingResponse> f;
    try {
      f = pt.forward(ex.method(), pathAndQuery, ex.body(), ex.headers(), extra);
    } catch (RuntimeException e) {
      fail(ex, e, null);
      return;
    }
    answer(ex, f, extra, null);
  }

  private void answer(
      Exchange ex,
      CompletableFuture<? extends StreamingResponse> f,
      Map<String, String> extra,
      InferenceRequest.Api api) {
    inFlight.incrementAndGet();
    ex.onClientGone(() -> f.cancel(true));
    f.whenComplete(
        (response, t) -> {
          if (t != null) {
            inFlight.decrementAndGet();
            if (!ex.answered()) {
              fail(ex, t, api);
            }
            return;
          }
          if (ex.answered()) {
            response.cancel();
            inFlight.decrementAndGet();
            return;
          }
          relay(ex, response, extra, api);
        });
  }

  private void relay(
      Exchange ex,
      StreamingResponse response,
      Map<String, String> extra,
      InferenceRequest.Api api) {
    String contentType = response.contentType().orElse("application/json");
    boolean sse = contentType.startsWith("text/event-stream");
    Response.Builder rb = Response.status(response.status()).contentType(contentType);
    response
        .headers()
        .forEach(
            (k, values) -> {
              if (!HOP_BY_HOP.contains(k)) {
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
              return sse ? FailureAnswer.sseEvent(t, api) : null;
            });
    try {
      ex.respond(rb.build());
    } catch (IllegalStateException alreadyAnswered) {
      response.cancel();
      end.run();
    }
  }

  private void fail(Exchange ex, Throwable t, InferenceRequest.Api api) {
    Optional<FailureAnswer> answer = FailureAnswer.of(t, api);
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
    private PassThrough passThrough;
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

    /** Serves other {@code GET} and {@code POST} paths under {@code /v1/} with {@code pt}. */
    Builder passThrough(PassThrough pt) {
      this.passThrough = pt;
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
