package io.kvroute.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RoutedResponse;
import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The README's embedding, run against simulated NIXL pods, and kept identical to the README. */
class EmbeddingTest {
  private static final String MODEL = "sim-model";

  private static Embedding.Pod pod(VllmSimulator s, Endpoint.Role role) {
    return new Embedding.Pod(s.name(), s.baseUrl(), role, s.eventsEndpoint(), s.replayEndpoint());
  }

  @Test
  void aStreamedChatRunsPrefillThenDecodeAndTheRouterClosesCleanly() throws Exception {
    try (SimulatedCluster cluster =
        SimulatedCluster.builder()
            .prefill(1)
            .decode(2)
            .model(MODEL)
            .protocol(KvTransferProtocol.NIXL)
            .configure(b -> b.blockSize(16).latency(LatencyModel.ZERO))
            .build()
            .start()) {
      List<Embedding.Pod> pods = new ArrayList<>();
      cluster.prefillPods().forEach(s -> pods.add(pod(s, Endpoint.Role.PREFILL)));
      cluster.decodePods().forEach(s -> pods.add(pod(s, Endpoint.Role.DECODE)));
      KvRouter router = Embedding.router(MODEL, pods);
      try {
        String prompt = "a long shared system prompt for the embedding test ".repeat(16);
        byte[] body =
            ("{\"model\":\""
                    + MODEL
                    + "\",\"stream\":true,\"max_tokens\":8,"
                    + "\"messages\":[{\"role\":\"user\",\"content\":\""
                    + prompt
                    + "\"}]}")
                .getBytes(StandardCharsets.UTF_8);
        RoutedResponse response = Embedding.chat(router, body, Map.of()).get(60, TimeUnit.SECONDS);
        String sse =
            new String(response.readAll(1 << 20).get(60, TimeUnit.SECONDS), StandardCharsets.UTF_8);

        assertThat(response.status()).isEqualTo(200);
        assertThat(response.decision().prefill()).as("disaggregated").isPresent();
        assertThat(sse).startsWith("data: ").contains("\"delta\"").endsWith("data: [DONE]\n\n");
        VllmSimulator prefill = cluster.prefillPods().get(0);
        assertThat(chats(prefill)).as("the prefill pod ran the prefill leg").isEqualTo(1);
        assertThat(cluster.decodePods().stream().mapToLong(EmbeddingTest::chats).sum())
            .as("one decode pod streamed the answer")
            .isEqualTo(1);
      } finally {
        router.close();
      }
      assertThat(router.inFlight()).isZero();
    }
  }

  /** Chat requests a pod served (the router also calls the pods' /tokenize). */
  private static long chats(VllmSimulator pod) {
    return pod.requests().stream().filter(r -> r.path().endsWith("/chat/completions")).count();
  }

  @Test
  void theReadmeShowsThisExampleVerbatim() throws IOException {
    Path module = Paths.get(System.getProperty("basedir", System.getProperty("user.dir")));
    String source =
        Files.readString(module.resolve("src/main/java/io/kvroute/examples/Embedding.java"));
    String snippet =
        source.substring(
            source.indexOf('\n', source.indexOf("// README:begin")) + 1,
            source.lastIndexOf('\n', source.indexOf("// README:end")) + 1);
    // The README shows the snippet un-indented by one level (two spaces).
    String unindented = snippet.replaceAll("(?m)^  ", "");
    String readme = Files.readString(module.resolve("../README.md"));
    assertThat(readme)
        .as(
            "README.md must show examples/.../Embedding.java between its README markers verbatim"
                + " (un-indented by two spaces)")
        .contains(unindented);
  }
}
