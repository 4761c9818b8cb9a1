package io.kvroute.connector.nixl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.contract.KVConnectorContract;
import io.kvroute.connector.http.OpenAiJson;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import mockwebserver3.MockResponse;
import org.junit.jupiter.api.Test;

/** The {@code fallback} connector (default chain {@code [nixl, http]}) and its fallback rules. */
class FallbackConnectorTest extends KVConnectorContract {

  private final AtomicLong clock = new AtomicLong();

  @Override
  protected String type() {
    return "fallback";
  }

  @Override
  protected MockResponse prefillAnswer(InferenceRequest.Api api) {
    return NixlConnectorTest.answer(NixlConnectorTest.PARAMS, "length");
  }

  /** The default chain's first member, {@code nixl}, serves the contract's requests. */
  @Override
  protected Set<String> transferFields() {
    return Set.of("kv_transfer_params");
  }

  private FallbackConnector chain(Map<String, Object> params) {
    ConnectorListener l =
        new ConnectorListener() {
          @Override
          public void connectorEvent(String connectorType, String event) {
            events.add(connectorType + ":" + event);
          }
        };
    return new FallbackConnector(
        KVConnectorProvider.Context.builder(config().withParams(params), transport, scheduler)
            .listener(l)
            .nanoClock(clock::get)
            .build(),
        KVConnectors.discover(getClass().getClassLoader()));
  }

  private KVConnector.DecodeRequest prepare(KVConnector c) throws Exception {
    return prepared(c, pd("{\"prompt\":\"x\",\"max_tokens\":7}"));
  }

  private JsonNode lastPrefillBody() throws Exception {
    return body(prefillServer.takeRequest(5, TimeUnit.SECONDS));
  }

  @Test
  void nixlPrefillerStaysOnNixl() throws Exception {
    FallbackConnector c = chain(Map.of("chain", List.of("nixl", "http")));
    assertThat(c.chainTypes()).containsExactly("nixl", "http");
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    KVConnector.DecodeRequest d = prepare(c);
    assertThat(d.attributes()).containsEntry("connector", "nixl");
    assertThat(lastPrefillBody().has("kv_transfer_params")).isTrue();
    assertThat(c.rememberedFallbacks()).isZero();
  }

  @Test
  void strictServerRejectingTheFieldIsRetriedWithTheNextMemberAndRemembered() throws Exception {
    FallbackConnector c = chain(Map.of("chain", List.of("nixl", "http")));
    prefillServer.enqueue(
        json(400, "{\"error\":{\"message\":\"unknown field: kv_transfer_params\"}}"));
    prefillServer.enqueue(json(200, "{\"choices\":[{\"finish_reason\":\"length\"}]}"));
    KVConnector.DecodeRequest d = prepare(c);
    assertThat(d.attributes()).containsEntry("connector", "http");
    assertThat(lastPrefillBody().has("kv_transfer_params")).isTrue();
    assertThat(lastPrefillBody().has("kv_transfer_params")).as("http prefill").isFalse();
    assertThat(OpenAiJson.readTree(d.body()).path("max_tokens").asInt()).isEqualTo(7);
    assertThat(events).containsExactly("fallback:fallback");

    // The next request goes to http directly: one prefill call, no NIXL fields.
    prefillServer.enqueue(json(200, "{\"choices\":[{\"finish_reason\":\"length\"}]}"));
    assertThat(prepare(c).attributes()).containsEntry("connector", "http");
    assertThat(lastPrefillBody().has("kv_transfer_params")).isFalse();
    assertThat(prefillServer.getRequestCount()).isEqualTo(3);

    // After the TTL, NIXL is tried again.
    clock.addAndGet(Duration.ofMinutes(5).toNanos());
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    assertThat(prepare(c).attributes()).containsEntry("connector", "nixl");
    assertThat(lastPrefillBody().has("kv_transfer_params")).isTrue();
  }

  @Test
  void lengthCappedPrefillWithoutParamsMarksTheEndpoint() throws Exception {
    FallbackConnector c = chain(Map.of("chain", List.of("nixl", "http")));
    prefillServer.enqueue(NixlConnectorTest.answer(null, "length"));
    KVConnector.DecodeRequest d = prepare(c);
    assertThat(d.attributes())
        .containsEntry("connector", "nixl")
        .containsEntry("kv_transfer_params", "absent");
    assertThat(OpenAiJson.readTree(d.body()).has("kv_transfer_params")).isFalse();
    assertThat(c.rememberedFallbacks()).isEqualTo(1);
    assertThat(events).contains("fallback:fallback", "nixl:prefill_without_kv_transfer_params");
    lastPrefillBody();
    prefillServer.enqueue(json(200, "{\"choices\":[{\"finish_reason\":\"length\"}]}"));
    assertThat(prepare(c).attributes()).containsEntry("connector", "http");
    assertThat(lastPrefillBody().has("kv_transfer_params")).isFalse();
  }

  @Test
  void eosOnTheSingleTokenMarksNothing() throws Exception {
    FallbackConnector c = chain(Map.of("chain", List.of("nixl", "http")));
    prefillServer.enqueue(NixlConnectorTest.answer(null, "stop"));
    prepare(c);
    assertThat(c.rememberedFallbacks()).isZero();
    assertThat(events).doesNotContain("fallback:fallback");
  }

  @Test
  void otherPrefillErrorsAreNotFallbacks() throws Exception {
    FallbackConnector c = chain(Map.of("chain", List.of("nixl", "http")));
    prefillServer.enqueue(json(400, "{\"error\":\"prompt too long\"}"));
    UpstreamException u = upstream(failure(c.prepareDecode(pd(PROMPT_X))));
    assertThat(u.upstreamStatus()).isEqualTo(400);
    assertThat(prefillServer.getRequestCount()).isEqualTo(1);
    assertThat(c.rememberedFallbacks()).isZero();
  }

  @Test
  void memoryIsBounded() throws Exception {
    FallbackConnector c = chain(Map.of("chain", List.of("nixl", "http"), "fallbackMemorySize", 1));
    for (String id : List.of("p1", "p2")) {
      prefillServer.enqueue(NixlConnectorTest.answer(null, "length"));
      prepared(
          c,
          new PdRequest(
              request(InferenceRequest.Api.COMPLETIONS, PROMPT_X),
              prefillEndpoint().withId(id),
              decodeEndpoint()));
    }
    assertThat(c.rememberedFallbacks()).isEqualTo(1);
    assertThat(events).contains("fallback:fallback_memory_evicted");
  }

  @Test
  void invalidChainsAreConfigurationErrors() {
    for (Object bad : List.of(List.of(), "", List.of("nixl", "sglang"), List.of("fallback"))) {
      assertThatThrownBy(() -> chain(Map.of("chain", bad)))
          .as(String.valueOf(bad))
          .isInstanceOf(ConnectorConfigException.class)
          .hasMessageContaining("kvConnector.config.chain");
    }
    assertThatThrownBy(() -> chain(Map.of("chain", List.of("nixl2"))))
        .hasMessageContaining("nixl2");
    assertThatThrownBy(() -> chain(Map.of("fallbackMemorySize", 0)))
        .hasMessageContaining("fallbackMemorySize");
  }

  @Test
  void defaultChainIsNixlThenHttp() {
    assertThat(chain(Map.of()).chainTypes()).containsExactly("nixl", "http");
    ConnectorConfig cfg = config();
    assertThat(cfg.params()).isEmpty();
  }

  /**
   * The block is flat: each member gets the keys it declares, and a key neither {@code fallback}
   * nor a member takes is refused with the closest known one, by the provider's check too.
   */
  @Test
  void membersTakeTheirOwnParametersAndUnknownKeysAreRefused() throws Exception {
    FallbackConnector c =
        chain(Map.of("chain", List.of("nixl", "http"), "remoteHostRewrite", "always"));
    assertThat(c.chainTypes()).containsExactly("nixl", "http");
    assertThatThrownBy(() -> chain(Map.of("remoteHostRewrit", "always")))
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessageStartingWith(
            "kvConnector.config.remoteHostRewrit: unknown fallback parameter \"remoteHostRewrit\";"
                + " did you mean \"remoteHostRewrite\"?");
    assertThatThrownBy(() -> chain(Map.of("remoteHostRewrite", "sometimes")))
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessageStartingWith(
            "kvConnector.config.remoteHostRewrite: must be one of never, localhost, always");
    KVConnectorProvider provider = new FallbackConnector.Provider();
    assertThatThrownBy(
            () -> provider.checkParameters(config().withParams(Map.of("fallbackTl", "1m"))))
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessageContaining("did you mean \"fallbackTtl\"");
    provider.checkParameters(
        config().withParams(Map.of("fallbackTtl", "1m", "remoteHostRewrite", "localhost")));
  }
}
