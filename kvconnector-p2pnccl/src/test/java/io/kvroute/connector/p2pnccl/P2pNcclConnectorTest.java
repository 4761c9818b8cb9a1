package io.kvroute.connector.p2pnccl;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.contract.KVConnectorContract;
import io.kvroute.connector.http.OpenAiJson;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * The {@code p2pnccl} connector against the contract, and against what vLLM's reference proxy
 * ({@code disagg_proxy_p2p_nccl_xpyd.py}) sends for the same client request.
 */
class P2pNcclConnectorTest extends KVConnectorContract {
  static final String PREFILL_KV = "10.0.0.1:21001";
  static final String DECODE_KV = "10.0.0.2:22001";

  @Override
  protected String type() {
    return "p2pnccl";
  }

  /**
   * With {@code kvPort}: the kit's own ad-hoc endpoints (a dead prefill, a dropping decode) carry
   * no KV-address label.
   */
  @Override
  protected ConnectorConfig config() {
    return super.config().withParams(Map.of("kvPort", 29999));
  }

  @Override
  protected Endpoint prefillEndpoint() {
    return super.prefillEndpoint().toBuilder()
        .label(P2pNcclConnector.KV_ADDRESS_LABEL, PREFILL_KV)
        .build();
  }

  @Override
  protected Endpoint decodeEndpoint() {
    return super.decodeEndpoint().toBuilder()
        .label(P2pNcclConnector.KV_ADDRESS_LABEL, DECODE_KV)
        .build();
  }

  @Override
  protected boolean servesDecodeOnly() {
    return false;
  }

  @Override
  protected void checkRequestId(String sent, String requestId) {
    assertThat(sent)
        .matches(
            "___prefill_addr_10\\.0\\.0\\.1:21001___decode_addr_10\\.0\\.0\\.2:22001_[0-9a-f]{32}");
  }

  @Override
  protected void checkConnectorPrefill(
      JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    // max_completion_tokens only when the client sent it: the prefill makes one token either way
    assertThat(prefill.has("max_completion_tokens"))
        .isEqualTo(original.has("max_completion_tokens"));
  }

  private KVConnector connector(UUID... ids) {
    Iterator<UUID> it = List.of(ids).iterator();
    return new P2pNcclConnector(
        io.kvroute.connector.KVConnectorProvider.Context.builder(config(), transport, scheduler)
            .build(),
        it::next);
  }

  @Test
  void bothLegsCarryTheAddressedIdThatEachInstanceReadsItsPeerFrom() throws Exception {
    UUID id = UUID.fromString("0123abcd-0000-4000-8000-00000000beef");
    Legs legs = exchange(connector(id), pd("{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":8}"));
    String expected =
        "___prefill_addr_10.0.0.1:21001___decode_addr_10.0.0.2:22001_0123abcd000040008000"
            + "00000000beef";
    assertThat(legs.header("X-Request-Id")).containsExactly(expected, expected);
    // vLLM prefixes it (cmpl-<id>-0) and each side's parse_request_id finds its peer
    String engineSide = "cmpl-" + expected + "-0";
    assertThat(RequestIds.parse(engineSide, true)).contains(new KvAddress("10.0.0.2", 22001));
    assertThat(RequestIds.parse(engineSide, false)).contains(new KvAddress("10.0.0.1", 21001));
  }

  @Test
  void everyAttemptHasItsOwnId() throws Exception {
    KVConnector c = connector(new UUID(1, 1), new UUID(2, 2));
    Legs first = exchange(c, pd(PROMPT_X));
    Legs second = exchange(c, pd(PROMPT_X));
    assertThat(first.header("X-Request-Id").get(0)).endsWith("_00000000000000010000000000000001");
    assertThat(second.header("X-Request-Id").get(0)).endsWith("_00000000000000020000000000000002");
  }

  @Test
  void kvPortAddressesEndpointsWithoutTheLabel() throws Exception {
    KVConnector c = connector(config().withParams(Map.of("kvPort", 21001)));
    PdRequest plain =
        new PdRequest(
            request(InferenceRequest.Api.COMPLETIONS, PROMPT_X),
            super.prefillEndpoint(),
            decodeEndpoint());
    Legs legs = exchange(c, plain);
    assertThat(legs.header("X-Request-Id").get(0))
        .startsWith("___prefill_addr_127.0.0.1:21001___decode_addr_10.0.0.2:22001_");
  }

  @Test
  void anEndpointWithoutAKvAddressIsAConfigurationErrorNamingIt() {
    PdRequest plain =
        new PdRequest(
            request(InferenceRequest.Api.COMPLETIONS, PROMPT_X),
            super.prefillEndpoint(),
            decodeEndpoint());
    KVConnector withoutKvPort = connector(super.config());
    assertThat(proxyFailure(withoutKvPort, plain))
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessageContaining("endpoint prefill-0 label kvroute.io/p2pnccl-kv-address")
        .hasMessageContaining("kvPort");
    assertThat(prefillServer.getRequestCount()).isZero();
    PdRequest bad =
        new PdRequest(
            request(InferenceRequest.Api.COMPLETIONS, PROMPT_X),
            super.prefillEndpoint().toBuilder()
                .label(P2pNcclConnector.KV_ADDRESS_LABEL, "no-port")
                .build(),
            decodeEndpoint());
    assertThat(proxyFailure(withoutKvPort, bad)).hasMessageContaining("must be host:port");
  }

  @Test
  void kvPortMustBeAPort() {
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> connector(super.config().withParams(Map.of("kvPort", 0))))
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessageContaining("kvConnector.config.kvPort");
  }

  // ---- vLLM's reference proxy, body for body --------------------------------------------------

  /*
   * disagg_proxy_p2p_nccl_xpyd.py (vLLM, cd583cfb) builds, for each /v1/completions or
   * /v1/chat/completions request:
   *   prefill_request = original_request_data.copy(); prefill_request["max_tokens"] = 1
   *   request_id = f"___prefill_addr_{prefill_zmq_addr}___decode_addr_{decode_zmq_addr}_{uuid4().hex}"
   * and posts prefill_request to the prefill instance, then original_request_data unchanged to the
   * decode instance, both with X-Request-Id: request_id (and Authorization: Bearer $OPENAI_API_KEY).
   * reference() and the tests below transcribe that; kvroute's bodies must equal the reference's
   * except for the four documented deviations, applied by deviate().
   */

  /** The reference proxy's prefill body for {@code original}. */
  static ObjectNode reference(ObjectNode original) {
    ObjectNode p = original.deepCopy();
    p.put("max_tokens", 1);
    return p;
  }

  /**
   * kvroute's documented deviations from the reference prefill: a non-streamed prefill, one token
   * for chat's {@code max_completion_tokens} too, and no {@code stream_options}, {@code min_tokens}
   * or {@code min_completion_tokens}.
   */
  static ObjectNode deviate(ObjectNode referencePrefill) {
    ObjectNode p = referencePrefill.deepCopy();
    p.put("stream", false);
    if (p.has("max_completion_tokens")) {
      p.put("max_completion_tokens", 1);
    }
    p.remove("stream_options");
    p.remove("min_tokens");
    p.remove("min_completion_tokens");
    return p;
  }

  static List<String> fieldOrder(JsonNode n) {
    List<String> out = new ArrayList<>();
    n.fieldNames().forEachRemaining(out::add);
    return out;
  }

  @Test
  void bodiesAreTheReferenceProxysUpToTheDocumentedDeviations() throws Exception {
    List<String[]> cases =
        List.of(
            new String[] {
              "completions", "{\"model\":\"m\",\"prompt\":\"Hello\",\"max_tokens\":20}"
            },
            new String[] {
              "completions",
              "{\"model\":\"m\",\"prompt\":[1,2,3],\"max_tokens\":20,\"stream\":true,"
                  + "\"stream_options\":{\"include_usage\":true},\"temperature\":0.0,\"seed\":7}"
            },
            new String[] {
              "completions",
              "{\"prompt\":\"x\",\"min_tokens\":4,\"max_tokens\":16,\"n\":1,\"ignore_eos\":true}"
            },
            new String[] {"chat", chatBody("\"max_completion_tokens\":50,\"stream\":true")},
            new String[] {"chat", chatBody("\"max_tokens\":50,\"logprobs\":true")},
            new String[] {"chat", chatBody("")});
    int n = 0;
    for (String[] c : cases) {
      InferenceRequest.Api api =
          c[0].equals("chat")
              ? InferenceRequest.Api.CHAT_COMPLETIONS
              : InferenceRequest.Api.COMPLETIONS;
      ObjectNode original = (ObjectNode) OpenAiJson.readTree(c[1]);
      Legs legs = exchange(connector(new UUID(n, n)), pd(api, c[1]));
      n++;
      JsonNode prefill = body(legs.prefill());
      JsonNode decode = body(legs.decode());
      // values are compared (an ObjectNode's equals ignores key order): where the client sent
      // neither, kvroute writes "stream" before "max_tokens", the reference's max_tokens comes
      // first; vLLM reads both by name
      assertThat(prefill).as(c[1]).isEqualTo(deviate(reference(original)));
      assertThat(decode).as(c[1]).isEqualTo(original);
      assertThat(fieldOrder(decode)).as(c[1]).isEqualTo(fieldOrder(original));
      assertThat(legs.prefill().getUrl().encodedPath()).isEqualTo(api.path());
      assertThat(legs.decode().getUrl().encodedPath()).isEqualTo(api.path());
      assertThat(legs.header("X-Request-Id").get(0))
          .isEqualTo(
              "___prefill_addr_"
                  + PREFILL_KV
                  + "___decode_addr_"
                  + DECODE_KV
                  + "_"
                  + RequestIds.hex(new UUID(n - 1, n - 1)));
      assertThat(legs.header("Authorization")).containsExactly("Bearer t", "Bearer t");
    }
  }

  @Test
  void theDeviationsChangeNothingOnAPlainRequest() throws Exception {
    // a non-streamed completion without the four fields: kvroute's prefill is the reference's
    // plus "stream": false, which is vLLM's default
    ObjectNode plain =
        (ObjectNode) OpenAiJson.readTree("{\"model\":\"m\",\"prompt\":\"p\",\"max_tokens\":9}");
    ObjectNode ref = reference(plain);
    ref.put("stream", false);
    assertThat(deviate(reference(plain))).isEqualTo(ref);
    assertThat(plain.has("stream")).isFalse();
  }
}
