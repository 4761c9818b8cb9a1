package io.kvroute.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.VllmSimulator;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvroute serve} against simulated vLLM pods publishing real KV events over ZMQ: events
 * flowing, a publisher restarting, a pod removed from the pods file.
 */
class ServeEndToEndTest {
  static final HttpClient HTTP = HttpClient.newHttpClient();
  static final String MODEL = "sim-model";

  @TempDir Path dir;
  final List<VllmSimulator> sims = new ArrayList<>();
  KvIndexService service;
  KvIndexClient client;
  Path podsFile;

  static VllmSimulator sim(String name) {
    return VllmSimulator.builder()
        .name(name)
        .model(MODEL)
        .latency(LatencyModel.ZERO)
        .build()
        .start();
  }

  static String podsJson(List<VllmSimulator> pods) {
    StringBuilder sb = new StringBuilder("[");
    for (VllmSimulator s : pods) {
      sb.append(sb.length() == 1 ? "" : ",")
          .append("{\"id\":\"")
          .append(s.name())
          .append("\",\"events\":\"")
          .append(s.eventsEndpoint())
          .append("\",\"replay\":\"")
          .append(s.replayEndpoint())
          .append("\",\"http\":\"")
          .append(s.baseUrl())
          .append("\",\"capacity_blocks\":2048}");
    }
    return sb.append("]").toString();
  }

  @BeforeEach
  void setUp() throws Exception {
    for (int i = 0; i < 3; i++) {
      sims.add(sim("pod-" + i));
    }
    podsFile = dir.resolve("pods.json");
    Files.writeString(podsFile, podsJson(sims));
    Path config = dir.resolve("serve.json");
    Files.writeString(
        config,
        "{\"model\":\""
            + MODEL
            + "\",\"http\":{\"port\":0,\"threads\":2},"
            + "\"events\":{\"ready_timeout_ms\":20000},"
            + "\"tokenizer\":{\"url\":\"pods\",\"timeout_ms\":5000},"
            + "\"pods_file\":\"pods.json\",\"pods_file_poll_ms\":3600000}");
    service = KvIndexService.start(ServiceConfig.load(config));
    client = KvIndexClient.builder(service.baseUri()).timeout(Duration.ofSeconds(10)).build();
  }

  @AfterEach
  void tearDown() {
    if (service != null) {
      service.close();
    }
    sims.forEach(VllmSimulator::close);
  }

  static String prompt(String topic) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < 40; i++) {
      sb.append(topic).append(" sentence number ").append(i).append(" about caching. ");
    }
    return sb.toString();
  }

  static void complete(VllmSimulator sim, String prompt) throws Exception {
    String body =
        "{\"model\":\"" + MODEL + "\",\"prompt\":" + Chromium.quote(prompt) + ",\"max_tokens\":1}";
    HttpResponse<String> r =
        HTTP.send(
            HttpRequest.newBuilder(sim.baseUrl().resolve("/v1/completions"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
  }

  /** Polls {@code condition} until it holds or the deadline passes. */
  static void await(String what, Duration timeout, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting for " + what);
      }
      LockSupport.parkNanos(20_000_000L);
    }
  }

  /**
   * Serves fresh prompts on {@code sim} until the service recommends it for one (ZMQ SUB sockets
   * connect asynchronously: batches published before the connection is up are not delivered, and
   * vLLM replays only on sequence gaps). Returns the prompt that was seen.
   */
  String serveUntilSeen(VllmSimulator sim, String topic) throws Exception {
    return serveUntilSeen(client, sim, topic);
  }

  /**
   * As {@link #serveUntilSeen(VllmSimulator, String)}, asking the service through {@code client}.
   */
  static String serveUntilSeen(KvIndexClient client, VllmSimulator sim, String topic)
      throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    for (int i = 0; ; i++) {
      // The attempt number leads, so each attempt starts a new chain: a chain whose first block
      // was published before the SUB socket connected has an unknown parent to the index.
      String p = prompt(i + " " + topic);
      complete(sim, p);
      long until = System.nanoTime() + Duration.ofSeconds(1).toNanos();
      while (System.nanoTime() < until) {
        if (client
            .score(ScoreRequest.builder().prompt(p).build())
            .best()
            .equals(Optional.of(sim.name()))) {
          return p;
        }
        LockSupport.parkNanos(20_000_000L);
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError("the service never saw " + sim.name() + "'s events");
      }
    }
  }

  ScoreResponse score(String prompt) {
    return client.score(ScoreRequest.builder().prompt(prompt).build());
  }

  @Test
  void eventsFlowIntoScoresStateAndPodViews() throws Exception {
    String p = serveUntilSeen(sims.get(1), "alpha");

    ScoreResponse r = score(p);
    ScoreResponse.PodScore s = r.scores().get("pod-1");
    assertThat(s.blocksTotal()).isGreaterThan(10);
    assertThat(s.blocksPresent()).isEqualTo(s.blocksTotal());
    assertThat(s.score()).isEqualTo(100.0);
    assertThat(r.scores().get("pod-0").blocksPresent()).isZero();

    PodState pod = client.pod("pod-1");
    assertThat(pod.status()).isEqualTo("healthy");
    assertThat(pod.eventsTotal()).isPositive();
    assertThat(pod.blocksByTier().get("GPU")).isGreaterThanOrEqualTo(s.blocksTotal());
    assertThat(pod.cacheUtilization()).isPositive();
    assertThat(pod.lastEvent()).isNotNull();

    // Token ids from the pod's own /tokenize and block keys from the index give the same answer.
    long[] keys = service.index().requestKeys(tokenize(sims.get(0), p), (String) null);
    ScoreResponse byKeys = client.score(ScoreRequest.builder().promptBlocks(keys).build());
    assertThat(byKeys.best()).contains("pod-1");
    assertThat(byKeys.scores().get("pod-1").blocksPresent()).isEqualTo(s.blocksPresent());

    // The same prompt served by pod-2 as well: both hold it, the first listed wins a tie.
    complete(sims.get(2), p);
    await(
        "pod-2 holds the prompt",
        Duration.ofSeconds(20),
        () -> score(p).scores().get("pod-2").score() == 100.0);
    CacheState state = client.cacheState();
    assertThat(state.podsReporting()).isEqualTo(2);
    assertThat(state.uniqueBlocks()).isGreaterThanOrEqualTo(s.blocksTotal());
    assertThat(state.totalBlocks()).isGreaterThanOrEqualTo(2L * s.blocksTotal());
    assertThat(state.eventsTotal()).isPositive();
    assertThat(state.averageCacheUtilization()).isNotNull();

    String metrics =
        HTTP.send(
                HttpRequest.newBuilder(service.baseUri().resolve("/metrics")).build(),
                HttpResponse.BodyHandlers.ofString())
            .body();
    assertThat(metrics).contains("kvindex_").contains("kvroute_service_tokenizer_cache_hits");
  }

  static int[] tokenize(VllmSimulator sim, String prompt) throws Exception {
    HttpResponse<String> r =
        HTTP.send(
            HttpRequest.newBuilder(sim.baseUrl().resolve("/tokenize"))
                .POST(
                    HttpRequest.BodyPublishers.ofString(
                        "{\"model\":\"" + MODEL + "\",\"prompt\":" + Chromium.quote(prompt) + "}"))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    com.fasterxml.jackson.databind.JsonNode tokens =
        new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.body()).get("tokens");
    int[] out = new int[tokens.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = tokens.get(i).asInt();
    }
    return out;
  }

  /**
   * Publishes {@code n} more batches from {@code sim} and waits until the service applied them, so
   * that a restarted publisher's sequence (from 0) is certainly below the last one seen: vLLM's
   * stream carries no epoch, so a restart is only recognisable by the sequence going backwards.
   */
  void raiseSequence(VllmSimulator sim, String topic, int n) throws Exception {
    long before = client.pod(sim.name()).eventsTotal();
    for (int i = 0; i < n; i++) {
      complete(sim, prompt(i + " " + topic));
    }
    await(
        n + " batches applied",
        Duration.ofSeconds(20),
        () -> client.pod(sim.name()).eventsTotal() >= before + n);
  }

  @Test
  void aRestartingPublisherIsDetectedAndItsPodRebuilt() throws Exception {
    String a = serveUntilSeen(sims.get(0), "before restart");
    raiseSequence(sims.get(0), "filler", 40);

    // A full engine restart: the cache is emptied and the publisher starts again at sequence 0.
    sims.get(0).faults().clearAllBlocks();
    await("pod-0 cleared", Duration.ofSeconds(20), () -> client.pod("pod-0").blocksCached() == 0);
    sims.get(0).faults().restartPublisher();
    String b = serveUntilSeen(sims.get(0), "after restart");
    assertThat(score(a).best()).isEmpty();
    await("restart counted", Duration.ofSeconds(20), () -> client.pod("pod-0").restarts() >= 1);

    // The publisher restarts again without losing its cache: the pod's entries are rebuilt from
    // new events only, so earlier prompts no longer score until the engine reports them again.
    raiseSequence(sims.get(0), "more filler", 40);
    sims.get(0).faults().restartPublisher();
    String c = serveUntilSeen(sims.get(0), "second restart");
    await(
        "second restart counted",
        Duration.ofSeconds(20),
        () -> client.pod("pod-0").restarts() >= 2);
    assertThat(score(c).best()).contains("pod-0");
    assertThat(score(b).scores().get("pod-0").blocksPresent()).isZero();
    assertThat(client.pod("pod-0").status()).isIn("healthy", "degraded");
  }

  @Test
  void aPodRemovedFromThePodsFileIsForgotten() throws Exception {
    String p = serveUntilSeen(sims.get(2), "removal");

    Files.writeString(podsFile, podsJson(sims.subList(0, 2)));
    Files.setLastModifiedTime(podsFile, FileTime.fromMillis(System.currentTimeMillis() + 5000));
    assertThat(service.reloadPodsFile()).isEmpty();

    assertThat(service.pods()).containsExactly("pod-0", "pod-1");
    ScoreResponse r = score(p);
    assertThat(r.scores().keySet()).containsExactly("pod-0", "pod-1");
    assertThat(r.best()).isEmpty();
    assertThat(client.cacheState().totalPods()).isEqualTo(2);
    await(
        "pod-2 dropped from the index",
        Duration.ofSeconds(10),
        () -> !service.index().pods().contains("pod-2"));
    try {
      client.pod("pod-2");
      throw new AssertionError("pod-2 still known");
    } catch (KvIndexServiceException e) {
      assertThat(e.status()).isEqualTo(404);
    }
    // Traffic on the removed pod no longer reaches the index.
    complete(sims.get(2), prompt("after removal"));
    serveUntilSeen(sims.get(1), "after removal");
    assertThat(service.index().pods()).doesNotContain("pod-2");

    // Adding it back subscribes again.
    Files.writeString(podsFile, podsJson(sims));
    Files.setLastModifiedTime(podsFile, FileTime.fromMillis(System.currentTimeMillis() + 10000));
    assertThat(service.reloadPodsFile()).isEmpty();
    assertThat(service.pods()).containsExactly("pod-0", "pod-1", "pod-2");
    serveUntilSeen(sims.get(2), "back again");
  }

  @Test
  void readinessTurnsGreenOnceEveryPodIsHeardFrom() throws Exception {
    assertThat(client.ready()).isFalse();
    for (VllmSimulator s : sims) {
      serveUntilSeen(s, "ready " + s.name());
    }
    await("ready", Duration.ofSeconds(20), client::ready);
    assertThat(client.cacheState().ready()).isTrue();
    assertThat(client.pods()).allSatisfy(p -> assertThat(p.status()).isEqualTo("healthy"));
  }
}
