package io.kvroute.testkit.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.longs;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import io.kvroute.kvindex.hybrid.GroupSpec;
import io.kvroute.kvindex.hybrid.HybridBlockIndex;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The block pool in hybrid mode against kvroute's index fed by the pool's own events: before every
 * request, the prefix kvroute's {@link HybridBlockIndex} predicts for the pod equals the prefix the
 * pool then reuses (its {@code cached_tokens}), over random workloads with shared prefixes,
 * evictions (small pools) and random layouts.
 */
class HybridPoolPropertyTest {
  private static final int BS = 16;

  private static List<GroupSpec> layout(int which, int w) {
    return switch (which) {
      case 0 -> List.of(GroupSpec.fullAttention(BS), GroupSpec.slidingWindow(BS, w));
      case 1 -> List.of(GroupSpec.fullAttention(BS), GroupSpec.mamba(BS));
      case 2 ->
          List.of(
              GroupSpec.fullAttention(BS),
              GroupSpec.slidingWindow(BS, w),
              GroupSpec.slidingWindow(BS, w));
      default ->
          List.of(GroupSpec.fullAttention(BS), GroupSpec.mamba(BS), GroupSpec.slidingWindow(BS, w));
    };
  }

  private final java.util.concurrent.atomic.AtomicInteger shorter =
      new java.util.concurrent.atomic.AtomicInteger();

  @Test
  void kvroutePredictsWhatThePoolReuses() {
    qt().withExamples(60).forAll(longs().all(), integers().between(0, 3)).checkAssert(this::check);
    // the rule mattered: some hits were shorter than the full-attention group's prefix
    assertThat(shorter.get()).isPositive();
  }

  private void check(long seed, int which) {
    Random r = new Random(seed);
    int w = 1 + r.nextInt(6 * BS);
    List<GroupSpec> groups = layout(which, w);
    HybridBlockIndex idx =
        HybridBlockIndex.inMemory(IndexConfig.builder().blockSize(BS).modelName("m").build());
    // vLLM sends BlockRemoved for every evicted copy of a hash, and a hybrid hit shorter than the
    // full-attention prefix recomputes (and caches again) blocks the pool already holds: count
    // the pool's copies so that the index sees a removal only when the last copy goes (the
    // wrapped index keeps one entry per pod and key; see the closing note of issue 29 part 5)
    Map<Long, Integer> copies = new HashMap<>();
    VllmBlockHasher hasher =
        VllmBlockHasher.builder()
            .algorithm(HashAlgorithm.SHA256_CBOR)
            .blockSize(BS)
            .hashSeed("0")
            .build();
    BlockPool pool =
        new BlockPool(
            8 + r.nextInt(40),
            0,
            hasher,
            events -> {
              for (KvEvent e : events) {
                if (e instanceof KvEvent.BlockStored s) {
                  if (s.groupIndex() == 0) {
                    for (long h : s.blockHashes().values()) {
                      copies.merge(h, 1, Integer::sum);
                    }
                  }
                  idx.blockStored("pod", s);
                } else if (e instanceof KvEvent.BlockRemoved rm && rm.groupIndex() != 0) {
                  idx.blockRemoved("pod", rm); // the other groups' caches hold a hash once
                } else if (e instanceof KvEvent.BlockRemoved rm) {
                  long h = rm.blockHashes().get(0);
                  int left = copies.merge(h, -1, Integer::sum);
                  if (left <= 0) {
                    copies.remove(h);
                    idx.blockRemoved("pod", rm);
                  }
                } else {
                  copies.clear();
                  idx.allBlocksCleared("pod");
                }
              }
            },
            groups);
    int[][] families = new int[3][BS * 12];
    for (int[] f : families) {
      for (int i = 0; i < f.length; i++) {
        f[i] = r.nextInt(50_000);
      }
    }
    List<String> history = new ArrayList<>();
    for (int req = 0; req < 25; req++) {
      int[] base = families[r.nextInt(families.length)];
      int len = BS + r.nextInt(base.length - BS);
      int[] prompt = Arrays.copyOf(base, len);
      int diverge = r.nextInt(len);
      for (int i = diverge; i < len; i++) {
        prompt[i] = 50_000 + r.nextInt(50_000);
      }
      BlockPool.Seq seq = new BlockPool.Seq(prompt, BlockExtraKeys.NONE, null, null);
      int maxBlocks = (len - 1) / BS;
      long[] keys = idx.requestKeys(Arrays.copyOf(prompt, maxBlocks * BS), (String) null);
      int predicted = idx.lookup(keys, List.of("pod")).matchedBlocks(0);
      int fullPrefix = pool.cachedPrefixBlocks(pool.hashesOf(seq, maxBlocks * BS), maxBlocks);
      BlockPool.Hit hit = pool.lookup(seq);
      if (hit.gpuTokens() / BS < fullPrefix) {
        shorter.incrementAndGet();
      }
      history.add("len " + len + " diverge " + diverge + " hit " + hit.gpuTokens() / BS);
      assertThat(predicted)
          .as("seed %d layout %s history %s", seed, groups, history)
          .isEqualTo(hit.gpuTokens() / BS);
      if (!pool.allocate(seq, hit.gpuTokens(), len + 1)) {
        continue; // does not fit now (nothing changed)
      }
      pool.cacheFullBlocks(seq, len);
      pool.free(seq);
      if (r.nextInt(20) == 0) {
        pool.reset();
      }
    }
  }
}
