package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The OpenAI-compatible surface: framing, usage, cached tokens, tokenizer, errors. */
class OpenAiApiTest {
  static VllmSimulator sim;

  @BeforeAll
  static void start() {
    sim = TestSupport.sim().loras(List.of("lora-a")).gpuBlocks(256).build().start();
  }

  @AfterAll
  static void stop() {
    sim.close();
  }

  private static List<String> sseData(String body) {
    assertThat(body).endsWith("data: [DONE]\n\n");
    List<String> out = new ArrayList<>();
    for (String ev : body.split("\n\n")) {
      assertThat(ev).startsWith("data: ");
      out.add(ev.substring(6));
    }
    return out;
  }

  @Test
  void nonStreamingCompletionReportsCachedTokensOnRepeat() {
    String prompt = "the quick brown fox jumps over the lazy dog ".repeat(8);
    HttpResponse<String> r1 =
        TestSupport.post(sim, "/v1/completions", TestSupport.completion(prompt, 4));
    assertThat(r1.statusCode()).isEqualTo(200);
    assertThat(r1.headers().firstValue("content-type")).hasValue("application/json");
    JsonNode j1 = TestSupport.json(r1.body());
    assertThat(j1.get("object").asText()).isEqualTo("text_completion");
    assertThat(j1.get("id").asText()).startsWith("cmpl-");
    assertThat(j1.at("/choices/0/finish_reason").asText()).isEqualTo("length");
    int promptTokens = j1.at("/usage/prompt_tokens").asInt();
    assertThat(promptTokens).isEqualTo(SimTokenizer.get().encode(prompt).length);
    assertThat(j1.at("/usage/completion_tokens").asInt()).isEqualTo(4);
    assertThat(j1.at("/usage/prompt_tokens_details/cached_tokens").asInt()).isZero();
    assertThat(j1.has("kv_transfer_params")).isTrue();

    JsonNode j2 =
        TestSupport.json(
            TestSupport.post(sim, "/v1/completions", TestSupport.completion(prompt, 4)).body());
    int cached = j2.at("/usage/prompt_tokens_details/cached_tokens").asInt();
    assertThat(cached).isEqualTo(((promptTokens - 1) / 16) * 16).isPositive();
    assertThat(j2.at("/choices/0/text").asText()).isEqualTo(j1.at("/choices/0/text").asText());
  }

  @Test
  void streamingCompletionUsesVllmFramingWithUsageChunk() {
    String body =
        "{\"model\":\"sim-model\",\"prompt\":\"hello world\",\"max_tokens\":3,\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true}}";
    HttpResponse<String> r = TestSupport.post(sim, "/v1/completions", body);
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("content-type")).hasValue("text/event-stream; charset=utf-8");
    List<String> data = sseData(r.body());
    assertThat(data).hasSize(5); // 3 tokens + usage + [DONE]
    JsonNode first = TestSupport.json(data.get(0));
    assertThat(first.get("object").asText()).isEqualTo("text_completion");
    assertThat(first.at("/choices/0/finish_reason").isNull()).isTrue();
    assertThat(first.has("usage")).isFalse();
    assertThat(TestSupport.json(data.get(2)).at("/choices/0/finish_reason").asText())
        .isEqualTo("length");
    JsonNode usage = TestSupport.json(data.get(3));
    assertThat(usage.get("choices")).isEmpty();
    assertThat(usage.at("/usage/completion_tokens").asInt()).isEqualTo(3);
    assertThat(usage.at("/usage/prompt_tokens_details/cached_tokens").isInt()).isTrue();
    assertThat(data.get(4)).isEqualTo("[DONE]");
  }

  @Test
  void streamingChatStartsWithRoleChunkAndOmitsUsageUnlessAsked() {
    String body =
        "{\"model\":\"sim-model\",\"messages\":[{\"role\":\"user\",\"content\":\"hi there\"}],"
            + "\"max_completion_tokens\":2,\"max_tokens\":50,\"stream\":true}";
    List<String> data = sseData(TestSupport.post(sim, "/v1/chat/completions", body).body());
    assertThat(data).hasSize(4); // role + 2 tokens + [DONE]
    JsonNode role = TestSupport.json(data.get(0));
    assertThat(role.get("object").asText()).isEqualTo("chat.completion.chunk");
    assertThat(role.at("/choices/0/delta/role").asText()).isEqualTo("assistant");
    assertThat(role.at("/choices/0/delta/content").asText()).isEmpty();
    assertThat(TestSupport.json(data.get(2)).at("/choices/0/finish_reason").asText())
        .isEqualTo("length");
  }

  @Test
  void chatMultiTurnReusesThePreviousTurnsBlocks() {
    String turn1 =
        "{\"messages\":[{\"role\":\"system\",\"content\":\""
            + "you are a helpful cache ".repeat(10)
            + "\"},{\"role\":\"user\",\"content\":\"first question\"}],\"max_tokens\":20}";
    JsonNode r1 = TestSupport.json(TestSupport.post(sim, "/v1/chat/completions", turn1).body());
    assertThat(r1.get("object").asText()).isEqualTo("chat.completion");
    assertThat(r1.at("/choices/0/message/role").asText()).isEqualTo("assistant");
    String answer = r1.at("/choices/0/message/content").asText();
    int p1 = r1.at("/usage/prompt_tokens").asInt();
    String turn2 =
        "{\"messages\":[{\"role\":\"system\",\"content\":\""
            + "you are a helpful cache ".repeat(10)
            + "\"},{\"role\":\"user\",\"content\":\"first question\"},"
            + "{\"role\":\"assistant\",\"content\":\""
            + answer
            + "\"},{\"role\":\"user\",\"content\":\"second\"}],\"max_tokens\":2}";
    JsonNode r2 = TestSupport.json(TestSupport.post(sim, "/v1/chat/completions", turn2).body());
    // the answer's tokens were cached as they were generated: hits reach past the first prompt
    assertThat(r2.at("/usage/prompt_tokens_details/cached_tokens").asInt())
        .isGreaterThan((p1 / 16) * 16 - 1);
  }

  @Test
  void tokenizeIsDeterministicForPromptsAndMessages() {
    JsonNode a =
        TestSupport.json(
            TestSupport.post(sim, "/tokenize", "{\"prompt\":\"Hello, world 123!\"}").body());
    JsonNode b =
        TestSupport.json(
            TestSupport.post(sim, "/tokenize", "{\"prompt\":\"Hello, world 123!\"}").body());
    assertThat(a).isEqualTo(b);
    int[] local = SimTokenizer.get().encode("Hello, world 123!");
    assertThat(a.get("count").asInt()).isEqualTo(local.length);
    assertThat(a.get("tokens").get(0).asInt()).isEqualTo(local[0]);
    JsonNode chat =
        TestSupport.json(
            TestSupport.post(
                    sim, "/tokenize", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}")
                .body());
    assertThat(chat.get("tokens").get(0).asInt()).isEqualTo(SimTokenizer.IM_START);
    assertThat(TestSupport.post(sim, "/tokenize", "{}").statusCode()).isEqualTo(400);
  }

  @Test
  void modelsHealthAndErrors() {
    JsonNode models = TestSupport.json(TestSupport.get(sim, "/v1/models").body());
    assertThat(models.get("data")).hasSize(2);
    assertThat(models.at("/data/1/id").asText()).isEqualTo("lora-a");
    assertThat(models.at("/data/1/parent").asText()).isEqualTo("sim-model");
    assertThat(TestSupport.get(sim, "/health").statusCode()).isEqualTo(200);

    HttpResponse<String> unknown =
        TestSupport.post(sim, "/v1/completions", "{\"model\":\"nope\",\"prompt\":\"x\"}");
    assertThat(unknown.statusCode()).isEqualTo(404);
    assertThat(TestSupport.json(unknown.body()).at("/error/type").asText())
        .isEqualTo("NotFoundError");
    assertThat(TestSupport.post(sim, "/v1/completions", "{not json").statusCode()).isEqualTo(400);
    assertThat(TestSupport.post(sim, "/v1/completions", "[1]").statusCode()).isEqualTo(400);
    assertThat(TestSupport.post(sim, "/v1/completions", "{\"prompt\":\"\"}").statusCode())
        .isEqualTo(400);
    assertThat(
            TestSupport.post(sim, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":0}")
                .statusCode())
        .isEqualTo(400);
    assertThat(
            TestSupport.post(
                    sim, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1,\"min_tokens\":2}")
                .statusCode())
        .isEqualTo(400);
    assertThat(
            TestSupport.post(sim, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":40000}")
                .statusCode())
        .isEqualTo(400);
    assertThat(TestSupport.post(sim, "/v1/chat/completions", "{\"messages\":3}").statusCode())
        .isEqualTo(400);
    assertThat(TestSupport.get(sim, "/v1/completions").statusCode()).isEqualTo(405);
    assertThat(TestSupport.get(sim, "/nothing").statusCode()).isEqualTo(404);
  }

  @Test
  void recordsRequestsWithHeadersAndJson() {
    sim.clearRequests();
    TestSupport.post(
        sim, "/v1/completions", TestSupport.completion("abc", 1), Map.of("X-Request-Id", "rid-1"));
    RecordedRequest r = sim.requests().get(sim.requests().size() - 1);
    assertThat(r.path()).isEqualTo("/v1/completions");
    assertThat(r.header("x-request-id")).hasValue("rid-1");
    assertThat(r.field("prompt").asText()).isEqualTo("abc");
  }

  @Test
  void requestIdHeaderBecomesResponseId() {
    JsonNode j =
        TestSupport.json(
            TestSupport.post(
                    sim,
                    "/v1/completions",
                    TestSupport.completion("abc", 1),
                    Map.of("X-Request-Id", "abc-9"))
                .body());
    assertThat(j.get("id").asText()).isEqualTo("cmpl-abc-9");
  }
}
