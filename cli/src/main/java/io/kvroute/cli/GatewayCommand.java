package io.kvroute.cli;

import static java.nio.charset.StandardCharsets.UTF_8;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.p2pnccl.P2pNcclRegistry;
import io.kvroute.kubernetes.EndpointSink;
import io.kvroute.kubernetes.KubernetesDiscovery;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.kvroute.opentelemetry.KvRouteTracing;
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
import io.opentelemetry.api.GlobalOpenTelemetry;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
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
 * tracing: { enabled: true }           # OpenTelemetry spans via GlobalOpenTelemetry (optional)
 * scheduler: picker.yaml               # an EndpointPickerConfig file, or the mapping inline
 *                                      # (optional)
 * endpoints:
 *   - { id: p0, url: "http://127.0.0.1:8001", role: prefill }
 *   - id: d0
 *     url: "http://127.0.0.1:8002"
 *     role: decode
 *     labels: { zone: a }
 *     kvEvents: { publisher: "tcp://127.0.0.1:5557", replay: "tcp://127.0.0.1:5558" }
 * discovery:                           # and/or ready pods from the Kubernetes API (optional)
 *   kubernetes: { namespace: llm, inferencePool: qwen-pool }
 *   p2pnccl: { registry: "tcp://0.0.0.0:30001" }  # and/or vLLM P2pNccl instances registering
 * }</pre>
 *
 * <p>The file is bound strictly ({@link GatewayConfig}): an unknown or duplicate key, a value of
 * the wrong type, a malformed URL, a publisher that is not {@code tcp://} or {@code ipc://}, two
 * endpoints with one id, or no endpoint at all (without {@code --admin} or {@code discovery}) stops
 * the gateway with one line naming the field and exit code 2. {@code docs/configuration.md} lists
 * every key.
 *
 * <p>Prompts of a model with {@code tokenizer.path} are tokenized in process ({@code
 * kvroute-tokenizer-hf}: the model's {@code tokenizer.json} and chat template, as vLLM does);
 * {@code fallback: true} (the default) sends them to the pods' {@code /tokenize} when local
 * tokenization fails. Other models use the pods' own {@code /tokenize}.
 *
 * <p>The traffic listener runs on kvroute's Netty edge: {@code listen} sets its limits and timeouts
 * (header and body read, idle keep-alive, write stall, header size and count, body size, open
 * connections) and TLS; every refusal is a status line with a JSON body and a counter ({@code
 * docs/http-edge.md}). With an {@code admin} section (or {@code --admin}, on 127.0.0.1:8081) the
 * admin API runs on its own listener: {@code GET /admin/endpoints}, {@code POST /admin/endpoints}
 * (one endpoint object as above, {@code Content-Type: application/json}; an existing id is
 * replaced), {@code DELETE /admin/endpoints/{id}}, each with {@code Authorization: Bearer <token>}
 * (the token of {@code admin.tokenFile}, {@code --admin-token-file} or {@code KVROUTE_ADMIN_TOKEN},
 * 16 or more characters; without one the gateway does not start).
 */
@Command(
    name = "gateway",
    mixinStandardHelpOptions = true,
    header = "Runs a reference OpenAI gateway routed by KvRouter.",
    description =
        "Serves /v1/completions and /v1/chat/completions through KvRouter (prefix-cache-aware, optionally prefill/decode disaggregated), with /metrics, /healthz and /readyz. The configuration format is in docs/configuration.md.")
final class GatewayCommand extends ServingCommand<OpenAiFront> {

  private static final Logger log = LoggerFactory.getLogger(GatewayCommand.class);

  @Option(names = "--config", required = true, description = "YAML or JSON configuration file")
  File config;

  @Option(names = "--port", description = "Port to listen on (default: listen.port, else 8080)")
  Integer port;

  @Option(
      names = "--admin",
      description =
          "Serve the admin API (/admin/endpoints) on its own listener, 127.0.0.1:8081 unless the"
              + " configuration's admin section says otherwise; every call needs the bearer token"
              + " of --admin-token-file or the KVROUTE_ADMIN_TOKEN environment variable")
  boolean admin;

  @Option(
      names = "--admin-token-file",
      paramLabel = "FILE",
      description =
          "File holding the admin API's bearer token, 16 or more characters (default:"
              + " admin.tokenFile, else $KVROUTE_ADMIN_TOKEN)")
  Path adminTokenFile;

  @Override
  public Integer call() throws Exception {
    Loaded loaded = load(config, admin);
    GatewayConfig cfg = loaded.config();
    Path dir = config.toPath().toAbsolutePath().getParent();
    FrontConfig.Admin adminSection = adminSection(cfg, admin, adminTokenFile);
    io.kvroute.edge.AdminConfig adminConfig;
    io.kvroute.edge.TlsConfig tls;
    try {
      adminConfig = adminSection == null ? null : adminSection.toEdge(dir);
    } catch (ConfigException e) { // a TLS file that cannot be read, named by its key
      throw e.under("admin").inSource(config.toString());
    } catch (io.kvroute.edge.EdgeConfigException e) {
      throw new ConfigException("admin", e.getMessage(), e).inSource(config.toString());
    }
    try {
      tls = cfg.listen().tls() == null ? null : cfg.listen().tls().toEdge(dir);
    } catch (ConfigException e) {
      throw e.under("listen.tls").inSource(config.toString());
    } catch (io.kvroute.edge.EdgeConfigException e) {
      throw new ConfigException("listen.tls", e.getMessage(), e).inSource(config.toString());
    }
    Scheduler.Builder scheduler = loaded.scheduler();
    PrometheusMeterRegistry meters = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    KvRouter built;
    List<AutoCloseable> resources = new ArrayList<>();
    try {
      built = router(cfg, scheduler, config.toPath(), meters, resources);
    } catch (ConfigException e) {
      closeAll(resources);
      throw e.source().isEmpty() ? e.inSource(config.toString()) : e;
    }
    try (KvRouter router = built;
        KubernetesDiscovery discovery = discovery(cfg, router, meters);
        P2pNcclRegistry instances = p2pNccl(cfg, router, meters)) {
      OpenAiFront.Builder fb =
          OpenAiFront.builder(
                  "gateway",
                  (request, extra) ->
                      router
                          .route(request)
                          .thenApply(
                              r -> {
                                extra.putAll(r.decision().responseHeaders());
                                return r;
                              }))
              .listen(cfg.listen().host(), port != null ? port : cfg.listen().port())
              .limits(cfg.listen().limits())
              .tls(tls)
              .meterRegistry(meters)
              .route("GET", "/metrics", OpenAiFront.prometheus(meters))
              .route(
                  "GET",
                  "/readyz",
                  ex ->
                      ex.respond(
                          router.endpoints().isEmpty() ? 503 : 200,
                          "text/plain",
                          (router.endpoints().isEmpty() ? "no endpoints\n" : "ready\n")
                              .getBytes(UTF_8)));
      if (adminConfig != null) {
        fb.admin(adminConfig);
        AdminApi api = new AdminApi(router);
        fb.adminRoute("GET", "/admin/endpoints", api::list)
            .adminRoute("POST", "/admin/endpoints", api::add)
            .adminRoute("DELETE", "/admin/endpoints/*", api::remove);
      }
      OpenAiFront server = fb.build().start();
      running = server;
      stop.onSignal("kvroute-gateway-shutdown", () -> server.shutdown(Duration.ofSeconds(10)));
      spec.commandLine()
          .getOut()
          .printf(
              "kvroute gateway listening on %s://%s:%d with %d endpoints%s%s%n",
              tls == null ? "http" : "https",
              cfg.listen().host(),
              server.port(),
              router.endpoints().size(),
              (discovery == null
                      ? ""
                      : "; discovering pods in Kubernetes namespace " + discovery.namespace())
                  + (instances == null
                      ? ""
                      : "; P2pNccl instances register at " + instances.endpoint()),
              server.adminPort() < 0
                  ? ""
                  : "; admin API on " + adminSection.host() + ":" + server.adminPort())
          .flush();
      stop.await();
      server.close();
    } finally {
      closeAll(resources);
    }
    return 0;
  }

  /** Closes what the router does not own (a Redis index's client), quietly. */
  static void closeAll(List<AutoCloseable> resources) {
    for (AutoCloseable r : resources) {
      try {
        r.close();
      } catch (Exception e) {
        log.warn("closing {} failed", r, e);
      }
    }
    resources.clear();
  }

  /**
   * The admin listener: the configuration's {@code admin} section, or with {@code --admin} one on
   * 127.0.0.1:8081; {@code --admin-token-file} names the token file either way.
   */
  static FrontConfig.Admin adminSection(GatewayConfig cfg, boolean admin, Path tokenFile) {
    FrontConfig.Admin a = cfg.admin();
    if (a == null && !admin) {
      if (tokenFile != null) {
        throw new ConfigException(
            "--admin-token-file", "is given but the admin API is off (add --admin)");
      }
      return null;
    }
    if (a == null) {
      return FrontConfig.Admin.loopback(8081, tokenFile);
    }
    if (tokenFile == null) {
      return a;
    }
    return new FrontConfig.Admin(a.host(), a.port(), tokenFile.toString(), null, a.tls());
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
      if (cfg.endpoints().isEmpty() && !endpointsMayBeAdded && cfg.discovery() == null) {
        throw new ConfigException(
            "endpoints",
            "lists no endpoint; every request would fail (list the model servers, add a"
                + " discovery section, or start with --admin to add them at run time)");
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
      GatewayConfig cfg,
      Scheduler.Builder sb,
      Path configFile,
      PrometheusMeterRegistry meters,
      List<AutoCloseable> resources)
      throws IOException {
    BlockIndex index = null;
    if (cfg.index() != null) {
      IndexConfig ic =
          IndexConfig.builder().blockSize(cfg.index().blockSize()).meterRegistry(meters).build();
      if (cfg.index().redis() != null) {
        RedisBlockIndex shared = redisIndex(ic, cfg.index().redis(), meters);
        resources.add(shared);
        index = shared;
      } else {
        index = BlockIndex.inMemory(ic);
      }
    }
    boolean pd =
        cfg.endpoints().stream().anyMatch(e -> e.endpoint().role() == Endpoint.Role.PREFILL)
            || (cfg.discovery() != null && cfg.discovery().pdDisaggregation());
    sb.pdEnabled(pd).meterRegistry(meters).tokenizer(tokenizer(cfg, configFile, meters));
    // Upstream legs on Netty: a call made from the edge's event loop stays on that loop.
    io.kvroute.edge.EdgeClient upstream =
        io.kvroute.edge.EdgeClient.builder().meterRegistry(meters).build();
    resources.add(upstream);
    KvRouter.Builder b =
        KvRouter.builder()
            .transport(upstream)
            .defaultConnector(cfg.defaultConnectorConfig())
            .observabilityHeaders(cfg.observabilityHeaders())
            .listener(new MicrometerConnectorListener(meters))
            .meterRegistry(meters);
    if (cfg.tracing().enabled()) {
      KvRouteTracing tracing = KvRouteTracing.create(GlobalOpenTelemetry.get());
      b.routeListener(tracing.routeListener()).transportDecorator(tracing::transport);
    }
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

  /** The shared index on Redis or Valkey that {@code index.redis} describes. */
  static RedisBlockIndex redisIndex(
      IndexConfig ic, GatewayConfig.Redis r, PrometheusMeterRegistry meters) {
    RedisIndexConfig.Builder b =
        RedisIndexConfig.builder()
            .url(r.url())
            .ingestMode(
                r.ingestMode().equals("leased")
                    ? RedisIndexConfig.IngestMode.LEASED
                    : RedisIndexConfig.IngestMode.ALL_REPLICAS)
            .meterRegistry(meters);
    if (r.keyPrefix() != null) {
      b.keyPrefix(r.keyPrefix());
    }
    if (r.entryTtl() != null) {
      b.entryTtl(r.entryTtl());
    }
    if (r.lookupTimeout() != null) {
      b.lookupTimeout(r.lookupTimeout());
    }
    if (r.replicaId() != null) {
      b.replicaId(r.replicaId());
    }
    RedisIndexConfig rc;
    try {
      rc = b.build();
    } catch (IllegalArgumentException e) {
      throw new ConfigException("index.redis", e.getMessage(), e);
    }
    return RedisBlockIndex.create(ic, rc);
  }

  /**
   * Starts the configuration's endpoint discovery into {@code router}, or returns null without one.
   * It runs in the background (list and watch failures are retried) and is closed with the gateway.
   */
  static KubernetesDiscovery discovery(
      GatewayConfig cfg, KvRouter router, PrometheusMeterRegistry meters) {
    if (cfg.discovery() == null || cfg.discovery().kubernetes() == null) {
      return null;
    }
    KubernetesDiscovery d =
        cfg.discovery()
            .kubernetes()
            .builder(EndpointSink.of(router))
            .meterRegistry(meters)
            .build()
            .start();
    return d;
  }

  /**
   * Starts the configuration's P2pNccl registration listener ({@code discovery.p2pnccl}) feeding
   * {@code router}, or returns null without one: an instance becomes an endpoint when it registers
   * and is removed when its heartbeats stop.
   */
  static P2pNcclRegistry p2pNccl(
      GatewayConfig cfg, KvRouter router, PrometheusMeterRegistry meters) {
    if (cfg.discovery() == null || cfg.discovery().p2pnccl() == null) {
      return null;
    }
    GatewayConfig.P2pNccl p = cfg.discovery().p2pnccl();
    return P2pNcclDiscovery.start(
        "discovery.p2pnccl.registry",
        p.registry(),
        p.ttl(),
        p.allowHosts(),
        p.maxInstances(),
        new MicrometerConnectorListener(meters),
        new P2pNcclRegistry.Listener() {
          @Override
          public void joined(Endpoint e) {
            router.addEndpoint(e, null);
          }

          @Override
          public void left(Endpoint e) {
            router.removeEndpoint(e.id());
          }
        });
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

  /** Lets requests in flight finish for a second (tests). */
  @Override
  void stopServing(OpenAiFront server) {
    server.shutdown(Duration.ofSeconds(1));
  }

  /**
   * The admin API: list, add (or replace) and remove endpoints. A change is validated in full
   * before it is applied (a failed change changes nothing) and logged at INFO, without the token.
   */
  static final class AdminApi {
    private final KvRouter router;
    private final ObjectMapper json = new ObjectMapper();

    AdminApi(KvRouter router) {
      this.router = router;
    }

    void list(io.kvroute.edge.Exchange ex) {
      List<Map<String, Object>> out = new ArrayList<>();
      for (Endpoint e : router.endpoints()) {
        out.add(
            Map.of(
                "id", e.id(),
                "url", e.baseUrl(),
                "role", e.role().name().toLowerCase(Locale.ROOT),
                "labels", e.labels()));
      }
      answer(ex, 200, out);
    }

    void add(io.kvroute.edge.Exchange ex) {
      String type = ex.header("Content-Type");
      if (type == null || !type.toLowerCase(Locale.ROOT).startsWith("application/json")) {
        ex.error(
            415,
            io.kvroute.edge.ErrorRenderer.INVALID_REQUEST,
            "Content-Type",
            "POST /admin/endpoints takes Content-Type: application/json");
        return;
      }
      GatewayConfig.EndpointSpec e;
      try {
        e =
            GatewayConfig.BINDER.readJson(
                new String(ex.body(), StandardCharsets.UTF_8), GatewayConfig.EndpointSpec.class);
      } catch (ConfigException bad) {
        ex.error(400, io.kvroute.edge.ErrorRenderer.INVALID_REQUEST, "body", bad.getMessage());
        return;
      }
      try {
        boolean replaced =
            router.endpoints().stream().anyMatch(x -> x.id().equals(e.endpoint().id()));
        router.addEndpoint(e.endpoint(), e.events());
        log.info(
            "admin: endpoint {} {} {} from {}",
            e.endpoint().id(),
            replaced ? "replaced by" : "added at",
            e.endpoint().baseUrl(),
            ex.remoteAddress());
        answer(
            ex, replaced ? 200 : 201, Map.of(replaced ? "replaced" : "added", e.endpoint().id()));
      } catch (IllegalArgumentException | ConnectorException bad) {
        int status = bad instanceof ConnectorException c ? c.httpStatus() : 400;
        ex.error(
            status,
            io.kvroute.edge.ErrorRenderer.INVALID_REQUEST,
            "body",
            String.valueOf(bad.getMessage()));
      }
    }

    void remove(io.kvroute.edge.Exchange ex) {
      String id =
          java.net.URLDecoder.decode(
              ex.path().substring("/admin/endpoints/".length()), StandardCharsets.UTF_8);
      boolean removed = router.removeEndpoint(id);
      if (removed) {
        log.info("admin: endpoint {} removed by {}", id, ex.remoteAddress());
      }
      answer(ex, removed ? 200 : 404, Map.of(removed ? "removed" : "unknown", id));
    }

    private void answer(io.kvroute.edge.Exchange ex, int status, Object body) {
      try {
        ex.respond(status, "application/json", json.writeValueAsBytes(body));
      } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
        ex.error(500, "internal_error", null, e.getMessage());
      }
    }
  }
}
