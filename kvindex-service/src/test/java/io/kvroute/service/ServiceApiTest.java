package io.kvroute.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.service.ServiceConfig.PodSpec;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The HTTP API over an index fed directly (no ZMQ): shapes, scores, errors, client. */
class ServiceApiTest {
  static final ObjectMapper JSON = new ObjectMapper();
  static final HttpClient HTTP = HttpClient.newHttpClient();

  final AtomicLong nanos = new AtomicLong(1_000_000_000L);
  KvIndexService service;
  KvIndexClient client;

  static int[] tokens(int n, int salt) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = 1000 + i * 7 + salt;
    }
    return t;
  }

  static long[] engineHashes(int blocks, long base) {
    long[] h = new long[blocks];
    for (int i = 0; i < blocks; i++) {
      h[i] = base + i;
    }
    return h;
  }

  ServiceConfig.Builder baseConfig() {
    return ServiceConfig.builder()
        .model("test-model")
        .port(0)
        .threads(2)
        .maxBodyBytes(64 << 10)
        .maxTokens(4096)
        .readyTimeout(Duration.ofSeconds(5))
        .pod(
            new PodSpec(
                "pod-a",
                "tcp://127.0.0.1:1",
                java.util.Optional.empty(),
                java.util.Optional.empty(),
                100))
        .pod(PodSpec.of("pod-b", "tcp://127.0.0.1:2"))
        .pod(PodSpec.of("pod-c", "tcp://127.0.0.1:3"));
  }

  void start(ServiceConfig config) {
    service = KvIndexService.builder(config).nanoClock(nanos::get).withoutEventFeed().start();
    client = KvIndexClient.builder(service.baseUri()).timeout(Duration.ofSeconds(5)).build();
  }

  @BeforeEach
  void setUp() {
    start(baseConfig().build());
  }

  @AfterEach
  void tearDown() {
    if (service != null) {
      service.close();
    }
  }

  /** Stores the first {@code blocks} 16-token blocks of {@code prompt} on {@code pod}. */
  static void store(BlockIndex index, String pod, int[] prompt, int blocks, String medium) {
    int[] t = java.util.Arrays.copyOf(prompt, blocks * 16);
    index.blockStored(
        pod, engineHashes(blocks, 0x1000L * pod.hashCode()), false, 0, t, 16, null, medium, 0);
  }

  HttpResponse<String> post(String path, String body) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(service.baseUri().resolve(path))
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .header("Content-Type", "application/json")
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  HttpResponse<String> get(String path) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(service.baseUri().resolve(path)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void scoresPodsByLongestCachedPrefix() {
    int[] prompt = tokens(64 + 5, 0); // 4 full blocks
    store(service.index(), "pod-a", prompt, 4, "GPU");
    store(service.index(), "pod-b", prompt, 2, "GPU");

    ScoreResponse r = client.score(ScoreRequest.builder().tokenIds(prompt).build());

    assertThat(r.scores().keySet()).containsExactly("pod-a", "pod-b", "pod-c");
    assertThat(r.scores().get("pod-a"))
        .isEqualTo(new ScoreResponse.PodScore(1.0, 4, 4, 100.0, java.util.Map.of("GPU", 4)));
    assertThat(r.scores().get("pod-b"))
        .isEqualTo(new ScoreResponse.PodScore(0.5, 2, 4, 50.0, java.util.Map.of("GPU", 2)));
    assertThat(r.scores().get("pod-c"))
        .isEqualTo(new ScoreResponse.PodScore(0.0, 0, 4, 0.0, java.util.Map.of()));
    assertThat(r.best()).contains("pod-a");
    assertThat(r.blocksTotal()).isEqualTo(4);
    assertThat(r.blockSize()).isEqualTo(16);
  }

  @Test
  void blockKeysWinOverTokensAndCandidatesAreRespected() throws Exception {
    int[] prompt = tokens(48, 0);
    int[] other = tokens(48, 99);
    store(service.index(), "pod-b", prompt, 3, "GPU");
    long[] keys = service.index().requestKeys(prompt, (String) null);
    assertThat(keys).hasSize(3);

    ScoreResponse r =
        client.score(
            ScoreRequest.builder()
                .promptBlocks(keys)
                .tokenIds(other)
                .candidatePods(List.of("pod-c", "pod-b", "not-configured"))
                .build());
    assertThat(r.scores().keySet()).containsExactly("pod-c", "pod-b", "not-configured");
    assertThat(r.scores().get("pod-b").score()).isEqualTo(100.0);
    assertThat(r.best()).contains("pod-b");

    // Block keys as unsigned decimal numbers are accepted too (the prompt text is ignored).
    StringBuilder nums = new StringBuilder();
    for (long k : keys) {
      nums.append(nums.length() == 0 ? "" : ",").append(Long.toUnsignedString(k));
    }
    HttpResponse<String> resp =
        post("/api/v1/score", "{\"prompt\":\"hi\",\"prompt_blocks\":[" + nums + "]}");
    assertThat(resp.statusCode()).isEqualTo(200);
    assertThat(JSON.readTree(resp.body()).at("/scores/pod-b/blocks_present").asInt()).isEqualTo(3);
  }

  @Test
  void cpuBlocksScoreLessThanGpuBlocks() {
    int[] prompt = tokens(32, 0);
    store(service.index(), "pod-a", prompt, 2, "CPU");
    store(service.index(), "pod-b", prompt, 2, "GPU");
    ScoreResponse r = client.score(ScoreRequest.builder().tokenIds(prompt).build());
    assertThat(r.scores().get("pod-a").score()).isEqualTo(80.0);
    assertThat(r.scores().get("pod-a").cacheHitRate()).isEqualTo(1.0);
    assertThat(r.scores().get("pod-a").blocksByTier()).containsEntry("CPU", 2);
    assertThat(r.best()).contains("pod-b");
  }

  /**
   * What the service knows of the reuse split, summed over its score queries: the longest prefix
   * any candidate held, what the recommendation held, and the queries nothing was available to;
   * never what an engine delivered.
   */
  @Test
  void reuseCountsAvailableAndRecommendedBlocksOfEveryScoreQuery() throws Exception {
    int[] prompt = tokens(96 + 3, 0); // 6 full blocks
    store(service.index(), "pod-a", prompt, 5, "GPU"); // score 5
    store(service.index(), "pod-b", prompt, 6, "CPU"); // score 4.8: longer, but on CPU
    ScoreResponse r = client.score(ScoreRequest.builder().tokenIds(prompt).build());
    assertThat(r.best()).contains("pod-a");
    client.score(ScoreRequest.builder().tokenIds(tokens(40, 9)).build()); // 2 blocks, held nowhere
    client.score(ScoreRequest.builder().tokenIds(prompt).candidatePods(List.of("pod-c")).build());

    HttpResponse<String> resp = get("/api/v1/reuse");
    assertThat(resp.statusCode()).isEqualTo(200);
    JsonNode j = JSON.readTree(resp.body());
    assertThat(j.get("queries").asLong()).isEqualTo(3);
    assertThat(j.get("block_size").asInt()).isEqualTo(16);
    assertThat(j.get("prompt_blocks").asLong()).isEqualTo(14);
    assertThat(j.get("available_blocks").asLong()).isEqualTo(6); // pod-b, first query only
    assertThat(j.get("recommended_blocks").asLong()).isEqualTo(5); // pod-a
    assertThat(j.get("delivered_blocks").isNull()).isTrue();
    assertThat(j.at("/misses/none_available").asLong()).isEqualTo(2);
    assertThat(j.at("/misses/below_available").asLong()).isEqualTo(1);
    assertThat(get("/metrics").body())
        .contains("kvroute_service_reuse_queries_total 3.0")
        .contains("kvroute_service_reuse_blocks_total{split=\"available\"} 6.0")
        .contains("kvroute_service_reuse_misses_total{cause=\"below_available\"} 1.0");
    assertThat(post("/api/v1/reuse", "{}").statusCode()).isEqualTo(405);
  }

  @Test
  void loraNamesRootTheirOwnKeys() {
    int[] prompt = tokens(32, 0);
    service
        .index()
        .blockStored("pod-a", engineHashes(2, 77), false, 0, prompt, 16, "sql-lora", "GPU", 0);
    ScoreResponse base = client.score(ScoreRequest.builder().tokenIds(prompt).build());
    assertThat(base.best()).isEmpty();
    ScoreResponse lora =
        client.score(ScoreRequest.builder().tokenIds(prompt).lora("sql-lora").build());
    assertThat(lora.best()).contains("pod-a");
    ScoreResponse byModel =
        client.score(ScoreRequest.builder().tokenIds(prompt).model("sql-lora").build());
    assertThat(byModel.best()).contains("pod-a");
    ScoreResponse byBaseModel =
        client.score(ScoreRequest.builder().tokenIds(prompt).model("test-model").build());
    assertThat(byBaseModel.best()).isEmpty();
  }

  @Test
  void handlersCanRunOnTheDispatcherThread() throws Exception {
    service.close();
    start(baseConfig().threads(0).build());
    int[] prompt = tokens(32, 0);
    store(service.index(), "pod-c", prompt, 2, "GPU");
    assertThat(client.score(ScoreRequest.builder().tokenIds(prompt).build()).best())
        .contains("pod-c");
    assertThat(post("/api/v1/score", "{}").statusCode()).isEqualTo(400);
    assertThat(get("/metrics").statusCode()).isEqualTo(200);
  }

  /**
   * Issue 14: a connection that never sends a byte is closed at the request timeout, not kept for
   * the idle timeout, so silent sockets cannot lock other clients out.
   */
  @Test
  void silentConnectionsAreClosedAtTheRequestTimeout() throws Exception {
    service.close();
    start(
        baseConfig()
            .maxConnections(32)
            .requestTimeout(Duration.ofSeconds(1))
            .idleTimeout(Duration.ofSeconds(300))
            .build());
    List<java.net.Socket> silent = new java.util.ArrayList<>();
    try {
      for (int i = 0; i < 32; i++) {
        java.net.Socket s = new java.net.Socket("127.0.0.1", service.port());
        s.setSoTimeout(60_000);
        silent.add(s);
      }
      for (java.net.Socket s : silent) {
        byte[] rest = s.getInputStream().readAllBytes();
        String answer = new String(rest, java.nio.charset.StandardCharsets.ISO_8859_1);
        assertThat(answer.isEmpty() || answer.startsWith("HTTP/1.1 408")).as(answer).isTrue();
      }
      assertThat(get("/healthz").statusCode()).isEqualTo(200);
    } finally {
      for (java.net.Socket s : silent) {
        s.close();
      }
    }
  }

  @Test
  void aBusyPortFailsCleanly() {
    ServiceConfig taken = baseConfig().port(service.port()).build();
    assertThatThrownBy(() -> KvIndexService.builder(taken).withoutEventFeed().start())
        .isInstanceOf(java.io.UncheckedIOException.class)
        .hasMessageContaining("http: cannot listen on 127.0.0.1:" + service.port());
  }

  @Test
  void shortPromptHasNoBlocksAndNoRecommendation() {
    ScoreResponse r = client.score(ScoreRequest.builder().tokenIds(1, 2, 3).build());
    assertThat(r.blocksTotal()).isZero();
    assertThat(r.best()).isEmpty();
    assertThat(r.scores().values()).allSatisfy(s -> assertThat(s.score()).isZero());
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      quoteCharacter = '^',
      value = {
        "not json | {nope | body | invalid JSON",
        "array body | [1,2] | body | must be a JSON object",
        "empty object | {} | prompt | one of prompt, token_ids or prompt_blocks is required",
        "unknown field | {\"tokens\":[1]} | tokens | unknown field \"tokens\"",
        "token_ids not array | {\"token_ids\":\"1 2\"} | token_ids | must be an array",
        "token string | {\"token_ids\":[1,\"2\"]} | token_ids[1] | must be an integer, was a string",
        "token float | {\"token_ids\":[1,2.5]} | token_ids[1] | must be an integer, was a number",
        "negative token | {\"token_ids\":[1,2,-3]} | token_ids[2] | must be in [0, 2147483647]",
        "huge token | {\"token_ids\":[99999999999]} | token_ids[0] | must be in [0, 2147483647]",
        "bad hex block | {\"prompt_blocks\":[\"00ff\",\"xyz\"]} | prompt_blocks[1] | 1-16 hex digits",
        "long hex block | {\"prompt_blocks\":[\"00112233445566778\"]} | prompt_blocks[0] | 1-16 hex",
        "engine hash | {\"prompt_blocks\":[\"sha256:abc\"]} | prompt_blocks[0] | engine hash",
        "negative block | {\"prompt_blocks\":[-1]} | prompt_blocks[0] | unsigned 64-bit",
        "block object | {\"prompt_blocks\":[{}]} | prompt_blocks[0] | was an object",
        "prompt number | {\"prompt\":5} | prompt | prompt must be a string, was a number",
        "model array | {\"token_ids\":[],\"model\":[]} | model | model must be a string",
        "candidates str | {\"token_ids\":[],\"candidate_pods\":\"a\"} | candidate_pods | array",
        "candidate num | {\"token_ids\":[],\"candidate_pods\":[\"a\",1]} | candidate_pods[1] | "
            + "must be a string",
        "candidate dup | {\"token_ids\":[],\"candidate_pods\":[\"a\",\"a\"]} | candidate_pods[1] | "
            + "listed twice",
        "empty candidate | {\"token_ids\":[],\"candidate_pods\":[\"\"]} | candidate_pods[0] | "
            + "1-253 characters",
        "trailing | {\"token_ids\":[]} x | body | ",
        "no tokenizer | {\"prompt\":\"hello\"} | prompt | no tokenizer is configured",
      })
  void rejectsMalformedScoreRequestsNamingTheField(
      String name, String body, String field, String message) throws Exception {
    HttpResponse<String> r = post("/api/v1/score", body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(400);
    JsonNode j = JSON.readTree(r.body());
    assertThat(j.get("field").asText()).isEqualTo(field);
    if (message != null) {
      assertThat(j.get("error").asText()).contains(message);
    }
    assertThat(j.get("status").asInt()).isEqualTo(400);
  }

  @Test
  void limitsOnTokensBlocksAndBody() throws Exception {
    service.close();
    start(baseConfig().maxTokens(32).maxCandidatePods(2).build());
    StringBuilder t = new StringBuilder("{\"token_ids\":[");
    for (int i = 0; i < 33; i++) {
      t.append(i == 0 ? "" : ",").append(i);
    }
    HttpResponse<String> r = post("/api/v1/score", t + "]}");
    assertThat(r.statusCode()).isEqualTo(400);
    assertThat(r.body()).contains("limits.max_tokens").contains("\"field\":\"token_ids\"");

    r = post("/api/v1/score", "{\"prompt_blocks\":[\"1\",\"2\",\"3\"]}");
    assertThat(r.statusCode()).isEqualTo(400);
    assertThat(r.body()).contains("\"field\":\"prompt_blocks\"");

    r = post("/api/v1/score", "{\"token_ids\":[],\"candidate_pods\":[\"a\",\"b\",\"c\"]}");
    assertThat(r.statusCode()).isEqualTo(400);
    assertThat(r.body()).contains("max_candidate_pods");

    String big = "{\"prompt\":\"" + "x".repeat(70 << 10) + "\"}";
    r = post("/api/v1/score", big);
    assertThat(r.statusCode()).isEqualTo(413);
    assertThat(JSON.readTree(r.body()).get("error").asText()).contains("exceeds 65536 bytes");
  }

  @Test
  void methodsRoutesAndUnknownPods() throws Exception {
    assertThat(get("/api/v1/score").statusCode()).isEqualTo(405);
    assertThat(post("/api/v1/cache/state", "{}").statusCode()).isEqualTo(405);
    HttpResponse<String> r = get("/api/v1/nothing");
    assertThat(r.statusCode()).isEqualTo(404);
    r = get("/api/v1/cache/pod/ghost");
    assertThat(r.statusCode()).isEqualTo(404);
    assertThat(JSON.readTree(r.body()).get("field").asText()).isEqualTo("pod_id");
    assertThatThrownBy(() -> client.pod("ghost"))
        .isInstanceOfSatisfying(
            KvIndexServiceException.class,
            e -> {
              assertThat(e.status()).isEqualTo(404);
              assertThat(e.getMessage()).contains("unknown pod \"ghost\"");
              assertThat(e.field()).contains("pod_id");
            });
    assertThatThrownBy(() -> client.score(ScoreRequest.builder().prompt("x").build()))
        .isInstanceOfSatisfying(
            KvIndexServiceException.class,
            e -> {
              assertThat(e.status()).isEqualTo(400);
              assertThat(e.field()).contains("prompt");
            });
  }

  @Test
  void stateAndPodEndpointsReportTotalsTiersAndActivity() {
    int[] prompt = tokens(64, 0);
    store(service.index(), "pod-a", prompt, 4, "GPU");
    store(service.index(), "pod-a", prompt, 2, "CPU");
    store(service.index(), "pod-b", prompt, 4, "GPU");

    CacheState s = client.cacheState();
    assertThat(s.uniqueBlocks()).isEqualTo(4);
    assertThat(s.totalBlocks()).isEqualTo(10);
    assertThat(s.totalPods()).isEqualTo(3);
    assertThat(s.podsReporting()).isEqualTo(2);
    assertThat(s.eventsTotal()).isEqualTo(3);
    assertThat(s.averageCacheUtilization()).isEqualTo(0.04); // pod-a: 4 GPU blocks of 100
    assertThat(s.lastUpdated()).isNotNull();
    assertThat(s.model()).isEqualTo("test-model");
    assertThat(s.ready()).isFalse(); // pod-c not heard from, timeout not elapsed

    PodState a = client.pod("pod-a");
    assertThat(a.blocksByTier()).containsEntry("GPU", 4L).containsEntry("CPU", 2L);
    assertThat(a.blocksCached()).isEqualTo(6);
    assertThat(a.status()).isEqualTo("healthy");
    assertThat(a.eventsTotal()).isEqualTo(2);
    assertThat(a.blocksStoredTotal()).isEqualTo(6);
    assertThat(a.cacheUtilization()).isEqualTo(0.04);
    assertThat(a.lastEvent()).isNotNull();
    assertThat(a.eventsEndpoint()).isEqualTo("tcp://127.0.0.1:1");
    assertThat(client.pod("pod-c").status()).isEqualTo("waiting");
    assertThat(client.pods())
        .extracting(PodState::podId)
        .containsExactly("pod-a", "pod-b", "pod-c");

    service.index().blockRemoved("pod-a", engineHashes(4, 0x1000L * "pod-a".hashCode()), "GPU", 0);
    PodState after = client.pod("pod-a");
    assertThat(after.blocksByTier()).doesNotContainKey("GPU");
    assertThat(after.blocksRemovedTotal()).isEqualTo(4);
  }

  @Test
  void readinessWaitsForEveryPodOrItsTimeout() throws Exception {
    HttpResponse<String> r = get("/readyz");
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(JSON.readTree(r.body()).get("waiting_for").toString())
        .isEqualTo("[\"pod-a\",\"pod-b\",\"pod-c\"]");
    store(service.index(), "pod-a", tokens(16, 0), 1, "GPU");
    store(service.index(), "pod-b", tokens(16, 0), 1, "GPU");
    assertThat(JSON.readTree(get("/readyz").body()).get("waiting_for").toString())
        .isEqualTo("[\"pod-c\"]");
    assertThat(client.ready()).isFalse();
    nanos.addAndGet(Duration.ofSeconds(6).toNanos());
    assertThat(get("/readyz").statusCode()).isEqualTo(200);
    assertThat(client.ready()).isTrue();
    assertThat(client.pod("pod-c").status()).isEqualTo("timed_out");
    assertThat(get("/healthz").statusCode()).isEqualTo(200);
  }

  @Test
  void metricsArePrometheusText() throws Exception {
    client.score(ScoreRequest.builder().tokenIds(tokens(32, 0)).build());
    store(service.index(), "pod-a", tokens(16, 0), 1, "GPU");
    HttpResponse<String> r = get("/metrics");
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v).startsWith("text/plain"));
    assertThat(r.body())
        .contains("kvroute_service_http_requests_seconds_count{route=\"score\",status=\"200\"}")
        .contains("kvroute_service_pods ")
        .contains("kvindex_");
  }

  @Test
  void dashboardIsServed() throws Exception {
    HttpResponse<String> r = get("/");
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("Content-Type")).contains("text/html; charset=utf-8");
    assertThat(r.body()).contains("<script src=\"/dashboard.js\">");
    assertThat(get("/dashboard.js").body()).contains("/api/v1/score");
    assertThat(get("/dashboard.css").statusCode()).isEqualTo(200);
  }

  @Test
  void tokenizesPromptsWithVllmTokenizeCachedAndWithTimeout() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    CountDownLatch release = new CountDownLatch(1);
    HttpServer tok = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
    tok.createContext(
        "/tokenize",
        ex -> {
          String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
          calls.incrementAndGet();
          if (body.contains("slow")) {
            try {
              release.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
          if (body.contains("broken")) {
            ex.sendResponseHeaders(500, -1);
            ex.close();
            return;
          }
          JsonNode req = JSON.readTree(body);
          assertThat(req.get("model").asText()).isEqualTo("test-model");
          StringBuilder sb = new StringBuilder("{\"count\":32,\"max_model_len\":4096,\"tokens\":[");
          int[] t = tokens(32, 0);
          for (int i = 0; i < t.length; i++) {
            sb.append(i == 0 ? "" : ",").append(t[i]);
          }
          byte[] out = sb.append("]}").toString().getBytes(StandardCharsets.UTF_8);
          ex.sendResponseHeaders(200, out.length);
          ex.getResponseBody().write(out);
          ex.close();
        });
    tok.setExecutor(java.util.concurrent.Executors.newCachedThreadPool());
    tok.start();
    try {
      service.close();
      URI url = URI.create("http://127.0.0.1:" + tok.getAddress().getPort());
      start(
          baseConfig()
              .tokenizer(
                  ServiceConfig.TokenizerSettings.builder()
                      .url(url)
                      .timeout(Duration.ofMillis(1500))
                      .build())
              .build());
      store(service.index(), "pod-b", tokens(32, 0), 2, "GPU");

      ScoreResponse r = client.score(ScoreRequest.builder().prompt("hello world").build());
      assertThat(r.best()).contains("pod-b");
      assertThat(r.blocksTotal()).isEqualTo(2);
      client.score(ScoreRequest.builder().prompt("hello world").build());
      assertThat(calls.get()).isEqualTo(1); // the second was a cache hit

      assertThatThrownBy(() -> client.score(ScoreRequest.builder().prompt("slow").build()))
          .isInstanceOfSatisfying(
              KvIndexServiceException.class,
              e -> {
                assertThat(e.status()).isEqualTo(504);
                assertThat(e.getMessage()).contains("did not answer within 1500 ms");
              });
      release.countDown();
      assertThatThrownBy(() -> client.score(ScoreRequest.builder().prompt("broken").build()))
          .isInstanceOfSatisfying(
              KvIndexServiceException.class,
              e -> {
                assertThat(e.status()).isEqualTo(502);
                assertThat(e.getMessage()).contains("answered HTTP 500");
              });
    } finally {
      release.countDown();
      tok.stop(0);
    }
  }

  @Test
  void rawSocketChunkedBodyOverLimitIs413() throws IOException {
    try (java.net.Socket s = new java.net.Socket("127.0.0.1", service.port())) {
      s.setSoTimeout(10_000);
      String chunk = "x".repeat(40 << 10);
      String head = "POST /api/v1/score HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
      var out = s.getOutputStream();
      out.write(head.getBytes(StandardCharsets.US_ASCII));
      for (int i = 0; i < 2; i++) {
        out.write(
            (Integer.toHexString(chunk.length()) + "\r\n" + chunk + "\r\n")
                .getBytes(StandardCharsets.US_ASCII));
      }
      out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
      out.flush();
      String status = new String(s.getInputStream().readNBytes(12), StandardCharsets.US_ASCII);
      assertThat(status).isEqualTo("HTTP/1.1 413");
    }
  }
}
