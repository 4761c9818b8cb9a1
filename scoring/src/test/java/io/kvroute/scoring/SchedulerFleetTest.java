package io.kvroute.scoring;

import static io.kvroute.scoring.TestSupport.eps;
import static io.kvroute.scoring.TestSupport.tokens;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.kvindex.fleet.InMemoryFleet;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Two schedulers as replicas of one fleet (an {@link InMemoryFleet}, no staleness). */
class SchedulerFleetTest {
  private final TestSupport.Clock clock = new TestSupport.Clock();
  private final InMemoryFleet fleet = InMemoryFleet.builder().nanoClock(clock::get).build();
  private final TestSupport.FakeLookup index = new TestSupport.FakeLookup(16);
  private final List<Endpoint> pods = eps("a", "b", "c", "d");

  private Scheduler replica(String id, boolean shared, long seed) {
    Scheduler.Builder b =
        Scheduler.builder()
            .prefixCacheLookup(index)
            .nanoClock(clock::get)
            .random(new SplittableRandom(seed));
    if (shared) {
      b.fleet(fleet.join(FleetConfig.builder().replicaId(id).nanoClock(clock::get).build()));
    }
    return b.build();
  }

  private SchedulingRequest request(int[] prompt) {
    return SchedulingRequest.builder().model("m").tokenIds(prompt).candidates(pods).build();
  }

  @Test
  void theNextTurnOnAnotherReplicaGoesWhereThePreviousTurnWentBeforeAnyEvent() {
    int[] turn1 = tokens(640, 1);
    int[] turn2 = Arrays.copyOf(turn1, 960);
    System.arraycopy(tokens(320, 2), 0, turn2, 640, 320);
    for (long seed = 0; seed < 16; seed++) {
      Scheduler a = replica("a-" + seed, true, seed);
      Scheduler b = replica("b-" + seed, true, seed + 1000);
      Decision first = a.pick(request(turn1));
      a.onRouted(first);
      Endpoint holder = first.primary().orElseThrow();
      clock.advanceMillis(100); // well within the speculative TTL (2 s)
      Decision second = b.pick(request(turn2));
      assertThat(second.primary()).as("seed %d", seed).contains(holder);
      assertThat(second.prefixMatch(holder).matchedBlocks()).isEqualTo(40);
      a.onComplete(first);
      clock.advanceMillis(3_000); // past the TTL: entries gone for the next seed
    }
  }

  @Test
  void inFlightCountsAreEveryReplicasAndEndWithTheRequest() {
    Scheduler a = replica("a", true, 1);
    Scheduler b = replica("b", true, 2);
    Decision d = a.pick(request(tokens(64, 3)));
    a.onRouted(d);
    Endpoint sent = d.primary().orElseThrow();
    Decision seen = b.pick(request(tokens(64, 4)));
    assertThat(seen.routed()).isTrue();
    // b counts a's request on the endpoint a chose, and nothing on the others
    FleetState bf = b.fleet().orElseThrow();
    assertThat(bf.view(List.of(sent.id()), new long[0], 0).inFlightRequests(0)).isEqualTo(1);
    a.onComplete(d);
    assertThat(bf.view(List.of(sent.id()), new long[0], 0).inFlightRequests(0)).isZero();
  }

  @Test
  void theLoadScorersReadTheFleetsInFlightCounts() {
    // all four pods equal but "a", which replica A loaded with 8 requests: replica B avoids it
    Scheduler a = replica("a", true, 1);
    Scheduler b = replica("b", true, 2);
    Endpoint pa = pods.get(0);
    for (int i = 0; i < 8; i++) {
      Decision d = a.pick(request(tokens(32, 100 + i)));
      a.onRouted(d, pa, null);
    }
    for (int i = 0; i < 20; i++) {
      assertThat(b.pick(request(tokens(32, 200 + i))).primary().orElseThrow()).isNotEqualTo(pa);
    }
  }

  @Test
  void withoutAFleetTheOtherReplicaSeesNothing() {
    Scheduler a = replica("a", false, 1);
    Scheduler b = replica("b", false, 2);
    Decision d = a.pick(request(tokens(640, 1)));
    a.onRouted(d);
    Decision second = b.pick(request(tokens(640, 1)));
    assertThat(second.prefixMatch(d.primary().orElseThrow()).matchedBlocks()).isZero();
    assertThat(b.fleet()).isEmpty();
  }

  @Test
  void pickAsyncReadsTheFleetViewToo() {
    Scheduler a = replica("a", true, 1);
    Scheduler b = replica("b", true, 2);
    int[] prompt = tokens(320, 9);
    Decision first = a.pick(request(prompt));
    a.onRouted(first);
    Decision async = b.pickAsync(request(prompt)).join();
    assertThat(async.primary()).isEqualTo(first.primary());
    assertThat(async.prefixMatch(first.primary().orElseThrow()).matchedBlocks()).isEqualTo(20);
    a.onComplete(first);
    assertThat(Duration.ofSeconds(2)).isEqualTo(FleetConfig.defaults().speculativeTtl());
  }

  /** A scheduler without an index (approximate profiles), a replica of the fleet if shared. */
  private Scheduler approximateReplica(String id, boolean shared, long seed) {
    Scheduler.Builder b =
        Scheduler.builder().nanoClock(clock::get).random(new SplittableRandom(seed));
    if (shared) {
      b.fleet(fleet.join(FleetConfig.builder().replicaId(id).nanoClock(clock::get).build()));
    }
    return b.build();
  }

  private static String text(int seed, int words) {
    StringBuilder sb = new StringBuilder();
    SplittableRandom r = new SplittableRandom(seed);
    for (int i = 0; i < words; i++) {
      sb.append("w").append(r.nextInt(100_000)).append(' ');
    }
    return sb.toString();
  }

  private SchedulingRequest textRequest(String prompt) {
    return SchedulingRequest.builder().model("m").prompt(prompt).candidates(pods).build();
  }

  @Test
  void theApproximateScorerFollowsWhereAnotherReplicaSentThePromptLongAfterTheSpeculativeTtl() {
    String system = text(1, 1500);
    for (long seed = 0; seed < 8; seed++) {
      Scheduler a = approximateReplica("a-" + seed, true, seed);
      Scheduler b = approximateReplica("b-" + seed, true, seed + 1000);
      Scheduler alone = approximateReplica("alone-" + seed, false, seed + 2000);
      Decision first = a.pick(textRequest(system + text((int) seed + 10, 50)));
      a.onRouted(first);
      a.onComplete(first);
      Endpoint holder = first.primary().orElseThrow();
      clock.advanceMillis(60_000); // far past the speculative TTL, within the memory's (5 min)
      Decision second = b.pick(textRequest(system + text((int) seed + 20, 50)));
      assertThat(second.primary()).as("seed %d", seed).contains(holder);
      assertThat(second.prefixMatch(holder).matchedBlocks()).as("seed %d", seed).isPositive();
      // a replica outside the fleet knows nothing of it
      Decision other = alone.pick(textRequest(system + text((int) seed + 20, 50)));
      assertThat(other.prefixMatch(holder).matchedBlocks()).isZero();
      clock.advanceMillis(600_000); // past the memory's TTL: gone for the next seed
    }
  }

  @Test
  void coldRequestsSpreadOverTheEndpointsFleetWide() {
    // four new prompts, alternately on two replicas, nothing in flight: the no-hit LRU of each
    // replica knows where the other sent its cold requests, so the four land on four pods
    for (long seed = 0; seed < 8; seed++) {
      Scheduler a = replica("a-" + seed, true, seed);
      Scheduler b = replica("b-" + seed, true, seed + 1000);
      java.util.Set<Endpoint> used = new java.util.HashSet<>();
      for (int i = 0; i < 4; i++) {
        Scheduler s = i % 2 == 0 ? a : b;
        Decision d = s.pick(request(tokens(64, (int) seed * 100 + i)));
        assertThat(d.profiles().get(Scheduler.DECODE_PROFILE).cold()).isTrue();
        s.onRouted(d);
        s.onComplete(d);
        used.add(d.primary().orElseThrow());
      }
      assertThat(used).as("seed %d", seed).hasSize(4);
      for (Endpoint e : pods) { // forget them for the next seed
        a.removeEndpoint(e.id());
        b.removeEndpoint(e.id());
      }
      clock.advanceMillis(3_000);
    }
  }
}
