package io.kvroute.connector.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.contract.KVConnectorContract;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import mockwebserver3.RecordedRequest;
import org.junit.jupiter.api.Test;

/** {@code shared-storage}: the contract, plus llm-d's {@code cache_hit_threshold} decode-first. */
class SharedStorageConnectorTest extends KVConnectorContract {
  private static final String REFUSAL =
      "{\"id\":\"cmpl-r\",\"choices\":[{\"index\":0,\"text\":\"\","
          + "\"finish_reason\":\"cache_threshold\"}]}";
  private static final String ANSWER =
      "{\"id\":\"cmpl-2\",\"choices\":[{\"index\":0,\"text\":\"hello\",\"finish_reason\":\"length\"}]}";

  @Override
  protected String type() {
    return "shared-storage";
  }

  @Override
  protected void checkConnectorPrefill(
      JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    assertThat(prefill.path("cache_hit_threshold").isNumber()).isTrue();
    assertThat(prefill.path("cache_hit_threshold").asDouble()).isZero();
  }

  @Override
  protected void checkConnectorDecode(JsonNode decode, JsonNode original) {
    assertThat(decode.path("cache_hit_threshold").asDouble(-1)).isZero();
  }

  private StreamingResponse proxy(String body) throws Exception {
    return proxied(connector(), pd(body));
  }

  @Test
  void decodeFirstServedByTheDecoderSkipsPrefill() throws Exception {
    decodeServer.enqueue(json(200, ANSWER));
    StreamingResponse r =
        proxy("{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":5,\"cache_hit_threshold\":0.6}");
    assertThat(text(r)).isEqualTo(ANSWER);
    RecordedRequest d = decodeServer.takeRequest(5, TimeUnit.SECONDS);
    assertThat(body(d).get("cache_hit_threshold").asDouble()).isEqualTo(0.6);
    assertThat(body(d).get("max_tokens").asInt()).isEqualTo(5);
    assertThat(prefillServer.getRequestCount()).isZero();
    assertThat(events).containsExactly("decode_first_hit");
    assertThat(transport.openResponses()).isZero();
  }

  @Test
  void refusalFallsBackToPrefillThenDecode() throws Exception {
    decodeServer.enqueue(json(200, REFUSAL));
    decodeServer.enqueue(json(200, ANSWER));
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    StreamingResponse r =
        proxy("{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":5,\"cache_hit_threshold\":0.6}");
    assertThat(text(r)).isEqualTo(ANSWER);

    RecordedRequest first = decodeServer.takeRequest(5, TimeUnit.SECONDS);
    RecordedRequest p = prefillServer.takeRequest(5, TimeUnit.SECONDS);
    RecordedRequest second = decodeServer.takeRequest(5, TimeUnit.SECONDS);
    assertThat(body(first).get("cache_hit_threshold").asDouble()).isEqualTo(0.6);
    assertThat(body(p).get("cache_hit_threshold").asDouble()).isZero();
    assertThat(body(p).get("max_tokens").asInt()).isEqualTo(1);
    assertThat(body(second).get("cache_hit_threshold").asDouble()).isZero();
    assertThat(body(second).get("max_tokens").asInt()).isEqualTo(5);
    assertThat(p.getHeaders().get("X-Request-Id"))
        .isEqualTo(second.getHeaders().get("X-Request-Id"));
    assertThat(events).containsExactly("decode_first_refused");
    assertThat(transport.openResponses()).isZero();
  }

  @Test
  void streamingRefusalIsDiscardedAndTheFallbackStreams() throws Exception {
    decodeServer.enqueue(
        sse(
            List.of(
                "{\"id\":\"r\",\"choices\":[{\"index\":0,\"text\":\"\","
                    + "\"finish_reason\":\"cache_threshold\"}]}"),
            7));
    List<String> chunks = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      chunks.add("{\"choices\":[{\"index\":0,\"text\":\"t" + i + "\"}]}");
    }
    decodeServer.enqueue(sse(chunks, 32));
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    StreamingResponse r =
        proxy("{\"model\":\"m\",\"prompt\":\"hi\",\"stream\":true,\"cache_hit_threshold\":1}");
    String out = text(r);
    assertThat(out).doesNotContain("cache_threshold").contains("t0").contains("t19");
    assertThat(out).endsWith("data: [DONE]\n\n");
    assertThat(prefillServer.getRequestCount()).isEqualTo(1);
    assertThat(decodeServer.getRequestCount()).isEqualTo(2);
    assertThat(transport.openResponses()).isZero();
  }

  @Test
  void streamingAnswerIsReplayedWhole() throws Exception {
    StringBuilder expected = new StringBuilder();
    List<String> chunks = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      String c = "{\"choices\":[{\"index\":0,\"text\":\"w" + i + "\"}]}";
      chunks.add(c);
      expected.append("data: ").append(c).append("\n\n");
    }
    expected.append("data: [DONE]\n\n");
    decodeServer.enqueue(sse(chunks, 5)); // the first event arrives in many pieces
    StreamingResponse r =
        proxy("{\"model\":\"m\",\"prompt\":\"hi\",\"stream\":true,\"cache_hit_threshold\":0.5}");
    assertThat(text(r)).isEqualTo(expected.toString());
    assertThat(prefillServer.getRequestCount()).isZero();
  }

  @Test
  void decoderErrorsAreReturnedWithoutFallback() throws Exception {
    decodeServer.enqueue(json(503, "{\"error\":\"busy\"}"));
    Throwable t = proxyFailure(connector(), pd("{\"prompt\":\"hi\",\"cache_hit_threshold\":0.5}"));
    assertThat(upstream(t).upstreamStatus()).isEqualTo(503);
    assertThat(prefillServer.getRequestCount()).isZero();
  }

  @Test
  void configuredDefaultThresholdAppliesWhenTheClientSendsNone() throws Exception {
    decodeServer.enqueue(json(200, ANSWER));
    StreamingResponse r =
        proxied(
            connector(config().withParams(Map.of("cacheHitThreshold", 0.75))),
            pd("{\"prompt\":\"hi\"}"));
    assertThat(text(r)).isEqualTo(ANSWER);
    assertThat(
            body(decodeServer.takeRequest(5, TimeUnit.SECONDS))
                .get("cache_hit_threshold")
                .asDouble())
        .isEqualTo(0.75);
    assertThat(prefillServer.getRequestCount()).isZero();

    for (Object bad : List.<Object>of(0, 1.5, "x", "0.75")) {
      assertThatThrownBy(() -> connector(config().withParams(Map.of("cacheHitThreshold", bad))))
          .isInstanceOf(ConnectorConfigException.class)
          .hasMessageContaining("kvConnector.config.cacheHitThreshold");
    }
  }

  @Test
  void zeroThresholdOrDecodeOnlyMeansNoDecodeFirst() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    decodeServer.enqueue(json(200, ANSWER));
    assertThat(text(proxy("{\"prompt\":\"hi\",\"cache_hit_threshold\":0}"))).isEqualTo(ANSWER);
    assertThat(prefillServer.getRequestCount()).isEqualTo(1);

    decodeServer.enqueue(json(200, ANSWER));
    StreamingResponse r =
        proxied(
            connector(),
            PdRequest.decodeOnly(
                request(
                    InferenceRequest.Api.COMPLETIONS,
                    "{\"prompt\":\"hi\",\"cache_hit_threshold\":0.9}"),
                decodeEndpoint()));
    assertThat(text(r)).isEqualTo(ANSWER);
    decodeServer.takeRequest(5, TimeUnit.SECONDS);
    JsonNode only = body(decodeServer.takeRequest(5, TimeUnit.SECONDS));
    assertThat(only.get("cache_hit_threshold").asDouble()).isEqualTo(0.9); // as the client sent it
  }

  @Test
  void sseInspection() {
    byte[] partial =
        "data: {\"choices\":[{\"finish_reason\":\"cache_thr".getBytes(StandardCharsets.UTF_8);
    assertThat(SharedStorageConnector.hasCompleteDataEvent(partial)).isFalse();
    assertThat(
            SharedStorageConnector.hasCompleteDataEvent(
                ": comment\n\n".getBytes(StandardCharsets.UTF_8)))
        .isFalse();
    byte[] refusal =
        "data: {\"choices\":[{\"finish_reason\":\"cache_threshold\"}]}\r\n\r\ndata: [DONE]\r\n\r\n"
            .getBytes(StandardCharsets.UTF_8);
    assertThat(SharedStorageConnector.hasCompleteDataEvent(refusal)).isTrue();
    assertThat(SharedStorageConnector.refusedInSse(refusal)).isTrue();
    assertThat(
            SharedStorageConnector.refusedInSse(
                "data: not json\n\ndata: {\"choices\":[{\"text\":\"a\"}]}\n\n"
                    .getBytes(StandardCharsets.UTF_8)))
        .isFalse();
  }
}
