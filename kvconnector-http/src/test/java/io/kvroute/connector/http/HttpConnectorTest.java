package io.kvroute.connector.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.contract.KVConnectorContract;

/** The {@code http} connector against the contract, plus its own prefill body rules. */
class HttpConnectorTest extends KVConnectorContract {

  @Override
  protected String type() {
    return "http";
  }

  @Override
  protected void checkPrefillBody(JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    super.checkPrefillBody(prefill, original, api);
    assertThat(prefill.has("min_completion_tokens")).isFalse();
    assertThat(prefill.has("kv_transfer_params")).isFalse();
    if (api == InferenceRequest.Api.CHAT_COMPLETIONS) {
      assertThat(prefill.path("max_completion_tokens").asInt()).isEqualTo(1);
    }
  }
}
