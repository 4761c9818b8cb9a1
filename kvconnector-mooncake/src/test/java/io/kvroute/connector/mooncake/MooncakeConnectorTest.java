package io.kvroute.connector.mooncake;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.Leg;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.contract.KVConnectorContract;
import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import mockwebserver3.Dispatcher;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.RecordedRequest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The {@code mooncake} connector against the contract and vLLM's reference Mooncake proxy. */
class MooncakeConnectorTest extends KVConnectorContract {

  /** The prefiller's Mooncake bootstrap server. */
  private MockWebServer bootstrap;

  private final AtomicInteger queries = new AtomicInteger();
  private final AtomicReference<String> queryAnswer =
      new AtomicReference<>("{\"0\":{\"engine_id\":\"eng-0\"},\"1\":{\"engine_id\":\"eng-1\"}}");

  @BeforeEach
  void startBootstrap() throws IOException {
    bootstrap = new MockWebServer();
    bootstrap.setDispatcher(
        new Dispatcher() {
          @Override
          public MockResponse dispatch(RecordedRequest r) {
            if (!"GET".equals(r.getMethod()) || !"/query".equals(r.getUrl().encodedPath())) {
              return json(404, "{}");
            }
            queries.incrementAndGet();
            return json(200, queryAnswer.get());
          }
        });
    bootstrap.start();
  }

  @AfterEach
  void stopBootstrap() {
    bootstrap.close();
  }

  @Override
  protected String type() {
    return "mooncake";
  }

  @Override
  protected boolean sequential() {
    return false;
  }

  @Override
  protected Set<String> transferFields() {
    return Set.of("kv_transfer_params");
  }

  @Override
  protected ConnectorConfig config() {
    return super.config().withParams(Map.of("bootstrapPort", bootstrap.getPort()));
  }

  @Override
  protected void checkConnectorPrefill(
      JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    JsonNode p = prefill.get("kv_transfer_params");
    assertThat(p.get("do_remote_decode").asBoolean()).isTrue();
    assertThat(p.get("do_remote_prefill").asBoolean()).isFalse();
    assertThat(p.get("transfer_id").asText()).startsWith("xfer-");
  }

  @Override
  protected void checkConnectorDecode(JsonNode decode, JsonNode original) {
    JsonNode p = decode.get("kv_transfer_params");
    assertThat(p.get("do_remote_prefill").asBoolean()).isTrue();
    assertThat(p.get("remote_bootstrap_addr").asText())
        .isEqualTo("http://127.0.0.1:" + bootstrap.getPort());
    assertThat(p.get("remote_engine_id").asText()).startsWith("eng-");
  }

  private MooncakeConnector fixedIds(ConnectorConfig cfg, String... ids) {
    AtomicInteger n = new AtomicInteger();
    return new MooncakeConnector(
        KVConnectorProvider.Context.builder(cfg, transport, scheduler).build(),
        () -> ids[n.getAndIncrement() % ids.length]);
  }

  /*
   * mooncake_connector_proxy.py@41c5903 builds the prefill as a copy with kv_transfer_params
   * {do_remote_decode, do_remote_prefill, transfer_id} appended, stream=false and max_tokens=1 (in
   * place or appended), max_completion_tokens=1 only if present, stream_options deleted; the
   * decode as the original with kv_transfer_params {do_remote_decode:false,
   * do_remote_prefill:true, remote_bootstrap_addr, remote_engine_id, transfer_id} appended. It
   * leaves min_tokens on the prefill, which vLLM rejects with max_tokens=1; kvroute removes it.
   */
  @Test
  void bodiesAndHeadersEqualTheReferenceProxy() throws Exception {
    String original =
        "{\"model\":\"m\",\"prompt\":\"Hi\",\"stream\":true,\"stream_options\":"
            + "{\"include_usage\":true},\"max_tokens\":20,\"min_tokens\":2}";
    Legs legs = exchange(fixedIds(config(), "xfer-abc"), pd(original));
    assertThat(legs.prefillBody())
        .isEqualTo(
            "{\"model\":\"m\",\"prompt\":\"Hi\",\"stream\":false,\"max_tokens\":1,"
                + "\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false,"
                + "\"transfer_id\":\"xfer-abc\"}}");
    assertThat(legs.decodeBody())
        .isEqualTo(
            "{\"model\":\"m\",\"prompt\":\"Hi\",\"stream\":true,\"stream_options\":"
                + "{\"include_usage\":true},\"max_tokens\":20,\"min_tokens\":2,"
                + "\"kv_transfer_params\":{\"do_remote_decode\":false,\"do_remote_prefill\":true,"
                + "\"remote_bootstrap_addr\":\"http://127.0.0.1:"
                + bootstrap.getPort()
                + "\",\"remote_engine_id\":\"eng-0\",\"transfer_id\":\"xfer-abc\"}}");
    assertThat(legs.header("X-data-parallel-rank")).containsExactly("0", null);
    assertThat(legs.header("X-Request-Id")).containsExactly("req-1", "req-1");
  }

  @Test
  void eachCallGetsAFreshTransferIdAndRanksRotate() throws Exception {
    KVConnector c = connector();
    String[] ids = new String[2];
    String[] engines = new String[2];
    for (int i = 0; i < 2; i++) {
      Legs legs = exchange(c, pd(PROMPT_X));
      JsonNode p = body(legs.prefill()).get("kv_transfer_params");
      JsonNode d = body(legs.decode()).get("kv_transfer_params");
      assertThat(d.get("transfer_id")).isEqualTo(p.get("transfer_id"));
      ids[i] = p.get("transfer_id").asText();
      engines[i] = d.get("remote_engine_id").asText();
    }
    assertThat(ids[0]).isNotEqualTo(ids[1]);
    assertThat(engines).containsExactlyInAnyOrder("eng-0", "eng-1");
    assertThat(queries.get()).as("bootstrap answer cached").isEqualTo(1);
  }

  @Test
  void dpRankLabelPinsTheRank() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    Map<String, String> labels = new HashMap<>();
    labels.put(MooncakeConnector.DP_RANK_LABEL, "1");
    KVConnector.DecodeRequest d =
        prepared(
            connector(),
            new PdRequest(
                request(InferenceRequest.Api.COMPLETIONS, PROMPT_X),
                prefillEndpoint().withLabels(labels),
                decodeEndpoint()));
    assertThat(body(prefillServer.takeRequest(5, TimeUnit.SECONDS)).has("kv_transfer_params"))
        .isTrue();
    assertThat(
            io.kvroute.connector.http.OpenAiJson.readTree(d.body())
                .at("/kv_transfer_params/remote_engine_id")
                .asText())
        .isEqualTo("eng-1");
    assertThat(d.attributes()).containsEntry("dp_rank", "1");
  }

  @Test
  void bootstrapFailureIsARetryablePrefillError() throws Exception {
    queryAnswer.set("[]");
    UpstreamException u = upstream(proxyFailure(connector(), pd(PROMPT_X)));
    assertThat(u.leg()).isEqualTo(Leg.PREFILL);
    assertThat(u.kind()).isEqualTo(UpstreamException.Kind.PROTOCOL);
    assertThat(u.retryable()).isTrue();
    assertThat(u.getMessage()).contains("/query").contains("mooncake-store");
    assertThat(prefillServer.getRequestCount()).isZero();
    assertThat(decodeServer.getRequestCount()).isZero();

    bootstrap.close();
    assertThat(upstream(proxyFailure(connector(), pd(PROMPT_X))).kind())
        .isEqualTo(UpstreamException.Kind.IO);
  }

  @Test
  void prefillFailureDropsTheCachedBootstrap() throws Exception {
    MooncakeConnector c = fixedIds(config(), "xfer-1", "xfer-2");
    prefillServer.enqueue(json(503, "{}"));
    decodeServer.enqueue(json(200, "{}"));
    assertThat(upstream(proxyFailure(c, pd(PROMPT_X))).leg()).isEqualTo(Leg.PREFILL);
    assertThat(c.cachedBootstraps()).isZero();
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    decodeServer.enqueue(json(200, "{}"));
    text(proxied(c, pd(PROMPT_X)));
    assertThat(queries.get()).isEqualTo(2);
    assertThat(c.cachedBootstraps()).isEqualTo(1);
  }

  @Test
  void ipv6PrefillHostIsBracketedInTheBootstrapAddress() throws Exception {
    Endpoint v6 = Endpoint.builder("p6", "::1", 1).role(Endpoint.Role.PREFILL).build();
    // No server listens on [::1]:<bootstrap port>, so the query fails; its message shows the URL.
    Throwable t =
        proxyFailure(
            connector(config().withParams(Map.of("bootstrapPort", 1, "bootstrapTimeout", "2s"))),
            new PdRequest(
                request(InferenceRequest.Api.COMPLETIONS, PROMPT_X), v6, decodeEndpoint()));
    assertThat(t.getMessage()).contains("http://[::1]:1/query");
  }
}
