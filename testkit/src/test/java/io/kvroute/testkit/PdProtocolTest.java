package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.net.http.HttpResponse;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** PD roles per connector family (spec pd-connector-protocols.md §2). */
class PdProtocolTest {

  private static final String PROMPT = "shared system prompt for the pd test ".repeat(12);

  private static SimulatedCluster cluster(KvTransferProtocol p) {
    return SimulatedCluster.builder()
        .prefill(1)
        .decode(1)
        .protocol(p)
        .configure(b -> b.latency(LatencyModel.ZERO))
        .build()
        .start();
  }

  /** What a test does with its cluster's prefill and decode pods. */
  private interface PairTest {
    void run(SimulatedCluster c, VllmSimulator prefill, VllmSimulator decode) throws Exception;
  }

  /**
   * Runs {@code test} on a new one-prefill, one-decode cluster of {@code protocol}, then stops it.
   */
  private static void onPair(KvTransferProtocol protocol, PairTest test) throws Exception {
    try (SimulatedCluster c = cluster(protocol)) {
      test.run(c, c.prefillPods().get(0), c.decodePods().get(0));
    }
  }

  private static ObjectNode body(int maxTokens) {
    ObjectNode n = TestSupport.JSON.createObjectNode();
    n.put("model", "sim-model");
    n.put("prompt", PROMPT);
    n.put("max_tokens", maxTokens);
    return n;
  }

  private static JsonNode post(VllmSimulator s, ObjectNode body) {
    HttpResponse<String> r = TestSupport.post(s, "/v1/completions", body.toString());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return TestSupport.json(r.body());
  }

  private static int cachedTokens(JsonNode response) {
    return response.at("/usage/prompt_tokens_details/cached_tokens").asInt();
  }

  private static int promptTokens() {
    return SimTokenizer.get().encode(PROMPT).length;
  }

  @Test
  void nixlPrefillReturnsParamsAndDecodeTakesTheBlocks() throws Exception {
    onPair(
        KvTransferProtocol.NIXL,
        (c, p, d) -> {
          ObjectNode pre = body(1);
          pre.put("stream", false);
          ObjectNode skel = pre.putObject("kv_transfer_params");
          skel.put("do_remote_decode", true);
          skel.put("do_remote_prefill", false);
          skel.putNull("remote_engine_id");
          skel.putNull("remote_block_ids");
          skel.putNull("remote_host");
          skel.putNull("remote_port");
          JsonNode pr = post(p, pre);
          JsonNode ktp = pr.get("kv_transfer_params");
          assertThat(ktp.get("do_remote_prefill").asBoolean()).isTrue();
          assertThat(ktp.get("do_remote_decode").asBoolean()).isFalse();
          assertThat(ktp.get("remote_engine_id").asText()).isEqualTo(p.engineId());
          assertThat(ktp.get("remote_block_ids").size()).isPositive();
          assertThat(ktp.get("remote_host").asText()).isEqualTo("localhost");
          assertThat(ktp.get("remote_port").asInt()).isEqualTo(5600);
          assertThat(ktp.get("tp_size").asInt()).isEqualTo(1);
          double heldUsage = p.kvCacheUsage();
          assertThat(heldUsage).isPositive(); // blocks kept for the decoder

          ObjectNode dec = body(4);
          dec.set("kv_transfer_params", ktp);
          JsonNode dr = post(d, dec);
          assertThat(cachedTokens(dr)).isEqualTo(promptTokens() - 1);
          assertThat(p.kvCacheUsage()).isZero(); // freed once pulled
          assertThat(d.stats().cachedTokens()).isEqualTo(promptTokens() - 1);
          assertThat(
                  d.requests().get(0).field("kv_transfer_params").get("remote_request_id").asText())
              .isEqualTo(ktp.get("remote_request_id").asText());

          // the same params cannot be pulled twice: default policy FAIL gives 500
          HttpResponse<String> again = TestSupport.post(d, "/v1/completions", dec.toString());
          assertThat(again.statusCode()).isEqualTo(500);
        });
  }

  @Test
  void nixlNoParamsWhenNotLengthCappedAndIncompleteParamsPrefillLocally() throws Exception {
    onPair(
        KvTransferProtocol.NIXL,
        (c, p, d) -> {
          ObjectNode pre = body(1);
          pre.putObject("kv_transfer_params").put("do_remote_decode", true);
          p.faults().stopAfterFirstToken(1);
          JsonNode pr = post(p, pre);
          assertThat(pr.get("kv_transfer_params").isNull()).isTrue();
          assertThat(pr.at("/choices/0/finish_reason").asText()).isEqualTo("stop");
          assertThat(p.kvCacheUsage()).isZero();

          ObjectNode dec = body(2);
          dec.putObject("kv_transfer_params")
              .put("do_remote_prefill", true)
              .put("remote_engine_id", "x");
          JsonNode dr = post(d, dec);
          assertThat(cachedTokens(dr)).isZero();
        });
  }

  @Test
  void nixlRecomputePolicyPrefillsLocallyWhenTheTransferIsGone() {
    try (VllmSimulator d =
        TestSupport.sim()
            .role(SimRole.DECODE)
            .protocol(KvTransferProtocol.NIXL)
            .kvLoadFailurePolicy(VllmSimulator.KvLoadFailurePolicy.RECOMPUTE)
            .build()
            .start()) {
      ObjectNode dec = body(2);
      ObjectNode k = dec.putObject("kv_transfer_params");
      k.put("do_remote_prefill", true);
      k.putArray("remote_block_ids").add(1);
      k.put("remote_engine_id", "unknown-engine");
      k.put("remote_request_id", "r");
      k.put("remote_host", "localhost");
      k.put("remote_port", 5600);
      JsonNode dr = post(d, dec);
      assertThat(cachedTokens(dr)).isZero();
    }
  }

  @Test
  void sharedStorageDecodeLoadsWhatThePrefillSaved() throws Exception {
    onPair(
        KvTransferProtocol.SHARED_STORAGE,
        (c, p, d) -> {
          JsonNode pr = post(p, body(1));
          assertThat(pr.get("kv_transfer_params").isNull()).isTrue();
          assertThat(c.sharedStore().orElseThrow().size()).isPositive();
          JsonNode dr = post(d, body(4));
          int expected = ((promptTokens() - 1) / 16) * 16;
          assertThat(cachedTokens(dr)).isEqualTo(expected);
        });
  }

  @Test
  void mooncakeBootstrapQueryAndConcurrentTransferById() throws Exception {
    onPair(
        KvTransferProtocol.MOONCAKE,
        (c, p, d) -> {
          assertThat(d.bootstrapUrl()).isNull();
          JsonNode q =
              TestSupport.json(
                  TestSupport.HTTP
                      .send(
                          java.net.http.HttpRequest.newBuilder(p.bootstrapUrl().resolve("/query"))
                              .build(),
                          HttpResponse.BodyHandlers.ofString())
                      .body());
          String engineId = q.at("/0/engine_id").asText();
          assertThat(engineId).isEqualTo(p.engineId());

          ObjectNode dec = body(3);
          ObjectNode dk = dec.putObject("kv_transfer_params");
          dk.put("do_remote_decode", false);
          dk.put("do_remote_prefill", true);
          dk.put("remote_bootstrap_addr", p.bootstrapUrl().toString());
          dk.put("remote_engine_id", engineId);
          dk.put("transfer_id", "xfer-1");
          // decode first: it waits for the prefill of the same transfer id
          CompletableFuture<JsonNode> decode = CompletableFuture.supplyAsync(() -> post(d, dec));
          ObjectNode pre = body(1);
          ObjectNode pk = pre.putObject("kv_transfer_params");
          pk.put("do_remote_decode", true);
          pk.put("do_remote_prefill", false);
          pk.put("transfer_id", "xfer-1");
          JsonNode pr = post(p, pre);
          assertThat(pr.get("kv_transfer_params").isNull())
              .isTrue(); // Mooncake prefill returns none
          assertThat(cachedTokens(decode.get())).isEqualTo(promptTokens() - 1);
        });
  }

  @Test
  void sglangDecodeMeetsThePrefillInTheBootstrapRoom() throws Exception {
    onPair(
        KvTransferProtocol.SGLANG,
        (c, p, d) -> {
          ObjectNode both = body(2);
          both.put("bootstrap_host", "127.0.0.1");
          both.put("bootstrap_port", p.bootstrapPort());
          both.put("bootstrap_room", 1234567890123L);
          CompletableFuture<JsonNode> decode = CompletableFuture.supplyAsync(() -> post(d, both));
          ObjectNode pre = both.deepCopy();
          pre.put("max_tokens", 1);
          post(p, pre);
          assertThat(cachedTokens(decode.get())).isEqualTo(promptTokens() - 1);
          assertThat(p.requests().get(0).field("bootstrap_room").asLong())
              .isEqualTo(1234567890123L);
        });
  }

  @Test
  void sglangDecodeWithoutPrefillFailsAfterTheTransferTimeout() {
    try (VllmSimulator d =
        TestSupport.sim()
            .role(SimRole.DECODE)
            .protocol(KvTransferProtocol.SGLANG)
            .transferTimeout(java.time.Duration.ofMillis(50))
            .build()
            .start()) {
      ObjectNode b = body(2);
      b.put("bootstrap_host", "127.0.0.1");
      b.put("bootstrap_port", 1);
      b.put("bootstrap_room", 7);
      assertThat(TestSupport.post(d, "/v1/completions", b.toString()).statusCode()).isEqualTo(500);
    }
  }

  @Test
  void sharedStorageFirstTokenAndCacheHitThreshold() throws Exception {
    onPair(
        KvTransferProtocol.SHARED_STORAGE,
        (c, p, d) -> {
          // llm-d shared-storage: decode first with a threshold; a cold decoder refuses
          ObjectNode first = body(4);
          first.put("cache_hit_threshold", 0.5);
          JsonNode refused = post(d, first);
          assertThat(refused.at("/choices/0/finish_reason").asText()).isEqualTo("cache_threshold");
          assertThat(refused.at("/usage/completion_tokens").asInt()).isZero();
          // LMCache's own proxy: the prefill returns its first token
          ObjectNode pre = body(1);
          pre.putObject("kv_transfer_params").put("ret_first_tok", true);
          JsonNode pr = post(p, pre);
          assertThat(pr.at("/kv_transfer_params/first_tok").isInt()).isTrue();
          // now the store has the prefix: the same threshold passes
          JsonNode ok = post(d, first);
          assertThat(ok.at("/choices/0/finish_reason").asText()).isEqualTo("length");
          assertThat(cachedTokens(ok)).isPositive();
        });
  }
}
