package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import io.kvroute.kvindex.zmq.PodEndpoint;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The whole read path against simulated vLLM pods: prompts are tokenized by the pods' {@code
 * /tokenize}, routed by the scheduler (precise prefix scorer over a kvindex fed by the pods' real
 * ZMQ KV events, engine metrics scraped from {@code /metrics}), and served by the chosen pod, whose
 * KV events then reach the index.
 */
class TestkitEndToEndTest {
  private static final String[] WORDS = {
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"
  };

  private SimulatedCluster cluster;
  private KvEventSubscriber subscriber;
  private ScheduledExecutorService exec;
  private BlockIndex index;
  private Scheduler scheduler;
  private MetricsScraper scraper;
  private final List<Endpoint> endpoints = new ArrayList<>();
  private final HttpClient http =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final Random random = new Random(17);

  @BeforeEach
  void start() throws Exception {
    cluster =
        SimulatedCluster.builder()
            .both(4)
            .model("m")
            .configure(b -> b.latency(LatencyModel.ZERO))
            .build()
            .start();
    index = BlockIndex.inMemory(IndexConfig.builder().blockSize(16).modelName("m").build());
    subscriber = KvEventSubscriber.builder().sink(KvEventSink.of(index)).build().start();
    for (VllmSimulator p : cluster.pods()) {
      subscriber
          .addPod(PodEndpoint.of(p.name(), p.eventsEndpoint()).withReplay(p.replayEndpoint()))
          .get(10, TimeUnit.SECONDS);
      URI u = p.baseUrl();
      endpoints.add(Endpoint.builder(p.name(), u.getHost(), u.getPort()).build());
    }
    warmUpEventStreams();
    exec = Executors.newSingleThreadScheduledExecutor();
    MetricsStore store = MetricsStore.create();
    scraper = MetricsScraper.builder(store, exec).timeout(Duration.ofSeconds(5)).build();
    scraper.setEndpoints(endpoints);
    scheduler =
        Scheduler.builder()
            .prefixCacheLookup(BlockIndexLookup.of(index))
            .tokenizer(Tokenizers.vllm().timeout(Duration.ofSeconds(5)).build())
            .tokenizeTimeout(Duration.ofSeconds(10))
            .metricsStore(store)
            .random(new Random(3))
            .build();
  }

  @AfterEach
  void stop() {
    exec.shutdownNow();
    subscriber.close();
    cluster.close();
  }

  /**
   * ZMQ subscriptions join asynchronously (and a pod's very first batch is not replayed when it is
   * missed): serve one unrelated prompt on each pod directly until its events are seen.
   */
  private void warmUpEventStreams() throws Exception {
    for (VllmSimulator p : cluster.pods()) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (!index.pods().contains(p.name())) {
        assertThat(System.nanoTime()).as("events of %s arrive", p.name()).isLessThan(deadline);
        complete(p.baseUrl().toString(), "warm up " + words(40));
        long wait = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
        while (!index.pods().contains(p.name()) && System.nanoTime() < wait) {
          java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
        }
      }
    }
  }

  private void complete(String baseUrl, String prompt) throws Exception {
    String body =
        "{\"model\":\"m\",\"max_tokens\":1,\"prompt\":\""
            + prompt.replace("\\", "\\\\").replace("\"", "\\\"")
            + "\"}";
    HttpResponse<String> resp =
        http.send(
            HttpRequest.newBuilder(URI.create(baseUrl + "/v1/completions"))
                .timeout(Duration.ofSeconds(20))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(resp.statusCode()).isEqualTo(200);
  }

  private String words(int n) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < n; i++) {
      sb.append(WORDS[random.nextInt(WORDS.length)]).append(random.nextInt(1000)).append(' ');
    }
    return sb.toString();
  }

  /** Schedules, serves on the chosen pod, and waits until its KV events reached the index. */
  private String route(String prompt) throws Exception {
    scraper.scrapeAll().get(10, TimeUnit.SECONDS);
    Decision d =
        scheduler
            .pickAsync(
                SchedulingRequest.builder().model("m").prompt(prompt).candidates(endpoints).build())
            .get(20, TimeUnit.SECONDS);
    assertThat(d.routed()).isTrue();
    assertThat(d.tokenizationFailed()).isFalse();
    Endpoint target = d.primary().get();
    scheduler.onRouted(d);
    complete(target.baseUrl(), prompt);
    scheduler.onComplete(d);
    int[] tokens = d.request().tokenIds().orElseThrow();
    long[] keys = index.requestKeys(tokens, (String) null);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (index.lookup(keys, List.of(target.id())).matchedBlocks(0) < keys.length - 1) {
      if (System.nanoTime() > deadline) {
        VllmSimulator sim = cluster.pod(target.id()).orElseThrow();
        throw new AssertionError(
            "KV events of "
                + target.id()
                + " did not reach the index: pods="
                + index.pods()
                + " entries="
                + index.podEntries(target.id())
                + " stats="
                + index.stats()
                + " batches="
                + sim.eventBatches()
                + " simCached="
                + sim.cachedBlockHashes().size()
                + " tokens="
                + tokens.length
                + " keys="
                + keys.length
                + " matched="
                + index.lookup(keys, List.of(target.id())).matchedBlocks(0)
                + " subscriberPods="
                + subscriber.pods()
                + " sim="
                + sim);
      }
      java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
    }
    return target.id();
  }

  @Test
  void coldPromptsSpreadAndConversationsStickToTheirPod() throws Exception {
    Map<String, Integer> cold = new HashMap<>();
    for (int i = 0; i < 8; i++) {
      cold.merge(route(words(60)), 1, Integer::sum);
    }
    assertThat(cold).hasSize(4);
    assertThat(cold.values()).containsOnly(2);

    int conversations = 5;
    String[] history = new String[conversations];
    String[] home = new String[conversations];
    for (int c = 0; c < conversations; c++) {
      history[c] = words(80);
    }
    for (int turn = 0; turn < 4; turn++) {
      for (int c = 0; c < conversations; c++) {
        history[c] = history[c] + words(12);
        String pod = route(history[c]);
        if (turn == 0) {
          home[c] = pod;
        } else {
          assertThat(pod).as("conversation %d, turn %d", c, turn).isEqualTo(home[c]);
        }
      }
    }
  }
}
