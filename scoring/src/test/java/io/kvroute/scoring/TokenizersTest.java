package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
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

class TokenizersTest {
  @StartStop final MockWebServer server = new MockWebServer();

  private Tokenizers.VllmTokenizer tokenizer() {
    return Tokenizers.vllm()
        .baseUrl(URI.create("http://127.0.0.1:" + server.getPort()))
        .timeout(Duration.ofSeconds(5))
        .cache(2, 1000)
        .build();
  }

  private static int[] join(Tokenizer t, SchedulingRequest r) throws Exception {
    return t.tokenize(r).toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  @Test
  void completionPromptIsTokenizedAndCached() throws Exception {
    server.enqueue(
        new MockResponse.Builder()
            .body("{\"count\":3,\"max_model_len\":4096,\"tokens\":[1,2,3]}")
            .build());
    Tokenizers.VllmTokenizer t = tokenizer();
    SchedulingRequest r = SchedulingRequest.builder().model("m").prompt("hi there").build();
    assertThat(join(t, r)).containsExactly(1, 2, 3);
    assertThat(join(t, r)).containsExactly(1, 2, 3); // cached: no second request
    assertThat(t.cacheHits()).isEqualTo(1);
    assertThat(t.cacheMisses()).isEqualTo(1);
    RecordedRequest rec = server.takeRequest();
    assertThat(rec.getUrl().encodedPath()).isEqualTo("/tokenize");
    assertThat(rec.getBody().utf8()).isEqualTo("{\"model\":\"m\",\"prompt\":\"hi there\"}");
  }

  @Test
  void chatMessagesUseTheEngineTemplate() throws Exception {
    server.enqueue(new MockResponse.Builder().body("{\"tokens\":[7]}").build());
    SchedulingRequest r =
        SchedulingRequest.builder()
            .model("m")
            .messages(List.of(new SchedulingRequest.ChatMessage("user", "hello")))
            .build();
    assertThat(join(tokenizer(), r)).containsExactly(7);
    assertThat(server.takeRequest().getBody().utf8())
        .isEqualTo(
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],"
                + "\"add_generation_prompt\":true}");
  }

  @Test
  void chatTemplateInputsAreSentAsTheClientWroteThem() throws Exception {
    server.enqueue(new MockResponse.Builder().body("{\"tokens\":[8]}").build());
    String inputs =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
            + "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
            + "\"chat_template_kwargs\":{\"enable_thinking\":false}}";
    SchedulingRequest r =
        SchedulingRequest.builder()
            .model("m")
            .messages(List.of(new SchedulingRequest.ChatMessage("user", "hi")))
            .chatTemplateInputs(inputs)
            .build();
    Tokenizers.VllmTokenizer t = tokenizer();
    assertThat(join(t, r)).containsExactly(8);
    assertThat(server.takeRequest().getBody().utf8())
        .isEqualTo(
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                + "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                + "\"chat_template_kwargs\":{\"enable_thinking\":false},"
                + "\"add_generation_prompt\":true}");
    // the same messages without tools are another prompt: not served from the cache
    server.enqueue(new MockResponse.Builder().body("{\"tokens\":[9]}").build());
    assertThat(join(t, r.toBuilder().chatTemplateInputs(null).build())).containsExactly(9);
  }

  @Test
  void cacheIsBoundedByEntries() throws Exception {
    Tokenizers.VllmTokenizer t = tokenizer();
    for (int i = 0; i < 5; i++) {
      server.enqueue(new MockResponse.Builder().body("{\"tokens\":[" + i + "]}").build());
      join(t, SchedulingRequest.builder().model("m").prompt("p" + i).build());
    }
    assertThat(t.cacheSize()).isEqualTo(2);
  }

  @Test
  void errorsFailTheStage() {
    server.enqueue(new MockResponse.Builder().code(500).build());
    server.enqueue(new MockResponse.Builder().body("not json").build());
    server.enqueue(new MockResponse.Builder().body("{\"tokens\":\"x\"}").build());
    Tokenizers.VllmTokenizer t = tokenizer();
    SchedulingRequest r = SchedulingRequest.builder().model("m").prompt("a").build();
    assertThatThrownBy(() -> join(t, r))
        .isInstanceOf(ExecutionException.class)
        .hasMessageContaining("HTTP 500");
    assertThatThrownBy(() -> join(t, r)).hasMessageContaining("invalid JSON");
    assertThatThrownBy(() -> join(t, r)).hasMessageContaining("no \"tokens\" array");
    assertThatThrownBy(() -> join(t, SchedulingRequest.builder().model("m").build()))
        .hasMessageContaining("neither prompt nor messages");
  }

  @Test
  void timeoutAndDegradationInTheScheduler() throws Exception {
    server.enqueue(
        new MockResponse.Builder()
            .body("{\"tokens\":[1]}")
            .headersDelay(5, TimeUnit.SECONDS)
            .build());
    Tokenizers.VllmTokenizer t =
        Tokenizers.vllm()
            .baseUrl(URI.create("http://127.0.0.1:" + server.getPort()))
            .timeout(Duration.ofMillis(100))
            .build();
    Scheduler s = Scheduler.builder().tokenizer(t).build();
    Endpoint e = Endpoint.builder("a", "127.0.0.1", 1).build();
    Decision d =
        s.pickAsync(SchedulingRequest.builder().model("m").prompt("x").candidate(e).build())
            .get(10, TimeUnit.SECONDS);
    assertThat(d.tokenizationFailed()).isTrue();
    assertThat(d.primary()).contains(e);
  }

  @Test
  void usesCandidatesWhenNoBaseUrl() throws Exception {
    server.enqueue(new MockResponse.Builder().body("{\"tokens\":[5,6]}").build());
    Tokenizers.VllmTokenizer t = Tokenizers.vllm().timeout(Duration.ofSeconds(5)).build();
    Endpoint e = Endpoint.builder("a", "127.0.0.1", server.getPort()).build();
    assertThat(join(t, SchedulingRequest.builder().model("m").prompt("x").candidate(e).build()))
        .containsExactly(5, 6);
    assertThat(
            join(
                Tokenizers.callerSupplied(),
                SchedulingRequest.builder().model("m").tokenIds(new int[] {9}).build()))
        .containsExactly(9);
    assertThatThrownBy(
            () -> join(Tokenizers.callerSupplied(), SchedulingRequest.builder().model("m").build()))
        .hasMessageContaining("no token ids");
  }
}
