package io.kvroute.testkit.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The step formula, term by term, with numbers worked by hand. */
class CostModelTest {
  private static final CostModel M =
      CostModel.builder()
          .overheadNanos(1_000)
          .weightsReadNanos(10_000)
          .perTokenNanos(100)
          .attentionNanosPerPair(0.5)
          .kvReadNanosPerToken(2)
          .build();

  @Test
  void memoryFloorHoldsUntilComputeExceedsIt() {
    // 50 tokens × 100 ns = 5,000 < 10,000: the weights' read time bounds the step
    assertThat(M.stepNanos(50, 0, 0)).isEqualTo(1_000 + 10_000);
    // 300 tokens × 100 ns = 30,000 > 10,000: compute bound
    assertThat(M.stepNanos(300, 0, 0)).isEqualTo(1_000 + 30_000);
  }

  @Test
  void attentionAndKvReadAddUp() {
    // 200 × 100 = 20,000; 1,000 pairs × 0.5 = 500; 4,000 context tokens × 2 = 8,000
    assertThat(M.stepNanos(200, 1_000, 4_000)).isEqualTo(1_000 + 20_000 + 500 + 8_000);
  }

  @Test
  void attentionPairsOfAChunk() {
    // 4 new tokens after 10: each attends to 10 + its position (1..4): 40 + 10
    assertThat(CostModel.attentionPairs(4, 10)).isEqualTo(50);
    assertThat(CostModel.attentionPairs(1, 0)).isEqualTo(1);
  }

  @Test
  void prefillIsOneStepPerChunkAfterTheCachedPrefix() {
    long first = M.stepNanos(256, CostModel.attentionPairs(256, 0), 0);
    long second = M.stepNanos(144, CostModel.attentionPairs(144, 256), 0);
    assertThat(M.prefillNanos(400, 0, 256)).isEqualTo(first + second);
    // 384 cached: 16 tokens left in one step
    assertThat(M.prefillNanos(400, 384, 256))
        .isEqualTo(M.stepNanos(16, CostModel.attentionPairs(16, 384), 0));
    // a full hit still computes the last token (vLLM caps hits at prompt - 1)
    assertThat(M.prefillNanos(400, 400, 256))
        .isEqualTo(M.stepNanos(1, CostModel.attentionPairs(1, 399), 0));
  }

  @Test
  void decodeStepReadsEveryContextToken() {
    assertThat(M.decodeStepNanos(1, 5_000)).isEqualTo(1_000 + 10_000 + 10_000);
    assertThat(M.decodeStepNanos(200, 200 * 1_000L)).isEqualTo(1_000 + 20_000 + 400_000);
  }

  @Test
  void rejectsNegativeCoefficients() {
    assertThatThrownBy(() -> CostModel.builder().perTokenNanos(-1).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("costModel.perTokenNanos");
    assertThatThrownBy(() -> M.prefillNanos(10, 0, 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("chunkTokens");
  }
}
