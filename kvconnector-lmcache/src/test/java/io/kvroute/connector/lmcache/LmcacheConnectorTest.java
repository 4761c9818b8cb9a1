package io.kvroute.connector.lmcache;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.http.KVConnectorContract;
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
}
