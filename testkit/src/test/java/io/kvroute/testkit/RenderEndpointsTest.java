package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * vLLM's render endpoints on the simulator ({@code vllm/entrypoints/serve/render/api_router.py}): a
 * chat answers one {@code GenerateRequest}, completions a list of them; the ids are the ones the
 * pod caches; vLLM's errors.
 */
class RenderEndpointsTest {
  static VllmSimulator sim;

  @BeforeAll
  static void start() {
    sim = TestSupport.sim().loras(List.of("lora-a")).gpuBlocks(256).hashSeed("0").build().start();
  }

  @AfterAll
  static void stop() {
    sim.close();
  }

  private static int[] ids(JsonNode arr) {
    int[] out = new int[arr.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = arr.get(i).asInt();
    }
    return out;
  }

  @Test
  void aChatRendersToTheIdsThePodCaches() {
    String messages =
        "[{\"role\":\"system\",\"content\":\""
            + "render me into token ids please ".repeat(6)
            + "\"},{\"role\":\"user\",\"content\":\"and cache me\"}]";
    HttpResponse<String> r =
        TestSupport.post(
            sim,
            "/v1/chat/completions/render",
            "{\"model\":\"sim-model\",\"max_tokens\":5,\"cache_salt\":\"s\",\"messages\":"
                + messages
                + "}");
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    JsonNode g = TestSupport.json(r.body());
    assertThat(g.isObject()).isTrue();
    assertThat(g.get("request_id").asText()).startsWith("chatcmpl-");
    assertThat(g.get("features").isNull()).isTrue();
    assertThat(g.get("model").asText()).isEqualTo("sim-model");
    assertThat(g.get("cache_salt").asText()).isEqualTo("s");
    assertThat(g.get("priority").asInt()).isZero();
    assertThat(g.at("/sampling_params/max_tokens").asInt()).isEqualTo(5);
    int[] rendered = ids(g.get("token_ids"));
    // /tokenize agrees
    JsonNode t =
        TestSupport.json(
            TestSupport.post(sim, "/tokenize", "{\"messages\":" + messages + "}").body());
    assertThat(ids(t.get("tokens"))).containsExactly(rendered);
    // and the pod caches exactly these ids' blocks
    assertThat(
            TestSupport.post(
                    sim,
                    "/v1/chat/completions",
                    "{\"model\":\"sim-model\",\"max_tokens\":1,\"messages\":" + messages + "}")
                .statusCode())
        .isEqualTo(200);
    VllmBlockHasher h =
        VllmBlockHasher.builder()
            .algorithm(HashAlgorithm.SHA256)
            .blockSize(16)
            .hashSeed("0")
            .build();
    List<Long> want = h.hashBlocks(rendered).stream().map(BlockHash::u64).toList();
    assertThat(want).isNotEmpty();
    assertThat(sim.cachedBlockHashes()).containsAll(want);
  }

  @Test
  void completionsRenderToAListOfOnePerPrompt() {
    JsonNode one =
        TestSupport.json(
            TestSupport.post(sim, "/v1/completions/render", "{\"prompt\":\"Hello, world 123!\"}")
                .body());
    assertThat(one.isArray()).isTrue();
    assertThat(one).hasSize(1);
    assertThat(one.get(0).get("request_id").asText()).startsWith("cmpl-");
    assertThat(one.get(0).get("model").isNull()).isTrue();
    assertThat(ids(one.get(0).get("token_ids")))
        .containsExactly(SimTokenizer.get().encode("Hello, world 123!"));
    JsonNode two =
        TestSupport.json(
            TestSupport.post(sim, "/v1/completions/render", "{\"prompt\":[\"a b\",[7,8,9]]}")
                .body());
    assertThat(two).hasSize(2);
    assertThat(ids(two.get(1).get("token_ids"))).containsExactly(7, 8, 9);
    JsonNode tokens =
        TestSupport.json(
            TestSupport.post(sim, "/v1/completions/render", "{\"prompt\":[5,6]}").body());
    assertThat(tokens).hasSize(1);
    assertThat(ids(tokens.get(0).get("token_ids"))).containsExactly(5, 6);
    // a LoRA adapter the pod serves is a known model
    assertThat(
            TestSupport.post(
                    sim, "/v1/completions/render", "{\"model\":\"lora-a\",\"prompt\":\"x\"}")
                .statusCode())
        .isEqualTo(200);
  }

  @Test
  void errorsAreVllms() {
    HttpResponse<String> unknown =
        TestSupport.post(
            sim,
            "/v1/chat/completions/render",
            "{\"model\":\"nope\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    assertThat(unknown.statusCode()).isEqualTo(404);
    assertThat(TestSupport.json(unknown.body()).at("/error/message").asText())
        .isEqualTo("The model `nope` does not exist.");
    assertThat(TestSupport.post(sim, "/v1/chat/completions/render", "{}").statusCode())
        .isEqualTo(400);
    assertThat(TestSupport.post(sim, "/v1/completions/render", "[1]").statusCode()).isEqualTo(400);
    assertThat(TestSupport.post(sim, "/v1/completions/render", "{\"prompt\":{}}").statusCode())
        .isEqualTo(400);
    assertThat(TestSupport.post(sim, "/v1/completions/render", "{\"prompt\":\"\"}").statusCode())
        .isEqualTo(400);
    assertThat(TestSupport.get(sim, "/v1/completions/render").statusCode()).isEqualTo(405);
    HttpResponse<String> tooLong =
        TestSupport.post(
            sim, "/v1/completions/render", "{\"prompt\":\"" + "word ".repeat(40_000) + "\"}");
    assertThat(tooLong.statusCode()).isEqualTo(400);
    assertThat(tooLong.body()).contains("maximum context length");
  }

  @Test
  void tokenizationEndpointsCanDisagreeWithWhatThePodCaches() {
    EngineTokenizer other =
        new EngineTokenizer() {
          @Override
          public int[] encodePrompt(String prompt) {
            int[] ids = SimTokenizer.get().encode(prompt);
            int[] out = new int[ids.length + 1];
            out[0] = 1; // a BOS the generation path does not add
            System.arraycopy(ids, 0, out, 1, ids.length);
            return out;
          }

          @Override
          public int[] encodeChat(JsonNode request) {
            return encodePrompt(
                SimTokenizer.get().applyChatTemplate(request.get("messages"), false));
          }

          @Override
          public int[] encodeText(String text) {
            return EngineTokenizer.simulated().encodeText(text);
          }
        };
    try (VllmSimulator odd = TestSupport.sim().endpointTokenizer(other).build().start()) {
      JsonNode rendered =
          TestSupport.json(
              TestSupport.post(odd, "/v1/completions/render", "{\"prompt\":\"abc def\"}").body());
      assertThat(ids(rendered.get(0).get("token_ids")))
          .containsExactly(other.encodePrompt("abc def"));
      JsonNode tokenized =
          TestSupport.json(TestSupport.post(odd, "/tokenize", "{\"prompt\":\"abc def\"}").body());
      assertThat(tokenized.get("tokens").get(0).asInt()).isEqualTo(1);
    }
  }

  @Test
  void withoutPythonHashSeedThePodHashesAsADefaultVllm() {
    try (VllmSimulator def =
        TestSupport.sim().hashSeed(null).hashAlgorithm(HashAlgorithm.SHA256_CBOR).build().start()) {
      String prompt = "a default vLLM without PYTHONHASHSEED ".repeat(4);
      assertThat(
              TestSupport.post(def, "/v1/completions", TestSupport.completion(prompt, 1))
                  .statusCode())
          .isEqualTo(200);
      VllmBlockHasher h =
          VllmBlockHasher.builder().algorithm(HashAlgorithm.SHA256_CBOR).blockSize(16).build();
      List<Long> want =
          h.hashBlocks(SimTokenizer.get().encode(prompt)).stream().map(BlockHash::u64).toList();
      assertThat(def.cachedBlockHashes()).containsAll(want);
    }
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> TestSupport.sim().hashSeed(null).hashAlgorithm(HashAlgorithm.XXHASH).build())
        .hasMessageContaining("hashSeed must be set for xxhash");
  }
}
