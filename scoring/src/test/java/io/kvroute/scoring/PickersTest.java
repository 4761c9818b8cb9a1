package io.kvroute.scoring;

import static io.kvroute.scoring.TestSupport.eps;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class PickersTest {
  private final List<Endpoint> c = eps("a", "b", "c", "d");

  private static List<String> ids(List<Endpoint> e) {
    return e.stream().map(Endpoint::id).toList();
  }

  @Test
  void maxScorePicksTheBest() {
    FakeContext ctx = FakeContext.of();
    assertThat(ids(Pickers.maxScore().pick(ctx, c, new double[] {0.1, 0.9, 0.3, 0.2})))
        .containsExactly("b");
  }

  @Test
  void topNReturnsFallbacksInScoreOrder() {
    FakeContext ctx = FakeContext.of();
    assertThat(ids(Pickers.topN(3).pick(ctx, c, new double[] {0.1, 0.9, 0.3, 0.2})))
        .containsExactly("b", "c", "d");
    assertThat(ids(Pickers.topN(10).pick(ctx, c, new double[] {0.1, 0.9, 0.3, 0.2})))
        .containsExactly("b", "c", "d", "a");
  }

  @Test
  void tiesAreBrokenAtRandomWithTheInjectedRandom() {
    Map<String, Integer> counts = new HashMap<>();
    FakeContext ctx = FakeContext.of();
    ctx.random = new Random(1);
    for (int i = 0; i < 400; i++) {
      String id = Pickers.maxScore().pick(ctx, c, new double[] {0.5, 0.5, 0.5, 0.1}).get(0).id();
      counts.merge(id, 1, Integer::sum);
    }
    assertThat(counts).containsOnlyKeys("a", "b", "c");
    assertThat(counts.values()).allSatisfy(n -> assertThat(n).isGreaterThan(80));
    // Same seed → same choices.
    FakeContext x = FakeContext.of();
    FakeContext y = FakeContext.of();
    x.random = new Random(9);
    y.random = new Random(9);
    for (int i = 0; i < 20; i++) {
      double[] t = {1, 1, 1, 1};
      assertThat(Pickers.topN(4).pick(x, c, t)).isEqualTo(Pickers.topN(4).pick(y, c, t));
    }
  }

  @Test
  void weightedRandomFollowsScoresAndIgnoresZeros() {
    FakeContext ctx = FakeContext.of();
    ctx.random = new Random(3);
    Map<String, Integer> counts = new HashMap<>();
    Picker p = Pickers.weightedRandom("w", 1);
    for (int i = 0; i < 3000; i++) {
      counts.merge(p.pick(ctx, c, new double[] {3, 1, 0, 0}).get(0).id(), 1, Integer::sum);
    }
    assertThat(counts).containsOnlyKeys("a", "b");
    assertThat(counts.get("a")).isBetween(2000, 2500); // ≈ 3/4
    // Zero-score endpoints still come last as fallbacks.
    List<String> all = ids(Pickers.weightedRandom("w", 4).pick(ctx, c, new double[] {3, 1, 0, 0}));
    assertThat(all).hasSize(4).doesNotHaveDuplicates();
    assertThat(all.subList(2, 4)).containsExactlyInAnyOrder("c", "d");
    // All zero: uniform.
    assertThat(Pickers.weightedRandom("w", 2).pick(ctx, c, new double[4])).hasSize(2);
  }

  @Test
  void randomIgnoresScores() {
    FakeContext ctx = FakeContext.of();
    Map<String, Integer> counts = new HashMap<>();
    for (int i = 0; i < 400; i++) {
      counts.merge(
          Pickers.random("r", 1).pick(ctx, c, new double[] {1, 0, 0, 0}).get(0).id(),
          1,
          Integer::sum);
    }
    assertThat(counts).containsOnlyKeys("a", "b", "c", "d");
  }

  @Test
  void singleCandidateAndValidation() {
    FakeContext ctx = FakeContext.of();
    assertThat(ids(Pickers.topN(3).pick(ctx, eps("x"), new double[] {0}))).containsExactly("x");
    assertThatThrownBy(() -> Pickers.maxScore("p", 0))
        .hasMessage("p.maxNumOfEndpoints must be >= 1, was 0");
  }
}
