package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The declarative form of {@link SimulatedClusterExtension}. */
@ExtendWith(SimulatedClusterExtension.class)
@SimulatedClusterExtension.Config(both = 2, blockSize = 32, model = "m2")
class SimulatedClusterDeclarativeTest {

  @Test
  void configuredFromTheAnnotation(SimulatedCluster cluster) {
    assertThat(cluster.bothPods()).hasSize(2);
    VllmSimulator pod = cluster.bothPods().get(0);
    assertThat(pod.model()).isEqualTo("m2");
    assertThat(pod.metricsText()).contains("block_size=\"32\"");
  }
}
