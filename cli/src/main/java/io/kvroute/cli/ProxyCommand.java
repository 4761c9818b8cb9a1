package io.kvroute.cli;

import io.kvroute.assembly.P2pNcclDiscovery;
import io.kvroute.config.Checks;
import io.kvroute.config.ConfigException;
import io.kvroute.config.Durations;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.pd.MicrometerConnectorListener;
import io.kvroute.pd.PdOrchestrator;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code kvroute proxy}: a standalone prefill/decode disaggregation proxy. */
@Command(
    name = "proxy",
    mixinStandardHelpOptions = true,
    header = "Runs a standalone prefill/decode (PD) disaggregation proxy.",
    description =
        "Serves /v1/completions and /v1/chat/completions (streaming and not) as a drop-in for vLLM's reference disaggregation proxies. Pairs are chosen round-robin; a failing pair is retried on the next one before the first byte reaches the client.")
final class ProxyCommand extends ServingCommand<OpenAiFront> {

  @Option(
      names = "--connector",
      defaultValue = "http",
      completionCandidates = Main.ConnectorTypes.class,
      description = "Connector type, one of: ${COMPLETION-CANDIDATES}")
  String connector;

  @Option(
      names = "--prefill",
      split = ",",
      showDefaultValue = CommandLine.Help.Visibility.NEVER,
      description = "Prefill base URLs, comma separated (default: none, decode only)")
  List<String> prefill = new ArrayList<>();

  @Option(
      names = "--decode",
      split = ",",
      description =
          "Decode base URLs, comma separated (required unless --registry is given; default: none)")
  List<String> decode;

  @Option(
      names = "--registry",
      paramLabel = "tcp://HOST:PORT",
      description =
          "Take the prefill and decode instances from vLLM P2pNccl registrations (xPyD): bind a"
              + " ZMQ ROUTER here, where the instances' kv_connector_extra_config proxy_ip and"
              + " proxy_port point (replaces --prefill and --decode; default: none)")
  String registry;

  @Option(
      names = "--registry-ttl",
      defaultValue = "5s",
      description = "How long a registered instance stays after its last heartbeat")
  String registryTtl;

  @Option(
      names = "--registry-allow",
      split = ",",
      paramLabel = "HOST",
      showDefaultValue = CommandLine.Help.Visibility.NEVER,
      description =
          "Hosts a registration may name (its http_address and zmq_address), comma separated or"
              + " repeated; default: loopback only (127.0.0.1, ::1, localhost)")
  List<String> registryAllow = new ArrayList<>();

  @Option(names = "--port", defaultValue = "8000", description = "Port to listen on (0: any)")
  int port;

  @Option(names = "--host", defaultValue = "127.0.0.1", description = "Address to bind")
  String host;

  @Option(names = "--prefill-timeout", defaultValue = "30s", description = "Prefill leg timeout")
  String prefillTimeout;

  @Option(
      names = "--decode-timeout",
      defaultValue = "120s",
      description = "Decode response head and inter-chunk timeout")
  String decodeTimeout;

  @Option(names = "--max-attempts", defaultValue = "3", description = "Attempts over pairs")
  int maxAttempts;

  @Option(
      names = "--param",
      paramLabel = "KEY=VALUE",
      showDefaultValue = CommandLine.Help.Visibility.NEVER,
      description =
          "A connector parameter (repeatable; default: none, the connector's defaults), e.g."
              + " --param remoteHostRewrite=always for nixl. Every connector's parameters are in"
              + " docs/connectors.md; an unknown one is refused.")
  java.util.Map<String, String> params = new java.util.LinkedHashMap<>();

  @Option(names = "--grace", defaultValue = "10", description = "Seconds to drain on SIGTERM")
  int graceSeconds;

  @Option(
      names = "--listen",
      paramLabel = "KEY=VALUE",
      showDefaultValue = CommandLine.Help.Visibility.NEVER,
      description =
          "A limit or timeout of the listener (repeatable), as the gateway's listen section:"
              + " maxConnections, maxHeaderBytes, maxHeaderCount, maxBodyBytes, headerTimeout,"
              + " bodyTimeout, idleTimeout, writeTimeout; e.g. --listen headerTimeout=5s"
              + " (default: the gateway's listen defaults)")
  java.util.Map<String, String> listen = new java.util.LinkedHashMap<>();

  @Option(
      names = "--tls-certificate",
      paramLabel = "FILE",
      description = "Serve HTTPS with this PEM certificate chain, with --tls-key (default: HTTP)")
  java.nio.file.Path tlsCertificate;

  @Option(
      names = "--tls-key",
      paramLabel = "FILE",
      description = "The PEM (PKCS#8) private key of --tls-certificate (default: none)")
  java.nio.file.Path tlsKey;

  @Override
  public Integer call() throws Exception {
    List<Endpoint> prefillEndpoints;
    List<Endpoint> decodeEndpoints;
    ConnectorConfig config;
    KVConnectors connectors = KVConnectors.discover(ProxyCommand.class.getClassLoader());
    // Mistakes are ConfigExceptions: Main prints them as one line with exit code 2.
    // "--prefill ," splits to nothing: given, but empty, which is a mistake.
    CommandLine.ParseResult parsed = spec.commandLine().getParseResult();
    boolean prefillGiven = parsed != null && parsed.hasMatchedOption("--prefill");
    Duration ttl = null;
    if (registry != null) {
      if (prefillGiven || decode != null) {
        throw new ConfigException(
            "--registry",
            "replaces --prefill and --decode (the instances register themselves); give one or"
                + " the other");
      }
      ttl = duration("--registry-ttl", registryTtl);
      prefillEndpoints = List.of();
      decodeEndpoints = List.of();
    } else {
      if (decode == null) {
        throw new ConfigException(
            "--decode",
            "is required (or --registry, to take the instances that register), e.g. --decode"
                + " http://10.0.0.2:8000");
      }
      prefillEndpoints = endpoints("--prefill", prefill, Endpoint.Role.PREFILL, prefillGiven);
      decodeEndpoints = endpoints("--decode", decode, Endpoint.Role.DECODE, true);
    }
    Checks.range("--port", port, 0, 65535);
    Checks.range("--grace", graceSeconds, 0, Integer.MAX_VALUE);
    if (!connectors.types().contains(connector.toLowerCase(Locale.ROOT))) {
      throw ConfigException.unknown("--connector", "connector type", connector, connectors.types());
    }
    config = connectorConfig(connectors);
    FrontConfig.Listen front;
    try {
      front =
          GatewayConfig.BINDER.convert(
              GatewayConfig.BINDER.fromText(listen, FrontConfig.Listen.class),
              FrontConfig.Listen.class,
              "");
    } catch (ConfigException e) {
      throw new ConfigException("--listen " + e.path(), e.problem(), e);
    }
    for (String k : List.of("host", "port", "tls")) {
      if (listen.containsKey(k)) {
        throw new ConfigException(
            "--listen " + k, "is set with --" + k.replace("tls", "tls-certificate"));
      }
    }
    io.kvroute.edge.TlsConfig tls = null;
    if (tlsCertificate != null || tlsKey != null) {
      if (tlsCertificate == null || tlsKey == null) {
        throw new ConfigException(
            tlsCertificate == null ? "--tls-key" : "--tls-certificate",
            "needs " + (tlsCertificate == null ? "--tls-certificate" : "--tls-key") + " too");
      }
      try {
        tls =
            new FrontConfig.Tls(tlsCertificate.toString(), tlsKey.toString(), null, null)
                .toEdge(null);
      } catch (ConfigException e) {
        throw new ConfigException(
            e.path().equals("key") ? "--tls-key" : "--tls-certificate", e.problem(), e);
      }
    }
    io.micrometer.prometheusmetrics.PrometheusMeterRegistry meters =
        new io.micrometer.prometheusmetrics.PrometheusMeterRegistry(
            io.micrometer.prometheusmetrics.PrometheusConfig.DEFAULT);
    ScheduledExecutorService scheduler =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "kvroute-proxy-scheduler");
              t.setDaemon(true);
              return t;
            });
    MicrometerConnectorListener listener = new MicrometerConnectorListener(meters);
    try (io.kvroute.edge.EdgeClient transport =
        io.kvroute.edge.EdgeClient.builder().meterRegistry(meters).build()) {
      KVConnector kv;
      try {
        kv =
            connectors.create(
                KVConnectorProvider.Context.builder(config, transport, scheduler)
                    .listener(listener)
                    .build());
      } catch (ConnectorConfigException e) {
        throw option(e);
      }
      PdOrchestrator orchestrator =
          PdOrchestrator.builder(kv, scheduler).retry(config.retry()).listener(listener).build();
      if (registry != null) {
        instances =
            P2pNcclDiscovery.start(
                "--registry",
                registry,
                ttl,
                registryAllow,
                null,
                listener,
                io.kvroute.connector.p2pnccl.P2pNcclRegistry.Listener.NONE);
      }
      io.kvroute.connector.p2pnccl.P2pNcclRegistry found = instances;
      OpenAiFront.Handler handler =
          found == null
              ? handler(orchestrator, prefillEndpoints, decodeEndpoints)
              : handler(
                  orchestrator,
                  OpenAiFront.roundRobin(
                      () -> found.endpoints(Endpoint.Role.PREFILL),
                      () -> found.endpoints(Endpoint.Role.DECODE)));
      OpenAiFront server =
          OpenAiFront.builder("proxy", handler)
              .listen(host, port)
              .limits(front.limits())
              .tls(tls)
              .meterRegistry(meters)
              .route("GET", "/metrics", OpenAiFront.prometheus(meters))
              .route("GET", "/readyz", ex -> ex.respond(200, "text/plain", READY))
              .build()
              .start();
      stop.onSignal(
          "kvroute-proxy-shutdown",
          () -> {
            System.err.println("kvroute proxy: draining (up to " + graceSeconds + " s)...");
            server.shutdown(Duration.ofSeconds(graceSeconds));
          });
      spec.commandLine()
          .getOut()
          .printf(
              "kvroute proxy (%s) listening on %s://%s:%d  %s%n",
              kv.type(),
              tls == null ? "http" : "https",
              host,
              server.port(),
              found == null
                  ? "prefill=" + prefill + " decode=" + decode
                  : "registry=" + found.endpoint())
          .flush();
      // published after the start-up line: a caller that waits for it can read that line
      running = server;
      stop.await();
      server.close();
      kv.close();
    } finally {
      if (instances != null) {
        instances.close();
      }
      scheduler.shutdownNow();
    }
    return 0;
  }

  private static final byte[] READY =
      "ready\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

  /** {@code KEY=VALUE} options as YAML would read them: numbers as numbers, the rest as text. */
  static java.util.Map<String, Object> scalars(java.util.Map<String, String> options) {
    java.util.Map<String, Object> out = new java.util.LinkedHashMap<>();
    options.forEach(
        (k, v) -> {
          Object value = v;
          if (v != null && v.matches("-?[0-9]{1,9}")) {
            value = Integer.parseInt(v);
          } else if (v != null && v.matches("-?[0-9]{10,18}")) {
            value = Long.parseLong(v);
          }
          out.put(k, value);
        });
    return out;
  }

  /** Runs each request over round-robin (prefill, decode) pairs. */
  static OpenAiFront.Handler handler(
      PdOrchestrator orchestrator, List<Endpoint> prefill, List<Endpoint> decode) {
    return handler(orchestrator, OpenAiFront.roundRobin(prefill, decode));
  }

  private static OpenAiFront.Handler handler(
      PdOrchestrator orchestrator,
      java.util.function.Function<io.kvroute.connector.InferenceRequest, List<PdOrchestrator.Pair>>
          pairs) {
    return (request, extra) -> orchestrator.execute(request, pairs.apply(request));
  }

  /** The registration listener of {@code --registry}, while the proxy runs (tests). */
  volatile io.kvroute.connector.p2pnccl.P2pNcclRegistry instances;

  /** Lets requests in flight finish for a second (tests). */
  @Override
  void stopServing(OpenAiFront server) {
    server.shutdown(Duration.ofSeconds(1));
  }

  /** The {@code kvConnector} section the options describe, its parameters checked. */
  private ConnectorConfig connectorConfig(KVConnectors connectors) {
    Duration prefillLeg = duration("--prefill-timeout", prefillTimeout);
    Duration decodeLeg = duration("--decode-timeout", decodeTimeout);
    Checks.range("--max-attempts", maxAttempts, 1, 100);
    KVConnectorProvider provider = connectors.provider(connector);
    java.util.Map<String, Object> typed =
        provider
            .parameters()
            .<java.util.Map<String, Object>>map(t -> GatewayConfig.BINDER.fromText(params, t))
            .orElseGet(() -> scalars(params));
    try {
      ConnectorConfig.Timeouts t = ConnectorConfig.Timeouts.DEFAULTS;
      ConnectorConfig c =
          ConnectorConfig.of(connector)
              .withParams(typed)
              .withTimeouts(
                  new ConnectorConfig.Timeouts(prefillLeg, decodeLeg, t.cleanup(), t.healthCheck()))
              .withRetry(
                  new ConnectorConfig.Retry(
                      maxAttempts,
                      ConnectorConfig.Retry.DEFAULTS.backoffBase(),
                      ConnectorConfig.Retry.DEFAULTS.backoffMax()));
      provider.checkParameters(c);
      return c;
    } catch (ConnectorConfigException e) {
      throw option(e);
    }
  }

  private static Duration duration(String option, String text) {
    Duration d;
    try {
      d = Durations.parse(text);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(option, e.getMessage());
    }
    if (d.isNegative() || d.isZero()) {
      throw new ConfigException(option, "must be > 0, was \"" + text + "\"");
    }
    return d;
  }

  /** A connector's complaint about its configuration, named by the option that set the field. */
  private static ConfigException option(ConnectorConfigException e) {
    String field = e.field();
    String problem = e.problem();
    String option =
        switch (field) {
          case "kvConnector.type" -> "--connector";
          case "kvConnector.timeouts.prefill" -> "--prefill-timeout";
          case "kvConnector.timeouts.decode" -> "--decode-timeout";
          case "kvConnector.retry.maxAttempts" -> "--max-attempts";
          default ->
              field.startsWith("kvConnector.config.")
                  ? "--param " + field.substring("kvConnector.config.".length())
                  : field;
        };
    return new ConfigException(option, problem, e);
  }

  /**
   * The endpoints of a {@code --prefill} or {@code --decode} list.
   *
   * @param required whether the list must name at least one URL
   * @throws ConfigException naming the option (and the element) when the list is empty where it
   *     must not be, has an empty element, a URL that is not http(s) or the same URL twice
   */
  static List<Endpoint> endpoints(
      String option, List<String> urls, Endpoint.Role role, boolean required) {
    if (urls.stream().allMatch(String::isBlank)) {
      if (required || !urls.isEmpty()) {
        throw new ConfigException(
            option, "lists no URL; give at least one, e.g. " + option + " http://10.0.0.2:8000");
      }
      return List.of();
    }
    List<Endpoint> out = new ArrayList<>();
    java.util.Map<String, Integer> seen = new java.util.HashMap<>();
    for (int i = 0; i < urls.size(); i++) {
      String at = option + "[" + i + "]";
      String u = urls.get(i).trim();
      if (u.isEmpty()) {
        throw new ConfigException(at, "is empty (a stray comma?)");
      }
      Checks.httpUrl(at, u);
      Endpoint e;
      try {
        e = Endpoint.of(u, role);
      } catch (IllegalArgumentException ex) {
        throw new ConfigException(at, ex.getMessage());
      }
      Integer first = seen.putIfAbsent(e.id(), i);
      if (first != null) {
        throw new ConfigException(
            at, "\"" + u + "\" is listed twice (also " + option + "[" + first + "])");
      }
      out.add(e);
    }
    return out;
  }
}
