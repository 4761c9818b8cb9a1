package io.kvroute.benchmarks;

import io.kvroute.kvindex.BlockIndex;
import java.util.SplittableRandom;

/** Shared data generation for the index benchmarks (in-memory and Redis). */
public final class IndexFixtures {
  private IndexFixtures() {}

  /** {@code n} random token ids below 150,000. */
  public static int[] randomTokens(SplittableRandom rnd, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = rnd.nextInt(150_000);
    }
    return t;
  }

  /** {@code n} random engine block hashes. */
  public static long[] randomHashes(SplittableRandom rnd, int n) {
    long[] h = new long[n];
    for (int i = 0; i < n; i++) {
      h[i] = rnd.nextLong();
    }
    return h;
  }

  /**
   * Stores {@code blocks} blocks of {@code tokens} (from the root) for {@code pod}, in events of at
   * most {@code perEvent} blocks chained by parent hash, engine hashes from {@code engine}.
   */
  public static void storeChain(
      BlockIndex index,
      String pod,
      int[] tokens,
      long[] engine,
      int blocks,
      int perEvent,
      int blockSize) {
    for (int from = 0; from < blocks; from += perEvent) {
      int to = Math.min(blocks, from + perEvent);
      long[] hashes = java.util.Arrays.copyOfRange(engine, from, to);
      int[] toks = java.util.Arrays.copyOfRange(tokens, from * blockSize, to * blockSize);
      index.blockStored(
          pod, hashes, from > 0, from > 0 ? engine[from - 1] : 0, toks, blockSize, null, null, 0);
    }
  }

  /** Pod names {@code pod-0 … pod-(n-1)}. */
  public static String[] podNames(int n) {
    String[] pods = new String[n];
    for (int p = 0; p < n; p++) {
      pods[p] = "pod-" + p;
    }
    return pods;
  }
}
