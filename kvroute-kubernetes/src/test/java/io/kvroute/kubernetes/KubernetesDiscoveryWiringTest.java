package io.kvroute.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.KvEventFeed;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RouteDecision;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import mockwebserver3.Dispatcher;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.RecordedRequest;
import org.junit.jupiter.api.Test;

/** Discovery applied to a real {@link KvRouter}, and the LoRA adapters read from a pod. */
class KubernetesDiscoveryWiringTest extends MockCluster {
  KubernetesDiscovery discovery;
  KvRouter router;
  MockWebServer vllm;

  /** The subscriptions a router asks for. */
  static final class RecordingFeed implements KvEventFeed {
    final Map<String, Source> subscribed = new ConcurrentHashMap<>();

    @Override
    public void add(Endpoint endpoint, Source source) {
      subscribed.put(endpoint.id(), source);
    }

    @Override
    public void remove(String endpointId) {
      subscribed.remove(endpointId);
    }

    @Override
    public void close() {}
  }

  /** Creates pod {@code vllm-0} served by {@link #vllm}; a discovery of it into {@code sink}. */
  KubernetesDiscovery.Builder discoverTheVllmPod(RecordingSink sink) {
    create(KubernetesDiscoveryTest.pod("vllm-0", "127.0.0.1", true, Map.of("app", "vllm")));
    return discover(sink).selector(Map.of("app", "vllm")).port(vllm.getPort());
  }

  @Test
  void aKvRouterFollowsThePods() {
    RecordingFeed feed = new RecordingFeed();
    router = closeLater(KvRouter.builder().eventFeed(feed).build());
    create(
        KubernetesDiscoveryTest.pod(
            "prefill-0", "10.1.0.1", true, Map.of("app", "vllm", "llm-d.ai/role", "prefill")));
    create(
        KubernetesDiscoveryTest.pod(
            "decode-0", "10.1.0.2", true, Map.of("app", "vllm", "llm-d.ai/role", "decode")));
    discovery = discover(EndpointSink.of(router)).selector(Map.of("app", "vllm")).build();
    closeLater(discovery).start();
    RecordingSink.await(
        Duration.ofSeconds(20),
        () ->
            assertThat(router.endpoints())
                .extracting(Endpoint::id)
                .containsExactlyInAnyOrder("prefill-0", "decode-0"));
    assertThat(feed.subscribed.get("decode-0").publisher()).isEqualTo("tcp://10.1.0.2:5557");
    RouteDecision d =
        router.decide(
            InferenceRequest.of(
                InferenceRequest.Api.COMPLETIONS,
                "{\"model\":\"m\",\"prompt\":\"hello\"}".getBytes(StandardCharsets.UTF_8),
                Map.of(),
                "t"));
    assertThat(d.decode().id()).isEqualTo("decode-0");
    d.complete(RouteDecision.Outcome.SUCCESS, Duration.ZERO, Duration.ZERO);

    client.pods().inNamespace(NS).withName("decode-0").delete();
    RecordingSink.await(
        Duration.ofSeconds(20),
        () -> assertThat(router.endpoints()).extracting(Endpoint::id).containsExactly("prefill-0"));
    assertThat(feed.subscribed).containsOnlyKeys("prefill-0");
  }

  @Test
  void loraAdaptersFromV1ModelsBecomeALabel() throws Exception {
    AtomicReference<String> models =
        new AtomicReference<>(
            "{\"object\":\"list\",\"data\":["
                + "{\"id\":\"Qwen/Qwen3-0.6B\",\"object\":\"model\",\"parent\":null},"
                + "{\"id\":\"sql-lora\",\"object\":\"model\",\"parent\":\"Qwen/Qwen3-0.6B\"},"
                + "{\"id\":\"chat-lora\",\"object\":\"model\",\"parent\":\"Qwen/Qwen3-0.6B\"}]}");
    vllm = closeLater(new MockWebServer());
    vllm.setDispatcher(
        new Dispatcher() {
          @Override
          public MockResponse dispatch(RecordedRequest r) {
            if (!"/v1/models".equals(r.getUrl().encodedPath())) {
              return new MockResponse.Builder().code(404).build();
            }
            return new MockResponse.Builder()
                .code(200)
                .setHeader("Content-Type", "application/json")
                .body(models.get())
                .build();
          }
        });
    vllm.start();
    RecordingSink sink = new RecordingSink();
    discovery =
        discoverTheVllmPod(sink).loraAdapters(true).loraRefresh(Duration.ofMillis(100)).build();
    closeLater(discovery).start();
    sink.await(
        s ->
            assertThat(s.state().get("vllm-0"))
                .isNotNull()
                .extracting(e -> e.endpoint().label(KubernetesDiscovery.LORA_LABEL))
                .isEqualTo("sql-lora,chat-lora"));
    // the endpoint is added once, with its adapters
    assertThat(sink.calls()).hasSize(1);

    models.set(
        "{\"object\":\"list\",\"data\":[{\"id\":\"Qwen/Qwen3-0.6B\",\"parent\":null},"
            + "{\"id\":\"sql-lora\",\"parent\":\"Qwen/Qwen3-0.6B\"}]}");
    // A label change removes and re-adds the endpoint: it may be briefly absent.
    sink.await(
        s ->
            assertThat(s.state().get("vllm-0"))
                .isNotNull()
                .extracting(e -> e.endpoint().label(KubernetesDiscovery.LORA_LABEL))
                .isEqualTo("sql-lora"));

    models.set("{\"object\":\"list\",\"data\":[{\"id\":\"Qwen/Qwen3-0.6B\"}]}");
    sink.await(
        s ->
            assertThat(s.state().get("vllm-0"))
                .isNotNull()
                .satisfies(
                    e ->
                        assertThat(e.endpoint().labels())
                            .doesNotContainKey(KubernetesDiscovery.LORA_LABEL)));
  }

  @Test
  void loraAdaptersAreOffByDefault() throws Exception {
    vllm = closeLater(new MockWebServer());
    vllm.start();
    RecordingSink sink = new RecordingSink();
    discovery = discoverTheVllmPod(sink).build();
    closeLater(discovery).start();
    sink.awaitIds("vllm-0");
    assertThat(sink.state().get("vllm-0").endpoint().labels()).isEqualTo(Map.of("app", "vllm"));
    assertThat(vllm.getRequestCount()).isZero();
    assertThat(List.of(discovery.endpoints().keySet().toArray())).containsExactly("vllm-0");
  }
}
