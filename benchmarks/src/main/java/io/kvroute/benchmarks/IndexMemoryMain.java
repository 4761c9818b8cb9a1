package io.kvroute.benchmarks;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.IndexStats;
import java.util.SplittableRandom;

/**
 * Memory per (block, pod) entry: fills an index with {@code entries} entries over {@code pods}
 * pods, each block held by {@code share} pods (pods in groups of {@code share} store the same
 * chains), and prints used heap after GC divided by entries. Engine-key mappings are included.
 *
 * <p>Usage: {@code java -Xmx4g -cp ... io.kvroute.benchmarks.IndexMemoryMain [entries] [pods]
 * [share]} (defaults 10,000,000 100 4).
 */
public final class IndexMemoryMain {
  private IndexMemoryMain() {}

  /** Runs the measurement. */
  public static void main(String[] args) {
    int entries = args.length > 0 ? Integer.parseInt(args[0]) : 10_000_000;
    int pods = args.length > 1 ? Integer.parseInt(args[1]) : 100;
    int share = args.length > 2 ? Integer.parseInt(args[2]) : 4;
    int blocksPerPod = entries / pods;
    int groups = pods / share;
    int keys = groups * blocksPerPod;
    long before = usedAfterGc();
    BlockIndex index = BlockIndex.inMemory(IndexConfig.builder().maxKeys(keys + 1024).build());
    SplittableRandom rnd = new SplittableRandom(1);
    long start = System.nanoTime();
    for (int g = 0; g < groups; g++) {
      for (int done = 0; done < blocksPerPod; done += 64) {
        int n = Math.min(64, blocksPerPod - done);
        int[] t = IndexFixtures.randomTokens(rnd, n * 16);
        long[] e = IndexFixtures.randomHashes(rnd, n);
        for (int s = 0; s < share; s++) {
          index.blockStored("pod-" + (g * share + s), e, false, 0, t, 16, null, null, 0);
        }
      }
    }
    long nanos = System.nanoTime() - start;
    long after = usedAfterGc();
    IndexStats st = index.stats();
    System.out.printf(
        "entries=%d keys=%d engineKeys=%d pods=%d share=%d%n",
        st.entries(), st.keys(), st.engineKeys(), st.pods(), share);
    System.out.printf(
        "heap used by index: %.1f MiB = %.1f bytes/entry (%.1f bytes/key); fill %.0f ns/entry%n",
        (after - before) / 1048576.0,
        (after - before) / (double) st.entries(),
        (after - before) / (double) st.keys(),
        nanos / (double) st.entries());
    if (index.stats().keys() < 0) {
      System.out.println(index); // keep reachable
    }
  }

  private static long usedAfterGc() {
    Runtime rt = Runtime.getRuntime();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 5; i++) {
      System.gc();
      used = Math.min(used, rt.totalMemory() - rt.freeMemory());
    }
    return used;
  }
}
