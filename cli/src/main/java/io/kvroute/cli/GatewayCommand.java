package io.kvroute.cli;

import static java.nio.charset.StandardCharsets.UTF_8;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.assembly.RouterAssembly;
import io.kvroute.assembly.RouterSettings;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.router.KvRouter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.File;
import java.nio.charset.StandardCharsets;
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
 * {@code kvroute gateway --config FILE}: a small reference gateway serving {@code /v1/completions},
 * {@code /v1/chat/completions}, {@code /v1/messages} (Anthropic's Messages) and {@code
 * /v1/responses} through {@link KvRouter}, other {@code GET} and {@code POST} paths under {@code
 * /v1/} passed through to an endpoint picked by load only, with {@code /metrics}, {@code /healthz}
 * and {@code /readyz}.
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
        "Serves /v1/completions, /v1/chat/completions, /v1/messages and /v1/responses through KvRouter (prefix-cache-aware, optionally prefill/decode disaggregated), passes other /v1/ paths through with load-only routing, with /metrics, /healthz and /readyz. The configuration format is in docs/configuration.md.")
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
    GatewayConfig cfg = load(config, admin, "gateway");
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
    PrometheusMeterRegistry meters = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    // Upstream legs on Netty: a call made from the edge's event loop stays on that loop.
    try (io.kvroute.edge.EdgeClient upstream =
            io.kvroute.edge.EdgeClient.builder().meterRegistry(meters).build();
        RouterAssembly assembly = assembly(cfg, config.toPath(), meters, upstream)) {
      KvRouter router = assembly.router();
      OpenAiFront.Builder fb =
          OpenAiFront.builder("gateway", handler(router))
              .passThrough(passThrough(router, upstream))
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
                          readiness(router).getBytes(UTF_8)));
      if (adminConfig != null) {
        fb.admin(adminConfig);
        AdminApi api = new AdminApi(router);
        fb.adminRoute("GET", "/admin/endpoints", api::list)
            .adminRoute("POST", "/admin/endpoints", api::add)
            .adminRoute("DELETE", "/admin/endpoints/*", api::remove);
      }
      OpenAiFront server = fb.build().start();
      stop.onSignal("kvroute-gateway-shutdown", () -> server.shutdown(Duration.ofSeconds(10)));
      spec.commandLine()
          .getOut()
          .printf(
              "kvroute gateway listening on %s://%s:%d with %d endpoints%s%s%n",
              tls == null ? "http" : "https",
              cfg.listen().host(),
              server.port(),
              router.endpoints().size(),
              assembly.discovery().map(d -> "; " + d).orElse(""),
              server.adminPort() < 0
                  ? ""
                  : "; admin API on " + adminSection.host() + ":" + server.adminPort())
          .flush();
      // published after the start-up line: a caller that waits for it can read that line
      running = server;
      stop.await();
      server.close();
    }
    return 0;
  }

  /**
   * The body of {@code /readyz}: {@code ready} (or {@code no endpoints}), then a line per model on
   * the KV-cache parity check when it runs. A failed parity leaves the gateway ready (it routes the
   * model with approximate scoring) and says why on its line.
   */
  static String readiness(KvRouter router) {
    StringBuilder sb =
        new StringBuilder(router.endpoints().isEmpty() ? "no endpoints\n" : "ready\n");
    router.parity().ifPresent(p -> p.readiness().forEach(l -> sb.append(l).append('\n')));
    return sb.toString();
  }

  /**
   * The router, index and discovery {@code cfg} describes ({@link RouterAssembly}), files resolved
   * against the configuration's directory, legs sent through {@code upstream}.
   *
   * @throws ConfigException naming the file and the setting
   */
  static RouterAssembly assembly(
      GatewayConfig cfg, Path configFile, MeterRegistry meters, HttpTransport upstream) {
    try {
      return RouterAssembly.builder(cfg.settings())
          .baseDirectory(configFile.toAbsolutePath().getParent())
          .meterRegistry(meters)
          .transport(upstream)
          .build();
    } catch (ConfigException e) {
      throw e.source().isEmpty() ? e.inSource(configFile.toString()) : e;
    }
  }

  /**
   * The gateway's OpenAI handler: {@link KvRouter#route}, the decision's response headers added to
   * the client's answer.
   */
  static OpenAiFront.Handler handler(KvRouter router) {
    return (request, extra) ->
        router
            .route(request)
            .thenApply(
                r -> {
                  extra.putAll(r.decision().responseHeaders());
                  return r;
                });
  }

  /**
   * The gateway's pass-through of APIs kvroute does not schedule (other {@code GET} and {@code
   * POST} paths under {@code /v1/}): {@link KvRouter#decidePassThrough} picks an endpoint by load
   * only, the request goes there unchanged through {@code upstream} (streamed back), and the
   * decision is completed when its answer ends.
   */
  static OpenAiFront.PassThrough passThrough(KvRouter router, HttpTransport upstream) {
    return (method, pathAndQuery, body, headers, extra) -> {
      io.kvroute.router.RouteDecision d = router.decidePassThrough(body, headers, e -> true);
      extra.putAll(d.responseHeaders());
      long start = System.nanoTime();
      HttpTransport.Outbound.Builder ob =
          "GET".equals(method)
              ? HttpTransport.Outbound.get(d.decode(), pathAndQuery)
              : HttpTransport.Outbound.post(d.decode(), pathAndQuery, body);
      java.util.concurrent.CompletableFuture<io.kvroute.connector.StreamingResponse> f;
      try {
        f = upstream.send(ob.headers(headers).streaming(true).build());
      } catch (RuntimeException e) {
        d.complete(io.kvroute.router.RouteDecision.Outcome.ENDPOINT_ERROR, Duration.ZERO, null);
        throw e;
      }
      return f.handle(
          (r, t) -> {
            if (t != null) {
              d.complete(
                  io.kvroute.router.RouteDecision.Outcome.ENDPOINT_ERROR,
                  Duration.ofNanos(System.nanoTime() - start),
                  null);
              throw t instanceof java.util.concurrent.CompletionException c
                  ? c
                  : new java.util.concurrent.CompletionException(t);
            }
            int status = r.status();
            return io.kvroute.connector.StreamingResponse.tap(
                r,
                chunk -> {},
                end ->
                    d.complete(
                        end instanceof java.util.concurrent.CancellationException
                            ? io.kvroute.router.RouteDecision.Outcome.CANCELLED
                            : end != null || status >= 500
                                ? io.kvroute.router.RouteDecision.Outcome.ENDPOINT_ERROR
                                : status >= 400
                                    ? io.kvroute.router.RouteDecision.Outcome.CLIENT_ERROR
                                    : io.kvroute.router.RouteDecision.Outcome.SUCCESS,
                        Duration.ofNanos(System.nanoTime() - start),
                        null));
          });
    };
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

  /**
   * Reads a gateway configuration file.
   *
   * @param endpointsMayBeAdded whether a configuration without endpoints and without discovery is
   *     allowed (endpoints come later, through the admin API)
   * @param command the command reading it, which names its way to add endpoints at run time: {@code
   *     gateway} has {@code --admin}, {@code epp} has none
   * @throws ConfigException naming the file and the field; Main's handler prints it as one line
   *     with exit code 2 ({@code --verbose} adds the stack trace)
   */
  static GatewayConfig load(File file, boolean endpointsMayBeAdded, String command) {
    try {
      GatewayConfig cfg = GatewayConfig.load(file.toPath());
      RouterSettings s = cfg.settings();
      if (s.endpoints().isEmpty() && !endpointsMayBeAdded && s.discovery() == null) {
        throw new ConfigException(
            "endpoints",
            "lists no endpoint; every request would fail (list the model servers"
                + (command.equals("gateway")
                    ? ", add a discovery section, or start with --admin to add them at run time)"
                    : " or add a discovery section)"));
      }
      return cfg;
    } catch (ConfigException e) {
      throw e.source().isEmpty() ? e.inSource(file.toString()) : e;
    }
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
      RouterSettings.EndpointSpec e;
      try {
        e =
            GatewayConfig.BINDER.readJson(
                new String(ex.body(), StandardCharsets.UTF_8), RouterSettings.EndpointSpec.class);
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
