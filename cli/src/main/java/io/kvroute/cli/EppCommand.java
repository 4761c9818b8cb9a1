package io.kvroute.cli;

import io.kvroute.assembly.RouterAssembly;
import io.kvroute.envoy.EndpointPicker;
import io.kvroute.envoy.EppServer;
import io.kvroute.router.KvRouter;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.File;
import java.nio.charset.StandardCharsets;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code kvroute epp --config FILE}: kvroute as the endpoint picker of a Gateway API Inference
 * Extension gateway (Envoy Gateway, Istio, kgateway, or plain Envoy): an Envoy {@code ext_proc}
 * gRPC server with the gRPC health service, routing with the same configuration file as {@code
 * kvroute gateway}, built by the same composition root ({@link RouterAssembly}): endpoints listed
 * or discovered ({@code discovery.kubernetes}: pods by label, or the pods an {@code InferencePool}
 * selects), connectors, scheduler, index and KV events; {@code listen} is the gRPC address here,
 * with {@code --port} defaulting to GIE's 9002. A configuration with neither endpoints nor
 * discovery is refused (exit code 2), as {@code gateway} refuses it. See docs/envoy.md.
 */
@Command(
    name = "epp",
    mixinStandardHelpOptions = true,
    header = "Runs an Envoy ext_proc endpoint picker (Gateway API Inference Extension).",
    description =
        "Serves envoy.service.ext_proc.v3.ExternalProcessor and grpc.health.v1.Health: picks the"
            + " endpoint for each request with KvRouter and tells Envoy through the"
            + " x-gateway-destination-endpoint header and envoy.lb metadata. The configuration is"
            + " the gateway's (docs/configuration.md); the Envoy side is in docs/envoy.md.")
final class EppCommand extends ServingCommand<EppServer> {

  @Option(names = "--config", required = true, description = "YAML or JSON configuration file")
  File config;

  @Option(
      names = "--host",
      description = "Address to bind (default: listen.host of the configuration)")
  String host;

  @Option(names = "--port", defaultValue = "9002", description = "gRPC port (0: any free port)")
  int port;

  @Option(
      names = "--metrics-port",
      description =
          "Serve Prometheus /metrics (and /healthz, /readyz) on this HTTP port (default: none)")
  Integer metricsPort;

  @Option(
      names = "--request-body-mode",
      defaultValue = "FULL_DUPLEX_STREAMED",
      description =
          "Request body mode assumed when Envoy does not send protocol_config: ${COMPLETION-CANDIDATES}")
  EndpointPicker.BodyMode requestBodyMode;

  @Option(
      names = "--response-body-mode",
      defaultValue = "FULL_DUPLEX_STREAMED",
      description = "Response body mode assumed likewise: ${COMPLETION-CANDIDATES}")
  EndpointPicker.BodyMode responseBodyMode;

  @Option(
      names = "--destination-namespace",
      defaultValue = EndpointPicker.DESTINATION_NAMESPACE,
      description = "Dynamic metadata namespace of the picked endpoints")
  String destinationNamespace;

  @Override
  public Integer call() throws Exception {
    GatewayConfig cfg = GatewayCommand.load(config, false, "epp");
    PrometheusMeterRegistry meters = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    io.kvroute.edge.EdgeServer metrics = null;
    try (io.kvroute.edge.EdgeClient upstream =
            io.kvroute.edge.EdgeClient.builder().meterRegistry(meters).build();
        RouterAssembly assembly = GatewayCommand.assembly(cfg, config.toPath(), meters, upstream)) {
      KvRouter router = assembly.router();
      EndpointPicker picker =
          EndpointPicker.builder(router)
              .requestBodyMode(requestBodyMode)
              .responseBodyMode(responseBodyMode)
              .destinationNamespace(destinationNamespace)
              .meterRegistry(meters)
              .build();
      String bind = host != null ? host : cfg.listen().host();
      try (EppServer server = EppServer.builder(picker).host(bind).port(port).build().start()) {
        if (metricsPort != null) {
          metrics =
              io.kvroute.edge.EdgeServer.builder()
                  .listen(bind, metricsPort)
                  .ioThreads(1)
                  .threadName("kvroute-epp-metrics")
                  .meterRegistry(meters)
                  .route("GET", "/metrics", OpenAiFront.prometheus(meters))
                  .route(
                      "GET",
                      "/healthz",
                      ex -> ex.respond(200, "text/plain", "ok\n".getBytes(StandardCharsets.UTF_8)))
                  // the gRPC health service carries no detail: the parity check's verdict is here
                  .route(
                      "GET",
                      "/readyz",
                      ex ->
                          ex.respond(
                              router.endpoints().isEmpty() ? 503 : 200,
                              "text/plain",
                              GatewayCommand.readiness(router).getBytes(StandardCharsets.UTF_8)))
                  .build()
                  .start();
        }
        stop.onSignal("kvroute-epp-shutdown", () -> {});
        spec.commandLine()
            .getOut()
            .printf(
                "kvroute epp (ext_proc) listening on %s:%d with %d endpoints%s%s%n",
                bind,
                server.port(),
                router.endpoints().size(),
                assembly.discovery().map(d -> "; " + d).orElse(""),
                metrics == null ? "" : "; metrics on :" + metrics.port())
            .flush();
        // published after the start-up line: a caller that waits for it can read that line
        running = server;
        stop.await();
      } finally {
        if (metrics != null) {
          metrics.close();
        }
      }
    }
    return 0;
  }
}
