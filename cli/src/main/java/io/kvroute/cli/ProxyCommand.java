package io.kvroute.cli;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.connector.http.OkHttpTransport;
import io.kvroute.pd.PdOrchestrator;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
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
final class ProxyCommand implements java.util.concurrent.Callable<Integer> {

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
      description = "Prefill base URLs, comma separated (none: decode only)")
  List<String> prefill = new ArrayList<>();

  @Option(
      names = "--decode",
      split = ",",
      required = true,
      description = "Decode base URLs, comma separated")
  List<String> decode;

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
      showDefaultValue = CommandLine.Help.Visibility.NEVER,
      description =
          "Connector parameter KEY=VALUE (repeatable), e.g. --param rewriteLocalhost=true")
  java.util.Map<String, String> params = new java.util.LinkedHashMap<>();

  @Option(names = "--grace", defaultValue = "10", description = "Seconds to drain on SIGTERM")
  int graceSeconds;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  /** Set by tests to learn the bound port and stop the proxy. */
  volatile ProxyServer running;

  private final CountDownLatch stop = new CountDownLatch(1);

  @Override
  public Integer call() throws Exception {
    List<Endpoint> prefillEndpoints = endpoints(prefill, Endpoint.Role.PREFILL);
    List<Endpoint> decodeEndpoints = endpoints(decode, Endpoint.Role.DECODE);
    java.util.Map<String, Object> p = new java.util.LinkedHashMap<>(params);
    ConnectorConfig config =
        ConnectorConfig.fromMap(
            java.util.Map.of(
                "type",
                connector,
                "config",
                p,
                "timeouts",
                java.util.Map.of("prefill", prefillTimeout, "decode", decodeTimeout),
                "retry",
                java.util.Map.of("maxAttempts", maxAttempts)));
    KVConnectors registry = KVConnectors.discover(ProxyCommand.class.getClassLoader());
    ScheduledExecutorService scheduler =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "kvroute-proxy-scheduler");
              t.setDaemon(true);
              return t;
            });
    try (OkHttpTransport transport = OkHttpTransport.create()) {
      KVConnector kv =
          registry.create(
              KVConnectorProvider.Context.builder(config, transport, scheduler).build());
      PdOrchestrator orchestrator =
          PdOrchestrator.builder(kv, scheduler).retry(config.retry()).build();
      ProxyServer server =
          new ProxyServer(
              host, port, orchestrator, ProxyServer.roundRobin(prefillEndpoints, decodeEndpoints));
      server.start();
      running = server;
      Thread hook =
          new Thread(
              () -> {
                System.err.println("kvroute proxy: draining (up to " + graceSeconds + " s)...");
                server.stop(graceSeconds);
                stop.countDown();
              },
              "kvroute-proxy-shutdown");
      Runtime.getRuntime().addShutdownHook(hook);
      spec.commandLine()
          .getOut()
          .printf(
              "kvroute proxy (%s) listening on http://%s:%d  prefill=%s decode=%s%n",
              kv.type(), host, server.port(), prefill, decode)
          .flush();
      stop.await();
      try {
        Runtime.getRuntime().removeShutdownHook(hook);
      } catch (IllegalStateException e) {
        // already shutting down
      }
      kv.close();
    } finally {
      scheduler.shutdownNow();
    }
    return 0;
  }

  /** Stops a proxy started by {@link #call()} (tests). */
  void shutdown() {
    ProxyServer s = running;
    if (s != null) {
      s.stop(1);
    }
    stop.countDown();
  }

  static List<Endpoint> endpoints(List<String> urls, Endpoint.Role role) {
    List<Endpoint> out = new ArrayList<>();
    for (String u : urls) {
      if (!u.isBlank()) {
        try {
          out.add(Endpoint.of(u.trim(), role));
        } catch (IllegalArgumentException e) {
          throw new CommandLine.ParameterException(
              new CommandLine(new ProxyCommand()),
              "--" + role.name().toLowerCase(java.util.Locale.ROOT) + ": " + e.getMessage());
        }
      }
    }
    return out;
  }
}
