package io.kvroute.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.pd.MicrometerConnectorListener;
import io.kvroute.router.KvEventFeeds;
import io.kvroute.router.KvRouter;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulerConfigLoader;
import io.kvroute.scoring.Tokenizer;
import io.kvroute.scoring.TokenizerChain;
import io.kvroute.scoring.Tokenizers;
import io.kvroute.tokenizer.hf.HfTokenizer;
import io.kvroute.tokenizer.hf.TokenizerLoadException;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
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
 * scheduler: picker.yaml               # an EndpointPickerConfig file, or the mapping inline
 *                                      # (optional)
 * endpoints:
 *   - { id: p0, url: "http://127.0.0.1:8001", role: prefill }
 *   - id: d0
 *     url: "http://127.0.0.1:8002"
 *     role: decode
 *     labels: { zone: a }
 *     kvEvents: { publisher: "tcp://127.0.0.1:5557", replay: "tcp://127.0.0.1:5558" }
 * }</pre>
 *
 * <p>The file is bound strictly ({@link GatewayConfig}): an unknown or duplicate key, a value of
 * the wrong type, a malformed URL, a publisher that is not {@code tcp://} or {@code ipc://}, two
 * endpoints with one id, or no endpoint at all (without {@code --admin}) stops the gateway with one
 * line naming the field and exit code 2. {@code docs/configuration.md} lists every key.
 *
 * <p>Prompts of a model with {@code tokenizer.path} are tokenized in process ({@code
 * kvroute-tokenizer-hf}: the model's {@code tokenizer.json} and chat template, as vLLM does);
 * {@code fallback: true} (the default) sends them to the pods' {@code /tokenize} when local
 * tokenization fails. Other models use the pods' own {@code /tokenize}. With {@code --admin},
 * endpoints can be listed, added and removed at run time: {@code GET /admin/endpoints}, {@code POST
 * /admin/endpoints} (one endpoint object as above, {@code Content-Type: application/json}), {@code
 * DELETE /admin/endpoints/{id}}, each with {@code Authorization: Bearer <token>} (the token of
 * {@code --admin-token-file} or {@code KVROUTE_ADMIN_TOKEN}, 16 or more characters; without one the
 * gateway does not start). The admin API shares the traffic port: bind the gateway to a trusted
 * interface when you enable it.
 */
@Command(
    name = "gateway",
    mixinStandardHelpOptions = true,
    header = "Runs a reference OpenAI gateway routed by KvRouter.",
    description =
        "Serves /v1/completions and /v1/chat/completions through KvRouter (prefix-cache-aware, optionally prefill/decode disaggregated), with /metrics, /healthz and /readyz. The configuration format is in docs/configuration.md.")
final class GatewayCommand implements Callable<Integer> {

  private static final Logger log = LoggerFactory.getLogger(GatewayCommand.class);

  @Option(names = "--config", required = true, description = "YAML or JSON configuration file")
  File config;

  @Option(names = "--port", description = "Overrides listen.port")
  Integer port;

  @Option(
      names = "--admin",
      description =
          "Serve /admin/endpoints to add and remove endpoints; every call needs the bearer token of"
              + " --admin-token-file or the KVROUTE_ADMIN_TOKEN environment variable")
  boolean admin;

  @Option(
      names = "--admin-token-file",
      paramLabel = "FILE",
      description = "File holding the admin API's bearer token (16 or more characters)")
  Path adminTokenFile;

  /** Where the admin token comes from when no file is given. */
  static final String ADMIN_TOKEN_ENV = "KVROUTE_ADMIN_TOKEN";

  /** The shortest admin token accepted. */
  static final int MIN_TOKEN_LENGTH = 16;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  volatile ProxyServer running;
  private final CountDownLatch stop = new CountDownLatch(1);

  @Override
  public Integer call() throws Exception {
    byte[] adminToken = admin ? adminToken(adminTokenFile, System.getenv(ADMIN_TOKEN_ENV)) : null;
    Loaded loaded = load(config, admin);
    GatewayConfig cfg = loaded.config();
    Scheduler.Builder scheduler = loaded.scheduler();
    PrometheusMeterRegistry meters = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    KvRouter built;
    try {
      built = router(cfg, scheduler, config.toPath(), meters);
    } catch (ConfigException e) {
      throw e.source().isEmpty() ? e.inSource(config.toString()) : e;
    }
    try (KvRouter router = built) {
      ProxyServer server =
          new ProxyServer(
              cfg.listen().host(),
              port != null ? port : cfg.listen().port(),
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
        server.route("/admin/endpoints", ex -> admin(router, adminToken, ex));
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
              cfg.listen().host(), server.port(), router.endpoints().size())
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

  /** A gateway configuration file and the scheduler it names. */
  record Loaded(GatewayConfig config, Scheduler.Builder scheduler) {}

  /**
   * Reads a gateway configuration file and the scheduler it names.
   *
   * @param endpointsMayBeAdded whether an empty {@code endpoints} list is allowed (endpoints come
   *     later, e.g. through the admin API)
   * @throws ConfigException naming the file and the field; Main's handler prints it as one line
   *     with exit code 2 ({@code --verbose} adds the stack trace)
   */
  static Loaded load(File file, boolean endpointsMayBeAdded) {
    try {
      GatewayConfig cfg = GatewayConfig.load(file.toPath());
      if (cfg.endpoints().isEmpty() && !endpointsMayBeAdded) {
        throw new ConfigException(
            "endpoints",
            "lists no endpoint; every request would fail (list the model servers, or start with"
                + " --admin to add them at run time)");
      }
      return new Loaded(cfg, scheduler(cfg, file.toPath()));
    } catch (ConfigException e) {
      throw e.source().isEmpty() ? e.inSource(file.toString()) : e;
    }
  }

  /**
   * The scheduler the configuration names: its {@code scheduler} file or mapping, or kvroute's
   * default profiles.
   *
   * @throws ConfigException naming the scheduler configuration's field
   */
  static Scheduler.Builder scheduler(GatewayConfig cfg, Path configFile) {
    Path file = cfg.schedulerFile(configFile);
    if (file != null) {
      return SchedulerConfigLoader.create().load(file);
    }
    if (cfg.schedulerMapping() != null) {
      return SchedulerConfigLoader.create().load(cfg.schedulerMapping(), "scheduler");
    }
    Scheduler.Builder sb = Scheduler.builder();
    Scheduler.defaultProfiles(cfg.index() != null).forEach(sb::profile);
    return sb.prefillProfile(Scheduler.PREFILL_PROFILE);
  }

  /** The router the configuration describes. */
  static KvRouter router(
      GatewayConfig cfg, Scheduler.Builder sb, Path configFile, PrometheusMeterRegistry meters)
      throws IOException {
    BlockIndex index = null;
    if (cfg.index() != null) {
      index =
          BlockIndex.inMemory(
              IndexConfig.builder()
                  .blockSize(cfg.index().blockSize())
                  .meterRegistry(meters)
                  .build());
    }
    boolean pd =
        cfg.endpoints().stream().anyMatch(e -> e.endpoint().role() == Endpoint.Role.PREFILL);
    sb.pdEnabled(pd).meterRegistry(meters).tokenizer(tokenizer(cfg, configFile, meters));
    KvRouter.Builder b =
        KvRouter.builder()
            .defaultConnector(cfg.defaultConnectorConfig())
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
    cfg.modelConnectors().forEach(b::model);
    if (cfg.scrapeMetrics() != null) {
      b.scrapeMetrics(cfg.scrapeMetrics());
    }
    return b.build();
  }

  /**
   * The pods' {@code /tokenize}, behind the local tokenizers of the models that name one.
   *
   * @throws ConfigException naming {@code models.<name>.tokenizer} when one cannot be loaded
   */
  static Tokenizer tokenizer(GatewayConfig cfg, Path configFile, PrometheusMeterRegistry meters) {
    Tokenizers.VllmTokenizer remote = Tokenizers.vllm().meterRegistry(meters).build();
    Map<String, GatewayConfig.LocalTokenizer> local = cfg.tokenizers();
    if (local.isEmpty()) {
      return remote;
    }
    Path dir = configFile.toAbsolutePath().getParent();
    TokenizerChain.Builder chain = Tokenizers.chain().remote(remote).meterRegistry(meters);
    for (Map.Entry<String, GatewayConfig.LocalTokenizer> e : local.entrySet()) {
      GatewayConfig.LocalTokenizer t = e.getValue();
      String at = "models." + e.getKey() + ".tokenizer";
      HfTokenizer.Builder hb =
          HfTokenizer.builder()
              .path(GatewayConfig.resolve(t.path(), dir))
              .revision(t.revision())
              .modelName(e.getKey())
              .meterRegistry(meters);
      if (t.chatTemplate() != null) {
        try {
          hb.chatTemplate(
              Files.readString(
                  GatewayConfig.resolve(t.chatTemplate(), dir), StandardCharsets.UTF_8));
        } catch (IOException ex) {
          throw new ConfigException(at + ".chatTemplate", "cannot read: " + ex.getMessage(), ex);
        }
      }
      try {
        chain.local(e.getKey(), hb.build(), t.fallback());
      } catch (TokenizerLoadException ex) {
        throw new ConfigException(at + ".path", ex.getMessage(), ex);
      }
    }
    return chain.build();
  }

  /**
   * The admin API's bearer token, from {@code file} or else the environment variable's {@code
   * fromEnv}, as the bytes of {@code "Bearer <token>"}.
   *
   * @throws ConfigException when there is none or it is shorter than {@value #MIN_TOKEN_LENGTH}
   */
  static byte[] adminToken(Path file, String fromEnv) {
    String token;
    if (file != null) {
      try {
        token = Files.readString(file, StandardCharsets.UTF_8).strip();
      } catch (IOException e) {
        throw new ConfigException("--admin-token-file", "cannot be read: " + e.getMessage(), e);
      }
    } else {
      token = fromEnv == null ? "" : fromEnv.strip();
    }
    if (token.length() < MIN_TOKEN_LENGTH) {
      throw new ConfigException(
          file != null ? "--admin-token-file" : "--admin",
          "needs a bearer token of "
              + MIN_TOKEN_LENGTH
              + " or more characters (--admin-token-file FILE or the "
              + ADMIN_TOKEN_ENV
              + " environment variable); anyone who reaches /admin/endpoints can redirect traffic");
    }
    return ("Bearer " + token).getBytes(StandardCharsets.UTF_8);
  }

  /** Whether the request carries the admin token (compared in constant time). */
  static boolean authorized(HttpExchange ex, byte[] expected) {
    String given = ex.getRequestHeaders().getFirst("Authorization");
    return given != null && MessageDigest.isEqual(given.getBytes(StandardCharsets.UTF_8), expected);
  }

  private static void admin(KvRouter router, byte[] token, HttpExchange ex) throws IOException {
    String path = ex.getRequestURI().getPath();
    String method = ex.getRequestMethod();
    ObjectMapper json = new ObjectMapper();
    if (!authorized(ex, token)) {
      ex.getResponseHeaders().set("WWW-Authenticate", "Bearer");
      text(ex, 401, "{\"error\":\"the admin API needs its bearer token\"}");
      return;
    }
    String type = ex.getRequestHeaders().getFirst("Content-Type");
    if (method.equals("POST")
        && (type == null || !type.toLowerCase(Locale.ROOT).startsWith("application/json"))) {
      text(ex, 415, "{\"error\":\"POST /admin/endpoints takes Content-Type: application/json\"}");
      return;
    }
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
        GatewayConfig.EndpointSpec e =
            GatewayConfig.BINDER.readJson(
                new String(ProxyServer.readBody(ex.getRequestBody()), StandardCharsets.UTF_8),
                GatewayConfig.EndpointSpec.class);
        router.addEndpoint(e.endpoint(), e.events());
        log.info("admin: endpoint {} set to {}", e.endpoint().id(), e.endpoint().baseUrl());
        text(ex, 201, json.writeValueAsString(Map.of("added", e.endpoint().id())));
      } else if (method.equals("DELETE") && path.startsWith("/admin/endpoints/")) {
        String id = path.substring("/admin/endpoints/".length());
        boolean removed = router.removeEndpoint(id);
        if (removed) {
          log.info("admin: endpoint {} removed", id);
        }
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
