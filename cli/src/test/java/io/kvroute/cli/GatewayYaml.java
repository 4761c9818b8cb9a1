package io.kvroute.cli;

import io.kvroute.testkit.VllmSimulator;

/** Pieces of gateway configuration for tests that run the gateway over simulated pods. */
final class GatewayYaml {
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
}
