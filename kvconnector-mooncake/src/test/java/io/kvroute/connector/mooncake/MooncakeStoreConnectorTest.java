package io.kvroute.connector.mooncake;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.contract.KVConnectorContract;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The {@code mooncake-store} connector: the plain two-step flow, no rendezvous fields. */
class MooncakeStoreConnectorTest extends KVConnectorContract {

  @Override
  protected String type() {
    return "mooncake-store";
  }

  @Override
  protected void checkPrefillBody(JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    super.checkPrefillBody(prefill, original, api);
    assertThat(prefill.has("kv_transfer_params")).isFalse();
  }

  @Test
  void decodeGetsTheOriginalBodyWithoutTransferFields() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    String original = "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":8,\"stream\":true}";
    KVConnector.DecodeRequest d =
        connector()
            .prepareDecode(
                new PdRequest(
                    request(InferenceRequest.Api.COMPLETIONS, original),
                    prefillEndpoint(),
                    decodeEndpoint()))
            .get(30, TimeUnit.SECONDS);
    assertThat(new String(d.body(), java.nio.charset.StandardCharsets.UTF_8)).isEqualTo(original);
    assertThat(prefillServer.takeRequest(5, TimeUnit.SECONDS).getBody().utf8())
        .isEqualTo("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":1,\"stream\":false}");
  }
}
