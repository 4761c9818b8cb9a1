package io.kvroute.connector.nixl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.contract.KVConnectorContract;
import io.kvroute.connector.http.OpenAiJson;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Set;
import mockwebserver3.MockResponse;
import org.junit.jupiter.api.Test;

/** The {@code nixl} connector against the contract and vLLM's reference proxy, body for body. */
class NixlConnectorTest extends KVConnectorContract {

  static final String PARAMS =
      "{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[[1,2,3]],"
          + "\"remote_engine_id\":\"eng-1\",\"remote_request_id\":\"cmpl-req-1-0\","
          + "\"remote_host\":\"10.0.0.5\",\"remote_port\":5600,\"tp_size\":1}";

  static final String SKELETON =
      "{\"do_remote_decode\":true,\"do_remote_prefill\":false,\"remote_engine_id\":null,"
          + "\"remote_block_ids\":null,\"remote_host\":null,\"remote_port\":null}";

  @Override
  protected String type() {
    return "nixl";
  }

  @Override
  protected Set<String> transferFields() {
    return Set.of("kv_transfer_params");
  }

  @Override
  protected MockResponse prefillAnswer(InferenceRequest.Api api) {
    return answer(PARAMS, "length");
  }

  static MockResponse answer(String params, String finishReason) {
    return json(
        200,
        "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
            + "\"text\":\"a\",\"finish_reason\":\""
            + finishReason
            + "\"}],"
            + USAGE
            + (params == null ? "" : ",\"kv_transfer_params\":" + params)
            + "}");
  }

  @Override
  protected void checkConnectorPrefill(
      JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    assertThat(prefill.get("kv_transfer_params").toString()).isEqualTo(SKELETON);
    assertThat(prefill.has("max_completion_tokens"))
        .isEqualTo(original.has("max_completion_tokens"));
  }

  @Override
  protected void checkConnectorDecode(JsonNode decode, JsonNode original) {
    assertThat(decode.get("kv_transfer_params").toString()).isEqualTo(PARAMS);
  }

  /*
   * The expected bodies below are what toy_proxy_server.py@030ea52 sends for the same client body:
   * it copies the dict, assigns kv_transfer_params (appended), stream and max_tokens (in place when
   * present, else appended), max_completion_tokens only when present, then deletes stream_options,
   * min_tokens and min_completion_tokens; decode is the original dict with kv_transfer_params
   * assigned from the prefill answer. Python's json.dumps adds a space after ',' and ':'; otherwise
   * the text, key order included, is the same.
   */

  /**
   * Proxies {@code original}: both legs carry the client's request id, the prefill body is {@code
   * prefill} and the decode body the original with the prefill answer's {@code kv_transfer_params}
   * appended, as the reference proxy sends them.
   */
  private void assertReferenceBodies(InferenceRequest.Api api, String original, String prefill)
      throws Exception {
    Legs legs = exchange(connector(), pd(api, original));
    assertThat(legs.header("X-Request-Id")).containsExactly("req-1", "req-1");
    assertThat(legs.prefillBody()).isEqualTo(prefill);
    assertThat(legs.decodeBody())
        .isEqualTo(
            original.substring(0, original.length() - 1)
                + ",\"kv_transfer_params\":"
                + PARAMS
                + "}");
  }

  @Test
  void completionBodiesEqualTheReferenceProxy() throws Exception {
    assertReferenceBodies(
        InferenceRequest.Api.COMPLETIONS,
        "{\"model\":\"m\",\"prompt\":\"Hi\",\"max_tokens\":20,\"min_tokens\":2,\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true},\"temperature\":0.7}",
        "{\"model\":\"m\",\"prompt\":\"Hi\",\"max_tokens\":1,\"stream\":false,"
            + "\"temperature\":0.7,\"kv_transfer_params\":"
            + SKELETON
            + "}");
  }

  @Test
  void chatBodiesEqualTheReferenceProxy() throws Exception {
    assertReferenceBodies(
        InferenceRequest.Api.CHAT_COMPLETIONS,
        chatBody("\"max_completion_tokens\":64,\"min_completion_tokens\":3"),
        chatBody(
            "\"max_completion_tokens\":1,\"kv_transfer_params\":"
                + SKELETON
                + ",\"stream\":false,\"max_tokens\":1"));
  }

  @Test
  void chatWithoutMaxCompletionTokensGetsOnlyMaxTokens() throws Exception {
    assertReferenceBodies(
        InferenceRequest.Api.CHAT_COMPLETIONS,
        chatBody("\"stream\":true"),
        chatBody("\"stream\":false,\"kv_transfer_params\":" + SKELETON + ",\"max_tokens\":1"));
  }

  @Test
  void prefillWithoutTransferParamsDecodesLocallyAndIsCounted() throws Exception {
    prefillServer.enqueue(answer(null, "stop"));
    decodeServer.enqueue(json(200, "{}"));
    String original =
        "{\"prompt\":\"x\",\"max_tokens\":9,\"kv_transfer_params\":{\"remote_host\":\"evil\"}}";
    KVConnector.DecodeRequest d = prepared(connector(), pd(original));
    assertThat(new String(d.body(), StandardCharsets.UTF_8))
        .as("no client-supplied params fall through")
        .isEqualTo("{\"prompt\":\"x\",\"max_tokens\":9}");
    assertThat(d.attributes())
        .containsEntry("kv_transfer_params", "absent")
        .containsEntry("prefill_finish_reason", "stop");
    assertThat(events).containsExactly(NixlConnector.EVENT_NO_PARAMS);
  }

  @Test
  void emptyOrNullParamsCountAsAbsent() throws Exception {
    for (String params : List.of("{}", "null")) {
      events.clear();
      prefillServer.enqueue(answer(params, "length"));
      KVConnector.DecodeRequest d = prepared(connector(), pd(PROMPT_X));
      assertThat(OpenAiJson.readTree(d.body()).has("kv_transfer_params")).isFalse();
      assertThat(events).containsExactly(NixlConnector.EVENT_NO_PARAMS);
    }
  }

  private JsonNode decodeParams(String mode, String reportedHost) throws Exception {
    prefillServer.enqueue(answer(PARAMS.replace("10.0.0.5", reportedHost), "length"));
    KVConnector c = connector(config().withParams(Map.of("remoteHostRewrite", mode)));
    KVConnector.DecodeRequest d =
        prepared(
            c,
            new PdRequest(
                request(InferenceRequest.Api.COMPLETIONS, PROMPT_X),
                prefillEndpoint().withId("p").withLabels(Map.of()),
                decodeEndpoint()));
    return OpenAiJson.readTree(d.body()).get("kv_transfer_params");
  }

  @Test
  void remoteHostRewriteModes() throws Exception {
    assertThat(decodeParams("never", "localhost").get("remote_host").asText())
        .isEqualTo("localhost");
    assertThat(decodeParams("localhost", "localhost").get("remote_host").asText())
        .isEqualTo("127.0.0.1");
    assertThat(events).containsExactly(NixlConnector.EVENT_HOST_REWRITTEN);
    assertThat(decodeParams("localhost", "10.9.9.9").get("remote_host").asText())
        .isEqualTo("10.9.9.9");
    JsonNode always = decodeParams("always", "10.9.9.9");
    assertThat(always.get("remote_host").asText()).isEqualTo("127.0.0.1");
    assertThat(always.get("remote_port").asInt()).as("other keys verbatim").isEqualTo(5600);
    assertThatThrownBy(() -> connector(config().withParams(Map.of("remoteHostRewrite", "maybe"))))
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessageContaining("kvConnector.config.remoteHostRewrite");
  }

  @Test
  void prefillAnswerThatIsNotJsonIsAProtocolError() {
    prefillServer.enqueue(json(200, "<html>oops</html>"));
    UpstreamException u = upstream(proxyFailure(connector(), pd(PROMPT_X)));
    assertThat(u.kind()).isEqualTo(UpstreamException.Kind.PROTOCOL);
    assertThat(u.retryable()).isTrue();
    assertThat(decodeServer.getRequestCount()).isZero();
  }
}
