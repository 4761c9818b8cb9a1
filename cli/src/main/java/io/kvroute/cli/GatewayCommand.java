package io.kvroute.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.sun.net.httpserver.HttpExchange;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.MicrometerConnectorListener;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.router.KvEventFeed;
import io.kvroute.router.KvEventFeeds;
import io.kvroute.router.KvRouter;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulerConfigLoader;
import io.kvroute.scoring.TokenizerChain;
import io.kvroute.scoring.Tokenizers;
import io.kvroute.tokenizer.hf.HfTokenizer;
import io.kvroute.tokenizer.hf.TokenizerLoadException;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
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
 * <p>The configuration (YAML, or JSON when the file ends in {@code .json}):
 *
 * <pre>{@code
 * listen: { host: 127.0.0.1, port: 8080 }
 * observabilityHeaders: true           # x-kvroute-* response headers
 * scrapeMetrics: "2s"                  # poll each endpoint's /metrics (optional)
 * defaultConnector: { type: http }     # a kvConnector section
 * models:
 *   llama: { kvConnector: { type: nixl, timeouts: { prefill: "30s" } } }
 *   Qwen/Qwen3-0.6B:                   # tokenize locally: no /tokenize calls to the engines
 *     tokenizer: { path: /models/hub/models--Qwen--Qwen3-0.6B, revision: main, fallback: true }
 * index: { blockSize: 16 }             # precise prefix scoring from KV events (optional)
 * scheduler: picker.yaml               # an EndpointPickerConfig file (optional)
 * endpoints:
 *   - { id: p0, url: "http://127.0.0.1:8001", role: prefill }
 *   - id: d0
 *     url: "http://127.0.0.1:8002"
 *     role: decode
 *     labels: { zone: a }
 *     kvEvents: { publisher: "tcp://127.0.0.1:5557", replay: "tcp://127.0.0.1:5558" }
 * }</pre>
 *
 * <p>Prompts of a model with {@code tokenizer.path} are tokenized in process ({@code
 * kvroute-tokenizer-hf}: the model's {@code tokenizer.json} and chat template, as vLLM does);
 * {@code fallback: true} (the default) sends them to the pods' {@code /tokenize} when local
 * tokenization fails. Other models use the pods' own {@code /tokenize}. With {@code --admin},
 * endpoints can be listed, added and removed at run time: {@code GET /admin/endpoints}, {@code POST
 * /admin/endpoints} (one endpoint object as above), {@code DELETE /admin/endpoints/{id}}; bind the
 * gateway to a trusted interface when you enable it.
 */
@Command(
    name = "gateway",
    mixinStandardHelpOptions = true,
    header = "Runs a reference OpenAI gateway routed by KvRouter.",
    description =
        "Serves /v1/completions and /v1/chat/completions through KvRouter (prefix-cache-aware, optionally prefill/decode disaggregated), with /metrics, /healthz and /readyz. The configuration format is in docs/configuration.md.")
final class GatewayCommand implements Callable<Integer> {

  @Option(names = "--config", required = true, description = "YAML or JSON configuration file")
  File config;

  @Option(names = "--port", description = "Overrides listen.port")
  Integer port;

  @Option(names = "--admin", description = "Serve /admin/endpoints to add and remove endpoints")
  boolean admin;

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
      List<ConfiguredEndpoint> endpoints,
      Integer indexBlockSize,
      File schedulerFile,
      Map<String, LocalTokenizer> tokenizers) {}

  /**
   * {@code models.<name>.tokenizer}: where the model's tokenizer files are, which snapshot of a
   * Hugging Face cache directory, an optional chat template file, and whether a local failure falls
   * back to the pods' {@code /tokenize}.
   */
  record LocalTokenizer(File path, String revision, File chatTemplate, boolean fallback) {}

  /** An endpoint and where it publishes KV events (null when it does not). */
  record ConfiguredEndpoint(Endpoint endpoint, KvEventFeed.Source events) {}

  /**
   * Loads and validates a configuration file.
   *
   * @throws IllegalArgumentException (or {@link ConnectorException}) naming the offending field
   */
  @SuppressWarnings("unchecked")
  static GatewayConfig load(File file) throws IOException {
    String name = file.getName().toLowerCase(Locale.ROOT);
    ObjectMapper mapper =
        name.endsWith(".json") ? new ObjectMapper() : new ObjectMapper(new YAMLFactory());
    Map<String, Object> root;
    try {
      root = mapper.readValue(file, Map.class);
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot parse: " + e.getMessage(), e);
    }
    if (root == null) {
      root = Map.of();
    }
    Map<String, Object> listen = (Map<String, Object>) root.getOrDefault("listen", Map.of());
    String host = String.valueOf(listen.getOrDefault("host", "127.0.0.1"));
    Object p = listen.getOrDefault("port", 8080);
    if (!(p instanceof Number) || ((Number) p).intValue() < 0 || ((Number) p).intValue() > 65535) {
      throw new IllegalArgumentException("listen.port must be in 0..65535, was " + p);
    }
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
    Map<String, LocalTokenizer> tokenizers = new LinkedHashMap<>();
    Map<String, Object> m = (Map<String, Object>) root.getOrDefault("models", Map.of());
    for (Map.Entry<String, Object> e : m.entrySet()) {
      if (!(e.getValue() instanceof Map)) {
        throw new IllegalArgumentException("models." + e.getKey() + " must be an object");
      }
      Map<String, Object> model = new LinkedHashMap<>((Map<String, Object>) e.getValue());
      Object tok = model.remove("tokenizer");
      if (tok != null) {
        tokenizers.put(
            e.getKey(), localTokenizer("models." + e.getKey() + ".tokenizer", tok, file));
      }
      if (!model.isEmpty() || tok == null) {
        models.put(e.getKey(), ConnectorConfig.fromMap(model));
      }
    }
    List<Map<String, Object>> eps =
        (List<Map<String, Object>>) root.getOrDefault("endpoints", List.of());
    List<ConfiguredEndpoint> endpoints = new ArrayList<>();
    for (int i = 0; i < eps.size(); i++) {
      endpoints.add(endpoint("endpoints[" + i + "]", eps.get(i)));
    }
    Integer blockSize = null;
    if (root.get("index") != null) {
      Map<String, Object> index = (Map<String, Object>) root.get("index");
      Object bs = index.getOrDefault("blockSize", 16);
      if (!(bs instanceof Number) || ((Number) bs).intValue() < 1) {
        throw new IllegalArgumentException("index.blockSize must be a positive integer, was " + bs);
      }
      blockSize = ((Number) bs).intValue();
    }
    File schedulerFile = null;
    if (root.get("scheduler") != null) {
      schedulerFile = new File(String.valueOf(root.get("scheduler")));
      if (!schedulerFile.isAbsolute() && file.getAbsoluteFile().getParentFile() != null) {
        schedulerFile = new File(file.getAbsoluteFile().getParentFile(), schedulerFile.getPath());
      }
    }
    return new GatewayConfig(
        host,
        ((Number) p).intValue(),
        obs,
        scrape,
        dflt,
        models,
        endpoints,
        blockSize,
        schedulerFile,
        tokenizers);
  }

  /** Parses {@code models.<name>.tokenizer}; relative paths are relative to the config file. */
  @SuppressWarnings("unchecked")
  static LocalTokenizer localTokenizer(String field, Object value, File configFile) {
    if (!(value instanceof Map)) {
      throw new IllegalArgumentException(field + " must be an object like { path: DIR }");
    }
    Map<String, Object> t = (Map<String, Object>) value;
    for (String k : t.keySet()) {
      if (!List.of("path", "revision", "chatTemplate", "fallback").contains(k)) {
        throw new IllegalArgumentException(
            field
                + "."
                + k
                + " is not a known field; expected path, revision, chatTemplate, fallback");
      }
    }
    if (!(t.get("path") instanceof String)) {
      throw new IllegalArgumentException(field + ".path must be a directory path string");
    }
    Object fb = t.getOrDefault("fallback", Boolean.TRUE);
    if (!(fb instanceof Boolean)) {
      throw new IllegalArgumentException(field + ".fallback must be true or false, was " + fb);
    }
    return new LocalTokenizer(
        relativeTo(configFile, (String) t.get("path")),
        t.get("revision") == null ? null : String.valueOf(t.get("revision")),
        t.get("chatTemplate") == null
            ? null
            : relativeTo(configFile, String.valueOf(t.get("chatTemplate"))),
        (Boolean) fb);
  }

  private static File relativeTo(File configFile, String path) {
    File f = new File(path);
    if (!f.isAbsolute() && configFile.getAbsoluteFile().getParentFile() != null) {
      f = new File(configFile.getAbsoluteFile().getParentFile(), path);
    }
    return f;
  }

  /** Parses one endpoint object; {@code field} names it in errors. */
  @SuppressWarnings("unchecked")
  static ConfiguredEndpoint endpoint(String field, Map<String, Object> e) {
    Object url = e.get("url");
    if (!(url instanceof String)) {
      throw new IllegalArgumentException(field + ".url must be a URL string, was " + url);
    }
    Endpoint ep;
    try {
      ep =
          Endpoint.of(
              (String) url, Endpoint.Role.parse(String.valueOf(e.getOrDefault("role", "both"))));
    } catch (IllegalArgumentException ex) {
      throw new IllegalArgumentException(field + ": " + ex.getMessage(), ex);
    }
    if (e.get("id") != null) {
      ep = ep.withId(String.valueOf(e.get("id")));
    }
    Map<String, String> labels = new LinkedHashMap<>();
    Object l = e.getOrDefault("labels", Map.of());
    if (!(l instanceof Map)) {
      throw new IllegalArgumentException(field + ".labels must be an object");
    }
    ((Map<String, Object>) l).forEach((k, v) -> labels.put(k, String.valueOf(v)));
    KvEventFeed.Source events = null;
    if (e.get("kvEvents") != null) {
      if (!(e.get("kvEvents") instanceof Map)) {
        throw new IllegalArgumentException(field + ".kvEvents must be an object");
      }
      Map<String, Object> k = (Map<String, Object>) e.get("kvEvents");
      if (!(k.get("publisher") instanceof String)) {
        throw new IllegalArgumentException(field + ".kvEvents.publisher must be a tcp:// endpoint");
      }
      events =
          new KvEventFeed.Source(
              (String) k.get("publisher"),
              k.get("replay") == null ? null : String.valueOf(k.get("replay")),
              k.get("topic") == null ? "" : String.valueOf(k.get("topic")));
    }
    return new ConfiguredEndpoint(ep.withLabels(labels), events);
  }

  @Override
  public Integer call() throws Exception {
    GatewayConfig cfg;
    try {
      cfg = load(config);
    } catch (RuntimeException e) {
      spec.commandLine()
          .getErr()
          .println(
              "kvroute gateway: invalid --config " + config + ": " + Main.oneLine(e.getMessage()));
      return 2;
    }
    PrometheusMeterRegistry meters = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    KvRouter built;
    try {
      built = router(cfg, meters);
    } catch (IllegalArgumentException e) {
      spec.commandLine()
          .getErr()
          .println("kvroute gateway: invalid --config " + config + ": " + e.getMessage());
      return 2;
    }
    try (KvRouter router = built) {
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
                            return (StreamingResponse) r;
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
      if (admin) {
        server.route("/admin/endpoints", ex -> admin(router, ex));
      }
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
              cfg.host(), server.port(), router.endpoints().size())
          .flush();
      stop.await();
      try {
        Runtime.getRuntime().removeShutdownHook(hook);
      } catch (IllegalStateException e) {
        // already shutting down
      }
    }
    return 0;
  }

  /** The router the configuration describes. */
  static KvRouter router(GatewayConfig cfg, PrometheusMeterRegistry meters) throws IOException {
    BlockIndex index = null;
    if (cfg.indexBlockSize() != null) {
      index =
          BlockIndex.inMemory(
              IndexConfig.builder().blockSize(cfg.indexBlockSize()).meterRegistry(meters).build());
    }
    Scheduler.Builder sb;
    if (cfg.schedulerFile() != null) {
      sb = SchedulerConfigLoader.create().load(cfg.schedulerFile().toPath());
    } else {
      sb = Scheduler.builder();
      Scheduler.defaultProfiles(index != null).forEach(sb::profile);
      sb.prefillProfile(Scheduler.PREFILL_PROFILE);
    }
    boolean pd =
        cfg.endpoints().stream().anyMatch(e -> e.endpoint().role() == Endpoint.Role.PREFILL);
    Tokenizers.VllmTokenizer remote = Tokenizers.vllm().meterRegistry(meters).build();
    if (cfg.tokenizers().isEmpty()) {
      sb.tokenizer(remote);
    } else {
      TokenizerChain.Builder chain = Tokenizers.chain().remote(remote).meterRegistry(meters);
      for (Map.Entry<String, LocalTokenizer> e : cfg.tokenizers().entrySet()) {
        LocalTokenizer t = e.getValue();
        HfTokenizer.Builder hb =
            HfTokenizer.builder()
                .path(t.path().toPath())
                .revision(t.revision())
                .modelName(e.getKey())
                .meterRegistry(meters);
        if (t.chatTemplate() != null) {
          hb.chatTemplate(
              java.nio.file.Files.readString(t.chatTemplate().toPath(), StandardCharsets.UTF_8));
        }
        try {
          chain.local(e.getKey(), hb.build(), t.fallback());
        } catch (TokenizerLoadException ex) {
          throw new IllegalArgumentException(
              "models." + e.getKey() + ".tokenizer: " + ex.getMessage(), ex);
        }
      }
      sb.tokenizer(chain.build());
    }
    sb.pdEnabled(pd).meterRegistry(meters);
    KvRouter.Builder b =
        KvRouter.builder()
            .defaultConnector(cfg.defaultConnector())
            .observabilityHeaders(cfg.observabilityHeaders())
            .listener(new MicrometerConnectorListener(meters))
            .meterRegistry(meters);
    if (index != null) {
      sb.prefixCacheLookup(BlockIndexLookup.of(index));
      b.eventFeed(
          KvEventFeeds.zmq(KvEventFeeds.subscriberFor(index).meterRegistry(meters).build(), index));
    }
    b.scheduler(sb.build());
    cfg.endpoints().forEach(e -> b.endpoint(e.endpoint(), e.events()));
    cfg.models().forEach(b::model);
    if (cfg.scrapeMetrics() != null) {
      b.scrapeMetrics(cfg.scrapeMetrics());
    }
    return b.build();
  }

  @SuppressWarnings("unchecked")
  private static void admin(KvRouter router, HttpExchange ex) throws IOException {
    String path = ex.getRequestURI().getPath();
    String method = ex.getRequestMethod();
    ObjectMapper json = new ObjectMapper();
    try {
      if (method.equals("GET") && path.equals("/admin/endpoints")) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Endpoint e : router.endpoints()) {
          out.add(
              Map.of(
                  "id", e.id(),
                  "url", e.baseUrl(),
                  "role", e.role().name().toLowerCase(Locale.ROOT),
                  "labels", e.labels()));
        }
        text(ex, 200, json.writeValueAsString(out));
      } else if (method.equals("POST") && path.equals("/admin/endpoints")) {
        Object body = json.readValue(ProxyServer.readBody(ex.getRequestBody()), Object.class);
        if (!(body instanceof Map)) {
          throw new IllegalArgumentException("body must be one endpoint object");
        }
        ConfiguredEndpoint e = endpoint("endpoint", (Map<String, Object>) body);
        router.addEndpoint(e.endpoint(), e.events());
        text(ex, 201, json.writeValueAsString(Map.of("added", e.endpoint().id())));
      } else if (method.equals("DELETE") && path.startsWith("/admin/endpoints/")) {
        String id = path.substring("/admin/endpoints/".length());
        boolean removed = router.removeEndpoint(id);
        text(
            ex,
            removed ? 200 : 404,
            json.writeValueAsString(Map.of(removed ? "removed" : "unknown", id)));
      } else {
        text(
            ex,
            405,
            "{\"error\":\"use GET or POST /admin/endpoints, DELETE /admin/endpoints/{id}\"}");
      }
    } catch (IllegalArgumentException | com.fasterxml.jackson.core.JacksonException e) {
      text(ex, 400, json.writeValueAsString(Map.of("error", String.valueOf(e.getMessage()))));
    } catch (ConnectorException e) {
      text(
          ex,
          e.httpStatus(),
          json.writeValueAsString(Map.of("error", String.valueOf(e.getMessage()))));
    }
  }

  void shutdown() {
    ProxyServer s = running;
    if (s != null) {
      s.stop(1);
    }
    stop.countDown();
  }

  static void text(HttpExchange ex, int status, String body) throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders()
        .set(
            "Content-Type",
            body.startsWith("{") || body.startsWith("[")
                ? "application/json"
                : "text/plain; version=0.0.4; charset=utf-8");
    ex.sendResponseHeaders(status, b.length);
    ex.getResponseBody().write(b);
    ex.close();
  }
}
