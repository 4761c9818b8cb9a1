package io.kvroute.connector.lmcache;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.contract.KVConnectorContract;
import java.util.concurrent.TimeUnit;
import mockwebserver3.RecordedRequest;
import org.junit.jupiter.api.Test;

/** The {@code lmcache} connector against the contract and the two-step bodies of spec §2.2(a). */
class LmcacheConnectorTest extends KVConnectorContract {

  @Override
  protected String type() {
    return "lmcache";
  }

  @Override
  protected void checkPrefillBody(JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    super.checkPrefillBody(prefill, original, api);
    assertThat(prefill.has("kv_transfer_params")).isFalse();
    assertThat(prefill.has("min_completion_tokens")).isFalse();
  }

  @Override
  protected void checkDecodeBody(JsonNode decode, JsonNode original) {
    super.checkDecodeBody(decode, original);
    assertThat(decode.has("kv_transfer_params")).isFalse();
  }

  @Test
  void exactBodies() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.CHAT_COMPLETIONS));
    decodeServer.enqueue(json(200, "{}"));
    String original =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true},\"max_tokens\":30,\"min_tokens\":4,"
            + "\"kv_transfer_params\":{\"do_remote_decode\":true}}";
    StreamingResponse r =
        connector()
            .proxy(
                new PdRequest(
                    request(InferenceRequest.Api.CHAT_COMPLETIONS, original),
                    prefillEndpoint(),
                    decodeEndpoint()))
            .get(30, TimeUnit.SECONDS);
    r.readAll(1 << 16).get(30, TimeUnit.SECONDS);
    RecordedRequest p = prefillServer.takeRequest(5, TimeUnit.SECONDS);
    RecordedRequest d = decodeServer.takeRequest(5, TimeUnit.SECONDS);
    assertThat(p.getBody().utf8())
        .isEqualTo(
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                + "\"stream\":false,\"max_tokens\":1,\"max_completion_tokens\":1}");
    assertThat(d.getBody().utf8())
        .isEqualTo(
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
                + "\"stream_options\":{\"include_usage\":true},\"max_tokens\":30,\"min_tokens\":4}");
    assertThat(p.getHeaders().get("X-Request-Id")).isEqualTo("req-1");
    assertThat(d.getHeaders().get("X-Request-Id")).isEqualTo("req-1");
  }

  // ---- first-token mode (spec 2.2(b), LMCache's 1p1d first-token proxy) ----

  private static final String PREFILL_FIRST =
      "{\"id\":\"cmpl-p\",\"object\":\"text_completion\",\"created\":1700000000,"
          + "\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"A\","
          + "\"finish_reason\":\"length\"}],\"kv_transfer_params\":{\"first_tok\":99}}";

  private io.kvroute.connector.KVConnector firstTokenConnector() {
    return connector(config().withParams(java.util.Map.of("firstToken", "true")));
  }

  private StreamingResponse firstToken(String body) throws Exception {
    return firstTokenConnector()
        .proxy(
            new PdRequest(
                request(InferenceRequest.Api.COMPLETIONS, body),
                prefillEndpoint(),
                decodeEndpoint()))
        .get(30, TimeUnit.SECONDS);
  }

  private static String text(StreamingResponse r) throws Exception {
    return new String(
        r.readAll(1 << 20).get(30, TimeUnit.SECONDS), java.nio.charset.StandardCharsets.UTF_8);
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
    Throwable t =
        failure(
            firstTokenConnector()
                .proxy(
                    new PdRequest(
                        request(
                            InferenceRequest.Api.COMPLETIONS, "{\"prompt\":[1],\"max_tokens\":4}"),
                        prefillEndpoint(),
                        decodeEndpoint())));
    assertThat(t).isInstanceOf(io.kvroute.connector.UpstreamException.class);
    assertThat(t.getMessage()).contains("kv_transfer_params.first_tok").contains("ret_first_tok");

    Throwable bad =
        failure(
            firstTokenConnector()
                .proxy(
                    new PdRequest(
                        request(
                            InferenceRequest.Api.COMPLETIONS, "{\"prompt\":[1],\"max_tokens\":0}"),
                        prefillEndpoint(),
                        decodeEndpoint())));
    assertThat(bad).hasMessageContaining("max_tokens must be an integer >= 1");
    assertThat(decodeServer.getRequestCount()).isZero();
  }

  @Test
  void firstTokenModeLeavesChatToTheTwoStepFlow() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.CHAT_COMPLETIONS));
    decodeServer.enqueue(json(200, "{\"choices\":[]}"));
    StreamingResponse r =
        firstTokenConnector()
            .proxy(
                new PdRequest(
                    request(
                        InferenceRequest.Api.CHAT_COMPLETIONS,
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3}"),
                    prefillEndpoint(),
                    decodeEndpoint()))
            .get(30, TimeUnit.SECONDS);
    assertThat(text(r)).isEqualTo("{\"choices\":[]}");
    JsonNode p = body(prefillServer.takeRequest(5, TimeUnit.SECONDS));
    assertThat(p.has("kv_transfer_params")).isFalse();
    assertThat(p.get("max_tokens").asInt()).isEqualTo(1);
  }
}
