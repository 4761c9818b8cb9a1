package io.kvroute.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RoutedResponse;
import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.SimulatedClusterExtension;
import io.kvroute.testkit.VllmSimulator;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

// docs/testkit.md:begin
/**
 * Tests a gateway's router against simulated vLLM pods: one prefill and two decode pods speaking
 * NIXL, started once for the class by the JUnit 5 extension and given to each test.
 */
@ExtendWith(SimulatedClusterExtension.class)
@SimulatedClusterExtension.Config(prefill = 1, decode = 2, protocol = KvTransferProtocol.NIXL)
class TestkitExampleTest {

  /** The router under test: here the README's embedding; in your project, your gateway's. */
  private static KvRouter router(SimulatedCluster cluster) {
    List<Embedding.Pod> pods = new ArrayList<>();
    for (VllmSimulator p : cluster.prefillPods()) {
      pods.add(pod(p, Endpoint.Role.PREFILL));
    }
    for (VllmSimulator p : cluster.decodePods()) {
      pods.add(pod(p, Endpoint.Role.DECODE));
    }
    return Embedding.router("sim-model", pods);
  }

  private static Embedding.Pod pod(VllmSimulator sim, Endpoint.Role role) {
    return new Embedding.Pod(
        sim.name(), sim.baseUrl(), role, sim.eventsEndpoint(), sim.replayEndpoint());
  }

  @Test
  void aFailingDecodePodIsRetriedOnTheOtherOne(SimulatedCluster cluster) throws Exception {
    VllmSimulator failing = cluster.decodePods().get(0);
    VllmSimulator healthy = cluster.decodePods().get(1);
    failing.faults().failNext(1_000, 503); // every generation request answers 503
    try (KvRouter router = router(cluster)) {
      for (int i = 0; i < 4; i++) {
        byte[] body =
            ("{\"model\":\"sim-model\",\"max_tokens\":4,\"messages\":"
                    + "[{\"role\":\"user\",\"content\":\"question "
                    + i
                    + " about a long shared document\"}]}")
                .getBytes(StandardCharsets.UTF_8);
        RoutedResponse response = Embedding.chat(router, body, Map.of()).get(30, TimeUnit.SECONDS);
        String answer =
            new String(response.readAll(1 << 20).get(30, TimeUnit.SECONDS), StandardCharsets.UTF_8);

        assertThat(response.status()).isEqualTo(200);
        assertThat(answer).contains("\"choices\"");
      }
    } finally {
      failing.faults().reset();
    }
    assertThat(chats(healthy)).as("the healthy decode pod answered every request").isEqualTo(4);
  }

  /** The chat requests a pod received (the router also calls the pods' /tokenize). */
  private static long chats(VllmSimulator pod) {
    return pod.requests().stream().filter(r -> r.path().endsWith("/chat/completions")).count();
  }
}
// docs/testkit.md:end
