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
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.contract.KVConnectorContract;
import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
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
  protected ConnectorConfig config() {
    return super.config().withParams(Map.of("bootstrapPort", bootstrap.getPort()));
  }

  @Override
  protected void checkPrefillBody(JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    super.checkPrefillBody(prefill, original, api);
    JsonNode p = prefill.get("kv_transfer_params");
    assertThat(p.get("do_remote_decode").asBoolean()).isTrue();
    assertThat(p.get("do_remote_prefill").asBoolean()).isFalse();
    assertThat(p.get("transfer_id").asText()).startsWith("xfer-");
  }

  @Override
  protected void checkDecodeBody(JsonNode decode, JsonNode original) {
    super.checkDecodeBody(decode, original);
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

  private PdRequest pd(String body) {
    return new PdRequest(
        request(InferenceRequest.Api.COMPLETIONS, body), prefillEndpoint(), decodeEndpoint());
  }

  private static void drain(StreamingResponse r) throws Exception {
    r.readAll(1 << 20).get(30, TimeUnit.SECONDS);
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
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    decodeServer.enqueue(json(200, "{}"));
    String original =
        "{\"model\":\"m\",\"prompt\":\"Hi\",\"stream\":true,\"stream_options\":"
            + "{\"include_usage\":true},\"max_tokens\":20,\"min_tokens\":2}";
    drain(fixedIds(config(), "xfer-abc").proxy(pd(original)).get(30, TimeUnit.SECONDS));
    RecordedRequest p = prefillServer.takeRequest(5, TimeUnit.SECONDS);
    RecordedRequest d = decodeServer.takeRequest(5, TimeUnit.SECONDS);
    assertThat(p.getBody().utf8())
        .isEqualTo(
            "{\"model\":\"m\",\"prompt\":\"Hi\",\"stream\":false,\"max_tokens\":1,"
                + "\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false,"
                + "\"transfer_id\":\"xfer-abc\"}}");
    assertThat(d.getBody().utf8())
        .isEqualTo(
            "{\"model\":\"m\",\"prompt\":\"Hi\",\"stream\":true,\"stream_options\":"
                + "{\"include_usage\":true},\"max_tokens\":20,\"min_tokens\":2,"
                + "\"kv_transfer_params\":{\"do_remote_decode\":false,\"do_remote_prefill\":true,"
                + "\"remote_bootstrap_addr\":\"http://127.0.0.1:"
                + bootstrap.getPort()
                + "\",\"remote_engine_id\":\"eng-0\",\"transfer_id\":\"xfer-abc\"}}");
    assertThat(p.getHeaders().get("X-data-parallel-rank")).isEqualTo("0");
    assertThat(d.getHeaders().get("X-data-parallel-rank")).isNull();
    assertThat(p.getHeaders().get("X-Request-Id")).isEqualTo("req-1");
    assertThat(d.getHeaders().get("X-Request-Id")).isEqualTo("req-1");
  }

  @Test
  void bothLegsAreInFlightTogether() throws Exception {
    CountDownLatch decodeArrived = new CountDownLatch(1);
    decodeServer.setDispatcher(
        new Dispatcher() {
          @Override
          public MockResponse dispatch(RecordedRequest r) {
            decodeArrived.countDown();
            return json(200, "{\"ok\":true}");
          }
        });
    prefillServer.setDispatcher(
        new Dispatcher() {
          @Override
          public MockResponse dispatch(RecordedRequest r) throws InterruptedException {
            // The prefill answers only once decode has arrived: a sequential connector fails here.
            return decodeArrived.await(10, TimeUnit.SECONDS)
                ? json(200, "{\"choices\":[]}")
                : json(500, "{\"error\":\"decode never came\"}");
          }
        });
    StreamingResponse r = connector().proxy(pd("{\"prompt\":\"x\"}")).get(30, TimeUnit.SECONDS);
    assertThat(new String(r.readAll(1 << 16).get(30, TimeUnit.SECONDS))).contains("ok");
  }

  @Test
  void eachCallGetsAFreshTransferIdAndRanksRotate() throws Exception {
    KVConnector c = connector();
    String[] ids = new String[2];
    String[] engines = new String[2];
    for (int i = 0; i < 2; i++) {
      prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
      decodeServer.enqueue(json(200, "{}"));
      drain(c.proxy(pd("{\"prompt\":\"x\"}")).get(30, TimeUnit.SECONDS));
      JsonNode p = body(prefillServer.takeRequest(5, TimeUnit.SECONDS)).get("kv_transfer_params");
      JsonNode d = body(decodeServer.takeRequest(5, TimeUnit.SECONDS)).get("kv_transfer_params");
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
        connector()
            .prepareDecode(
                new PdRequest(
                    request(InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\"}"),
                    prefillEndpoint().withLabels(labels),
                    decodeEndpoint()))
            .get(30, TimeUnit.SECONDS);
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
    Throwable t = failure(connector().proxy(pd("{\"prompt\":\"x\"}")));
    assertThat(t).isInstanceOf(UpstreamException.class);
    UpstreamException u = (UpstreamException) t;
    assertThat(u.leg()).isEqualTo(Leg.PREFILL);
    assertThat(u.kind()).isEqualTo(UpstreamException.Kind.PROTOCOL);
    assertThat(u.retryable()).isTrue();
    assertThat(u.getMessage()).contains("/query").contains("mooncake-store");
    assertThat(prefillServer.getRequestCount()).isZero();
    assertThat(decodeServer.getRequestCount()).isZero();

    bootstrap.close();
    Throwable down = failure(connector().proxy(pd("{\"prompt\":\"x\"}")));
    assertThat(((UpstreamException) down).kind()).isEqualTo(UpstreamException.Kind.IO);
  }

  @Test
  void prefillFailureDropsTheCachedBootstrap() throws Exception {
    MooncakeConnector c = fixedIds(config(), "xfer-1", "xfer-2");
    prefillServer.enqueue(json(503, "{}"));
    decodeServer.enqueue(json(200, "{}"));
    Throwable t = failure(c.proxy(pd("{\"prompt\":\"x\"}")));
    assertThat(((UpstreamException) t).leg()).isEqualTo(Leg.PREFILL);
    assertThat(c.cachedBootstraps()).isZero();
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    decodeServer.enqueue(json(200, "{}"));
    drain(c.proxy(pd("{\"prompt\":\"x\"}")).get(30, TimeUnit.SECONDS));
    assertThat(queries.get()).isEqualTo(2);
    assertThat(c.cachedBootstraps()).isEqualTo(1);
  }

  @Test
  void ipv6PrefillHostIsBracketedInTheBootstrapAddress() throws Exception {
    Endpoint v6 = Endpoint.builder("p6", "::1", 1).role(Endpoint.Role.PREFILL).build();
    // No server listens on [::1]:<bootstrap port>, so the query fails; its message shows the URL.
    Throwable t =
        failure(
            connector(config().withParams(Map.of("bootstrapPort", 1, "bootstrapTimeout", "2s")))
                .proxy(
                    new PdRequest(
                        request(InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\"}"),
                        v6,
                        decodeEndpoint())));
    assertThat(t.getMessage()).contains("http://[::1]:1/query");
  }
}
