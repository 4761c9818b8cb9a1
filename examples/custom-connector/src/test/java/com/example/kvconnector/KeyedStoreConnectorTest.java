package com.example.kvconnector;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.contract.KVConnectorContract;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The connector contract (streaming, cancellation, timeouts, bad bodies, error mapping, unknown
 * parameters, against real HTTP pods), plus what is particular to {@code keyed-store}.
 */
class KeyedStoreConnectorTest extends KVConnectorContract {

  @Override
  protected String type() {
    return KeyedStoreConnector.TYPE;
  }

  /** Both legs carry {@code kv_transfer_params}, and no other transfer field. */
  @Override
  protected Set<String> transferFields() {
    return Set.of("kv_transfer_params");
  }

  @Override
  protected void checkConnectorPrefill(
      JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    assertThat(prefill.at("/kv_transfer_params/action").asText()).isEqualTo("put");
  }

  @Override
  protected void checkConnectorDecode(JsonNode decode, JsonNode original) {
    assertThat(decode.at("/kv_transfer_params/action").asText()).isEqualTo("get");
  }

  @Test
  void bothLegsNameTheSameKeyWithTheConfiguredPrefix() throws Exception {
    Legs legs =
        exchange(connector(config().withParams(Map.of("keyPrefix", "tenant-a/"))), pd(PROMPT_X));
    String put = body(legs.prefill()).at("/kv_transfer_params/store_key").asText();
    String get = body(legs.decode()).at("/kv_transfer_params/store_key").asText();
    assertThat(put).startsWith("tenant-a/").isEqualTo(get);
  }

  @Test
  void aBlankPrefixIsRefusedByName() {
    assertThatThrownBy(() -> connector(config().withParams(Map.of("keyPrefix", " "))))
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessage("kvConnector.config.keyPrefix: must not be blank");
  }
}
