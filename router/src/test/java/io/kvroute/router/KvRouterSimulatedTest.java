package io.kvroute.router;

import static io.kvroute.router.SimulatedFleet.completion;
import static io.kvroute.router.SimulatedFleet.endpoint;
import static io.kvroute.router.SimulatedFleet.eventsInto;
import static io.kvroute.router.SimulatedFleet.routerOver;
import static io.kvroute.router.SimulatedFleet.source;
import static io.kvroute.router.SimulatedFleet.withPods;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * KvRouter against simulated vLLM pods with real HTTP and real ZMQ KV events: precise prefix
 * routing, endpoints added and removed at run time.
 */
class KvRouterSimulatedTest {
  private SimulatedCluster cluster;
  private BlockIndex index;
  private KvRouter router;

  @BeforeEach
  void start() {
    cluster = SimulatedFleet.start();
    index = BlockIndex.inMemory(SimulatedFleet.indexConfig());
    router = withPods(routerOver(index).eventFeed(eventsInto(index)), cluster).build();
  }

  @AfterEach
  void stop() {
    router.close();
    cluster.close();
  }

  private String routeAndRead(String prompt) throws Exception {
    RoutedResponse r = router.route(completion(prompt)).get(20, TimeUnit.SECONDS);
    r.readAll(1 << 20).get(20, TimeUnit.SECONDS);
    return r.decision().decode().id();
  }

  private void awaitIndexed(String pod) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!index.pods().contains(pod) && System.nanoTime() < deadline) {
      TimeUnit.MILLISECONDS.sleep(5);
    }
    assertThat(index.pods()).as("events of " + pod + " indexed").contains(pod);
  }

  @Test
  void repeatsOfAPromptFollowTheCacheThatHoldsIt() throws Exception {
    String prefix = "shared system prompt about kv caches ".repeat(20);
    String first = routeAndRead(prefix + "question one");
    awaitIndexed(first);
    for (int i = 0; i < 5; i++) {
      assertThat(routeAndRead(prefix + "follow up " + i))
          .as("turn %d goes where the prefix is cached", i)
          .isEqualTo(first);
    }
    RouteDecision rd = router.decide(completion(prefix + "peek"));
    assertThat(rd.responseHeaders().get("x-kvroute-cached-tokens")).isNotEqualTo("0");
    rd.complete(RouteDecision.Outcome.SUCCESS, Duration.ZERO, null);
    assertThat(router.inFlight()).isZero();
  }

  @Test
  void aRemovedPodIsNeitherRoutedToNorIndexed() throws Exception {
    String prefix = "another long prefix for removal ".repeat(20);
    String first = routeAndRead(prefix + "q");
    awaitIndexed(first);
    assertThat(router.removeEndpoint(first)).isTrue();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (index.pods().contains(first) && System.nanoTime() < deadline) {
      TimeUnit.MILLISECONDS.sleep(5);
    }
    assertThat(index.pods()).doesNotContain(first);
    Set<String> used = new HashSet<>();
    for (int i = 0; i < 4; i++) {
      used.add(routeAndRead(prefix + "again " + i));
    }
    assertThat(used).doesNotContain(first);
    VllmSimulator pod = cluster.pod(first).orElseThrow();
    router.addEndpoint(endpoint(pod), source(pod));
    assertThat(router.endpoints()).extracting(Endpoint::id).contains(first);
  }

  /** Issue 14: a rejected change to an endpoint changes nothing; re-adding an id just works. */
  @Test
  void aRejectedEndpointChangeChangesNothingAndAReplacementResubscribes() throws Exception {
    VllmSimulator pod = cluster.pods().get(0);
    Endpoint original = endpoint(pod);
    Endpoint evil = Endpoint.builder(pod.name(), "127.0.0.1", 19999).build();
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () ->
                router.addEndpoint(
                    evil, new KvEventFeed.Source("http://127.0.0.1:19999", null, "")))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(router.endpoints()).contains(original).doesNotContain(evil);

    // the same id again, straight away: the old subscription goes, the new one comes
    for (int i = 0; i < 3; i++) {
      router.addEndpoint(original, source(pod));
    }
    assertThat(router.endpoints()).contains(original);
    String prompt = "replaced endpoints keep their events flowing ".repeat(12);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    String cached = "0";
    while (System.nanoTime() < deadline && "0".equals(cached)) {
      router
          .route(completion(prompt + "q"))
          .get(20, TimeUnit.SECONDS)
          .readAll(1 << 20)
          .get(20, TimeUnit.SECONDS);
      RouteDecision d = router.decideAsync(completion(prompt + "r")).get(20, TimeUnit.SECONDS);
      cached = d.responseHeaders().getOrDefault("x-kvroute-cached-tokens", "0");
      d.complete(RouteDecision.Outcome.SUCCESS, Duration.ZERO, null);
      TimeUnit.MILLISECONDS.sleep(20); // polling a condition
    }
    assertThat(cached).as("a cached prefix seen through the events").isNotEqualTo("0");
  }
}
