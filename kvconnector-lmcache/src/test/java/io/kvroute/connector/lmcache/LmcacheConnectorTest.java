package io.kvroute.connector.lmcache;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.contract.KVConnectorContract;
import java.util.concurrent.TimeUnit;
import mockwebserver3.RecordedRequest;
import org.junit.jupiter.api.Test;

/**
 * The {@code lmcache} connector against the contract (no transfer fields on either leg) and the
 * two-step bodies of spec §2.2(a).
 */
class LmcacheConnectorTest extends KVConnectorContract {

  @Override
  protected String type() {
    return "lmcache";
  }

  @Test
  void exactBodies() throws Exception {
    String fields =
        "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":30,\"min_tokens\":4";
    Legs legs =
        exchange(
            connector(),
            pd(
                InferenceRequest.Api.CHAT_COMPLETIONS,
                chatBody(fields + ",\"kv_transfer_params\":{\"do_remote_decode\":true}")));
    assertThat(legs.prefillBody())
        .isEqualTo(chatBody("\"stream\":false,\"max_tokens\":1,\"max_completion_tokens\":1"));
    assertThat(legs.decodeBody()).isEqualTo(chatBody(fields));
    assertThat(legs.header("X-Request-Id")).containsExactly("req-1", "req-1");
  }

  // ---- first-token mode (spec 2.2(b), LMCache's 1p1d first-token proxy) ----

  private static final String PREFILL_FIRST =
      "{\"id\":\"cmpl-p\",\"object\":\"text_completion\",\"created\":1700000000,"
          + "\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"A\","
          + "\"finish_reason\":\"length\"}],\"kv_transfer_params\":{\"first_tok\":99}}";

  private io.kvroute.connector.KVConnector firstTokenConnector() {
    return connector(config().withParams(java.util.Map.of("firstToken", true)));
  }

  private StreamingResponse firstToken(String body) throws Exception {
    return proxied(firstTokenConnector(), pd(body));
  }

  @Test
  void firstTokenStreamsTheSyntheticHeadThenTheDecodeStream() throws Exception {
    prefillServer.enqueue(json(200, "{\"count\":3,\"max_model_len\":4096,\"tokens\":[1,2,3]}"));
    prefillServer.enqueue(json(200, PREFILL_FIRST));
    decodeServer.enqueue(
        sse(
            java.util.List.of(
                "{\"choices\":[{\"index\":0,\"text\":\"B\"}]}",
                "{\"choices\":[{\"index\":0,\"text\":\"C\",\"finish_reason\":\"length\"}]}"),
            9));
    StreamingResponse r =
        firstToken(
            "{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":5,\"stream\":true,"
                + "\"stream_options\":{\"include_usage\":true},"
                + "\"kv_transfer_params\":{\"x\":1}}");
    assertThat(text(r))
        .isEqualTo(
            "data: {\"id\":\"cmpl-p\",\"object\":\"text_completion\",\"created\":1700000000,"
                + "\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"A\",\"logprobs\":null,"
                + "\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}\n\n"
                + "data: {\"choices\":[{\"index\":0,\"text\":\"B\"}]}\n\n"
                + "data: {\"choices\":[{\"index\":0,\"text\":\"C\",\"finish_reason\":\"length\"}]}\n\n"
                + "data: [DONE]\n\n");
    RecordedRequest tok = prefillServer.takeRequest(5, TimeUnit.SECONDS);
    assertThat(tok.getUrl().encodedPath()).isEqualTo("/tokenize");
    assertThat(body(tok).toString()).isEqualTo("{\"prompt\":\"hi\"}");
    JsonNode p = body(prefillServer.takeRequest(5, TimeUnit.SECONDS));
    assertThat(p.get("prompt").toString()).isEqualTo("[1,2,3]");
    assertThat(p.get("max_tokens").asInt()).isEqualTo(1);
    assertThat(p.get("stream").asBoolean()).isFalse();
    assertThat(p.has("stream_options")).isFalse();
    assertThat(p.get("kv_transfer_params").toString()).isEqualTo("{\"ret_first_tok\":true}");
    JsonNode d = body(decodeServer.takeRequest(5, TimeUnit.SECONDS));
    assertThat(d.get("prompt").toString()).isEqualTo("[1,2,3,99]");
    assertThat(d.get("max_tokens").asInt()).isEqualTo(4);
    assertThat(d.get("stream").asBoolean()).isTrue();
    assertThat(d.get("stream_options").toString()).isEqualTo("{\"include_usage\":true}");
    assertThat(d.has("kv_transfer_params")).isFalse();
    assertThat(transport.openResponses()).isZero();
  }

  @Test
  void firstTokenWithoutStreamingMergesIntoOneAnswer() throws Exception {
    prefillServer.enqueue(json(200, PREFILL_FIRST));
    decodeServer.enqueue(
        json(
            200,
            "{\"id\":\"cmpl-d\",\"choices\":[{\"index\":0,\"text\":\"BC\","
                + "\"finish_reason\":\"length\"}],"
                + "\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2,\"total_tokens\":6}}"));
    StreamingResponse r = firstToken("{\"model\":\"m\",\"prompt\":[1,2,3],\"max_tokens\":3}");
    JsonNode out = io.kvroute.connector.http.OpenAiJson.readTree(text(r));
    assertThat(out.path("choices").path(0).path("text").asText()).isEqualTo("ABC");
    assertThat(out.path("usage").toString())
        .isEqualTo("{\"prompt_tokens\":3,\"completion_tokens\":3,\"total_tokens\":6}");
    // token ids need no /tokenize
    assertThat(body(prefillServer.takeRequest(5, TimeUnit.SECONDS)).get("prompt").toString())
        .isEqualTo("[1,2,3]");
    JsonNode d = body(decodeServer.takeRequest(5, TimeUnit.SECONDS));
    assertThat(d.path("stream").asBoolean(false)).isFalse();
    assertThat(d.get("max_tokens").asInt()).isEqualTo(2);
  }

  @Test
  void firstTokenThatEndsTheAnswerSkipsDecode() throws Exception {
    prefillServer.enqueue(json(200, PREFILL_FIRST));
    StreamingResponse r =
        firstToken("{\"model\":\"m\",\"prompt\":[5,6],\"max_tokens\":1,\"stream\":true}");
    String out = text(r);
    assertThat(out).contains("\"text\":\"A\"").contains("\"finish_reason\":\"length\"");
    assertThat(out).endsWith("data: [DONE]\n\n");
    assertThat(decodeServer.getRequestCount()).isZero();
    assertThat(events).contains("first_token_only");
  }

  @Test
  void firstTokenFailuresAreExplained() throws Exception {
    prefillServer.enqueue(
        json(200, "{\"id\":\"x\",\"choices\":[{\"text\":\"A\",\"finish_reason\":\"length\"}]}"));
    Throwable t = proxyFailure(firstTokenConnector(), pd("{\"prompt\":[1],\"max_tokens\":4}"));
    assertThat(upstream(t).getMessage())
        .contains("kv_transfer_params.first_tok")
        .contains("ret_first_tok");

    Throwable bad = proxyFailure(firstTokenConnector(), pd("{\"prompt\":[1],\"max_tokens\":0}"));
    assertThat(bad).hasMessageContaining("max_tokens must be an integer >= 1");
    assertThat(decodeServer.getRequestCount()).isZero();
  }

  @Test
  void firstTokenModeLeavesChatToTheTwoStepFlow() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.CHAT_COMPLETIONS));
    decodeServer.enqueue(json(200, "{\"choices\":[]}"));
    StreamingResponse r =
        proxied(
            firstTokenConnector(),
            pd(
                InferenceRequest.Api.CHAT_COMPLETIONS,
                "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3}"));
    assertThat(text(r)).isEqualTo("{\"choices\":[]}");
    JsonNode p = body(prefillServer.takeRequest(5, TimeUnit.SECONDS));
    assertThat(p.has("kv_transfer_params")).isFalse();
    assertThat(p.get("max_tokens").asInt()).isEqualTo(1);
  }
}
