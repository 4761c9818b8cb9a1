package io.kvroute.connector.mooncake;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.contract.KVConnectorContract;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The {@code mooncake-store} connector: the plain two-step flow, no rendezvous fields. */
class MooncakeStoreConnectorTest extends KVConnectorContract {

  @Override
  protected String type() {
    return "mooncake-store";
  }

  @Test
  void decodeGetsTheOriginalBodyWithoutTransferFields() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    String original = "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":8,\"stream\":true}";
    KVConnector.DecodeRequest d = prepared(connector(), pd(original));
    assertThat(new String(d.body(), StandardCharsets.UTF_8)).isEqualTo(original);
    assertThat(prefillServer.takeRequest(5, TimeUnit.SECONDS).getBody().utf8())
        .isEqualTo("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":1,\"stream\":false}");
  }
}
