package io.kvroute.kvindex.hybrid;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Worked examples of the hybrid match (the property test covers random histories). */
class HybridBlockIndexTest {
  private static final int BS = 16;
  private static final int[] TOKENS = new int[BS * 12];

  static {
    for (int i = 0; i < TOKENS.length; i++) {
      TOKENS[i] = 1000 + i;
    }
  }

  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final HybridBlockIndex idx =
      HybridBlockIndex.inMemory(
          IndexConfig.builder().blockSize(BS).modelName("m").meterRegistry(registry).build());

  private static long hash(int block) {
    return 0x1000L + block;
  }

  /** Stores blocks [from, to) of TOKENS for group {@code g} as vLLM would. */
  private void store(String pod, int g, String kind, Integer window, int from, int to) {
    long[] h = new long[to - from];
    for (int i = from; i < to; i++) {
      h[i - from] = hash(i);
    }
    KvEvent.BlockStored.Builder b =
        KvEvent.BlockStored.builder()
            .blockHashes(EngineHashes.ofInts(h))
            .tokenIds(Arrays.copyOfRange(TOKENS, from * BS, to * BS))
            .blockSize(BS)
            .groupIdx(g)
            .kvCacheSpecKind(kind)
            .kvCacheSpecSlidingWindow(window);
    if (from > 0) {
      b.parentBlockHash(hash(from - 1));
    }
    idx.blockStored(pod, b.build());
  }

  private void remove(String pod, int g, int from, int to) {
    for (int i = from; i < to; i++) {
      idx.blockRemoved(
          pod, KvEvent.BlockRemoved.builder().blockHashes(hash(i)).groupIdx(g).build());
    }
  }

  private PrefixMatch lookup(int blocks, String... pods) {
    long[] keys = idx.requestKeys(Arrays.copyOf(TOKENS, blocks * BS), (String) null);
    return idx.lookup(keys, List.of(pods));
  }

  @Test
  void gptOssStyle_theSlidingGroupNeedsOnlyItsWindowBeforeTheEnd() {
    // 12 blocks in both groups; the sliding group (window 128 tokens: 8 blocks of 16) evicted 0-1
    store("a", 0, "full_attention", null, 0, 12);
    store("a", 1, "sliding_window", 128, 0, 12);
    remove("a", 1, 0, 2);
    assertThat(idx.isHybrid("a")).isTrue();
    assertThat(idx.groups("a"))
        .containsEntry(0, GroupSpec.fullAttention(BS))
        .containsEntry(1, GroupSpec.slidingWindow(BS, 128));
    // blocks 4..11 (the 8 before the end) are held in the window group: all 12 reusable
    assertThat(lookup(12, "a").matchedBlocks(0)).isEqualTo(12);
    // the window group lost block 9: the largest end whose 8 preceding blocks it holds is none
    // above 9 (9 itself is missing) ... and at or below 9 needs blocks [e-8, e) without 0-1 and 9
    remove("a", 1, 9, 10);
    assertThat(lookup(12, "a").matchedBlocks(0)).isEqualTo(0);
    // a pod's plain index answer would have been 12 for the full-attention group
    assertThat(
            idx.delegate()
                .lookup(idx.requestKeys(TOKENS, (String) null), List.of("a"))
                .matchedBlocks(0))
        .isEqualTo(12);
  }

  @Test
  void gemmaStyle_slidingGroupsWithOneSpecMustAllHoldABlock() {
    store("a", 0, "full_attention", null, 0, 10);
    store("a", 1, "sliding_window", 64, 0, 10); // 64 tokens: cdiv(63, 16) = 4 blocks
    store("a", 2, "sliding_window", 64, 0, 10);
    assertThat(lookup(10, "a").matchedBlocks(0)).isEqualTo(10);
    remove("a", 2, 8, 9); // one member lost block 8: windows ending at 9 or 10 fail
    // the largest end e <= 8 with blocks [e-4, e) held by both: 8
    assertThat(lookup(10, "a").matchedBlocks(0)).isEqualTo(8);
  }

  @Test
  void mambaStyle_theStateAtTheEndIsWhatCounts() {
    store("a", 0, "full_attention", null, 0, 10);
    // vLLM's mamba "align" mode caches sparse states: here after blocks 4 and 7
    store("a", 1, "mamba", null, 3, 4);
    store("a", 1, "mamba", null, 6, 7);
    assertThat(lookup(10, "a").matchedBlocks(0)).isEqualTo(7);
    assertThat(lookup(6, "a").matchedBlocks(0)).isEqualTo(4);
    assertThat(lookup(3, "a").matchedBlocks(0)).isZero();
    // the full-attention group caps it: it lost block 5
    remove("a", 0, 5, 6);
    assertThat(lookup(10, "a").matchedBlocks(0)).isEqualTo(4);
  }

  @Test
  void plainPodsKeepThePlainAnswerNextToHybridOnes() {
    store("plain", 0, "full_attention", null, 0, 6);
    store("h", 0, "full_attention", null, 0, 6);
    store("h", 1, "mamba", null, 1, 2);
    PrefixMatch m = lookup(6, "plain", "h", "nobody");
    assertThat(m.matchedBlocks(0)).isEqualTo(6);
    assertThat(m.matchedBlocks(1)).isEqualTo(2);
    assertThat(m.score(1)).isEqualTo(2.0);
    assertThat(m.blocksOnTier(1, "GPU")).isEqualTo(2);
    assertThat(m.matchedBlocks(2)).isZero();
    assertThat(idx.pods()).containsExactlyInAnyOrder("plain", "h");
    assertThat(registry.get("kvroute.kvindex.hybrid.pods").gauge().value()).isEqualTo(1.0);
    assertThat(registry.get("kvroute.kvindex.hybrid.lookups").functionCounter().count())
        .isEqualTo(1.0);
  }

  @Test
  void clearAndRemovePodReachEveryGroup() {
    store("a", 0, "full_attention", null, 0, 4);
    store("a", 1, "sliding_window", 32, 0, 4);
    assertThat(idx.podEntries("a")).containsEntry("GPU", 8L);
    idx.allBlocksCleared("a");
    assertThat(idx.podEntries("a")).isEmpty();
    store("a", 0, "full_attention", null, 0, 4);
    store("a", 1, "sliding_window", 32, 0, 4);
    idx.removePod("a");
    assertThat(idx.pods()).isEmpty();
    assertThat(idx.delegate().pods()).isEmpty();
    assertThat(idx.groups("a")).isEmpty();
  }
}
