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
        .contains("3 gateway replicas (hash), sharing on (staleness 5.0 ms)");
  }

  @Test
  void optionsAreValidated() {
    assertThatThrownBy(() -> Replay.builder(SLICE).replicas(0).build())
        .hasMessageContaining("replicas must be in [1, 1024], was 0");
    assertThatThrownBy(() -> Replay.builder(SLICE).fleetStaleness(Duration.ofMillis(-1)).build())
        .hasMessageContaining("fleetStaleness");
    assertThatThrownBy(() -> Replay.Assignment.parse("sticky"))
        .hasMessageContaining("known: round-robin, hash");
    assertThat(Replay.Assignment.parse("round-robin")).isEqualTo(Replay.Assignment.ROUND_ROBIN);
  }
}
