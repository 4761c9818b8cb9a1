package io.kvroute.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code --replicas}: several gateway replicas in virtual time, with and without sharing. */
class FleetReplayTest {
  private static final Workload SLICE = Workload.mooncakeTrace(WorkloadTest.SYNTHETIC).first(120);

  private static StrategyResult precise(Replay.Builder b) {
    return b.pods(4)
        .speed(2)
        .strategies(List.of(Strategy.PRECISE))
        .build()
        .run(ReplayListener.NONE)
        .strategy("precise")
        .orElseThrow();
  }

  @Test
  void oneReplicaIsTheSingleSchedulerReplay() {
    StrategyResult one = precise(Replay.builder(SLICE));
    StrategyResult alsoOne = precise(Replay.builder(SLICE).replicas(1).sharing(false));
    assertThat(alsoOne.hitRatio()).isEqualTo(one.hitRatio());
    assertThat(alsoOne.goodputRps()).isEqualTo(one.goodputRps());
  }

  @Test
  void replicasRouteEveryRequestDeterministically() {
    for (boolean sharing : new boolean[] {true, false}) {
      for (Replay.Assignment a : Replay.Assignment.values()) {
        StrategyResult r1 =
            precise(Replay.builder(SLICE).replicas(4).sharing(sharing).assignment(a));
        StrategyResult r2 =
            precise(Replay.builder(SLICE).replicas(4).sharing(sharing).assignment(a));
        assertThat(r1.requests() + r1.rejected()).isEqualTo(SLICE.size());
        assertThat(r1.hitRatio()).isEqualTo(r2.hitRatio());
        assertThat(r1.goodputRps()).isEqualTo(r2.goodputRps());
      }
    }
  }

  @Test
  void theDescriptionSaysHowTheReplicasShare() {
    ReplayReport r =
        Replay.builder(SLICE.first(20))
            .pods(2)
            .strategies(List.of(Strategy.PRECISE))
            .replicas(3)
            .assignment(Replay.Assignment.HASH)
            .fleetStaleness(Duration.ofMillis(5))
            .build()
            .run(ReplayListener.NONE);
    assertThat(r.description())
        .contains(
            "3 gateway replicas (hash), sharing on (staleness 5.0 ms, routing memory 300.0 s)");
  }

  /**
   * The approximate strategy's whole signal is the router's memory of where it sent each prompt:
   * with it per replica, each replica spreads a prefix group over the engines as if it were new;
   * with the fleet's routing memory (and cold routing) shared, replicas route as one.
   */
  @Test
  void theSharedRoutingMemoryMakesReplicasRouteAsOne() {
    // 60 groups of 6,000-token system prompts on 4 engines that hold 96,000 tokens each: an
    // engine keeps a quarter of the groups, so a group spread over engines loses its hits
    Workload w = Workload.sharedPrefix(new SharedPrefix(60, 5, 6000, 400, 20, 4, 600), 7);
    io.kvroute.testkit.engine.EngineProfile small =
        io.kvroute.testkit.engine.EngineProfile.named("llama-3.3-70b-fp8-2xh100").toBuilder()
            .kvBlocks(6000)
            .build();
    java.util.function.Function<Replay.Builder, StrategyResult> run =
        b ->
            b.pods(4)
                .profile(small)
                .strategies(List.of(Strategy.APPROXIMATE))
                .build()
                .run(ReplayListener.NONE)
                .strategy("approximate")
                .orElseThrow();
    StrategyResult one = run.apply(Replay.builder(w));
    StrategyResult shared = run.apply(Replay.builder(w).replicas(4).sharing(true));
    StrategyResult countsOnly =
        run.apply(Replay.builder(w).replicas(4).sharing(true).fleetMemoryTtl(Duration.ZERO));
    StrategyResult none = run.apply(Replay.builder(w).replicas(4).sharing(false));
    System.out.printf(
        "FleetReplayTest: approximate hit ratio, one replica %.3f, four sharing %.3f, four"
            + " sharing counts only %.3f, four not sharing %.3f%n",
        one.hitRatio(), shared.hitRatio(), countsOnly.hitRatio(), none.hitRatio());
    assertThat(shared.hitRatio()).isGreaterThanOrEqualTo(0.95 * one.hitRatio());
    assertThat(countsOnly.hitRatio()).isLessThan(0.9 * shared.hitRatio());
    assertThat(none.hitRatio()).isLessThan(0.9 * shared.hitRatio());
  }

  @Test
  void optionsAreValidated() {
    assertThatThrownBy(() -> Replay.builder(SLICE).replicas(0).build())
        .hasMessageContaining("replicas must be in [1, 1024], was 0");
    assertThatThrownBy(() -> Replay.builder(SLICE).fleetStaleness(Duration.ofMillis(-1)).build())
        .hasMessageContaining("fleetStaleness");
    assertThatThrownBy(() -> Replay.builder(SLICE).fleetMemoryTtl(Duration.ofMillis(-1)).build())
        .hasMessageContaining("fleetMemoryTtl must be >= 0");
    assertThatThrownBy(() -> Replay.Assignment.parse("sticky"))
        .hasMessageContaining("known: round-robin, hash");
    assertThat(Replay.Assignment.parse("round-robin")).isEqualTo(Replay.Assignment.ROUND_ROBIN);
  }
}
