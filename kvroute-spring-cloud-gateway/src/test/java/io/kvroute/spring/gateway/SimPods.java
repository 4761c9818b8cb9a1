package io.kvroute.spring.gateway;

import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.util.List;
import java.util.function.Function;
import java.util.function.UnaryOperator;
import org.springframework.test.context.DynamicPropertyRegistry;

/** Simulated pods for the gateway tests, and the starter's properties that point at them. */
final class SimPods {
  /** The model the pods serve. */
  static final String MODEL = "sim-model";

  private SimPods() {}

  /**
   * A started cluster with the pods {@code shape} adds, serving {@link #MODEL} with 16-token blocks
   * and {@code latency}.
   */
  static SimulatedCluster start(
      UnaryOperator<SimulatedCluster.Builder> shape, LatencyModel latency) {
    return shape
        .apply(SimulatedCluster.builder().model(MODEL))
        .configure(b -> b.blockSize(16).latency(latency))
        .build()
        .start();
  }

  /** {@code kvroute.mode} and the {@code x-kvroute-*} response headers the tests read. */
  static void mode(DynamicPropertyRegistry registry, String mode) {
    registry.add("kvroute.mode", () -> mode);
    registry.add("kvroute.observability-headers", () -> "true");
  }

  /**
   * Registers {@code pods} in order: each one's id and URL, its role when {@code role} gives one
   * (null: none, the starter's default) and, with {@code kvEvents}, its KV-event publisher and
   * replay socket.
   */
  static void register(
      DynamicPropertyRegistry registry,
      List<VllmSimulator> pods,
      Function<VllmSimulator, String> role,
      boolean kvEvents) {
    for (int i = 0; i < pods.size(); i++) {
      VllmSimulator p = pods.get(i);
      String at = "kvroute.endpoints[" + i + "].";
      registry.add(at + "id", p::name);
      registry.add(at + "url", () -> p.baseUrl().toString());
      String r = role.apply(p);
      if (r != null) {
        registry.add(at + "role", () -> r);
      }
      if (kvEvents) {
        registry.add(at + "kv-events.publisher", p::eventsEndpoint);
        registry.add(at + "kv-events.replay", p::replayEndpoint);
      }
    }
  }
}
