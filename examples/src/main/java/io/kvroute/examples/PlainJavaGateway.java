package io.kvroute.examples;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RouteDecision;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.Executors;

/**
 * The smallest useful gateway: the JDK's {@link HttpServer} in front, the JDK's {@link HttpClient}
 * to the model servers, and {@link KvRouter#decide} in between. It shows the decide path — the
 * gateway keeps its own HTTP machinery and only asks kvroute where to send each request. (For the
 * route path, where kvroute also runs prefill/decode and retries, see {@code kvroute gateway}.)
 *
 * <p>Run: {@code PlainJavaGateway 8080 http://127.0.0.1:8001 http://127.0.0.1:8002}.
 */
public final class PlainJavaGateway {
  private final KvRouter router;
  private final HttpClient client = HttpClient.newHttpClient();
  private final HttpServer server;

  /** A gateway on {@code port} routing with {@code router}. */
  public PlainJavaGateway(KvRouter router, int port) throws IOException {
    this.router = router;
    this.server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 128);
    server.setExecutor(Executors.newCachedThreadPool());
    server.createContext("/v1/", this::handle);
  }

  /** Starts serving. */
  public PlainJavaGateway start() {
    server.start();
    return this;
  }

  /** The bound port. */
  public int port() {
    return server.getAddress().getPort();
  }

  /** Stops serving. */
  public void stop() {
    server.stop(0);
  }

  private void handle(HttpExchange ex) throws IOException {
    try (ex;
        InputStream in = ex.getRequestBody()) {
      String path = ex.getRequestURI().getPath();
      InferenceRequest.Api api = InferenceRequest.Api.fromPath(path).orElse(null);
      if (api == null) {
        reply(ex, 404, "{\"error\":\"not found\"}");
        return;
      }
      byte[] body = in.readNBytes(16 << 20);
      InferenceRequest request =
          InferenceRequest.of(api, body, ex.getRequestHeaders(), UUID.randomUUID().toString());
      RouteDecision decision;
      try {
        decision = router.decide(request); // in-memory only: cheap enough for any thread
      } catch (ConnectorException e) {
        reply(ex, e.httpStatus(), "{\"error\":\"" + e.getMessage().replace("\"", "'") + "\"}");
        return;
      }
      long start = System.nanoTime();
      RouteDecision.Outcome outcome = RouteDecision.Outcome.ENDPOINT_ERROR;
      try {
        HttpRequest.Builder upstream =
            HttpRequest.newBuilder(URI.create(decision.decode().baseUrl() + path))
                .timeout(Duration.ofMinutes(2))
                .header("Content-Type", "application/json")
                .header("X-Request-Id", request.requestId())
                .POST(HttpRequest.BodyPublishers.ofByteArray(body));
        decision.requestHeaders().forEach(upstream::header);
        HttpResponse<InputStream> resp =
            client.send(upstream.build(), HttpResponse.BodyHandlers.ofInputStream());
        resp.headers()
            .firstValue("Content-Type")
            .ifPresent(ct -> ex.getResponseHeaders().set("Content-Type", ct));
        decision.responseHeaders().forEach((k, v) -> ex.getResponseHeaders().set(k, v));
        ex.sendResponseHeaders(resp.statusCode(), 0);
        try (InputStream up = resp.body();
            OutputStream out = ex.getResponseBody()) {
          byte[] buf = new byte[8192];
          for (int n; (n = up.read(buf)) > 0; ) {
            out.write(buf, 0, n);
            out.flush(); // relay SSE events as they come
          }
        }
        outcome =
            resp.statusCode() >= 500
                ? RouteDecision.Outcome.ENDPOINT_ERROR
                : resp.statusCode() >= 400
                    ? RouteDecision.Outcome.CLIENT_ERROR
                    : RouteDecision.Outcome.SUCCESS;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        outcome = RouteDecision.Outcome.CANCELLED;
      } finally {
        decision.complete(outcome, Duration.ofNanos(System.nanoTime() - start), null);
      }
    }
  }

  private static void reply(HttpExchange ex, int status, String json) throws IOException {
    byte[] b = json.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().set("Content-Type", "application/json");
    ex.sendResponseHeaders(status, b.length);
    ex.getResponseBody().write(b);
  }

  /** {@code PlainJavaGateway PORT DECODE_URL...}. */
  public static void main(String[] args) throws IOException {
    KvRouter.Builder b = KvRouter.builder();
    for (String url : List.of(args).subList(1, args.length)) {
      b.endpoint(Endpoint.of(url, Endpoint.Role.BOTH));
    }
    PlainJavaGateway g = new PlainJavaGateway(b.build(), Integer.parseInt(args[0])).start();
    System.out.println("listening on http://127.0.0.1:" + g.port());
  }
}
