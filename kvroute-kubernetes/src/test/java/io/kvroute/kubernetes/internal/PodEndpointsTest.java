package io.kvroute.kubernetes.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fabric8.kubernetes.api.model.GenericKubernetesResourceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.kvroute.connector.Endpoint;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PodEndpointsTest {
  static Pod pod(String ip, String ready) {
    return new PodBuilder()
        .withNewMetadata()
        .withName("vllm-0")
        .withLabels(Map.of("app", "vllm"))
        .endMetadata()
        .withNewStatus()
        .withPodIP(ip)
        .addNewCondition()
        .withType("Ready")
        .withStatus(ready)
        .endCondition()
        .endStatus()
        .build();
  }

  @Test
  void readyNeedsTheConditionAnIpAndNoDeletion() {
    assertThat(PodEndpoints.ready(pod("10.0.0.1", "True"))).isTrue();
    assertThat(PodEndpoints.ready(pod("10.0.0.1", "False"))).isFalse();
    assertThat(PodEndpoints.ready(pod("10.0.0.1", "Unknown"))).isFalse();
    assertThat(PodEndpoints.ready(pod(null, "True"))).isFalse();
    assertThat(PodEndpoints.ready(pod("", "True"))).isFalse();
    Pod deleting =
        new PodBuilder(pod("10.0.0.1", "True"))
            .editMetadata()
            .withDeletionTimestamp("2026-11-25T00:00:00Z")
            .endMetadata()
            .build();
    assertThat(PodEndpoints.ready(deleting)).isFalse();
    assertThat(PodEndpoints.ready(new PodBuilder().withNewMetadata().endMetadata().build()))
        .isFalse();
  }

  @Test
  void ipv6PodsGetBracketedPublishers() {
    List<PodEndpoints.Target> t =
        PodEndpoints.targets(
            pod("fd00::7", "True"), new PodEndpoints.Options("llm-d.ai/role", List.of(8000), 5557));
    assertThat(t).hasSize(1);
    assertThat(t.get(0).endpoint().baseUrl()).isEqualTo("http://[fd00::7]:8000");
    assertThat(t.get(0).events().publisher()).isEqualTo("tcp://[fd00::7]:5557");
    assertThat(t.get(0).endpoint().role()).isEqualTo(Endpoint.Role.BOTH);
  }

  @Test
  void matchesNeedsEveryLabel() {
    Pod p = pod("10.0.0.1", "True");
    assertThat(PodEndpoints.matches(p, Map.of("app", "vllm"))).isTrue();
    assertThat(PodEndpoints.matches(p, Map.of("app", "vllm", "x", "y"))).isFalse();
    assertThat(PodEndpoints.matches(p, Map.of())).isTrue();
  }

  @Test
  void inferencePoolSpecsOfBothVersions() {
    var v1 =
        new GenericKubernetesResourceBuilder()
            .withAdditionalProperties(
                Map.of(
                    "spec",
                    Map.of(
                        "selector",
                        Map.of("matchLabels", Map.of("app", "a")),
                        "targetPorts",
                        List.of(Map.of("number", 8000), Map.of("number", 8001)))))
            .build();
    assertThat(InferencePools.spec(v1))
        .isEqualTo(new InferencePools.Spec(Map.of("app", "a"), List.of(8000, 8001)));
    var alpha =
        new GenericKubernetesResourceBuilder()
            .withAdditionalProperties(
                Map.of("spec", Map.of("selector", Map.of("app", "b"), "targetPortNumber", 9000)))
            .build();
    assertThat(InferencePools.spec(alpha))
        .isEqualTo(new InferencePools.Spec(Map.of("app", "b"), List.of(9000)));
    var noSelector =
        new GenericKubernetesResourceBuilder()
            .withAdditionalProperties(Map.of("spec", Map.of("targetPortNumber", 9000)))
            .build();
    assertThatThrownBy(() -> InferencePools.spec(noSelector)).hasMessageContaining("spec.selector");
    var badPort =
        new GenericKubernetesResourceBuilder()
            .withAdditionalProperties(
                Map.of(
                    "spec",
                    Map.of("selector", Map.of("app", "b"), "targetPorts", List.of(Map.of()))))
            .build();
    assertThatThrownBy(() -> InferencePools.spec(badPort)).hasMessageContaining("targetPorts");
    assertThatThrownBy(() -> InferencePools.context("v1")).hasMessageContaining("group/version");
  }

  @Test
  void loraAdaptersAreTheModelsWithAParent() {
    String body =
        "{\"data\":[{\"id\":\"base\",\"parent\":null},{\"id\":\"a\",\"parent\":\"base\"},"
            + "{\"id\":\"b\",\"root\":\"/x\",\"parent\":\"base\"},{\"id\":\"c\"}]}";
    assertThat(LoraAdapters.parse(body.getBytes(StandardCharsets.UTF_8))).isEqualTo("a,b");
    assertThat(LoraAdapters.parse("not json".getBytes(StandardCharsets.UTF_8))).isEmpty();
    assertThat(LoraAdapters.parse("{}".getBytes(StandardCharsets.UTF_8))).isEmpty();
  }
}
