package io.kvroute.benchmarks;

import java.util.Arrays;

/**
 * Floor for lookup: the simplest structure that answers "longest consecutive prefix per pod" — one
 * primitive open-addressing map (linear probing, power-of-two capacity at load ≤ 0.5) from a 64-bit
 * key to a row of pod bits in one flat {@code long[]}, pods being dense ints 0..n-1. A scan probes
 * the keys in order and ANDs each row into the active set until no pod is left. No strings, no
 * tiers, no locks, no eviction state. Not thread-safe.
 */
final class FlatPrefixFloor {
  private final long[] keys;
  private final int[] rows;
  private final int mask;
  private final int words;
  private long[] bits;
  private int rowCount;
  private final long[] active;
  private int size;

  FlatPrefixFloor(int expectedKeys, int pods) {
    int cap = Integer.highestOneBit(Math.max(16, expectedKeys * 2 - 1)) << 1;
    keys = new long[cap];
    rows = new int[cap];
    mask = cap - 1;
    words = (pods + 63) >>> 6;
    bits = new long[64 * words];
    active = new long[words];
  }

  /** A new row of pod bits; returns its id. */
  int newRow() {
    if ((rowCount + 1) * words > bits.length) {
      bits = Arrays.copyOf(bits, bits.length * 2);
    }
    return rowCount++;
  }

  /** Sets pod {@code pod} in row {@code row}. */
  void set(int row, int pod) {
    bits[row * words + (pod >>> 6)] |= 1L << pod;
  }

  /** Maps {@code key} (non-zero) to {@code row}. */
  void put(long key, int row) {
    int i = slot(key);
    while (keys[i] != 0 && keys[i] != key) {
      i = (i + 1) & mask;
    }
    if (keys[i] == 0) {
      size++;
    }
    keys[i] = key;
    rows[i] = row;
  }

  int size() {
    return size;
  }

  private int slot(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h >>> 40) & mask;
  }

  private int get(long key) {
    int i = slot(key);
    while (true) {
      long k = keys[i];
      if (k == key) {
        return rows[i];
      }
      if (k == 0) {
        return -1;
      }
      i = (i + 1) & mask;
    }
  }

  /**
   * For pods {@code 0..pods-1}: {@code matched[p]} = the longest run of {@code keys[0..n)} from 0
   * that pod {@code p} holds. Returns the longest run.
   */
  int scan(long[] request, int n, int pods, int[] matched) {
    long[] act = active;
    Arrays.fill(act, 0);
    for (int p = 0; p < pods; p++) {
      act[p >>> 6] |= 1L << p;
    }
    int b = 0;
    int left = pods;
    for (; b < n && left > 0; b++) {
      int row = get(request[b]);
      if (row < 0) {
        break;
      }
      int base = row * words;
      for (int w = 0; w < words; w++) {
        long a = act[w];
        if (a == 0) {
          continue;
        }
        long nx = a & bits[base + w];
        long gone = a & ~nx;
        while (gone != 0) {
          matched[(w << 6) + Long.numberOfTrailingZeros(gone)] = b;
          left--;
          gone &= gone - 1;
        }
        act[w] = nx;
      }
    }
    int longest = left > 0 ? b : 0;
    for (int w = 0; w < words; w++) {
      long a = act[w];
      while (a != 0) {
        matched[(w << 6) + Long.numberOfTrailingZeros(a)] = b;
        a &= a - 1;
      }
    }
    if (longest == 0) {
      for (int p = 0; p < pods; p++) {
        longest = Math.max(longest, matched[p]);
      }
    }
    return longest;
  }
}
