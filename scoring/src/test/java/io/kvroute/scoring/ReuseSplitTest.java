package io.kvroute.scoring;

import static io.kvroute.scoring.TestSupport.ep;
import static io.kvroute.scoring.TestSupport.eps;
import static io.kvroute.scoring.TestSupport.tokens;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class ReuseSplitTest {

  @Test
  void missesAreClassifiedByCause() {
    assertThat(new ReuseSplit(100, 0, 0, 0).misses())
        .containsExactly(ReuseSplit.Miss.NONE_AVAILABLE);
    assertThat(new ReuseSplit(100, 64, 64, 64).misses()).isEmpty();
    assertThat(new ReuseSplit(100, 64, 32, 32).misses()).containsExactly(ReuseSplit.Miss.LOAD);
    assertThat(new ReuseSplit(100, 64, 64, 16).misses())
        .containsExactly(ReuseSplit.Miss.STALE_INDEX);
    assertThat(new ReuseSplit(100, 64, 48, 16).misses())
        .containsExactly(ReuseSplit.Miss.LOAD, ReuseSplit.Miss.STALE_INDEX);
    // not measured: a stale index cannot be told
    assertThat(new ReuseSplit(100, 64, 64, ReuseSplit.UNKNOWN).misses()).isEmpty();
    // the engine reused more than the index knew: no miss
    assertThat(new ReuseSplit(100, 32, 32, 64).misses()).isEmpty();
    assertThat(ReuseSplit.Miss.STALE_INDEX.tag()).isEqualTo("stale_index");
  }

  @Test
  void missTokensAndSums() {
    ReuseSplit a = new ReuseSplit(100, 64, 48, 16);
    assertThat(a.loadMissTokens()).isEqualTo(16);
    assertThat(a.staleMissTokens()).isEqualTo(32);
    assertThat(new ReuseSplit(100, 64, 48, ReuseSplit.UNKNOWN).staleMissTokens()).isZero();
    ReuseSplit sum = a.plus(new ReuseSplit(50, 32, 32, ReuseSplit.UNKNOWN));
    assertThat(sum).isEqualTo(new ReuseSplit(150, 96, 80, 16));
    assertThat(sum.capturedRatio()).isEqualTo(80.0 / 150);
    assertThat(ReuseSplit.ZERO.deliveredRatio()).isZero();
  }

  @Test
  void invalidSplitsAreRefused() {
    assertThatThrownBy(() -> new ReuseSplit(10, 4, 8, 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("captured (8) must not exceed available (4)");
    assertThatThrownBy(() -> new ReuseSplit(-1, 0, 0, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new ReuseSplit(10, 0, 0, -2))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> ReuseSplit.ZERO.withDelivered(-1))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void reusableTokensFollowVllmsRule() {
    // whole blocks before the prompt's last token
    assertThat(ReuseSplit.reusableTokens(64, 16, 64)).isEqualTo(48);
    assertThat(ReuseSplit.reusableTokens(64, 16, 65)).isEqualTo(64);
    assertThat(ReuseSplit.reusableTokens(64, 16, 1000)).isEqualTo(64);
    assertThat(ReuseSplit.reusableTokens(64, 64, 12)).isZero();
    assertThat(ReuseSplit.reusableTokens(64, 0, 12)).isEqualTo(11);
    assertThat(ReuseSplit.reusableTokens(0, 16, 100)).isZero();
    assertThat(ReuseSplit.reusableTokens(new PrefixCacheMatch(4, 4, 4, 16), 64)).isEqualTo(48);
  }

  @Test
  void aDecisionsSplitComesFromItsPreciseMatches() {
    TestSupport.FakeLookup idx = new TestSupport.FakeLookup(16);
    int[] prompt = tokens(1024, 1);
    idx.store("c", prompt, "m", 64, 1.0); // the whole prompt
    idx.store("b", prompt, "m", 10, 1.0);
    Scheduler s = Scheduler.builder().random(new Random(3)).prefixCacheLookup(idx).build();
    List<Endpoint> c = eps("a", "b", "c", "d");
    Decision d =
        s.pick(SchedulingRequest.builder().model("m").tokenIds(prompt).candidates(c).build());
    assertThat(d.primary().get().id()).isEqualTo("c");
    // c holds all 64 blocks, but the last token is recomputed: 63 whole blocks
    assertThat(ReuseSplit.of(d, ep("c"))).isEqualTo(new ReuseSplit(1024, 1008, 1008, -1));
    assertThat(ReuseSplit.of(d, ep("b"))).isEqualTo(new ReuseSplit(1024, 1008, 160, -1));
    assertThat(ReuseSplit.of(d, ep("b")).misses()).isEqualTo(Set.of(ReuseSplit.Miss.LOAD));
    assertThat(ReuseSplit.of(d, ep("a")).withDelivered(0).misses())
        .containsExactly(ReuseSplit.Miss.LOAD);
  }

  @Test
  void withoutPreciseScoringTheApproximateIndexAnswers() {
    TestSupport.FakeLookup idx = new TestSupport.FakeLookup(16);
    int[] prompt = tokens(256, 2);
    idx.store("a", prompt, "m", 16, 1.0);
    Scheduler s = Scheduler.builder().random(new Random(3)).prefixCacheLookup(idx).build();
    SchedulingRequest r =
        SchedulingRequest.builder()
            .model("m")
            .tokenIds(prompt)
            .candidates(eps("a", "b"))
            .preciseScoring(false)
            .build();
    assertThat(r.toBuilder().build().preciseScoring()).isFalse();
    assertThat(r.withTokenIds(prompt).preciseScoring()).isFalse();
    Decision d = s.pick(r);
    // the index says "a" holds the prompt, but the precise scorer may not read it
    assertThat(d.scores().get("a").get("precise-prefix-cache-scorer")).isZero();
    assertThat(ReuseSplit.of(d, ep("a")).available()).isZero();
  }

  /**
   * The approximate index counts a trailing partial block whole (64 tokens for a 12-token prompt):
   * the split (and the router's x-kvroute-cached-tokens) never exceeds the prompt.
   */
  @Test
  void theApproximateIndexNeverCountsMoreThanThePrompt() {
    Scheduler s = Scheduler.builder().random(new Random(3)).build();
    List<Endpoint> c = eps("a");
    SchedulingRequest r =
        SchedulingRequest.builder().model("m").prompt("short prompt").candidates(c).build();
    Decision first = s.pick(r);
    s.onRouted(first);
    s.onComplete(first);
    Decision again = s.pick(r);
    assertThat(again.prefixMatch(ep("a")).cachedTokens()).isGreaterThan(3);
    ReuseSplit split = ReuseSplit.of(again, ep("a"));
    assertThat(split.promptTokens()).isEqualTo(3); // "short prompt": 12 bytes, 4 to a token
    assertThat(split.captured()).isLessThan(split.promptTokens());
  }

  @Test
  void anUnroutedDecisionHasNoSplit() {
    Scheduler s = Scheduler.builder().build();
    Decision d = s.pick(SchedulingRequest.builder().model("m").build());
    assertThat(ReuseSplit.of(d, ep("a"))).isEqualTo(ReuseSplit.ZERO);
  }
}
