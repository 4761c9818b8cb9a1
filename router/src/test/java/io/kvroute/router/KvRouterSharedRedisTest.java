package io.kvroute.router;

import static io.kvroute.router.SimulatedFleet.completion;
import static io.kvroute.router.SimulatedFleet.eventsInto;
import static io.kvroute.router.SimulatedFleet.routerOver;
import static io.kvroute.router.SimulatedFleet.withPods;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.kvroute.kvindex.redis.RedisServer;
import io.kvroute.testkit.SimulatedCluster;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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
  private RedisServer redis;
  private SimulatedCluster cluster;
  private final List<KvRouter> routers = new ArrayList<>();

  @BeforeEach
  void start() {
    redis = RedisServer.start();
    cluster = SimulatedFleet.start();
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
            SimulatedFleet.indexConfig(),
            RedisIndexConfig.builder()
                .url(redis.url())
                .replicaId(replica)
                .lookupTimeout(Duration.ofSeconds(10))
                .commandTimeout(Duration.ofSeconds(10))
                .mappingCacheSize(4096)
                .build());
    KvRouter.Builder rb = routerOver(index);
    if (subscribe) {
      rb.eventFeed(eventsInto(index));
    }
    KvRouter r = withPods(rb, cluster).build();
    routers.add(r);
    return r;
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
