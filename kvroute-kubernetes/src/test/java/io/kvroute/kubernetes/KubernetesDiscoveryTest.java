package io.kvroute.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.GenericKubernetesResourceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.api.model.PodConditionBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.kvroute.connector.Endpoint;
import io.kvroute.kubernetes.internal.InferencePools;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class KubernetesDiscoveryTest extends MockCluster {
  final RecordingSink sink = new RecordingSink();

  KubernetesDiscovery start(KubernetesDiscovery.Builder b) {
    return closeLater(b.client(client).namespace(NS).build()).start();
  }

  static Pod pod(String name, String ip, boolean ready, Map<String, String> labels) {
    return new PodBuilder()
        .withNewMetadata()
        .withName(name)
        .withNamespace(NS)
        .withLabels(labels)
        .endMetadata()
        .withNewStatus()
        .withPhase("Running")
        .withPodIP(ip)
        .withConditions(readiness(ready))
        .endStatus()
        .build();
  }

  /** The pod's {@code Ready} condition. */
  static PodCondition readiness(boolean ready) {
    return new PodConditionBuilder().withType("Ready").withStatus(ready ? "True" : "False").build();
  }

  /** Replaces a pod's status (readiness, IP) as the kubelet would. */
  void setStatus(String name, String ip, boolean ready) {
    Pod now = client.pods().inNamespace(NS).withName(name).get();
    Pod next =
        new PodBuilder(now)
            .editStatus()
            .withPodIP(ip)
            .withConditions(readiness(ready))
            .endStatus()
            .build();
    client.pods().inNamespace(NS).resource(next).updateStatus();
  }

  void delete(String name) {
    client.pods().inNamespace(NS).withName(name).delete();
  }

  static final Map<String, String> VLLM = Map.of("app", "vllm");

  @Test
  void podsScaleUpAndDown() {
    create(pod("vllm-0", "10.0.0.1", true, VLLM));
    create(pod("vllm-1", "10.0.0.2", true, VLLM));
    create(pod("other", "10.0.0.9", true, Map.of("app", "other")));
    start(KubernetesDiscovery.builder(sink).selector(VLLM));
    sink.awaitIds("vllm-0", "vllm-1");
    RecordingSink.Entry e = sink.state().get("vllm-0");
    assertThat(e.endpoint().baseUrl()).isEqualTo("http://10.0.0.1:8000");
    assertThat(e.endpoint().role()).isEqualTo(Endpoint.Role.BOTH);
    assertThat(e.endpoint().labels()).containsEntry("app", "vllm");
    assertThat(e.events().publisher()).isEqualTo("tcp://10.0.0.1:5557");

    create(pod("vllm-2", "10.0.0.3", true, VLLM));
    sink.awaitIds("vllm-0", "vllm-1", "vllm-2");
    delete("vllm-0");
    delete("vllm-1");
    sink.awaitIds("vllm-2");
  }

  @Test
  void readinessGatesTheEndpoint() {
    create(pod("vllm-0", "10.0.0.1", false, VLLM));
    create(pod("vllm-1", "10.0.0.2", true, VLLM));
    start(KubernetesDiscovery.builder(sink).selector(VLLM));
    sink.awaitIds("vllm-1");
    setStatus("vllm-0", "10.0.0.1", true);
    sink.awaitIds("vllm-0", "vllm-1");
    setStatus("vllm-1", "10.0.0.2", false);
    sink.awaitIds("vllm-0");
    setStatus("vllm-0", null, true); // no pod IP yet
    sink.awaitIds();
  }

  @Test
  void aRestartWithANewIpIsRemovedThenAdded() {
    create(pod("vllm-0", "10.0.0.1", true, VLLM));
    start(KubernetesDiscovery.builder(sink).selector(VLLM));
    sink.awaitIds("vllm-0");
    setStatus("vllm-0", "10.0.0.7", true);
    sink.await(
        s ->
            assertThat(s.state().get("vllm-0").endpoint().baseUrl())
                .isEqualTo("http://10.0.0.7:8000"));
    assertThat(sink.calls())
        .containsSubsequence(
            "add vllm-0 http://10.0.0.1:8000", "remove vllm-0", "add vllm-0 http://10.0.0.7:8000");
    assertThat(sink.state().get("vllm-0").events().publisher()).isEqualTo("tcp://10.0.0.7:5557");
  }

  @Test
  void rolesComeFromTheRoleLabel() {
    create(pod("p", "10.0.0.1", true, Map.of("app", "vllm", "llm-d.ai/role", "prefill")));
    create(pod("d", "10.0.0.2", true, Map.of("app", "vllm", "llm-d.ai/role", "decode")));
    create(pod("b", "10.0.0.3", true, Map.of("app", "vllm", "llm-d.ai/role", "both")));
    create(pod("n", "10.0.0.4", true, VLLM));
    create(pod("x", "10.0.0.5", true, Map.of("app", "vllm", "llm-d.ai/role", "encode")));
    start(KubernetesDiscovery.builder(sink).selector(VLLM));
    sink.awaitIds("p", "d", "b", "n", "x");
    Map<String, RecordingSink.Entry> s = sink.state();
    assertThat(s.get("p").endpoint().role()).isEqualTo(Endpoint.Role.PREFILL);
    assertThat(s.get("d").endpoint().role()).isEqualTo(Endpoint.Role.DECODE);
    assertThat(s.get("b").endpoint().role()).isEqualTo(Endpoint.Role.BOTH);
    assertThat(s.get("n").endpoint().role()).isEqualTo(Endpoint.Role.BOTH);
    assertThat(s.get("x").endpoint().role()).isEqualTo(Endpoint.Role.BOTH);
  }

  @Test
  void aCustomRoleLabelAndPorts() {
    create(pod("p", "10.0.0.1", true, Map.of("app", "vllm", "role", "prefill")));
    start(
        KubernetesDiscovery.builder(sink)
            .selector(VLLM)
            .roleLabel("role")
            .port(9000)
            .kvEventsPort(0));
    sink.awaitIds("p");
    RecordingSink.Entry e = sink.state().get("p");
    assertThat(e.endpoint().role()).isEqualTo(Endpoint.Role.PREFILL);
    assertThat(e.endpoint().baseUrl()).isEqualTo("http://10.0.0.1:9000");
    assertThat(e.events()).isNull();
  }

  @Test
  void dataParallelRanksAreEndpointsAtConsecutivePorts() {
    create(pod("vllm-0", "10.0.0.1", true, VLLM));
    start(KubernetesDiscovery.builder(sink).selector(VLLM).dataParallelSize(2));
    sink.awaitIds("vllm-0-rank0", "vllm-0-rank1");
    Map<String, RecordingSink.Entry> s = sink.state();
    assertThat(s.get("vllm-0-rank0").endpoint().baseUrl()).isEqualTo("http://10.0.0.1:8000");
    assertThat(s.get("vllm-0-rank1").endpoint().baseUrl()).isEqualTo("http://10.0.0.1:8001");
    assertThat(s.get("vllm-0-rank0").events().publisher()).isEqualTo("tcp://10.0.0.1:5557");
    assertThat(s.get("vllm-0-rank1").events().publisher()).isEqualTo("tcp://10.0.0.1:5558");
    delete("vllm-0");
    sink.awaitIds();
  }

  @Test
  void dataParallelRanksBehindOneHttpPort() {
    create(pod("vllm-0", "10.0.0.1", true, VLLM));
    start(
        KubernetesDiscovery.builder(sink)
            .selector(VLLM)
            .dataParallelSize(3)
            .httpPortPerRank(false));
    sink.awaitIds("vllm-0-rank0", "vllm-0-rank1", "vllm-0-rank2");
    Map<String, RecordingSink.Entry> s = sink.state();
    assertThat(s.get("vllm-0-rank2").endpoint().baseUrl()).isEqualTo("http://10.0.0.1:8000");
    assertThat(s.get("vllm-0-rank2").events().publisher()).isEqualTo("tcp://10.0.0.1:5559");
  }

  static GenericKubernetesResource poolV1(String name, Map<String, String> selector, int... ports) {
    List<Map<String, Object>> targetPorts = new ArrayList<>();
    for (int p : ports) {
      targetPorts.add(Map.of("number", p));
    }
    Map<String, Object> spec = new LinkedHashMap<>();
    spec.put("selector", Map.of("matchLabels", selector));
    spec.put("targetPorts", targetPorts);
    spec.put("endpointPickerRef", Map.of("name", "epp", "port", Map.of("number", 9002)));
    return new GenericKubernetesResourceBuilder()
        .withApiVersion(InferencePools.V1)
        .withKind("InferencePool")
        .withNewMetadata()
        .withName(name)
        .withNamespace(NS)
        .endMetadata()
        .withAdditionalProperties(Map.of("spec", spec))
        .build();
  }

  void put(GenericKubernetesResource pool) {
    String apiVersion = pool.getApiVersion();
    var ops = client.genericKubernetesResources(InferencePools.context(apiVersion)).inNamespace(NS);
    if (ops.withName(pool.getMetadata().getName()).get() == null) {
      ops.resource(pool).create();
    } else {
      ops.resource(pool).update();
    }
  }

  @Test
  void anInferencePoolSelectsPodsAndItsSelectorCanChange() {
    create(pod("a-0", "10.0.1.1", true, Map.of("pool", "a")));
    create(pod("a-1", "10.0.1.2", true, Map.of("pool", "a")));
    create(pod("b-0", "10.0.2.1", true, Map.of("pool", "b")));
    put(poolV1("qwen", Map.of("pool", "a"), 8200));
    start(
        KubernetesDiscovery.builder(sink)
            .inferencePool("qwen")
            .inferencePoolApiVersion(InferencePools.V1));
    sink.awaitIds("a-0", "a-1");
    assertThat(sink.state().get("a-0").endpoint().baseUrl()).isEqualTo("http://10.0.1.1:8200");

    put(poolV1("qwen", Map.of("pool", "b"), 8200));
    sink.awaitIds("b-0");
    create(pod("b-1", "10.0.2.2", true, Map.of("pool", "b")));
    sink.awaitIds("b-0", "b-1");

    // two target ports: one data-parallel rank each
    put(poolV1("qwen", Map.of("pool", "b"), 8200, 8201));
    sink.awaitIds("b-0-rank0", "b-0-rank1", "b-1-rank0", "b-1-rank1");
    assertThat(sink.state().get("b-1-rank1").endpoint().baseUrl())
        .isEqualTo("http://10.0.2.2:8201");
    assertThat(sink.state().get("b-1-rank1").events().publisher()).isEqualTo("tcp://10.0.2.2:5558");

    client
        .genericKubernetesResources(InferencePools.context(InferencePools.V1))
        .inNamespace(NS)
        .withName("qwen")
        .delete();
    sink.awaitIds();
  }

  @Test
  void aPoolCreatedLaterIsFollowed() {
    create(pod("a-0", "10.0.1.1", true, Map.of("pool", "a")));
    start(KubernetesDiscovery.builder(sink).inferencePool("late"));
    // the pool's API version was probed (v1 answers) and nothing is applied without the pool
    put(poolV1("late", Map.of("pool", "a"), 8000));
    sink.awaitIds("a-0");
  }

  @Test
  void listFailuresAreCountedAndRetried() {
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    try (KubernetesClient unreachable =
        new io.fabric8.kubernetes.client.KubernetesClientBuilder()
            .withConfig(
                new io.fabric8.kubernetes.client.ConfigBuilder()
                    .withMasterUrl("http://127.0.0.1:1")
                    .withRequestRetryBackoffLimit(0)
                    .build())
            .build()) {
      KubernetesDiscovery d =
          closeLater(
              KubernetesDiscovery.builder(sink)
                  .client(unreachable)
                  .namespace(NS)
                  .selector(VLLM)
                  .meterRegistry(meters)
                  .build());
      d.start();
      RecordingSink.await(
          java.time.Duration.ofSeconds(20),
          () ->
              assertThat(meters.get("kvroute.kubernetes.watch.errors").counter().count())
                  .isGreaterThanOrEqualTo(1.0));
      assertThat(d.endpoints()).isEmpty();
      d.close();
    }
  }

  @Test
  void aV1alpha2InferencePool() {
    create(pod("a-0", "10.0.1.1", true, Map.of("pool", "a")));
    GenericKubernetesResource pool =
        new GenericKubernetesResourceBuilder()
            .withApiVersion(InferencePools.V1ALPHA2)
            .withKind("InferencePool")
            .withNewMetadata()
            .withName("old")
            .withNamespace(NS)
            .endMetadata()
            .withAdditionalProperties(
                Map.of(
                    "spec",
                    Map.of(
                        "selector", Map.of("pool", "a"),
                        "targetPortNumber", 8300,
                        "extensionRef", Map.of("name", "epp"))))
            .build();
    put(pool);
    start(
        KubernetesDiscovery.builder(sink)
            .inferencePool("old")
            .inferencePoolApiVersion(InferencePools.V1ALPHA2));
    sink.awaitIds("a-0");
    assertThat(sink.state().get("a-0").endpoint().baseUrl()).isEqualTo("http://10.0.1.1:8300");
  }

  @Test
  void metersCountTheChanges() {
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    create(pod("vllm-0", "10.0.0.1", true, VLLM));
    start(KubernetesDiscovery.builder(sink).selector(VLLM).meterRegistry(meters));
    sink.awaitIds("vllm-0");
    setStatus("vllm-0", "10.0.0.2", true);
    sink.await(s -> assertThat(s.state().get("vllm-0").endpoint().host()).isEqualTo("10.0.0.2"));
    delete("vllm-0");
    sink.awaitIds();
    RecordingSink.await(
        java.time.Duration.ofSeconds(5),
        () -> {
          assertThat(meters.get("kvroute.kubernetes.endpoints").gauge().value()).isZero();
          assertThat(
                  meters.get("kvroute.kubernetes.changes").tag("kind", "added").counter().count())
              .isEqualTo(1.0);
          assertThat(
                  meters
                      .get("kvroute.kubernetes.changes")
                      .tag("kind", "replaced")
                      .counter()
                      .count())
              .isEqualTo(1.0);
          assertThat(
                  meters.get("kvroute.kubernetes.changes").tag("kind", "removed").counter().count())
              .isEqualTo(1.0);
        });
    assertThat(meters.get("kvroute.kubernetes.watch.errors").counter().count()).isZero();
  }
}
