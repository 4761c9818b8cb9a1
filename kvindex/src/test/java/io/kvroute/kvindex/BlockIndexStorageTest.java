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

  /**
   * Dense keys keep their pods in packed bitset rows; pods registered later may lie beyond every
   * row, and lookups reuse the pod list they resolved last while no pod came or went.
   */
  @Test
  void denseRowsAndReusedPodListsFollowPodChanges() {
    BlockIndex idx = BlockIndex.inMemory(IndexConfig.builder().blockSize(16).build());
    SplittableRandom rnd = new SplittableRandom(7);
    int[] t = BlockIndexTest.tokens(3, 4 * 16);
    long[] e = hashes(rnd, 4);
    List<String> pods = new java.util.ArrayList<>();
    for (int p = 0; p < 70; p++) {
      pods.add("p" + p);
    }
    for (int p = 0; p < 10; p++) {
      idx.blockStored(pods.get(p), e, false, 0, t, 16, null, null, 0); // dense sets, pods < 64
    }
    for (int p = 10; p < 70; p++) { // more pods, none in the dense rows
      int[] u = BlockIndexTest.tokens(100 + p, 16);
      idx.blockStored(pods.get(p), hashes(rnd, 1), false, 0, u, 16, null, null, 0);
    }
    long[] keys = idx.requestKeys(t, (String) null);
    int[] want = new int[70];
    java.util.Arrays.fill(want, 0, 10, 4);
    assertThat(matchedAll(idx, keys, pods)).containsExactly(want);

    idx.blockStored("p65", new long[] {e[0], e[1]}, false, 0, slice(t, 0, 2), 16, null, null, 0);
    want[65] = 2;
    assertThat(matchedAll(idx, keys, pods)).containsExactly(want);
    assertThat(matchedAll(idx, keys, new java.util.ArrayList<>(pods))).containsExactly(want);

    idx.removePod("p3");
    want[3] = 0;
    assertThat(matchedAll(idx, keys, pods)).containsExactly(want);
    idx.blockStored("p69", new long[] {e[0]}, false, 0, slice(t, 0, 1), 16, null, "CPU", 0);
    want[69] = 1;
    assertThat(matchedAll(idx, keys, pods)).containsExactly(want);
    idx.blockStored("p3", new long[] {e[0]}, false, 0, slice(t, 0, 1), 16, null, null, 0);
    want[3] = 1;
    assertThat(matchedAll(idx, keys, pods)).containsExactly(want);
    PrefixMatch m = idx.lookup(keys, pods);
    assertThat(m.score(69)).isEqualTo(0.8);
    assertThat(m.blocksOnTier(69, "CPU")).isEqualTo(1);
    assertThat(m.score(65)).isEqualTo(2.0);

    // a cell and a pair whose pods are beyond the first word
    int[] v = BlockIndexTest.tokens(9, 2 * 16);
    long[] g = hashes(rnd, 2);
    idx.blockStored("p66", g, false, 0, v, 16, null, null, 0);
    idx.blockStored("p67", new long[] {g[0]}, false, 0, slice(v, 0, 1), 16, null, null, 0);
    int[] wantV = new int[70];
    wantV[66] = 2;
    wantV[67] = 1;
    assertThat(matchedAll(idx, idx.requestKeys(v, (String) null), pods)).containsExactly(wantV);

    pods.set(5, "unknown"); // the same list, changed
    want[5] = 0;
    assertThat(matchedAll(idx, keys, pods)).containsExactly(want);
    pods.set(6, "p0"); // a duplicate
    want[6] = 4;
    assertThat(matchedAll(idx, keys, pods)).containsExactly(want);
  }

  private static int[] slice(int[] tokens, int fromBlock, int toBlock) {
    return java.util.Arrays.copyOfRange(tokens, fromBlock * 16, toBlock * 16);
  }

  private static int[] matchedAll(BlockIndex idx, long[] keys, List<String> pods) {
    PrefixMatch m = idx.lookup(keys, keys.length, pods, new PrefixMatch());
    int[] out = new int[pods.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = m.matchedBlocks(i);
    }
    return out;
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
