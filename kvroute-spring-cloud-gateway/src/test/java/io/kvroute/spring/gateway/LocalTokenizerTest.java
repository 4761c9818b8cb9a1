package io.kvroute.spring.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.testkit.EngineTokenizer;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import io.kvroute.tokenizer.hf.ChatRequest;
import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.HfTokenizer;
import io.kvroute.tokenizer.hf.ReferenceTokenizers;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * {@code kvroute.models.<name>.tokenizer.path}: the pods tokenize with the real Qwen3 tokenizer,
 * the gateway tokenizes the same way in process (no {@code /tokenize} calls), so repeated prompts
 * are scored precisely from the pods' KV events and go to the pod that holds their blocks.
 */
@GatewayAppTest
class LocalTokenizerTest {
  static HfTokenizer podTokenizer;
  static SimulatedCluster cluster;

  @LocalServerPort int port;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    Path qwen = ReferenceTokenizers.modelDir("qwen3");
    podTokenizer = HfTokenizer.load(qwen);
    cluster =
        SimulatedCluster.builder()
            .both(3)
            .model("qwen3")
            .configure(
                b ->
                    b.blockSize(16)
                        .latency(LatencyModel.ZERO)
                        .tokenizer(new PodTokenizer(podTokenizer)))
            .build()
            .start();
    registry.add("kvroute.observability-headers", () -> "true");
    registry.add("kvroute.index.block-size", () -> "16");
    registry.add("kvroute.models[qwen3].tokenizer.path", qwen::toString);
    registry.add("kvroute.models[qwen3].tokenizer.fallback", () -> "false");
    SimPods.register(registry, cluster.pods(), p -> null, true);
  }

  @AfterAll
  static void stop() {
    cluster.close();
    podTokenizer.close();
  }

  @Test
  void repeatedPromptsGoToThePodHoldingTheirBlocksWithoutTokenizeCalls() throws Exception {
    String body =
        "{\"model\":\"qwen3\",\"max_tokens\":2,\"messages\":["
            + "{\"role\":\"system\",\"content\":\"You are a careful assistant. "
            + "Grüße, 你好 🙂. ".repeat(20)
            + "\"},{\"role\":\"user\",\"content\":\"Summarise the text above.\"}]}";
    HttpResponse<String> first = Http.post(port, "/v1/chat/completions", body);
    assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
    String pod = first.headers().firstValue("x-kvroute-decode").orElseThrow();

    // The pod's KV events reach the index asynchronously: repeat until the gateway reports cached
    // tokens for the same conversation, which then goes to the same pod.
    AtomicReference<HttpResponse<String>> again = new AtomicReference<>();
    Http.await(
        "cached tokens reported",
        () -> {
          try {
            again.set(Http.post(port, "/v1/chat/completions", body));
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
          assertThat(again.get().statusCode()).isEqualTo(200);
          return Long.parseLong(
                  again.get().headers().firstValue("x-kvroute-cached-tokens").orElse("0"))
              > 0;
        });
    assertThat(Long.parseLong(again.get().headers().firstValue("x-kvroute-cached-tokens").get()))
        .isGreaterThanOrEqualTo(16 * 10);
    assertThat(again.get().headers().firstValue("x-kvroute-decode")).contains(pod);
    for (VllmSimulator p : cluster.pods()) {
      assertThat(p.requests()).extracting(RecordedRequest::path).doesNotContain("/tokenize");
    }
  }

  /** The pods' side: the same tokenizer, as {@code kvroute sim --tokenizer} uses it. */
  static final class PodTokenizer implements EngineTokenizer {
    private final HfTokenizer tokenizer;

    PodTokenizer(HfTokenizer tokenizer) {
      this.tokenizer = tokenizer;
    }

    @Override
    public int[] encodePrompt(String prompt) {
      return tokenizer.encode(prompt);
    }

    @Override
    public int[] encodeChat(JsonNode request) {
      try {
        return tokenizer.encodeChat(ChatRequest.fromJson(request));
      } catch (ChatTemplateException e) {
        throw new IllegalArgumentException(e.getMessage(), e);
      }
    }

    @Override
    public int[] encodeText(String text) {
      int[] ids = tokenizer.encode(text, false);
      return ids.length > 0 ? ids : new int[] {0};
    }
  }
}
