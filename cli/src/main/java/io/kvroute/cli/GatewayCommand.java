package io.kvroute.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.MicrometerConnectorListener;
import io.kvroute.router.KvRouter;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code kvroute gateway --config FILE}: a small reference gateway serving {@code /v1/completions}
 * and {@code /v1/chat/completions} through {@link KvRouter}, with {@code /metrics}, {@code
 * /healthz} and {@code /readyz}.
 *
 * <p>The configuration (YAML or JSON):
 *
 * <pre>{@code
 * listen: { host: 127.0.0.1, port: 8080 }
 * observabilityHeaders: true           # x-kvroute-* response headers
 * scrapeMetrics: "2s"                  # poll each endpoint's /metrics (optional)
 * defaultConnector: { type: http }     # a kvConnector section
 * models:
 *   llama: { kvConnector: { type: nixl, timeouts: { prefill: "30s" } } }
 * endpoints:
 *   - { id: p0, url: "http://127.0.0.1:8001", role: prefill }
 *   - { id: d0, url: "http://127.0.0.1:8002", role: decode, labels: { zone: a } }
 * }</pre>
 */
@Command(
    name = "gateway",
    mixinStandardHelpOptions = true,
    description = "A reference OpenAI gateway routed by KvRouter (the example a Java team copies).")
final class GatewayCommand implements Callable<Integer> {

  @Option(names = "--config", required = true, description = "YAML or JSON configuration file")
  File config;

  @Option(names = "--port", description = "Overrides listen.port")
  Integer port;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  volatile ProxyServer running;
  private final CountDownLatch stop = new CountDownLatch(1);

  /** The parsed configuration. */
  record GatewayConfig(
      String host,
      int port,
      boolean observabilityHeaders,
      Duration scrapeMetrics,
      ConnectorConfig defaultConnector,
      Map<String, ConnectorConfig> models,
      List<Endpoint> endpoints) {}

  @SuppressWarnings("unchecked")
  static GatewayConfig load(File file) throws IOException {
    String name = file.getName().toLowerCase(java.util.Locale.ROOT);
    ObjectMapper mapper =
        name.endsWith(".json") ? new ObjectMapper() : new ObjectMapper(new YAMLFactory());
    Map<String, Object> root;
    try {
      root = mapper.readValue(file, Map.class);
    } catch (IOException e) {
      throw new CommandLine.ParameterException(
          new CommandLine(new GatewayCommand()),
          "--config " + file + ": cannot parse: " + e.getMessage());
    }
    if (root == null) {
      root = Map.of();
    }
    Map<String, Object> listen = (Map<String, Object>) root.getOrDefault("listen", Map.of());
    String host = String.valueOf(listen.getOrDefault("host", "127.0.0.1"));
    int port = ((Number) listen.getOrDefault("port", 8080)).intValue();
    boolean obs = Boolean.TRUE.equals(root.get("observabilityHeaders"));
    Duration scrape =
        root.get("scrapeMetrics") == null
            ? null
            : ConnectorConfig.parseDuration("scrapeMetrics", root.get("scrapeMetrics"));
    ConnectorConfig dflt =
        root.get("defaultConnector") == null
            ? ConnectorConfig.of("http")
            : ConnectorConfig.fromMap((Map<String, Object>) root.get("defaultConnector"));
    Map<String, ConnectorConfig> models = new LinkedHashMap<>();
    Map<String, Object> m = (Map<String, Object>) root.getOrDefault("models", Map.of());
    m.forEach((k, v) -> models.put(k, ConnectorConfig.fromMap((Map<String, Object>) v)));
    List<Map<String, Object>> eps =
        (List<Map<String, Object>>) root.getOrDefault("endpoints", List.of());
    List<Endpoint> endpoints = new java.util.ArrayList<>();
    for (int i = 0; i < eps.size(); i++) {
      Map<String, Object> e = eps.get(i);
      String field = "endpoints[" + i + "]";
      Object url = e.get("url");
      if (!(url instanceof String)) {
        throw new IllegalArgumentException(field + ".url must be a URL string");
      }
      Endpoint.Role role = Endpoint.Role.parse(String.valueOf(e.getOrDefault("role", "both")));
      Endpoint ep = Endpoint.of((String) url, role);
      if (e.get("id") != null) {
        ep = ep.withId(String.valueOf(e.get("id")));
      }
      Map<String, String> labels = new LinkedHashMap<>();
      ((Map<String, Object>) e.getOrDefault("labels", Map.of()))
          .forEach((k, v) -> labels.put(k, String.valueOf(v)));
      endpoints.add(ep.withLabels(labels));
    }
    return new GatewayConfig(host, port, obs, scrape, dflt, models, endpoints);
  }

  @Override
  public Integer call() throws Exception {
    GatewayConfig cfg;
    try {
      cfg = load(config);
    } catch (RuntimeException e) {
      spec.commandLine()
          .getErr()
          .println("kvroute gateway: invalid --config " + config + ": " + e.getMessage());
      return 2;
    }
    PrometheusMeterRegistry meters = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    KvRouter.Builder b =
        KvRouter.builder()
            .defaultConnector(cfg.defaultConnector())
            .observabilityHeaders(cfg.observabilityHeaders())
            .listener(new MicrometerConnectorListener(meters))
            .meterRegistry(meters)
            .endpoints(cfg.endpoints());
    cfg.models().forEach(b::model);
    if (cfg.scrapeMetrics() != null) {
      b.scrapeMetrics(cfg.scrapeMetrics());
    }
    try (KvRouter router = b.build()) {
      ProxyServer server =
          new ProxyServer(
              cfg.host(),
              port != null ? port : cfg.port(),
              (request, extra) ->
                  router
                      .route(request)
                      .thenApply(
                          r -> {
                            extra.putAll(r.decision().responseHeaders());
                            return (io.kvroute.connector.StreamingResponse) r;
                          }));
      server.route("/metrics", ex -> text(ex, 200, meters.scrape()));
      server.route("/healthz", ex -> text(ex, 200, "ok\n"));
      server.route(
          "/readyz",
          ex ->
              text(
                  ex,
                  router.endpoints().isEmpty() ? 503 : 200,
                  router.endpoints().isEmpty() ? "no endpoints\n" : "ready\n"));
      server.start();
      running = server;
      Thread hook =
          new Thread(
              () -> {
                server.stop(10);
                stop.countDown();
              },
              "kvroute-gateway-shutdown");
      Runtime.getRuntime().addShutdownHook(hook);
      spec.commandLine()
          .getOut()
          .printf(
              "kvroute gateway listening on http://%s:%d with %d endpoints%n",
              cfg.host(), server.port(), cfg.endpoints().size())
          .flush();
      stop.await();
    }
    return 0;
  }

  void shutdown() {
    ProxyServer s = running;
    if (s != null) {
      s.stop(1);
    }
    stop.countDown();
  }

  static void text(com.sun.net.httpserver.HttpExchange ex, int status, String body)
      throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    ex.sendResponseHeaders(status, b.length);
    ex.getResponseBody().write(b);
    ex.close();
  }
}
