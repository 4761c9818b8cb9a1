package io.kvroute.testkit.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.longs;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The block pool under arbitrary schedules of lookups, step-by-step allocation, lagging caching,
 * decode growth, frees and preemptions over prompts that share prefixes (so hits, evictions and
 * duplicate blocks happen): blocks are conserved, and its KV events, encoded and decoded with the
 * real codec, add up to exactly the hashes it holds.
 */
public class BlockPoolPropertyTest {

  /** A live sequence and how many of its tokens are computed. */
  private static final class Live {
    final BlockPool.Seq seq;
    int computed;

    Live(BlockPool.Seq seq, int computed) {
      this.seq = seq;
      this.computed = computed;
    }
  }

  @Test
  void blocksAreConservedAndEventsDecodeBackToThePoolsState() {
    qt().withExamples(150)
        .forAll(longs().all(), integers().between(3, 48), integers().between(20, 300))
        .checkAssert(BlockPoolPropertyTest::run);
  }

  private static void run(long seed, int numBlocks, int ops) {
    SplittableRandom rnd = new SplittableRandom(seed);
    int bs = 4;
    VllmBlockHasher hasher = VllmBlockHasher.builder().blockSize(bs).build();
    Map<Long, Integer> fromEvents = new HashMap<>();
    BlockPool pool =
        new BlockPool(
            numBlocks,
            0,
            hasher,
            events -> {
              byte[] wire = KvEventCodec.encode(KvEventBatch.of(0, events));
              for (KvEvent e : KvEventCodec.decode(wire).events()) {
                apply(fromEvents, e);
              }
            });
    int[][] prefixes = new int[4][];
    for (int p = 0; p < prefixes.length; p++) {
      prefixes[p] = new int[4 + rnd.nextInt(20)];
      for (int i = 0; i < prefixes[p].length; i++) {
        prefixes[p][i] = rnd.nextInt(50);
      }
    }
    List<Live> live = new ArrayList<>();
    for (int op = 0; op < ops; op++) {
      int kind = rnd.nextInt(10);
      if (kind < 3 || live.isEmpty()) {
        int[] pre = prefixes[rnd.nextInt(prefixes.length)];
        int[] prompt = new int[pre.length + rnd.nextInt(12)];
        System.arraycopy(pre, 0, prompt, 0, pre.length);
        for (int i = pre.length; i < prompt.length; i++) {
          prompt[i] = rnd.nextInt(50);
        }
        BlockPool.Seq s = new BlockPool.Seq(prompt, BlockExtraKeys.NONE, null, null);
        int hit = pool.lookup(s).gpuTokens();
        int n = 1 + rnd.nextInt(prompt.length - hit);
        if (pool.allocateSlots(s, hit, n)) {
          Live l = new Live(s, hit + n);
          live.add(l);
          if (rnd.nextBoolean()) {
            pool.cacheFullBlocks(s, l.computed);
          }
        }
      } else {
        Live l = live.get(rnd.nextInt(live.size()));
        if (kind < 6) {
          if (l.computed >= l.seq.numTokens()) {
            l.seq.append(rnd.nextInt(50)); // decode: the sampled token
          }
          int n = 1 + rnd.nextInt(l.seq.numTokens() - l.computed);
          if (pool.growSlots(l.seq, l.computed, n)) {
            l.computed += n;
          }
        } else if (kind < 8) {
          pool.cacheFullBlocks(l.seq, l.computed);
        } else if (kind == 8) {
          pool.free(l.seq);
          live.remove(l);
        } else {
          pool.preempt(l.seq);
          live.remove(l);
        }
      }
      pool.checkInvariants();
      long held = 0;
      Set<Integer> distinct = new HashSet<>();
      for (Live l : live) {
        held += l.seq.numBlocks();
        for (int i = 0; i < l.seq.numBlocks(); i++) {
          distinct.add(l.seq.blocks[i]);
        }
      }
      assertThat(pool.totalReferences()).isEqualTo(held);
      assertThat(pool.numFreeBlocks() + distinct.size()).isEqualTo(numBlocks);
      assertThat(fromEvents.values()).allMatch(c -> c > 0);
      assertThat(fromEvents).isEqualTo(pool.cachedBlockCounts());
    }
    live.forEach(l -> pool.free(l.seq));
    assertThat(pool.numFreeBlocks()).isEqualTo(numBlocks);
    assertThat(new HashSet<>(pool.cachedHashes())).isEqualTo(fromEvents.keySet());
    pool.reset();
    assertThat(fromEvents).isEmpty();
  }

  /** Applies one event to a hash → block count multiset. */
  public static void apply(Map<Long, Integer> counts, KvEvent e) {
    if (e instanceof KvEvent.BlockStored s) {
      for (long h : s.blockHashes().values()) {
        counts.merge(h, 1, Integer::sum);
      }
    } else if (e instanceof KvEvent.BlockRemoved r) {
      for (long h : r.blockHashes().values()) {
        counts.merge(h, -1, Integer::sum);
        counts.remove(h, 0);
      }
    } else {
      counts.clear();
    }
  }
}
