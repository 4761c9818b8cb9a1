package io.kvroute.kubernetes;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import io.kvroute.router.KvEventFeed;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

class KubernetesDiscoveryBuilderTest {
  static final EndpointSink NONE =
      new EndpointSink() {
        @Override
        public void add(Endpoint endpoint, KvEventFeed.Source events) {}

        @Override
        public void remove(String endpointId) {}
      };

  static KubernetesDiscovery.Builder b() {
    return KubernetesDiscovery.builder(NONE).selector(Map.of("app", "vllm"));
  }

  @Test
  void buildNamesTheInvalidField() {
    assertThatThrownBy(() -> KubernetesDiscovery.builder(NONE).build())
        .hasMessageContaining("exactly one of selector");
    assertThatThrownBy(() -> b().inferencePool("p").build())
        .hasMessageContaining("exactly one of selector");
    assertThatThrownBy(() -> b().port(0).build())
        .hasMessage("kubernetes.port must be in 1..65535, was 0");
    assertThatThrownBy(() -> b().dataParallelSize(0).build())
        .hasMessageContaining("kubernetes.dataParallelSize");
    assertThatThrownBy(() -> b().port(65535).dataParallelSize(2).build())
        .hasMessageContaining("kubernetes.port + dataParallelSize");
    assertThatThrownBy(() -> b().kvEventsPort(-1).build())
        .hasMessageContaining("kubernetes.kvEventsPort");
    assertThatThrownBy(() -> b().roleLabel(" ").build())
        .hasMessageContaining("kubernetes.roleLabel");
    assertThatThrownBy(() -> b().namespace("").build())
        .hasMessageContaining("kubernetes.namespace");
    assertThatThrownBy(() -> b().resyncPeriod(Duration.ZERO).build())
        .hasMessageContaining("kubernetes.resyncPeriod");
    assertThatThrownBy(
            () ->
                KubernetesDiscovery.builder(NONE)
                    .inferencePool("p")
                    .inferencePoolApiVersion("v1")
                    .build())
        .hasMessageContaining("group/version");
  }

  @Test
  void startsOnce() {
    KubernetesDiscovery d = b().build();
    d.close();
    assertThatThrownBy(d::start).isInstanceOf(IllegalStateException.class);
  }
}
