package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.hybrid.GroupSpec;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The simulator's hybrid mode on real sockets: per-group events, and reuse by vLLM's rule. */
class HybridModeTest {

  @Test
  void eachGroupPublishesItsOwnEventsWithKindAndWindow() {
    try (VllmSimulator sim =
            TestSupport.sim()
                .blockSize(16)
                .kvCacheGroups(
                    List.of(
                        GroupSpec.fullAttention(16),
                        GroupSpec.slidingWindow(16, 32),
                        GroupSpec.mamba(16)))
                .build()
                .start();
        TestSupport.Sub sub = new TestSupport.Sub(sim)) {
      TestSupport.post(
          sim, "/v1/completions", TestSupport.completion(TestSupport.tokens(80, 11), 1));
      List<KvEvent.BlockStored> stored = new ArrayList<>();
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (stored.size() < 3 && System.nanoTime() < deadline) {
        TestSupport.Msg m = sub.next(200);
        if (m == null) {
          continue;
        }
        KvEventBatch b = m.batch();
        for (KvEvent e : b.events()) {
          if (e instanceof KvEvent.BlockStored s) {
            stored.add(s);
          }
        }
      }
      assertThat(stored).hasSize(3);
      KvEvent.BlockStored full = stored.get(0);
      KvEvent.BlockStored window = stored.get(1);
      KvEvent.BlockStored mamba = stored.get(2);
      assertThat(full.groupIdx()).isZero();
      assertThat(full.kvCacheSpecKind()).isEqualTo("full_attention");
      assertThat(full.blockHashes().size()).isEqualTo(5);
      assertThat(window.groupIdx()).isEqualTo(1);
      assertThat(window.kvCacheSpecKind()).isEqualTo("sliding_window");
      assertThat(window.kvCacheSpecSlidingWindow()).isEqualTo(32);
      assertThat(window.blockHashes()).isEqualTo(full.blockHashes());
      // mamba caches the state at the end only; its tokens still cover the span (non-dense)
      assertThat(mamba.groupIdx()).isEqualTo(2);
      assertThat(mamba.kvCacheSpecKind()).isEqualTo("mamba");
      assertThat(mamba.blockHashes().values()).containsExactly(full.blockHashes().get(4));
      assertThat(mamba.tokenIds()).hasSize(80);
    }
  }

  @Test
  void groupsMustShareTheBlockSizeAndStartWithFullAttention() {
    assertThatThrownBy(
            () ->
                TestSupport.sim()
                    .blockSize(16)
                    .kvCacheGroups(List.of(GroupSpec.fullAttention(32)))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("kvCacheGroups[0] has blockSize 32");
    assertThatThrownBy(
            () ->
                TestSupport.sim()
                    .blockSize(16)
                    .kvCacheGroups(List.of(GroupSpec.slidingWindow(16, 64)))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("must be full attention");
  }
}
