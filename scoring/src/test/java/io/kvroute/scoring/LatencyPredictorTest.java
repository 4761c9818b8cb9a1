package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link LatencyPredictor}: learns a latency law from tickets, keeps its live state right through
 * every ending, falls back to the pooled model, stays bounded, reports predicted against actual;
 * the {@code predicted-latency-scorer} and {@link LatencySlo} headers.
 */
class LatencyPredictorTest {

  /** An engine whose TTFT is 50 ms + 100 µs per token of its own and of the prefill ahead. */
  private static double ttftSeconds(long own, long ahead) {
    return 0.05 + 1e-4 * (own + ahead);
  }

  /** Rounds of three requests sent together to {@code endpoint} and answered in order. */
  private static void train(LatencyPredictor p, String endpoint, int rounds, long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    long t = 0;
    for (int r = 0; r < rounds; r++) {
      List<LatencyPredictor.Ticket> open = new ArrayList<>();
      List<Long> sizes = new ArrayList<>();
      for (int k = 0; k < 3; k++) {
        long u = 100 + rnd.nextInt(8000);
        open.add(p.dispatched(endpoint, endpoint, u, 0, t));
        sizes.add(u);
      }
      long ahead = 0;
      for (int k = 0; k < 3; k++) {
        long u = sizes.get(k);
        long first = t + Math.round(ttftSeconds(u, ahead) * 1e9);
        open.get(k).firstToken(first);
        open.get(k).finished(first + 100 * 20_000_000L, 101);
        ahead += u;
      }
      t += 10_000_000_000L;
    }
  }

  @Test
  void learnsTheLatencyLawFromWhatItObserves() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    LatencyPredictor p = LatencyPredictor.builder().meterRegistry(registry).build();
    assertThat(p.predict("e", 1000, 0).knowsTtft()).isFalse();
    train(p, "e", 200, 1);
    // alone: 50 ms + 0.1 ms per token
    LatencyPredictor.Prediction idle = p.predict("e", 4000, 0);
    assertThat(idle.ttftNanos() / 1e9).isCloseTo(ttftSeconds(4000, 0), within(0.05));
    // with 6000 tokens routed ahead and not answered yet
    List<LatencyPredictor.Ticket> ahead = new ArrayList<>();
    ahead.add(p.dispatched("e", "e", 2000, 0, 0));
    ahead.add(p.dispatched("e", "e", 4000, 0, 0));
    assertThat(p.prefillQueueTokens("e")).isEqualTo(6000);
    assertThat(p.predict("e", 4000, 0).ttftNanos() / 1e9)
        .isCloseTo(ttftSeconds(4000, 6000), within(0.05));
    assertThat(p.predictIdle("e", 4000, 0).ttftNanos())
        .isCloseTo(idle.ttftNanos(), org.assertj.core.data.Percentage.withPercentage(1));
    // TPOT: 20 ms per token
    assertThat(idle.tpotNanos() / 1e9).isCloseTo(0.02, within(0.05));
    // explainable: the coefficient of the request's own tokens is 1 s per 10k tokens
    Map<String, Double> c = p.ttftCoefficients("e");
    assertThat(c.get("uncachedTokens/1e4"))
        .isCloseTo(1.0, org.assertj.core.data.Offset.offset(0.1));
    assertThat(c.get("prefillQueueTokens/1e4"))
        .isCloseTo(1.0, org.assertj.core.data.Offset.offset(0.1));
    assertThat(registry.get("kvroute.slo.actual").tag("latency", "ttft").timer().count())
        .isEqualTo(600);
    assertThat(registry.get("kvroute.slo.prediction.error").tag("latency", "ttft").summary().mean())
        .isLessThan(0.2);
    ahead.forEach(LatencyPredictor.Ticket::abandon);
    assertThat(p.prefillQueueTokens("e")).isZero();
  }

  private static org.assertj.core.data.Percentage within(double fraction) {
    return org.assertj.core.data.Percentage.withPercentage(fraction * 100);
  }

  @Test
  void anEndpointWithoutSamplesOfItsOwnIsPredictedByThePooledModel() {
    LatencyPredictor p = LatencyPredictor.builder().build();
    train(p, "a", 100, 2);
    assertThat(p.predict("b", 3000, 0).ttftNanos() / 1e9)
        .isCloseTo(ttftSeconds(3000, 0), within(0.05));
    assertThat(p.ttftCoefficients("b")).isNotEmpty();
  }

  @Test
  void everyEndingLeavesTheLiveStateAsItFoundIt() {
    LatencyPredictor p = LatencyPredictor.builder().build();
    LatencyPredictor.Ticket abandoned = p.dispatched("e", "e", 500, 100, 0);
    LatencyPredictor.Ticket decoding = p.dispatched("e", "d", 700, 0, 0);
    LatencyPredictor.Ticket unanswered = p.dispatched("e", "e", 900, 0, 0);
    assertThat(p.prefillQueueTokens("e")).isEqualTo(2100);
    abandoned.abandon();
    abandoned.abandon();
    decoding.firstToken(1_000_000);
    decoding.firstToken(2_000_000); // once only
    assertThat(decoding.observedTtftNanos()).isEqualTo(1_000_000);
    assertThat(p.prefillQueueTokens("e")).isEqualTo(900);
    unanswered.finished(5_000_000, 10); // ended without a first token
    decoding.finished(9_000_000, 5);
    decoding.abandon();
    assertThat(p.prefillQueueTokens("e")).isZero();
    assertThat(p.size()).isEqualTo(2);
    p.remove("e");
    assertThat(p.size()).isEqualTo(1);
  }

  @Test
  void endpointsBeyondTheBoundShareThePooledModel() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    LatencyPredictor p = LatencyPredictor.builder().maxEndpoints(2).meterRegistry(registry).build();
    for (int i = 0; i < 5; i++) {
      p.dispatched("e" + i, "e" + i, 10, 0, 0).abandon();
    }
    assertThat(p.size()).isEqualTo(2);
    assertThat(registry.get("kvroute.slo.predictor.dropped").counter().count()).isEqualTo(3);
    assertThat(registry.get("kvroute.slo.predictor.endpoints").gauge().value()).isEqualTo(2);
  }

  @Test
  void builderErrorsNameTheField() {
    assertThatThrownBy(() -> LatencyPredictor.builder().window(0).build())
        .hasMessageContaining("latencyPredictor.window");
    assertThatThrownBy(() -> LatencyPredictor.builder().minSamples(0).build())
        .hasMessageContaining("latencyPredictor.minSamples");
  }

  @Test
  void theScorerPrefersTheEndpointPredictedFastestOrWithTheMostHeadroom() {
    Scheduler s =
        Scheduler.builder()
            .profile(
                Profile.builder(Scheduler.DECODE_PROFILE)
                    .scorer(Scorers.predictedLatency(), 1)
                    .picker(Pickers.maxScore())
                    .build())
            .approximateIndexing(false)
            .build();
    LatencyPredictor p = s.latencyPredictor();
    train(p, "busy", 100, 3);
    train(p, "idle", 100, 4);
    LatencyPredictor.Ticket load = p.dispatched("busy", "busy", 20_000, 0, 0);
    Endpoint busy = TestSupport.ep("busy");
    Endpoint idle = TestSupport.ep("idle");
    SchedulingRequest r =
        SchedulingRequest.builder()
            .model("m")
            .tokenIds(new int[3000])
            .candidates(List.of(busy, idle))
            .build();
    Decision d = s.pick(r);
    assertThat(d.primary()).contains(idle);
    // with an objective both can meet, both score at least 0.5; the idle one more
    Decision withSlo =
        s.pick(r.toBuilder().slo(LatencySlo.of(Duration.ofSeconds(10), null)).build());
    assertThat(withSlo.primary()).contains(idle);
    load.abandon();
  }

  @Test
  void headroomScores() {
    LatencySlo slo = LatencySlo.of(Duration.ofMillis(1000), Duration.ofMillis(50));
    assertThat(Scorers.PredictedLatencyScorer.headroomScore(slo, 0, 0)).isEqualTo(1.0);
    assertThat(Scorers.PredictedLatencyScorer.headroomScore(slo, 500_000_000L, 0)).isEqualTo(0.75);
    assertThat(Scorers.PredictedLatencyScorer.headroomScore(slo, 1_000_000_000L, 25_000_000L))
        .isEqualTo(0.5);
    assertThat(Scorers.PredictedLatencyScorer.headroomScore(slo, 1_500_000_000L, 0))
        .isEqualTo(0.25);
    assertThat(Scorers.PredictedLatencyScorer.headroomScore(slo, 3_000_000_000L, 0)).isZero();
    assertThat(Scorers.PredictedLatencyScorer.headroomScore(slo, -1, -1)).isEqualTo(0.5);
  }

  @Test
  void objectivesComeFromHeadersAndDefaults() {
    Map<String, String> h = Map.of(LatencySlo.TTFT_HEADER, "250", LatencySlo.TPOT_HEADER, " 40 ");
    LatencySlo slo = LatencySlo.fromHeaders(n -> Optional.ofNullable(h.get(n)));
    assertThat(slo.ttft()).contains(Duration.ofMillis(250));
    assertThat(slo.tpot()).contains(Duration.ofMillis(40));
    assertThat(LatencySlo.fromHeaders(n -> Optional.empty())).isSameAs(LatencySlo.NONE);
    LatencySlo defaults = LatencySlo.of(Duration.ofSeconds(2), Duration.ofMillis(50));
    assertThat(LatencySlo.of(Duration.ofMillis(100), null).orElse(defaults))
        .isEqualTo(LatencySlo.of(Duration.ofMillis(100), Duration.ofMillis(50)));
    assertThat(LatencySlo.NONE.orElse(defaults)).isEqualTo(defaults);
    for (String bad : List.of("0", "-5", "1.5", "soon", "86400001")) {
      assertThatThrownBy(
              () ->
                  LatencySlo.fromHeaders(
                      n -> n.equals(LatencySlo.TTFT_HEADER) ? Optional.of(bad) : Optional.empty()))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining(LatencySlo.TTFT_HEADER);
    }
  }
}
