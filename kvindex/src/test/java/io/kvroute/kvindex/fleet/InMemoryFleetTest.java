package io.kvroute.kvindex.fleet;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.kvindex.contract.FleetStateContract;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/** The in-process fleet store: the contract, the modelled staleness, lease expiry, bounds. */
class InMemoryFleetTest extends FleetStateContract {
  private final Map<String, InMemoryFleet> fleets = new HashMap<>();

  @Override
  protected FleetState join(FleetConfig config) {
    return fleets
        .computeIfAbsent(config.fleet(), f -> InMemoryFleet.builder().build())
        .join(config);
  }

  private static final List<String> EPS = List.of("e1", "e2");
  private static final long[] NONE = new long[0];

  @Test
  void changesBecomeVisibleToOthersAfterTheDelayOnTheFleetsClock() {
    AtomicLong now = new AtomicLong(1_000_000_000L);
    InMemoryFleet fleet =
        InMemoryFleet.builder().visibilityDelay(Duration.ofMillis(5)).nanoClock(now::get).build();
    FleetState a = fleet.join(FleetConfig.builder().replicaId("a").speculativeStride(1).build());
    FleetState b = fleet.join(FleetConfig.builder().replicaId("b").speculativeStride(1).build());
    long[] k = keys(1, 4);
    a.requestStarted("e1", 10);
    a.speculate("e2", k, 4);
    // a sees its own at once, b nothing yet
    assertThat(describe(a.view(EPS, k, 4))).isEqualTo("e1=1/10/0 e2=0/0/4");
    assertThat(describe(b.view(EPS, k, 4))).isEqualTo("e1=0/0/0 e2=0/0/0");
    now.addAndGet(Duration.ofMillis(5).toNanos() - 1);
    assertThat(describe(b.view(EPS, k, 4))).isEqualTo("e1=0/0/0 e2=0/0/0");
    now.addAndGet(1);
    assertThat(describe(b.view(EPS, k, 4))).isEqualTo("e1=1/10/0 e2=0/0/4");
    // a finishes: b still counts the request for one delay
    a.requestFinished("e1", 10);
    assertThat(describe(a.view(EPS, NONE, 0))).isEqualTo("e1=0/0/0 e2=0/0/0");
    assertThat(describe(b.view(EPS, NONE, 0))).isEqualTo("e1=1/10/0 e2=0/0/0");
    now.addAndGet(Duration.ofMillis(5).toNanos());
    assertThat(describe(b.view(EPS, NONE, 0))).isEqualTo("e1=0/0/0 e2=0/0/0");
    // the speculative TTL (2 s) on the same clock
    now.addAndGet(Duration.ofSeconds(2).toNanos());
    assertThat(describe(b.view(EPS, k, 4))).isEqualTo("e1=0/0/0 e2=0/0/0");
    assertThat(fleet.speculativeEntries()).isZero();
  }

  @Test
  void anExpiredReplicasCountsLeaveAtOnceAndComeBackWithItsNextChange() {
    InMemoryFleet fleet = InMemoryFleet.builder().build();
    FleetState a = fleet.join(FleetConfig.builder().replicaId("a").build());
    FleetState b = fleet.join(FleetConfig.builder().replicaId("b").build());
    a.requestStarted("e1", 10);
    a.requestStarted("e2", 1);
    assertThat(describe(b.view(EPS, NONE, 0))).isEqualTo("e1=1/10/0 e2=1/1/0");
    fleet.expire("a");
    assertThat(describe(b.view(EPS, NONE, 0))).isEqualTo("e1=0/0/0 e2=0/0/0");
    assertThat(describe(a.view(EPS, NONE, 0))).isEqualTo("e1=1/10/0 e2=1/1/0"); // its own: exact
    a.requestFinished("e2", 1);
    assertThat(describe(b.view(EPS, NONE, 0))).isEqualTo("e1=1/10/0 e2=0/0/0");
    assertThat(fleet.replicas()).containsExactly("a", "b");
    a.close();
    assertThat(fleet.replicas()).containsExactly("b");
    assertThatThrownBy(() -> fleet.join(FleetConfig.builder().replicaId("b").build()))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("already joined");
  }

  @Test
  void speculativeEntriesAreBoundedFleetWideAndPerKey() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    InMemoryFleet fleet = InMemoryFleet.builder().maxSpeculativeEntries(10).build();
    FleetState a =
        fleet.join(
            FleetConfig.builder()
                .replicaId("a")
                .speculativeStride(1)
                .maxEntriesPerKey(2)
                .meterRegistry(reg)
                .build());
    long[] k = keys(7, 8);
    a.speculate("e1", k, 8);
    a.speculate("e2", k, 8); // 16 entries asked, 10 kept: the oldest (e1's first keys) went
    assertThat(fleet.speculativeEntries()).isEqualTo(10);
    assertThat(reg.get("kvroute.fleet.speculative.evicted").functionCounter().count()).isEqualTo(6);
    // e1's entries at keys 6 and 7 remain (each proves the prefix before it); those before went
    assertThat(describe(a.view(EPS, k, 8))).isEqualTo("e1=0/0/8 e2=0/0/8");
    assertThat(describe(a.view(EPS, k, 6))).isEqualTo("e1=0/0/0 e2=0/0/6");
    // per key: a third endpoint pushes the oldest entry of each key out
    InMemoryFleet f2 = InMemoryFleet.builder().build();
    FleetState c =
        f2.join(
            FleetConfig.builder().replicaId("c").speculativeStride(1).maxEntriesPerKey(2).build());
    c.speculate("e1", k, 2);
    c.speculate("e2", k, 2);
    c.speculate("e3", k, 2);
    assertThat(describe(c.view(List.of("e1", "e2", "e3"), k, 2)))
        .isEqualTo("e1=0/0/0 e2=0/0/2 e3=0/0/2");
    // the same request again replaces its entry, it does not add one
    c.speculate("e3", k, 2);
    assertThat(f2.speculativeEntries()).isEqualTo(4);
  }

  @Test
  void theRoutingMemoryIsBoundedFleetWideApartFromSpeculativeEntries() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    InMemoryFleet fleet =
        InMemoryFleet.builder().maxMemoryEntries(10).maxSpeculativeEntries(100).build();
    FleetState a =
        fleet.join(
            FleetConfig.builder().replicaId("a").speculativeStride(1).meterRegistry(reg).build());
    long[] h = keys(8, 8);
    a.speculate("e1", h, 8);
    a.remember("e1", h, 8);
    a.remember("e2", h, 8); // 16 memory entries asked, 10 kept: the oldest (e1's first) went
    assertThat(fleet.memoryEntries()).isEqualTo(10);
    assertThat(fleet.speculativeEntries()).isEqualTo(8); // untouched by the memory's bound
    assertThat(reg.get("kvroute.fleet.memory.evicted").functionCounter().count()).isEqualTo(6);
    assertThat(remembered(a.view(EPS, NONE, 0, h, 8))).isEqualTo("e1=8 e2=8");
    assertThat(remembered(a.view(EPS, NONE, 0, h, 6))).isEqualTo("e1=0 e2=6");
  }

  @Test
  void coldRoutingBecomesVisibleToOthersAfterTheDelay() {
    AtomicLong clock = new AtomicLong();
    InMemoryFleet fleet =
        InMemoryFleet.builder().nanoClock(clock::get).visibilityDelay(Duration.ofMillis(3)).build();
    FleetState a = fleet.join(FleetConfig.builder().replicaId("a").nanoClock(clock::get).build());
    FleetState b = fleet.join(FleetConfig.builder().replicaId("b").nanoClock(clock::get).build());
    a.coldRouted("e2");
    assertThat(coldOrder(a.view(EPS, NONE, 0))).isEqualTo("e2");
    assertThat(coldOrder(b.view(EPS, NONE, 0))).isEmpty();
    clock.addAndGet(Duration.ofMillis(3).toNanos());
    assertThat(coldOrder(b.view(EPS, NONE, 0))).isEqualTo("e2");
  }

  @Test
  void trackedEndpointsAreBoundedAndTheOverflowCounted() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    FleetState a =
        FleetState.local(FleetConfig.builder().maxEndpoints(2).meterRegistry(reg).build());
    a.requestStarted("e1", 1);
    a.requestStarted("e2", 1);
    a.requestStarted("e3", 1); // not counted
    assertThat(describe(a.view(List.of("e1", "e2", "e3"), NONE, 0)))
        .isEqualTo("e1=1/1/0 e2=1/1/0 e3=0/0/0");
    assertThat(reg.get("kvroute.fleet.endpoints.overflow").functionCounter().count()).isEqualTo(1);
    a.requestFinished("e1", 1); // idle now: dropped to make room
    a.requestStarted("e3", 1);
    assertThat(describe(a.view(List.of("e1", "e2", "e3"), NONE, 0)))
        .isEqualTo("e1=0/0/0 e2=1/1/0 e3=1/1/0");
    assertThat(reg.get("kvroute.fleet.views").tag("source", "fleet").counter().count())
        .isEqualTo(2);
  }

  @Test
  void configurationIsValidatedNamingTheField() {
    assertThatThrownBy(() -> FleetConfig.builder().speculativeStride(0).build())
        .hasMessageContaining("fleet.speculativeStride");
    assertThatThrownBy(() -> FleetConfig.builder().leaseTtl(Duration.ofMillis(10)).build())
        .hasMessageContaining("fleet.leaseTtl");
    assertThatThrownBy(() -> FleetConfig.builder().fleet("a{b}").build())
        .hasMessageContaining("fleet.name");
    assertThatThrownBy(() -> FleetConfig.builder().viewTimeout(Duration.ZERO).build())
        .hasMessageContaining("fleet.viewTimeout");
    assertThatThrownBy(() -> FleetConfig.builder().memoryTtl(Duration.ofMillis(-1)).build())
        .hasMessageContaining("fleet.memoryTtl");
    assertThatThrownBy(() -> FleetConfig.builder().maxMemoryEntries(0).build())
        .hasMessageContaining("fleet.maxMemoryEntries");
    assertThatThrownBy(() -> InMemoryFleet.builder().maxMemoryEntries(0))
        .hasMessageContaining("fleet.maxMemoryEntries");
  }

  @Nested
  class Groups {
    @Test
    void podsSpreadOverGroupsAndEachGroupIsFollowedByCopiesReplicas() {
      PodGroups g = PodGroups.of(8);
      int[] perGroup = new int[8];
      for (int i = 0; i < 8000; i++) {
        perGroup[g.group("pod-" + i)]++;
      }
      for (int c : perGroup) {
        assertThat(c).isBetween(800, 1200);
      }
      assertThat(g.group("pod-1")).isEqualTo(PodGroups.of(8).group("pod-1"));
      // 4 replicas, 2 copies: each group followed by two of them, each replica follows 4 groups
      int[] followers = new int[8];
      for (int r = 0; r < 4; r++) {
        PodGroups mine = g.followedBy(r, 4, 2);
        assertThat(mine.followed()).hasSize(4);
        for (int grp : mine.followed()) {
          followers[grp]++;
        }
        assertThat(mine.follows("pod-1")).isEqualTo(mine.followsGroup(g.group("pod-1")));
      }
      assertThat(followers).containsOnly(2);
      assertThat(PodGroups.single().group("anything")).isZero();
      assertThat(g.followsAll()).isTrue();
      assertThat(g.followedBy(0, 1, 1).followsAll()).isTrue();
      assertThatThrownBy(() -> g.followedBy(4, 4, 2)).hasMessageContaining("replica index");
      assertThatThrownBy(() -> g.following(java.util.Set.of(9))).hasMessageContaining("group 9");
      assertThatThrownBy(() -> PodGroups.of(0)).hasMessageContaining("podGroups.groups");
    }
  }
}
