package io.kvroute.kvindex;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The compact storage of the in-memory index: a key's entries move between its cell (one entry), a
 * pooled pair and a pooled set as pods come and go, and a full table (not a power of two in size)
 * stays at its bound.
 */
class BlockIndexStorageTest {
  private static final List<String> PODS = List.of("a", "b", "c");

  private static long[] hashes(SplittableRandom rnd, int n) {
    long[] h = new long[n];
    for (int i = 0; i < n; i++) {
      h[i] = rnd.nextLong() | 1;
    }
    return h;
  }

  private static int[] matched(BlockIndex idx, int[] tokens) {
    PrefixMatch m = idx.lookup(idx.requestKeys(tokens, (String) null), PODS);
    return PODS.stream().mapToInt(m::matchedBlocks).toArray();
  }

  @Test
  void entriesMoveBetweenCellPairAndSetAndBack() {
    BlockIndex idx = BlockIndex.inMemory(IndexConfig.builder().blockSize(16).build());
    SplittableRandom rnd = new SplittableRandom(3);
    int[] t = BlockIndexTest.tokens(1, 4 * 16);
    long[] e = hashes(rnd, 4);
    idx.blockStored("a", e, false, 0, t, 16, null, null, 0);
    assertThat(matched(idx, t)).containsExactly(4, 0, 0);
    idx.blockStored("b", e, false, 0, t, 16, null, "CPU", 0); // pair
    assertThat(matched(idx, t)).containsExactly(4, 4, 0);
    idx.blockStored("c", e, false, 0, t, 16, null, null, 0); // set
    assertThat(matched(idx, t)).containsExactly(4, 4, 4);
    assertThat(idx.stats().entries()).isEqualTo(12);
    assertThat(idx.podEntries("b")).isEqualTo(Map.of("CPU", 4L));

    idx.blockRemoved("c", new long[] {e[2], e[3]}, null, 0);
    assertThat(matched(idx, t)).containsExactly(4, 4, 2);
    idx.removePod("a");
    assertThat(matched(idx, t)).containsExactly(0, 4, 2);
    idx.allBlocksCleared("c");
    assertThat(matched(idx, t)).containsExactly(0, 4, 0);
    assertThat(idx.stats().entries()).isEqualTo(4);

    // pairs shrink back to a cell and their pool slots are reused
    int[] u = BlockIndexTest.tokens(2, 4 * 16);
    long[] f = hashes(rnd, 4);
    for (int round = 0; round < 3; round++) {
      idx.blockStored("a", f, false, 0, u, 16, null, null, 0);
      idx.blockStored("c", f, false, 0, u, 16, null, null, 0);
      assertThat(matched(idx, u)).containsExactly(4, 0, 4);
      idx.blockRemoved("a", f, null, 0);
      assertThat(matched(idx, u)).containsExactly(0, 0, 4);
      idx.blockRemoved("c", new long[] {f[3]}, null, 0);
      assertThat(matched(idx, u)).containsExactly(0, 0, 3);
      idx.blockStored("c", new long[] {f[3]}, true, f[2], new int[0], 16, null, null, 0);
    }
    assertThat(idx.stats().entries()).isEqualTo(4 + 4);
    assertThat(idx.stats().keys()).isEqualTo(8);
    assertThat(idx.podEntries("c")).isEqualTo(Map.of("GPU", 4L));
  }

  @Test
  void fullTableStaysAtItsBoundAndKeepsAKeyInUse() {
    int maxKeys = 1000; // final capacity 1252 slots
    BlockIndex idx =
        BlockIndex.inMemory(IndexConfig.builder().blockSize(16).maxKeys(maxKeys).build());
    SplittableRandom rnd = new SplittableRandom(5);
    int[] hot = BlockIndexTest.tokens(0, 16);
    idx.blockStored("a", hashes(rnd, 1), false, 0, hot, 16, null, null, 0);
    long[] hotKeys = idx.requestKeys(hot, (String) null);
    for (int i = 1; i <= 3 * maxKeys; i++) {
      int[] t = BlockIndexTest.tokens(i, 16);
      idx.blockStored(i % 2 == 0 ? "a" : "b", hashes(rnd, 1), false, 0, t, 16, null, null, 0);
      assertThat(idx.lookup(hotKeys, List.of("a")).matchedBlocks("a")).isEqualTo(1);
    }
    IndexStats st = idx.stats();
    assertThat(st.keys()).isEqualTo(maxKeys);
    assertThat(st.entries()).isEqualTo(maxKeys);
    assertThat(st.evictions()).containsEntry("max_keys", (long) 2 * maxKeys + 1);
    assertThat(st.engineKeys()).isEqualTo(maxKeys);
    assertThat(st.evictions()).containsEntry("max_engine_keys", (long) 2 * maxKeys + 1);
    long perPod = idx.podEntries("a").get("GPU") + idx.podEntries("b").get("GPU");
    assertThat(perPod).isEqualTo(maxKeys);
  }
}
