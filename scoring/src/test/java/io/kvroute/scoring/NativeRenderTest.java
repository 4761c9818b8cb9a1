package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
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
 * Anthropic Messages and OpenAI Responses requests rendered natively ({@link
 * SchedulingRequest.NativeRequest}): {@link Tokenizers#vllmRender()} sends them to vLLM's {@code
 * /v1/messages/render} and {@code /v1/responses/render}; an engine without those answers 404 and is
 * asked for the chat form on {@code /v1/chat/completions/render} from then on; a request without a
 * chat form is refused by a tokenizer that cannot render it natively.
 */
class NativeRenderTest {
  @StartStop final MockWebServer server = new MockWebServer();

  private static final String MESSAGES =
      "{\"model\":\"m\",\"max_tokens\":1,\"system\":\"be brief\","
          + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

  private Tokenizers.VllmTokenizer render() {
    return Tokenizers.vllmRender()
        .baseUrl(URI.create("http://127.0.0.1:" + server.getPort()))
        .timeout(Duration.ofSeconds(5))
        .cache(8, 1000)
        .meterRegistry(new SimpleMeterRegistry())
        .build();
  }

  private static int[] join(Tokenizer t, SchedulingRequest r) throws Exception {
    return t.tokenize(r).toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  /** A request of {@code api} with its native form and, if not null, its chat form. */
  private static SchedulingRequest request(
      InferenceRequest.Api api, String json, String chatInputs) {
    SchedulingRequest.Builder b =
        SchedulingRequest.builder()
            .model("m")
            .messages(List.of(new SchedulingRequest.ChatMessage("user", "hi")))
            .nativeRequest(new SchedulingRequest.NativeRequest(api, json));
    if (chatInputs != null) {
      b.chatTemplateInputs(chatInputs);
    }
    return b.build();
  }

  @Test
  void messagesGoToTheirOwnRenderEndpointAsTheyAreAndAreCached() throws Exception {
    server.enqueue(
        new MockResponse.Builder()
            .body("{\"request_id\":\"chatcmpl-1\",\"token_ids\":[7,8,9],\"features\":null}")
            .build());
    Tokenizers.VllmTokenizer t = render();
    SchedulingRequest r = request(InferenceRequest.Api.MESSAGES, MESSAGES, null);
    assertThat(join(t, r)).containsExactly(7, 8, 9);
    assertThat(join(t, r)).containsExactly(7, 8, 9);
    RecordedRequest rec = server.takeRequest();
    assertThat(rec.getUrl().encodedPath()).isEqualTo("/v1/messages/render");
    assertThat(rec.getBody().utf8()).isEqualTo(MESSAGES);
    assertThat(t.cacheHits()).isEqualTo(1);
    assertThat(server.getRequestCount()).isEqualTo(1);
  }

  @Test
  void anEngineWithoutTheRenderEndpointIsAskedForTheChatFormFromThenOn() throws Exception {
    server.enqueue(new MockResponse.Builder().code(404).body("{\"detail\":\"Not Found\"}").build());
    server.enqueue(new MockResponse.Builder().body("{\"token_ids\":[1,2]}").build());
    server.enqueue(new MockResponse.Builder().body("{\"token_ids\":[3,4]}").build());
    Tokenizers.VllmTokenizer t = render();
    String chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"QUESTION\"}]}";
    assertThat(
            join(
                t,
                request(
                    InferenceRequest.Api.RESPONSES,
                    "{\"model\":\"m\",\"input\":\"hi\"}",
                    chat.replace("QUESTION", "hi"))))
        .containsExactly(1, 2);
    assertThat(
            join(
                t,
                request(
                    InferenceRequest.Api.RESPONSES,
                    "{\"model\":\"m\",\"input\":\"yo\"}",
                    chat.replace("QUESTION", "yo"))))
        .containsExactly(3, 4);
    assertThat(server.takeRequest().getUrl().encodedPath()).isEqualTo("/v1/responses/render");
    RecordedRequest fallback = server.takeRequest();
    assertThat(fallback.getUrl().encodedPath()).isEqualTo("/v1/chat/completions/render");
    assertThat(fallback.getBody().utf8()).contains("\"messages\":[{\"role\":\"user\"");
    assertThat(server.takeRequest().getUrl().encodedPath())
        .as("not asked again")
        .isEqualTo("/v1/chat/completions/render");
  }

  @Test
  void withoutAChatFormOnlyTheRenderEndpointCanTokenize() {
    Tokenizers.VllmTokenizer tokenize =
        Tokenizers.vllm()
            .baseUrl(URI.create("http://127.0.0.1:" + server.getPort()))
            .timeout(Duration.ofSeconds(5))
            .build();
    assertThatThrownBy(() -> join(tokenize, request(InferenceRequest.Api.MESSAGES, MESSAGES, null)))
        .isInstanceOf(ExecutionException.class)
        .hasCauseInstanceOf(Tokenizers.TokenizationException.class)
        .hasMessageContaining("/v1/messages request has no chat form")
        .hasMessageContaining("/v1/messages/render");
    assertThat(server.getRequestCount()).isZero();
  }

  @Test
  void theSimulatorsMessagesAndResponsesRenderAreThePodsOwnChatIds() throws Exception {
    try (VllmSimulator sim =
        VllmSimulator.builder().model("m").latency(LatencyModel.ZERO).build().start()) {
      Tokenizers.VllmTokenizer t = Tokenizers.vllmRender().timeout(Duration.ofSeconds(10)).build();
      Endpoint pod = Endpoint.of(sim.baseUrl().toString(), Endpoint.Role.BOTH);
      int[] expected =
          SimTokenizer.get()
              .encode(
                  SimTokenizer.get()
                      .applyChatTemplate(
                          new com.fasterxml.jackson.databind.ObjectMapper()
                              .readTree(
                                  "[{\"role\":\"system\",\"content\":\"be brief\"},"
                                      + "{\"role\":\"user\",\"content\":\"hi\"}]"),
                          true));
      int[] messages =
          join(
              t,
              request(InferenceRequest.Api.MESSAGES, MESSAGES, null).toBuilder()
                  .candidate(pod)
                  .build());
      int[] responses =
          join(
              t,
              request(
                      InferenceRequest.Api.RESPONSES,
                      "{\"model\":\"m\",\"instructions\":\"be brief\",\"input\":\"hi\"}",
                      null)
                  .toBuilder()
                  .candidate(pod)
                  .build());
      assertThat(messages).containsExactly(expected);
      assertThat(responses).containsExactly(expected);
      assertThat(sim.requests())
          .extracting(io.kvroute.testkit.RecordedRequest::path)
          .containsExactly("/v1/messages/render", "/v1/responses/render");
    }
  }

  @Test
  void anEnginesAnswerAboutTheRequestDoesNotTurnNativeRenderingOff() throws Exception {
    server.enqueue(
        new MockResponse.Builder()
            .code(404)
            .body(
                "{\"error\":{\"message\":\"The model `x` does not exist.\","
                    + "\"type\":\"NotFoundError\",\"param\":null,\"code\":404}}")
            .build());
    server.enqueue(new MockResponse.Builder().body("{\"token_ids\":[5]}").build());
    Tokenizers.VllmTokenizer t = render();
    String chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    assertThatThrownBy(
            () ->
                join(
                    t,
                    request(
                        InferenceRequest.Api.MESSAGES, MESSAGES.replace("\"m\"", "\"x\""), chat)))
        .hasMessageContaining(
            "/v1/messages/render answered HTTP 404: The model `x` does not exist.");
    assertThat(join(t, request(InferenceRequest.Api.MESSAGES, MESSAGES, chat))).containsExactly(5);
    assertThat(server.takeRequest().getUrl().encodedPath()).isEqualTo("/v1/messages/render");
    assertThat(server.takeRequest().getUrl().encodedPath())
        .as("still rendered natively")
        .isEqualTo("/v1/messages/render");
  }
}
