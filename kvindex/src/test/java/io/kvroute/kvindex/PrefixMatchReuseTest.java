package io.kvroute.kvindex;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import io.kvroute.kvindex.contract.BlockIndexContract;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A {@link PrefixMatch} reused across lookups (it clears only what the previous lookup wrote), on a
 * thread that keeps passing the same pod list (the index then only catches up with the pods that
 * changed), answers exactly as a fresh result of a lookup that resolves its list afresh (on another
 * thread, with a list naming a pod twice, which the index never catches up): random prefixes over
 * random pod lists of 1 to 1,500 pods, most of which match nothing, some lists far smaller or
 * larger than the one before, half of them one unmodifiable list instance used again, with pods
 * storing, being cleared and removed, and media appearing between lookups (the tier count changes).
 */
class PrefixMatchReuseTest {
  private static final int BS = 16;
  private static final String[] MEDIA = {"GPU", "CPU", "DISK", "REMOTE"};

  @Test
  void aReusedResultEqualsAFreshOne() {
    qt().withExamples(60)
        .forAll(integers().all(), lists().of(integers().all()).ofSizeBetween(1, 40))
        .checkAssert(
            (seed, lookups) -> {
              try {
                check(seed, lookups);
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
  }

  private void check(int seed, List<Integer> lookups) throws Exception {
    java.util.concurrent.ExecutorService other =
        java.util.concurrent.Executors.newSingleThreadExecutor();
    try {
      check(seed, lookups, other);
    } finally {
      other.shutdownNow();
    }
  }

  private void check(int seed, List<Integer> lookups, java.util.concurrent.ExecutorService other)
      throws Exception {
    SplittableRandom rnd = new SplittableRandom(seed);
    BlockIndex idx = BlockIndex.inMemory(IndexConfig.builder().build());
    int[] tokens = BlockIndexContract.tokens(seed & 0xFF, 24 * BS);
    long[] engine = BlockIndexContract.engine(BS, tokens, null);
    long[] keys = idx.requestKeys(tokens, (String) null);
    List<String> all = new ArrayList<>();
    for (int p = 0; p < 1500; p++) {
      all.add("pod-" + p);
    }
    PrefixMatch reused = new PrefixMatch();
    List<String> fixed = List.copyOf(all.subList(50, 1350));
    int media = 1;
    for (int op : lookups) {
      // some pods store a prefix, on one of the media seen so far (sometimes a new one)
      if ((op & 3) == 0) {
        media = Math.min(MEDIA.length, media + 1);
      }
      for (int k = 0; k < 1 + (op >>> 2 & 7); k++) {
        String pod = all.get(rnd.nextInt(all.size()));
        int len = 1 + rnd.nextInt(engine.length);
        idx.blockStored(
            pod,
            java.util.Arrays.copyOf(engine, len),
            false,
            0,
            java.util.Arrays.copyOf(tokens, len * BS),
            BS,
            null,
            MEDIA[rnd.nextInt(media)],
            0);
      }
      if ((op & 32) != 0) { // some pods are cleared (they get fresh ids) or removed
        idx.allBlocksCleared(all.get(rnd.nextInt(all.size())));
      }
      if ((op & 64) != 0) {
        idx.removePod(all.get(rnd.nextInt(all.size())));
      }
      int from = rnd.nextInt(all.size());
      int count = 1 + rnd.nextInt(all.size() - from);
      // half the time the same unmodifiable instance (an index may trust it is unchanged)
      List<String> pods = (op & 16) == 0 ? fixed : List.copyOf(all.subList(from, from + count));
      int n = 1 + rnd.nextInt(keys.length);
      List<String> twice = new ArrayList<>(pods);
      twice.add(pods.get(0));
      PrefixMatch fresh = other.submit(() -> idx.lookup(keys, n, twice, new PrefixMatch())).get();
      idx.lookup(keys, n, pods, reused);
      assertThat(fresh.size()).isEqualTo(pods.size() + 1);
      assertThat(reused.size()).isEqualTo(pods.size());
      assertThat(reused.requestBlocks()).isEqualTo(fresh.requestBlocks());
      assertThat(reused.tierNames()).isEqualTo(fresh.tierNames());
      for (int i = 0; i < reused.size(); i++) {
        assertThat(reused.podId(i)).isEqualTo(fresh.podId(i));
        assertThat(reused.matchedBlocks(i)).as("pod %d", i).isEqualTo(fresh.matchedBlocks(i));
        assertThat(reused.score(i)).isEqualTo(fresh.score(i));
        for (int t = 0; t < fresh.tierNames().size(); t++) {
          assertThat(reused.blocksOnTier(i, t)).isEqualTo(fresh.blocksOnTier(i, t));
        }
      }
    }
  }
}
