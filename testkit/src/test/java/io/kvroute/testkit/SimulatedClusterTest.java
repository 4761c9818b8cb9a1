package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The cluster, its accessors and the JUnit 5 extension in both forms. */
class SimulatedClusterTest {

  @RegisterExtension
  static final SimulatedClusterExtension SIM =
      SimulatedClusterExtension.of(
          () ->
              SimulatedCluster.builder()
                  .prefill(1)
                  .decode(2)
                  .protocol(KvTransferProtocol.NIXL)
                  .configure(b -> b.latency(LatencyModel.ZERO).gpuBlocks(128))
                  .build());

  @Test
  void podsHaveRolesNamesLabelsAndEndpoints(SimulatedCluster cluster) {
    assertThat(cluster).isSameAs(SIM.cluster());
    assertThat(cluster.pods()).hasSize(3);
    assertThat(cluster.prefillPods()).extracting(VllmSimulator::name).containsExactly("prefill-0");
    assertThat(cluster.decodePods())
        .extracting(VllmSimulator::name)
        .containsExactly("decode-0", "decode-1");
    VllmSimulator d = cluster.pod("decode-1").orElseThrow();
    assertThat(d.role()).isEqualTo(SimRole.DECODE);
    assertThat(d.labels()).containsEntry("llm-d.ai/role", "decode");
    assertThat(d.baseUrl().toString()).startsWith("http://127.0.0.1:");
    assertThat(d.eventsEndpoint()).startsWith("tcp://127.0.0.1:");
    assertThat(d.replayEndpoint()).startsWith("tcp://127.0.0.1:");
    assertThat(cluster.describe()).contains("decode-1 role=decode http=" + d.baseUrl());
    assertThat(TestSupport.get(d, "/health").statusCode()).isEqualTo(200);
  }

  @Test
  void statsArePerPod(SimulatedCluster cluster) {
    cluster.resetStats();
    VllmSimulator p = cluster.prefillPods().get(0);
    TestSupport.post(p, "/v1/completions", TestSupport.completion("stats words", 2));
    assertThat(p.stats().requests()).isEqualTo(1);
    assertThat(p.stats().generatedTokens()).isEqualTo(2);
    assertThat(p.stats().ttft()).hasSize(1);
    assertThat(cluster.decodePods().get(0).stats().requests()).isZero();
  }

  @Test
  void builderValidationNamesTheField() {
    assertThatThrownBy(() -> SimulatedCluster.builder().build())
        .hasMessageContaining("at least one pod");
    assertThatThrownBy(() -> SimulatedCluster.builder().prefill(-1).build())
        .hasMessageContaining("prefill=-1");
    assertThatThrownBy(() -> VllmSimulator.builder().blockSize(0).build())
        .hasMessageContaining("blockSize must be > 0");
    assertThatThrownBy(
            () -> VllmSimulator.builder().protocol(KvTransferProtocol.SHARED_STORAGE).build())
        .hasMessageContaining("sharedStore");
    assertThatThrownBy(() -> VllmSimulator.builder().port(70000).build())
        .hasMessageContaining("port");
    assertThatThrownBy(() -> VllmSimulator.builder().loras(java.util.List.of("sim-model")).build())
        .hasMessageContaining("loras");
    VllmSimulator s = TestSupport.sim().build();
    assertThatThrownBy(s::baseUrl).isInstanceOf(IllegalStateException.class);
    s.start();
    assertThatThrownBy(s::start).hasMessageContaining("already started");
    s.close();
    s.close();
  }
}
