package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimTokenizer;
import io.kvroute.testkit.VllmSimulator;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.RecordedRequest;
import mockwebserver3.junit5.StartStop;
import org.junit.jupiter.api.Test;

/**
 * {@link Tokenizers#vllmRender()}: vLLM's {@code /v1/chat/completions/render} and {@code
 * /v1/completions/render} as a tokenizer, against MockWebServer (exact bodies, bad answers) and the
 * testkit simulator (real HTTP, the ids the pod caches).
 */
class RenderTokenizerTest {
  @StartStop final MockWebServer server = new MockWebServer();

  private Tokenizers.VllmTokenizer tokenizer(SimpleMeterRegistry registry) {
    return Tokenizers.vllmRender()
        .baseUrl(URI.create("http://127.0.0.1:" + server.getPort()))
        .timeout(Duration.ofSeconds(5))
        .cache(4, 1000)
        .meterRegistry(registry)
        .build();
  }

  private static int[] join(Tokenizer t, SchedulingRequest r) throws Exception {
    return t.tokenize(r).toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  private static SchedulingRequest chat(String content) {
    return SchedulingRequest.builder()
        .model("m")
        .messages(List.of(new SchedulingRequest.ChatMessage("user", content)))
        .build();
  }

  @Test
  void chatsGoToTheChatRenderEndpointAndAreCached() throws Exception {
    server.enqueue(
        new MockResponse.Builder()
            .body(
                "{\"request_id\":\"chatcmpl-1\",\"token_ids\":[151644,872,198],\"features\":null,"
                    + "\"sampling_params\":{\"max_tokens\":100},\"model\":\"m\",\"stream\":false,"
                    + "\"stream_options\":null,\"cache_salt\":null,\"priority\":0,"
                    + "\"kv_transfer_params\":null}")
            .build());
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    Tokenizers.VllmTokenizer t = tokenizer(registry);
    assertThat(t.api()).isEqualTo(Tokenizers.VllmApi.RENDER);
    assertThat(join(t, chat("hello"))).containsExactly(151644, 872, 198);
    assertThat(join(t, chat("hello"))).containsExactly(151644, 872, 198);
    RecordedRequest rec = server.takeRequest();
    assertThat(rec.getUrl().encodedPath()).isEqualTo("/v1/chat/completions/render");
    assertThat(rec.getBody().utf8())
        .isEqualTo(
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],"
                + "\"add_generation_prompt\":true}");
    assertThat(registry.get("kvroute.tokenizer.cache.hits").functionCounter().count()).isEqualTo(1);
    assertThat(registry.get("kvroute.tokenizer.cache.misses").functionCounter().count())
        .isEqualTo(1);
    assertThat(registry.get("kvroute.tokenizer.cache.size").gauge().value()).isEqualTo(1);
    assertThat(t.toString()).contains("render");
  }

  @Test
  void promptsGoToTheCompletionsRenderEndpointWhichAnswersAList() throws Exception {
    server.enqueue(
        new MockResponse.Builder()
            .body("[{\"request_id\":\"cmpl-1\",\"token_ids\":[14990,1879],\"features\":null}]")
            .build());
    int[] ids =
        join(
            tokenizer(new SimpleMeterRegistry()),
            SchedulingRequest.builder().model("m").prompt("hello world").build());
    assertThat(ids).containsExactly(14990, 1879);
    RecordedRequest rec = server.takeRequest();
    assertThat(rec.getUrl().encodedPath()).isEqualTo("/v1/completions/render");
    assertThat(rec.getBody().utf8()).isEqualTo("{\"model\":\"m\",\"prompt\":\"hello world\"}");
  }

  @Test
  void badAnswersFailWithClearErrors() {
    server.enqueue(
        new MockResponse.Builder()
            .code(404)
            .body(
                "{\"error\":{\"message\":\"The model `m` does not exist.\","
                    + "\"type\":\"NotFoundError\",\"param\":null,\"code\":404}}")
            .build());
    server.enqueue(new MockResponse.Builder().code(500).body("<html>oops</html>").build());
    server.enqueue(new MockResponse.Builder().body("not json").build());
    server.enqueue(new MockResponse.Builder().body("{\"tokens\":[1,2]}").build());
    server.enqueue(new MockResponse.Builder().body("{\"token_ids\":[1,\"x\"]}").build());
    server.enqueue(new MockResponse.Builder().body("[]").build());
    server.enqueue(
        new MockResponse.Builder().body("[{\"token_ids\":[1]},{\"token_ids\":[2]}]").build());
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    Tokenizers.VllmTokenizer t = tokenizer(registry);
    SchedulingRequest c = chat("x");
    SchedulingRequest p = SchedulingRequest.builder().model("m").prompt("y").build();
    assertThatThrownBy(() -> join(t, c))
        .isInstanceOf(ExecutionException.class)
        .hasCauseInstanceOf(Tokenizers.TokenizationException.class)
        .hasMessageContaining(
            "/v1/chat/completions/render answered HTTP 404: The model `m` does not exist.");
    assertThatThrownBy(() -> join(t, c))
        .hasMessageContaining("/v1/chat/completions/render answered HTTP 500: <html>oops</html>");
    assertThatThrownBy(() -> join(t, c))
        .hasMessageContaining("/v1/chat/completions/render returned invalid JSON");
    assertThatThrownBy(() -> join(t, c))
        .hasMessageContaining("/v1/chat/completions/render response has no \"token_ids\" array");
    assertThatThrownBy(() -> join(t, c))
        .hasMessageContaining("/v1/chat/completions/render token 1 is not an int");
    assertThatThrownBy(() -> join(t, p))
        .hasMessageContaining("/v1/completions/render rendered 0 prompts, expected exactly 1");
    assertThatThrownBy(() -> join(t, p))
        .hasMessageContaining("/v1/completions/render rendered 2 prompts, expected exactly 1");
    assertThat(t.failures()).isEqualTo(7);
    assertThat(registry.get("kvroute.tokenizer.failures").functionCounter().count()).isEqualTo(7);
    assertThat(t.cacheSize()).isZero();
  }

  @Test
  void theSimulatorsRenderIdsAreThePodsOwn() throws Exception {
    try (VllmSimulator sim =
        VllmSimulator.builder().model("m").latency(LatencyModel.ZERO).build().start()) {
      Tokenizers.VllmTokenizer t = Tokenizers.vllmRender().timeout(Duration.ofSeconds(10)).build();
      Endpoint pod = Endpoint.of(sim.baseUrl().toString(), Endpoint.Role.BOTH);
      int[] prompt =
          join(
              t,
              SchedulingRequest.builder()
                  .model("m")
                  .prompt("Hello, world 123!")
                  .candidate(pod)
                  .build());
      assertThat(prompt).containsExactly(SimTokenizer.get().encode("Hello, world 123!"));
      int[] chat = join(t, chat("hi").toBuilder().candidate(pod).build());
      assertThat(chat)
          .containsExactly(
              SimTokenizer.get().encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"));
      // the same ids as /tokenize
      Tokenizers.VllmTokenizer tokenize = Tokenizers.vllm().timeout(Duration.ofSeconds(10)).build();
      assertThat(join(tokenize, chat("hi").toBuilder().candidate(pod).build()))
          .containsExactly(chat);
      assertThat(sim.requests())
          .extracting(io.kvroute.testkit.RecordedRequest::path)
          .containsExactly("/v1/completions/render", "/v1/chat/completions/render", "/tokenize");
      // an unknown model: vLLM's 404, with its message
      assertThatThrownBy(
              () ->
                  join(
                      t,
                      SchedulingRequest.builder()
                          .model("other")
                          .prompt("x")
                          .candidate(pod)
                          .build()))
          .hasMessageContaining("answered HTTP 404: The model `other` does not exist.");
    }
  }
}
