package io.kvroute.connector.sglang;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.contract.KVConnectorContract;
import io.kvroute.connector.http.OpenAiJson;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import mockwebserver3.Dispatcher;
import mockwebserver3.MockResponse;
import mockwebserver3.RecordedRequest;
import org.junit.jupiter.api.Test;

/** The {@code sglang} connector against the contract and SGLang's bootstrap protocol. */
class SglangConnectorTest extends KVConnectorContract {

  @Override
  protected String type() {
    return "sglang";
  }

  @Override
  protected boolean sequential() {
    return false;
  }

  /** The rendezvous, on both legs. */
  private static final Set<String> BOOTSTRAP =
      Set.of("bootstrap_host", "bootstrap_port", "bootstrap_room");

  @Override
  protected Set<String> transferFields() {
    return BOOTSTRAP;
  }

  @Override
  protected void checkConnectorPrefill(
      JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    assertThat(prefill.get("bootstrap_host").asText()).isEqualTo("127.0.0.1");
    assertThat(prefill.get("bootstrap_port").isNull()).isTrue();
    assertThat(prefill.get("bootstrap_room").isIntegralNumber()).isTrue();
  }

  @Override
  protected void checkConnectorDecode(JsonNode decode, JsonNode original) {
    assertThat(decode.get("bootstrap_room").asLong()).isNotNegative();
  }

  private SglangConnector fixedRooms(ConnectorConfig cfg, long firstRoom) {
    AtomicLong next = new AtomicLong(firstRoom);
    return new SglangConnector(
        KVConnectorProvider.Context.builder(cfg, transport, scheduler).build(),
        next::getAndIncrement);
  }

  private String[] run(KVConnector c, String original) throws Exception {
    Legs legs = exchange(c, pd(original));
    List<String> ids = legs.header("X-Request-Id");
    assertThat(ids.get(0)).isEqualTo(ids.get(1));
    return new String[] {legs.prefillBody(), legs.decodeBody()};
  }

  @Test
  void exactBodies() throws Exception {
    long room = Long.MAX_VALUE - 5; // above 2^53: must survive as an exact integer
    String[] legs =
        run(
            fixedRooms(config(), room),
            "{\"model\":\"m\",\"prompt\":\"Hi\",\"max_tokens\":20,\"min_tokens\":2,\"stream\":true,"
                + "\"stream_options\":{\"include_usage\":true},\"bootstrap_room\":1}");
    String bootstrap =
        "\"bootstrap_host\":\"127.0.0.1\",\"bootstrap_port\":null,\"bootstrap_room\":" + room;
    assertThat(legs[1])
        .isEqualTo(
            "{\"model\":\"m\",\"prompt\":\"Hi\",\"max_tokens\":20,\"min_tokens\":2,\"stream\":true,"
                + "\"stream_options\":{\"include_usage\":true},"
                + bootstrap
                + "}");
    assertThat(legs[0])
        .isEqualTo(
            "{\"model\":\"m\",\"prompt\":\"Hi\",\"max_tokens\":1,\"stream\":false,"
                + bootstrap
                + "}");
  }

  @Test
  void roomsAreFreshPerCallAndSharedByBothLegs() throws Exception {
    KVConnector c = connector();
    Set<Long> rooms = new HashSet<>();
    for (int i = 0; i < 3; i++) {
      String[] legs = run(c, PROMPT_X);
      long p = OpenAiJson.readTree(legs[0]).get("bootstrap_room").asLong();
      long d = OpenAiJson.readTree(legs[1]).get("bootstrap_room").asLong();
      assertThat(p).isEqualTo(d).isNotNegative();
      rooms.add(p);
    }
    assertThat(rooms).hasSize(3);
  }

  @Test
  void batchPromptsGetPerItemLists() throws Exception {
    String[] legs =
        run(
            fixedRooms(config().withParams(Map.of("bootstrapPort", 8998)), 7),
            "{\"prompt\":[\"a\",\"b\"]}");
    assertThat(legs[1])
        .isEqualTo(
            "{\"prompt\":[\"a\",\"b\"],\"bootstrap_host\":[\"127.0.0.1\",\"127.0.0.1\"],"
                + "\"bootstrap_port\":[8998,8998],\"bootstrap_room\":[7,8]}");
    String[] tokens = run(fixedRooms(config(), 1), "{\"prompt\":[1,2,3]}");
    assertThat(OpenAiJson.readTree(tokens[1]).get("bootstrap_room").isNumber()).isTrue();
  }

  @Test
  void labelPortAndIpv6Host() throws Exception {
    Endpoint v6 =
        Endpoint.builder("p6", "::1", prefillServer.getPort())
            .role(Endpoint.Role.PREFILL)
            .labels(Map.of(SglangConnector.BOOTSTRAP_PORT_LABEL, "9100"))
            .build();
    KVConnector.DecodeRequest d =
        prepared(
            fixedRooms(config().withParams(Map.of("bootstrapPort", 8998)), 3),
            new PdRequest(
                request(InferenceRequest.Api.COMPLETIONS, PROMPT_X), v6, decodeEndpoint()));
    assertThat(new String(d.body(), StandardCharsets.UTF_8))
        .isEqualTo(
            "{\"prompt\":\"x\",\"bootstrap_host\":\"[::1]\",\"bootstrap_port\":9100,"
                + "\"bootstrap_room\":3}");
    assertThat(d.attributes()).containsEntry("bootstrap_room", "3");
    assertThatThrownBy(() -> connector(config().withParams(Map.of("bootstrapPort", 0))))
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessageContaining("bootstrapPort");
  }

  @Test
  void decodeFailureCancelsThePrefill() throws Exception {
    prefillServer.enqueue(stalled());
    decodeServer.enqueue(json(503, "{\"error\":\"busy\"}"));
    assertThat(upstream(proxyFailure(connector(), pd(PROMPT_X))).leg())
        .isEqualTo(io.kvroute.connector.Leg.DECODE);
    await("prefill call cancelled", () -> transport.callsAwaitingHead() == 0);
  }

  @Test
  void aRetryOnAnotherPairGetsANewRoom() throws Exception {
    try (mockwebserver3.MockWebServer failing = new mockwebserver3.MockWebServer()) {
      failing.enqueue(json(503, "{\"error\":\"busy\"}"));
      failing.start();
      prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
      decodeServer.setDispatcher(
          new Dispatcher() {
            @Override
            public MockResponse dispatch(RecordedRequest r) {
              return json(200, "{\"ok\":true}");
            }
          });
      Endpoint p1 =
          Endpoint.builder("p1", "127.0.0.1", failing.getPort())
              .role(Endpoint.Role.PREFILL)
              .build();
      StreamingResponse r =
          io.kvroute.pd.PdOrchestrator.builder(connector(), scheduler)
              .retryBudget(io.kvroute.pd.RetryBudget.unlimited())
              .retry(
                  new ConnectorConfig.Retry(
                      3, java.time.Duration.ofMillis(1), java.time.Duration.ofMillis(10)))
              .build()
              .execute(
                  request(InferenceRequest.Api.COMPLETIONS, PROMPT_X),
                  List.of(
                      new io.kvroute.pd.PdOrchestrator.Pair(p1, decodeEndpoint()),
                      new io.kvroute.pd.PdOrchestrator.Pair(prefillEndpoint(), decodeEndpoint())))
              .get(30, TimeUnit.SECONDS);
      assertThat(text(r)).contains("ok");
      long first = body(failing.takeRequest(5, TimeUnit.SECONDS)).get("bootstrap_room").asLong();
      long second =
          body(prefillServer.takeRequest(5, TimeUnit.SECONDS)).get("bootstrap_room").asLong();
      assertThat(second).isNotEqualTo(first);
      Set<Long> decodeRooms = new HashSet<>();
      for (RecordedRequest d = decodeServer.takeRequest(1, TimeUnit.SECONDS);
          d != null;
          d = decodeServer.takeRequest(100, TimeUnit.MILLISECONDS)) {
        decodeRooms.add(body(d).get("bootstrap_room").asLong());
      }
      assertThat(decodeRooms).contains(second);
    }
  }
}
