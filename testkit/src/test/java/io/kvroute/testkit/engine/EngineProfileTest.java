package io.kvroute.testkit.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Each shipped profile reproduces the figures its public source states, to ±20%: a lone request's
 * TTFT or the prefill rate, and the inter-token latency of a decode step at the stated batch.
 */
class EngineProfileTest {

  @Test
  void everyProfileMatchesItsSourceWithin20Percent() {
    for (EngineProfile p : EngineProfile.all()) {
      Set<EngineProfile.FigureKind> kinds = EnumSet.noneOf(EngineProfile.FigureKind.class);
      for (EngineProfile.Figure f : p.sourceFigures()) {
        kinds.add(f.kind());
        double predicted = p.predict(f);
        assertThat(predicted)
            .as("%s: %s (predicted %.2f)", p.name(), f.statement(), predicted)
            .isBetween(f.value() * 0.8, f.value() * 1.2);
      }
      assertThat(kinds)
          .as("%s states a prefill rate and a decode ITL", p.name())
          .contains(
              EngineProfile.FigureKind.PREFILL_TOKENS_PER_SECOND, EngineProfile.FigureKind.ITL_MS);
      assertThat(p.source()).isNotBlank();
    }
  }

  @Test
  void profilesCarryVllmSchedulerDefaultsForLargeGpus() {
    for (EngineProfile p : EngineProfile.all()) {
      assertThat(p.blockSize()).isEqualTo(16);
      assertThat(p.maxNumBatchedTokens()).isEqualTo(8192);
      assertThat(p.maxNumSeqs()).isEqualTo(1024);
    }
    // KV capacity in tokens, as derived in the javadoc
    assertThat(EngineProfile.LLAMA_70B_FP8_2XH100.kvBlocks() * 16L).isEqualTo(211_200);
    assertThat(EngineProfile.LLAMA_8B_FP8_H200.kvBlocks() * 16L).isEqualTo(1_744_000);
  }

  @Test
  void namedProfilesAndErrors() {
    assertThat(EngineProfile.named("llama-3.1-8b-fp8-h200"))
        .isSameAs(EngineProfile.LLAMA_8B_FP8_H200);
    assertThatThrownBy(() -> EngineProfile.named("gpt-5"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("known: llama-3.3-70b-fp8-2xh100, llama-3.1-8b-fp8-h200");
    assertThatThrownBy(() -> EngineProfile.builder("x").build())
        .hasMessageContaining("costModel is required");
    assertThatThrownBy(() -> EngineProfile.LLAMA_8B_FP8_H200.toBuilder().kvBlocks(0).build())
        .hasMessageContaining("kvBlocks must be > 0");
  }
}
