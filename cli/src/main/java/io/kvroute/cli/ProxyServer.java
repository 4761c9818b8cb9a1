package io.kvroute.cli;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.PdOrchestrator;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * A minimal OpenAI-compatible front end on the JDK's {@link HttpServer}: it accepts {@code POST
 * /v1/completions} and {@code /v1/chat/completions}, asks a pair chooser for candidate (prefill,
 * decode) pairs, runs them through a {@link PdOrchestrator}, and streams the decode response back
 * chunk by chunk. Used by {@code kvroute proxy} and the demo.
 *
 * <p>Thread-safe. Each request is served on a thread of its executor; when the client goes away
 * mid-stream the upstream call is cancelled.
 */
final class ProxyServer implements AutoCloseable {
  static final int MAX_BODY_BYTES = 16 * 1024 * 1024;
  static final int MAX_THREADS = 2048;
  private static final Set<String> HOP_BY_HOP =
      Set.of("connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "te");

  private final HttpServer server;
  private final ExecutorService executor;
  private final Handler handler;
  private final AtomicInteger inFlight = new AtomicInteger();

  /** Runs one parsed request and completes with the response to relay. */
  @FunctionalInterface
  interface Handler {
    /**
     * The upstream response; {@code extraHeaders} receives headers to add to the client response
     * once the future completed.
     */
    CompletableFuture<StreamingResponse> handle(
        InferenceRequest request, java.util.Map<String, String> extraHeaders);
  }

  static {
    if (System.getProperty("sun.net.httpserver.nodelay") == null) {
      System.setProperty("sun.net.httpserver.nodelay", "true");
    }
  }

  ProxyServer(
      String host,
      int port,
      PdOrchestrator orchestrator,
      Function<InferenceRequest, List<PdOrchestrator.Pair>> pairs)
      throws IOException {
    this(host, port, (request, extra) -> orchestrator.execute(request, pairs.apply(request)));
  }

  ProxyServer(String host, int port, Handler handler) throws IOException {
    this.handler = handler;
    InetSocketAddress address = new InetSocketAddress(host, port);
    if (address.isUnresolved()) {
      throw new java.net.UnknownHostException(host + " (the address to listen on)");
    }
    try {
      this.server = HttpServer.create(address, 256);
    } catch (java.net.BindException e) {
      throw new java.net.BindException(
          "cannot listen on " + host + ":" + port + ": " + e.getMessage());
    }
    AtomicInteger n = new AtomicInteger();
    this.executor =
        // One thread per request in flight (streams block on writes), bounded: past MAX_THREADS
        // concurrent requests new connections are refused rather than queued without limit.
        new java.util.concurrent.ThreadPoolExecutor(
            0,
            MAX_THREADS,
            60,
            java.util.concurrent.TimeUnit.SECONDS,
            new java.util.concurrent.SynchronousQueue<>(),
            r -> {
              Thread t = new Thread(r, "kvroute-proxy-" + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
    server.setExecutor(executor);
    server.createContext("/", this::handle);
  }

  void start() {
    server.start();
  }

  int port() {
    return server.getAddress().getPort();
  }

  /** Requests being served now. */
  int inFlight() {
    return inFlight.get();
  }

  /** Stops accepting, waits up to {@code graceSeconds} for requests in flight, then stops. */
  void stop(int graceSeconds) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(graceSeconds);
    server.removeContext("/");
    server.createContext(
        "/",
        ex -> {
          sendError(ex, 503, "shutting down", "unavailable");
        });
    while (inFlight.get() > 0 && System.nanoTime() < deadline) {
      try {
        TimeUnit.MILLISECONDS.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    server.stop(0);
    executor.shutdownNow();
  }

  @Override
  public void close() {
    stop(0);
  }

  private void handle(HttpExchange ex) throws IOException {
    inFlight.incrementAndGet();
    boolean aborted = false;
    try {
      serve(ex);
    } catch (StreamAbortedException e) {
      aborted = true;
      // Not closing the exchange: the server drops the connection, so the client sees a broken
      // response rather than a short one that looks complete.
      throw e;
    } finally {
      inFlight.decrementAndGet();
      if (!aborted) {
        ex.close();
      }
    }
  }

  /** The decode stream failed after bytes reached the client. */
  static final class StreamAbortedException extends IOException {
    private static final long serialVersionUID = 1L;

    StreamAbortedException(Throwable cause) {
      super("upstream stream failed after the first byte: " + cause, cause);
    }
  }

  private void serve(HttpExchange ex) throws IOException {
    String path = ex.getRequestURI().getPath();
    if (path.equals("/health") || path.equals("/healthz")) {
      byte[] ok = "{\"status\":\"ok\"}".getBytes(StandardCharsets.UTF_8);
      ex.getResponseHeaders().set("Content-Type", "application/json");
      ex.sendResponseHeaders(200, ok.length);
      ex.getResponseBody().write(ok);
      return;
    }
    Optional<InferenceRequest.Api> api = InferenceRequest.Api.fromPath(path);
    if (api.isEmpty()) {
      sendError(ex, 404, "no route for " + path, "not_found");
      return;
    }
    if (!ex.getRequestMethod().equals("POST")) {
      ex.getResponseHeaders().set("Allow", "POST");
      sendError(ex, 405, "use POST for " + path, "method_not_allowed");
      return;
    }
    byte[] body;
    try {
      body = readBody(ex.getRequestBody());
    } catch (ConnectorException e) {
      sendError(ex, e.httpStatus(), e.getMessage(), "invalid_request_error");
      return;
    }
    InferenceRequest request =
        InferenceRequest.of(
            api.get(), body, ex.getRequestHeaders(), "kvr-" + UUID.randomUUID().toString());
    java.util.Map<String, String> extra = new java.util.concurrent.ConcurrentHashMap<>();
    CompletableFuture<StreamingResponse> f;
    try {
      f = handler.handle(request, extra);
    } catch (ConnectorException e) {
      sendError(ex, e.httpStatus(), e.getMessage(), "routing_error");
      return;
    }
    StreamingResponse response;
    try {
      response = f.get();
    } catch (InterruptedException e) {
      f.cancel(true);
      Thread.currentThread().interrupt();
      return;
    } catch (java.util.concurrent.ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof UpstreamException
          && ((UpstreamException) cause).upstreamBody().isPresent()
          && cause instanceof ConnectorException
          && ((ConnectorException) cause).httpStatus() < 500) {
        byte[] b =
            ((UpstreamException) cause).upstreamBody().get().getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(((ConnectorException) cause).httpStatus(), b.length);
        ex.getResponseBody().write(b);
        return;
      }
      if (cause instanceof ConnectorException) {
        sendError(
            ex, ((ConnectorException) cause).httpStatus(), cause.getMessage(), "upstream_error");
      } else {
        sendError(ex, 500, "internal error: " + cause, "internal_error");
      }
      return;
    }
    extra.forEach((k, v) -> ex.getResponseHeaders().set(k, v));
    relay(ex, response);
  }

  /** Adds a route, e.g. {@code /metrics}, served before the OpenAI routes. */
  void route(String path, com.sun.net.httpserver.HttpHandler h) {
    server.createContext(path, h);
  }

  private static void relay(HttpExchange ex, StreamingResponse response) throws IOException {
    response
        .headers()
        .forEach(
            (k, v) -> {
              if (!HOP_BY_HOP.contains(k.toLowerCase(Locale.ROOT))) {
                ex.getResponseHeaders().put(k, v);
              }
            });
    ex.sendResponseHeaders(response.status(), 0);
    OutputStream out = ex.getResponseBody();
    boolean sse =
        response.contentType().map(ct -> ct.startsWith("text/event-stream")).orElse(false);
    CompletableFuture<Throwable> done = new CompletableFuture<>();
    response.subscribe(
        new Flow.Subscriber<>() {
          private Flow.Subscription subscription;

          @Override
          public void onSubscribe(Flow.Subscription s) {
            subscription = s;
            s.request(1);
          }

          @Override
          public void onNext(ByteBuffer item) {
            try {
              byte[] b = new byte[item.remaining()];
              item.get(b);
              out.write(b);
              out.flush();
              subscription.request(1);
            } catch (IOException e) {
              // The client went away: cancel the upstream (that is how vLLM learns to abort).
              subscription.cancel();
              done.complete(null);
            }
          }

          @Override
          public void onError(Throwable t) {
            done.complete(t);
          }

          @Override
          public void onComplete() {
            done.complete(null);
          }
        });
    Throwable failure;
    try {
      failure = done.get();
    } catch (InterruptedException e) {
      response.cancel();
      Thread.currentThread().interrupt();
      return;
    } catch (java.util.concurrent.ExecutionException e) {
      failure = e.getCause();
    }
    if (failure != null) {
      if (sse) {
        // Tell SSE clients why, as vLLM does, then break the connection (no [DONE]).
        String event =
            "data: {\"error\":{\"message\":"
                + Json.quote("upstream stream failed: " + failure.getMessage())
                + ",\"type\":\"upstream_error\",\"code\":502}}\n\n";
        try {
          out.write(event.getBytes(StandardCharsets.UTF_8));
          out.flush();
        } catch (IOException ignored) {
          // the client is gone too
        }
      }
      throw new StreamAbortedException(failure);
    }
  }

  static byte[] readBody(InputStream in) throws IOException {
    byte[] b = in.readNBytes(MAX_BODY_BYTES + 1);
    if (b.length > MAX_BODY_BYTES) {
      throw new ConnectorException.InvalidRequestException(
          "request body exceeds " + MAX_BODY_BYTES + " bytes", 413);
    }
    return b;
  }

  static void sendError(HttpExchange ex, int status, String message, String type)
      throws IOException {
    String json =
        "{\"error\":{\"message\":"
            + Json.quote(message)
            + ",\"type\":"
            + Json.quote(type)
            + ",\"code\":"
            + status
            + "}}";
    byte[] b = json.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().set("Content-Type", "application/json");
    ex.sendResponseHeaders(status, b.length);
    ex.getResponseBody().write(b);
  }

  /** Builds the candidate pairs for round-robin over fixed prefill and decode lists. */
  static Function<InferenceRequest, List<PdOrchestrator.Pair>> roundRobin(
      List<io.kvroute.connector.Endpoint> prefill, List<io.kvroute.connector.Endpoint> decode) {
    AtomicInteger next = new AtomicInteger();
    return request -> {
      int start =
          Math.floorMod(
              next.getAndIncrement(), Math.max(1, Math.max(prefill.size(), decode.size())));
      int n = Math.max(prefill.size(), decode.size());
      PdOrchestrator.Pair[] out = new PdOrchestrator.Pair[n];
      for (int i = 0; i < n; i++) {
        int k = start + i;
        io.kvroute.connector.Endpoint p =
            prefill.isEmpty() ? null : prefill.get(k % prefill.size());
        out[i] = new PdOrchestrator.Pair(p, decode.get(k % decode.size()));
      }
      return List.of(out);
    };
  }

  /** JSON string quoting for error bodies. */
  static final class Json {
    private Json() {}

    static String quote(String s) {
      try {
        return io.kvroute.connector.http.OpenAiJson.MAPPER.writeValueAsString(s);
      } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
        throw new IllegalStateException(e);
      }
    }
  }
}
