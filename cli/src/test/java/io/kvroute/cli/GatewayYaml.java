package io.kvroute.cli;

import io.kvroute.testkit.VllmSimulator;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Pieces of gateway configuration for tests that run the gateway, writing it, and running {@code
 * kvroute gateway} on it in the background.
 */
final class GatewayYaml {
  /**
   * The head of a test gateway's configuration: any free loopback port, {@code x-kvroute-*}
   * response headers, the {@code http} connector with one attempt per request.
   */
  static final String HTTP_ONE_ATTEMPT =
      "listen: { host: 127.0.0.1, port: 0 }\n"
          + "observabilityHeaders: true\n"
          + "defaultConnector: { type: http, retry: { maxAttempts: 1 } }\n";

  private GatewayYaml() {}

  /**
   * One {@code endpoints} item for {@code pod}, with its KV-event publisher and replay socket.
   *
   * @param role the role line's value, or {@code null} for none (the gateway's default)
   */
  static String endpoint(VllmSimulator pod, String role) {
    return "  - id: "
        + pod.name()
        + "\n    url: \""
        + pod.baseUrl()
        + "\"\n"
        + (role == null ? "" : "    role: " + role + "\n")
        + "    kvEvents: { publisher: \""
        + pod.eventsEndpoint()
        + "\", replay: \""
        + pod.replayEndpoint()
        + "\" }\n";
  }

  /** An {@code endpoints} list of {@code pods} without roles, as {@link #endpoint} writes them. */
  static String endpoints(Iterable<VllmSimulator> pods) {
    StringBuilder yaml = new StringBuilder("endpoints:\n");
    for (VllmSimulator p : pods) {
      yaml.append(endpoint(p, null));
    }
    return yaml.toString();
  }

  /** Writes {@code yaml} to {@code gateway.yaml} in {@code dir}; its path. */
  static Path write(Path dir, String yaml) throws IOException {
    Path cfg = dir.resolve("gateway.yaml");
    Files.writeString(cfg, yaml, StandardCharsets.UTF_8);
    return cfg;
  }

  /** Starts {@code kvroute gateway --config cfg} with {@code extraArgs}; waits until it serves. */
  static RunningCommand<GatewayCommand> run(Path cfg, String... extraArgs)
      throws InterruptedException {
    String[] args = new String[extraArgs.length + 2];
    args[0] = "--config";
    args[1] = cfg.toString();
    System.arraycopy(extraArgs, 0, args, 2, extraArgs.length);
    GatewayCommand cmd = new GatewayCommand();
    return RunningCommand.start(cmd, () -> cmd.running, args);
  }

  /** The base URL of the gateway {@code g}. */
  static String base(RunningCommand<GatewayCommand> g) {
    return "http://127.0.0.1:" + g.command.running.port();
  }
}
