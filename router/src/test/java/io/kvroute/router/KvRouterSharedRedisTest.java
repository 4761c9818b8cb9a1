package io.kvroute.router;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.kvroute.kvindex.redis.RedisServer;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Scheduler;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Two KvRouters (gateway replicas) sharing one real Redis index, both subscribed to simulated vLLM
 * pods' KV events, give identical decisions; a third one that subscribes to nothing (started
 * against the warm index) decides the same from its first request.
 */
class KvRouterSharedRedisTest {
  private static final String MODEL = "sim-model";
  private RedisServer redis;
  private SimulatedCluster cluster;
  private final List<KvRouter> routers = new ArrayList<>();

  @BeforeEach
  void start() {
    redis = RedisServer.start();
    cluster =
        SimulatedCluster.builder()
            .both(3)
            .model(MODEL)
            .configure(b -> b.blockSize(16).gpuBlocks(1024).latency(LatencyModel.ZERO))
            .build()
            .start();
  }

  @AfterEach
  void stop() {
    // After a skipped start (no redis-server) nothing was started.
    routers.forEach(KvRouter::close);
    if (cluster != null) {
      cluster.close();
    }
    if (redis != null) {
      redis.close();
    }
  }

  private KvRouter router(String replica, boolean subscribe) {
    RedisBlockIndex index =
        RedisBlockIndex.create(
            IndexConfig.builder().blockSize(16).modelName(MODEL).build(),
            RedisIndexConfig.builder()
                .url(redis.url())
                .replicaId(replica)
                .lookupTimeout(Duration.ofSeconds(10))
                .commandTimeout(Duration.ofSeconds(10))
                .mappingCacheSize(4096)
                .build());
    Scheduler.Builder sb =
        Scheduler.builder()
            .prefixCacheLookup(BlockIndexLookup.of(index))
            .tokenizer(KvRouterSimulatedTest::tokenize);
    Scheduler.defaultProfiles(true).forEach(sb::profile);
    KvRouter.Builder rb = KvRouter.builder().scheduler(sb.build()).observabilityHeaders(true);
    if (subscribe) {
      rb.eventFeed(KvEventFeeds.zmq(KvEventFeeds.subscriberFor(index).build(), index));
    }
    for (VllmSimulator pod : cluster.pods()) {
      rb.endpoint(
          Endpoint.builder(pod.name(), pod.baseUrl().getHost(), pod.baseUrl().getPort())
              .role(Endpoint.Role.BOTH)
              .build(),
          new KvEventFeed.Source(pod.eventsEndpoint(), pod.replayEndpoint(), pod.topic()));
    }
    KvRouter r = rb.build();
    routers.add(r);
    return r;
  }

  private static InferenceRequest completion(String prompt) {
    return InferenceRequest.of(
        InferenceRequest.Api.COMPLETIONS,
        ("{\"model\":\"" + MODEL + "\",\"prompt\":\"" + prompt + "\",\"max_tokens\":4}")
            .getBytes(StandardCharsets.UTF_8),
        Map.of(),
        "id-" + prompt.hashCode());
  }

  /** The decision (tokenized, so precise prefix scoring applies): pod and cached tokens. */
  private static String decide(KvRouter r, String prompt) throws Exception {
    RouteDecision d = r.decideAsync(completion(prompt)).get(20, TimeUnit.SECONDS);
    String pod = d.decode().id() + " cached=" + d.responseHeaders().get("x-kvroute-cached-tokens");
    d.complete(RouteDecision.Outcome.SUCCESS, Duration.ZERO, null);
    return pod;
  }

  @Test
  void replicasSharingRedisDecideAlike() throws Exception {
    KvRouter a = router("a", true);
    KvRouter b = router("b", true);
    String[] prefixes = {
      "shared system prompt about kv caches ".repeat(20),
      "another long context on routing ".repeat(25)
    };
    List<String> firsts = new ArrayList<>();
    for (String prefix : prefixes) {
      RoutedResponse r = a.route(completion(prefix + "question")).get(20, TimeUnit.SECONDS);
      r.readAll(1 << 20).get(20, TimeUnit.SECONDS);
      firsts.add(r.decision().decode().id());
    }
    // wait until the shared index holds both prefixes. A separate replica peeks: each decision
    // leaves speculative entries (routed, not yet confirmed) in the deciding scheduler, so peeking
    // through b would give b a view of its own (a tie on another pod) that a does not have.
    KvRouter peek = router("peek", false);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (System.nanoTime() < deadline
        && (decide(peek, prefixes[0] + "peek").endsWith("cached=0")
            || decide(peek, prefixes[1] + "peek").endsWith("cached=0"))) {
      TimeUnit.MILLISECONDS.sleep(20); // polling a condition
    }
    KvRouter c = router("c", false); // a replica started now, subscribed to nothing
    for (int i = 0; i < prefixes.length; i++) {
      String p = prefixes[i] + "follow up";
      String da = decide(a, p);
      assertThat(da).startsWith(firsts.get(i)).doesNotEndWith("cached=0");
      assertThat(decide(b, p)).isEqualTo(da);
      assertThat(decide(c, p)).isEqualTo(da);
    }
  }
}
