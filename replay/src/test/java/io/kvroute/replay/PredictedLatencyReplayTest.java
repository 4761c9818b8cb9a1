package io.kvroute.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The {@code precise-latency} strategy: the precise strategy's default profiles plus the {@code
 * predicted-latency-scorer}, reading a latency predictor that learns from the replay's own
 * latencies. At weight 0 it routes exactly as {@code precise} (so its profiles are precise's); with
 * a weight the scorer changes the routing, with and without an objective; the same inputs and seed
 * give the same figures.
 */
class PredictedLatencyReplayTest {
  private static final Workload SLICE = Workload.mooncakeTrace(WorkloadTest.SYNTHETIC).first(200);

  private static ReplayReport run(Replay.Builder b) {
    return b.build().run(ReplayListener.NONE);
  }

  private static Replay.Builder both() {
    return Replay.builder(SLICE)
        .pods(4)
        .speed(0.5)
        .strategies(List.of(Strategy.PRECISE, Strategy.PRECISE_LATENCY));
  }

  /** The strategy's figures as JSON, its name and the wall time left out. */
  private static String figures(ReplayReport r, String name) throws Exception {
    int i = r.strategies().indexOf(r.strategy(name).orElseThrow());
    ObjectNode s = (ObjectNode) ReplayTest.JSON.readTree(r.toJson()).get("strategies").get(i);
    s.remove("name");
    return s.toString();
  }

  @Test
  void atWeightZeroItRoutesAsPrecise() throws Exception {
    ReplayReport r = run(both().latencyWeight(0));
    assertThat(figures(r, "precise-latency")).isEqualTo(figures(r, "precise"));
  }

  @Test
  void theScorerChangesTheRoutingWithAndWithoutAnObjective() throws Exception {
    ReplayReport aiming = run(both());
    ReplayReport fastest = run(both().latencyObjective(false));
    // precise does not read the predictor: the objective's absence changes nothing for it
    assertThat(figures(fastest, "precise")).isEqualTo(figures(aiming, "precise"));
    String precise = figures(aiming, "precise");
    assertThat(figures(aiming, "precise-latency")).isNotEqualTo(precise);
    assertThat(figures(fastest, "precise-latency"))
        .isNotEqualTo(precise)
        .isNotEqualTo(figures(aiming, "precise-latency"));
    for (ReplayReport r : List.of(aiming, fastest)) {
      StrategyResult s = r.strategy("precise-latency").orElseThrow();
      assertThat(s.requests() + s.rejected()).isEqualTo(SLICE.size());
      // the predictor the scorer reads learnt from the replay: it predicted, within a factor 2
      assertThat(s.ttftPredictionError()).isBetween(0.0, 1.0);
    }
    assertThat(aiming.description()).contains("predicted-latency scorer x3.0 aiming at the SLO");
    assertThat(fastest.description()).contains("without an objective");
  }

  @Test
  void sameInputsAndSeedGiveTheSameFigures() throws Exception {
    Replay.Builder b =
        Replay.builder(SLICE.first(120))
            .pods(3)
            .strategies(List.of(Strategy.PRECISE_LATENCY))
            .latencyWeight(2);
    // (the seed only breaks ties between equal scores, which the predicted latencies rarely leave)
    String a = figures(run(b.seed(7)), "precise-latency");
    String again = figures(run(b.seed(7)), "precise-latency");
    String fastest = figures(run(b.seed(7).latencyObjective(false)), "precise-latency");
    String fastestAgain = figures(run(b.seed(7).latencyObjective(false)), "precise-latency");
    assertThat(again).isEqualTo(a);
    assertThat(fastestAgain).isEqualTo(fastest);
  }

  @Test
  void eachReplicaLearnsFromWhatItRouted() {
    StrategyResult s =
        run(Replay.builder(SLICE)
                .pods(4)
                .strategies(List.of(Strategy.PRECISE_LATENCY))
                .replicas(2)
                .sharing(false))
            .strategy("precise-latency")
            .orElseThrow();
    assertThat(s.requests() + s.rejected()).isEqualTo(SLICE.size());
    assertThat(s.ttftPredictionError()).isBetween(0.0, 1.0);
  }

  @Test
  void itIsNotInTheDefaultSetAndItsWeightIsValidated() {
    assertThat(Strategy.DEFAULTS).doesNotContain(Strategy.PRECISE_LATENCY);
    assertThat(Strategy.parse("precise-latency")).isEqualTo(Strategy.PRECISE_LATENCY);
    assertThatThrownBy(() -> Replay.builder(SLICE).latencyWeight(-1).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("latencyWeight must be a finite number >= 0, was -1.0");
    assertThatThrownBy(() -> Replay.builder(SLICE).latencyWeight(Double.NaN).build())
        .hasMessageContaining("latencyWeight");
  }
}
