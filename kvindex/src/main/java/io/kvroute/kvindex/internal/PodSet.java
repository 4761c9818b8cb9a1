package io.kvroute.kvindex.internal;

import java.util.Arrays;

/**
 * The entries of one request key once it has more than two, in insertion order. Above a size
 * threshold it also keeps two pod bitsets (pods holding the key on any tier; on GPU) so lookups
 * intersect 64 pods per word. Not thread-safe: guarded by the index lock.
 */
final class PodSet {
  private static final int DENSE_MIN = 8;

  int[] e = new int[4];
  int n;
  int nonGpu; // entries on a tier other than GPU
  long[] any;
  long[] gpu;

  int indexOf(int entry) {
    for (int i = 0; i < n; i++) {
      if (e[i] == entry) {
        return i;
      }
    }
    return -1;
  }

  void add(int entry, int podHigh) {
    if (n == e.length) {
      e = Arrays.copyOf(e, n * 2);
    }
    e[n++] = entry;
    if ((entry & 0xF) != 0) {
      nonGpu++;
    }
    if (any != null) {
      setBits(entry);
    } else if (n >= Math.max(DENSE_MIN, 2 * ((podHigh + 63) >>> 6))) {
      int words = (podHigh + 63) >>> 6;
      any = new long[words];
      gpu = new long[words];
      for (int i = 0; i < n; i++) {
        setBits(e[i]);
      }
    }
  }

  private void setBits(int entry) {
    int p = entry >>> 12;
    int w = p >>> 6;
    if (w >= any.length) {
      any = Arrays.copyOf(any, w + 1);
      gpu = Arrays.copyOf(gpu, w + 1);
    }
    any[w] |= 1L << p;
    if ((entry & 0xF) == 0) {
      gpu[w] |= 1L << p;
    }
  }

  void removeAt(int i) {
    int entry = e[i];
    System.arraycopy(e, i + 1, e, i, n - i - 1);
    n--;
    if ((entry & 0xF) != 0) {
      nonGpu--;
    }
    if (any != null) {
      int p = entry >>> 12;
      boolean stillAny = false;
      boolean stillGpu = false;
      for (int k = 0; k < n; k++) {
        if ((e[k] >>> 12) == p) {
          stillAny = true;
          stillGpu |= (e[k] & 0xF) == 0;
        }
      }
      int w = p >>> 6;
      if (!stillAny) {
        any[w] &= ~(1L << p);
      }
      if (!stillGpu) {
        gpu[w] &= ~(1L << p);
      }
    }
  }
}
