package io.kvroute.scoring;

import static io.kvroute.scoring.TestSupport.ep;
import static io.kvroute.scoring.TestSupport.eps;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.kvroute.connector.Endpoint;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class ScorersTest {

  private static double[] score(Scorer s, SchedulingContext ctx, List<Endpoint> c) {
    double[] out = new double[c.size()];
    s.score(ctx, c, out);
    return out;
  }

  /** Engine metrics (short for {@link EndpointMetrics#of}, for the tables below). */
  private static EndpointMetrics m(int waiting, int running, double kvCacheUsage) {
    return EndpointMetrics.of(waiting, running, kvCacheUsage);
  }

  /** A context where the endpoints "a", "b", ... have {@code metrics}, in that order. */
  private static FakeContext withMetrics(EndpointMetrics... metrics) {
    FakeContext ctx = FakeContext.of();
    for (int i = 0; i < metrics.length; i++) {
      ctx.metrics.put(String.valueOf((char) ('a' + i)), metrics[i]);
    }
    return ctx;
  }

  // ---------------------------------------------------------------- prefix

  @Test
  void precisePrefixIsTierWeightedRatio() {
    FakeContext ctx = FakeContext.of();
    ctx.hasPrecise = true;
    ctx.precise.put("a", new PrefixCacheMatch(8, 8, 10, 16));
    ctx.precise.put("b", new PrefixCacheMatch(10, 8.0, 10, 16)); // 10 blocks, all CPU (0.8)
    ctx.precise.put("c", new PrefixCacheMatch(0, 0, 10, 16));
    double[] s = score(Scorers.precisePrefixCache(), ctx, eps("a", "b", "c"));
    assertThat(s).containsExactly(new double[] {0.8, 0.8, 0.0}, within(1e-9));
  }

  @Test
  void prefixMatchLengthWeightBlendsAbsoluteLength() {
    FakeContext ctx = FakeContext.of();
    ctx.hasPrecise = true;
    // 4 of 8 blocks of 16 tokens = 64 tokens; scale 128 → length (64/128)^2 = 0.25; ratio 0.5
    ctx.precise.put("a", new PrefixCacheMatch(4, 4, 8, 16));
    Scorer s = Scorers.precisePrefixCache("p", 0.5, 128, false);
    assertThat(score(s, ctx, eps("a"))[0]).isCloseTo(0.5 * 0.25 + 0.5 * 0.5, within(1e-9));
  }

  @Test
  void prefixWithZeroTotalBlocksScoresZero() {
    FakeContext ctx = FakeContext.of();
    ctx.hasPrecise = true;
    assertThat(score(Scorers.precisePrefixCache(), ctx, eps("a"))).containsExactly(0.0);
  }

  @Test
  void precisePrefixFallsBackToApproximateWithoutTokens() {
    FakeContext ctx = FakeContext.of();
    ctx.hasPrecise = false;
    ctx.approximate.put("a", new PrefixCacheMatch(3, 3, 4, 64));
    assertThat(score(Scorers.precisePrefixCache(), ctx, eps("a"))[0]).isEqualTo(0.75);
    Scorer noFallback = Scorers.precisePrefixCache("p", 0, 8192, false);
    assertThat(score(noFallback, ctx, eps("a"))[0]).isEqualTo(0.0);
  }

  @Test
  void approximatePrefixReadsTheApproximateIndexOnly() {
    FakeContext ctx = FakeContext.of();
    ctx.hasPrecise = true;
    ctx.precise.put("a", new PrefixCacheMatch(4, 4, 4, 16));
    ctx.approximate.put("a", new PrefixCacheMatch(1, 1, 4, 64));
    assertThat(score(Scorers.approximatePrefixCache(), ctx, eps("a"))[0]).isEqualTo(0.25);
  }

  @Test
  void prefixParametersAreValidated() {
    assertThatThrownBy(() -> Scorers.precisePrefixCache("p", 1.5, 10, true))
        .hasMessage("p.matchLengthWeight must be in [0, 1], was 1.5");
    assertThatThrownBy(() -> Scorers.approximatePrefixCache("p", 0.1, 0))
        .hasMessage("p.matchLengthScaleTokens must be >= 1, was 0");
  }

  // ---------------------------------------------------------------- load

  @Test
  void loadAwareFormula() {
    FakeContext ctx = withMetrics(m(0, 1, 0.1), m(5, 1, 0.1), m(10, 1, 0.1), m(50, 1, 0.1));
    double[] s = score(Scorers.loadAware(), ctx, eps("a", "b", "c", "d", "unknown"));
    assertThat(s).containsExactly(new double[] {0.5, 0.25, 0.0, 0.0, 0.0}, within(1e-9));
    assertThatThrownBy(() -> Scorers.loadAware("x", 0))
        .hasMessage("x.threshold must be >= 1, was 0");
  }

  @Test
  void kvCacheUtilizationIsOneMinusUsage() {
    FakeContext ctx = withMetrics(m(0, 0, 0.25), m(0, 0, 1.7 /* clamped */), m(0, 0, Double.NaN));
    double[] s = score(Scorers.kvCacheUtilization(), ctx, eps("a", "b", "c", "stale"));
    assertThat(s).containsExactly(0.75, 0.0, 0.0, 0.0);
  }

  @Test
  void queueIsMinMaxAndUnknownGetsNothing() {
    FakeContext ctx = withMetrics(m(2, 0, 0), m(6, 0, 0), m(4, 0, 0));
    double[] s = score(Scorers.queue(), ctx, eps("a", "b", "c", "unknown"));
    assertThat(s).containsExactly(1.0, 0.0, 0.5, 0.0);
  }

  @Test
  void queueTiesScoreOne() {
    FakeContext ctx = withMetrics(m(3, 0, 0), m(3, 0, 0));
    assertThat(score(Scorers.queue(), ctx, eps("a", "b"))).containsExactly(1.0, 1.0);
    assertThat(score(Scorers.queue(), ctx, List.of())).isEmpty();
  }

  @Test
  void runningRequestsIsMinMax() {
    FakeContext ctx = withMetrics(m(0, 10, 0), m(0, 0, 0));
    assertThat(score(Scorers.runningRequests("r"), ctx, eps("a", "b"))).containsExactly(0.0, 1.0);
  }

  @Test
  void activeRequestsFormula() {
    FakeContext ctx = FakeContext.of();
    ctx.inFlight.put("a", 0);
    ctx.inFlight.put("b", 2);
    ctx.inFlight.put("c", 8);
    double[] s = score(Scorers.activeRequests(), ctx, eps("a", "b", "c"));
    assertThat(s).containsExactly(new double[] {1.0, 0.75, 0.0}, within(1e-9));
    double[] t = score(Scorers.activeRequests("x", 2, 0.5), ctx, eps("a", "b", "c"));
    assertThat(t).containsExactly(new double[] {1.0, 1.0, 0.0}, within(1e-9));
    assertThatThrownBy(() -> Scorers.activeRequests("x", -1, 1))
        .hasMessage("x.idleThreshold must be >= 0, was -1");
  }

  @Test
  void loraAffinityTiers() {
    SchedulingRequest r = SchedulingRequest.builder().model("m").lora("ad").build();
    FakeContext ctx = new FakeContext(r);
    EndpointMetrics base = EndpointMetrics.of(0, 0, 0);
    ctx.metrics.put("running", base.withLoras(Set.of("ad"), Set.of(), 2));
    ctx.metrics.put("free", base.withLoras(Set.of("x"), Set.of(), 2));
    ctx.metrics.put("waiting", base.withLoras(Set.of("x"), Set.of("ad"), 2));
    ctx.metrics.put("full", base.withLoras(Set.of("x", "y"), Set.of(), 2));
    double[] s =
        score(Scorers.loraAffinity(), ctx, eps("running", "free", "waiting", "full", "unknown"));
    assertThat(s).containsExactly(1.0, 0.8, 0.6, 0.0, 0.0);
    FakeContext noLora = FakeContext.of();
    assertThat(score(Scorers.loraAffinity(), noLora, eps("a"))).containsExactly(1.0);
  }

  // ---------------------------------------------------------------- sessions

  @Test
  void statelessSessionTokenPinsTheDecodedEndpoint() {
    String token = Base64.getEncoder().encodeToString("b".getBytes(StandardCharsets.UTF_8));
    SchedulingRequest r =
        SchedulingRequest.builder().model("m").header("X-Session-Token", token).build();
    double[] s = score(Scorers.sessionAffinity(), new FakeContext(r), eps("a", "b"));
    assertThat(s).containsExactly(0.0, 1.0);
    SchedulingRequest bad =
        SchedulingRequest.builder().model("m").header("x-session-token", "!!!").build();
    assertThat(score(Scorers.sessionAffinity(), new FakeContext(bad), eps("a", "b")))
        .containsExactly(0.0, 0.0);
  }

  @Test
  void statefulSessionExpiresAfterTtl() {
    SessionAffinity sa =
        SessionAffinity.sessionId(List.of("x-session-id"), Duration.ofSeconds(300), 10);
    Scorer s = Scorers.sessionAffinity("s", sa);
    SchedulingRequest r =
        SchedulingRequest.builder().model("m").header("x-session-id", "conv-1").build();
    s.onRouted(new Routed(r, "decode", ep("b"), false, 0L));
    FakeContext ctx = new FakeContext(r);
    ctx.now = Duration.ofSeconds(299).toNanos();
    assertThat(score(s, ctx, eps("a", "b"))).containsExactly(0.0, 1.0);
    ctx.now = Duration.ofSeconds(301).toNanos();
    assertThat(score(s, ctx, eps("a", "b"))).containsExactly(0.0, 0.0);
  }

  @Test
  void statefulSessionsAreBounded() {
    SessionAffinity sa =
        SessionAffinity.sessionId(List.of("x-session-id"), Duration.ofSeconds(300), 100);
    for (int i = 0; i < 1000; i++) {
      SchedulingRequest r =
          SchedulingRequest.builder().model("m").header("x-session-id", "s" + i).build();
      sa.record(r, ep("a"), i);
    }
    assertThat(sa.size()).isLessThanOrEqualTo(100);
    assertThat(sa.evictions()).isGreaterThan(0);
    assertThatThrownBy(() -> SessionAffinity.sessionId(List.of(), Duration.ofSeconds(1), 1))
        .hasMessageContaining("sessionIdConfig.sources");
  }

  // ---------------------------------------------------------------- no-hit LRU

  @Test
  void noHitLruGivesWarmRequestsHalfEverywhere() {
    FakeContext ctx = FakeContext.of();
    ctx.approximate.put("b", new PrefixCacheMatch(1, 1, 4, 64));
    assertThat(score(Scorers.noHitLru(), ctx, eps("a", "b", "c"))).containsExactly(0.5, 0.5, 0.5);
  }

  @Test
  void noHitLruRanksColdRequestsNeverUsedFirstThenOldest() {
    Scorer s = Scorers.noHitLru();
    SchedulingRequest r = SchedulingRequest.builder().model("m").build();
    s.onRouted(new Routed(r, "decode", ep("a"), true, 0));
    s.onRouted(new Routed(r, "decode", ep("b"), true, 0));
    s.onRouted(new Routed(r, "decode", ep("c"), false, 0)); // warm: not recorded
    FakeContext ctx = FakeContext.of();
    // candidates: a (oldest used), b (newest used), c and d never used (cold)
    double[] out = score(s, ctx, eps("a", "b", "c", "d"));
    // ranks: c, d never used → 1.0; a rank 2 → 1 - 2/3; b rank 3 → 0
    assertThat(out).containsExactly(new double[] {1.0 / 3, 0.0, 1.0, 1.0}, within(1e-9));
    assertThat(score(s, ctx, eps("b"))).containsExactly(1.0);
    assertThatThrownBy(() -> Scorers.noHitLru("n", 0)).hasMessage("n.lruSize must be >= 1, was 0");
  }

  @Test
  void noHitLruIsBounded() {
    Scorers.NoHitLruScorer s = (Scorers.NoHitLruScorer) Scorers.noHitLru("n", 3);
    SchedulingRequest r = SchedulingRequest.builder().model("m").build();
    for (int i = 0; i < 10; i++) {
      s.onRouted(new Routed(r, "decode", ep("e" + i), true, 0));
    }
    assertThat(s.size()).isEqualTo(3);
  }
}
