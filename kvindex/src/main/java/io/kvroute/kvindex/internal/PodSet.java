package io.kvroute.kvindex.internal;

import java.util.Arrays;
import java.util.function.IntConsumer;

/**
 * The entries of one request key once it has more than two, in insertion order. Above a size
 * threshold it also keeps a row of two pod bitsets (pods holding the key on any tier; on GPU) in
 * the index's {@link PodBits}, so lookups intersect 64 pods per word. Written by one thread at a
 * time (the index's write lock), while the key's slot is open (its version odd); read by lookups
 * that validate the slot's version after (see {@link SampledLruTable}).
 */
final class PodSet {
  private static final int DENSE_MIN = 8;

  private final PodBits bits;
  int[] e = new int[4];
  int n;
  int nonGpu; // entries on a tier other than GPU
  int row = -1; // row in bits once dense, else -1
  int purgedAt = -1; // the index's retirement count when this set was last purged of stale entries
  private int id = -1; // index in the index's sets[], once allocated

  PodSet(PodBits bits) {
    this.bits = bits;
  }

  int indexOf(int entry) {
    if (row >= 0 && !bits.get(row, entry >>> 12, false)) {
      return -1; // the pod holds none of this key's entries (one load, not a scan)
    }
    for (int i = 0; i < n; i++) {
      if (e[i] == entry) {
        return i;
      }
    }
    return -1;
  }

  /** Records this set's index in the index's {@code sets[]} (its descriptor's position). */
  void bind(int setIndex) {
    id = setIndex;
    describe();
  }

  private void describe() {
    if (id >= 0) {
      bits.describe(id, row, nonGpu != 0);
    }
  }

  void add(int entry, int podHigh) {
    if (n == e.length) {
      e = Arrays.copyOf(e, n * 2);
    }
    e[n++] = entry;
    if ((entry & 0xF) != 0) {
      nonGpu++;
    }
    if (row >= 0) {
      setBits(entry);
    } else if (n >= Math.max(DENSE_MIN, 2 * ((podHigh + 63) >>> 6))) {
      row = bits.alloc(podHigh);
      for (int i = 0; i < n; i++) {
        setBits(e[i]);
      }
    }
    describe();
  }

  private void setBits(int entry) {
    bits.set(row, entry >>> 12, (entry & 0xF) == 0);
  }

  void removeAt(int i) {
    int entry = e[i];
    System.arraycopy(e, i + 1, e, i, n - i - 1);
    n--;
    if ((entry & 0xF) != 0) {
      nonGpu--;
    }
    if (row >= 0) {
      int p = entry >>> 12;
      boolean stillAny = false;
      boolean stillGpu = false;
      for (int k = 0; k < n; k++) {
        if ((e[k] >>> 12) == p) {
          stillAny = true;
          stillGpu |= (e[k] & 0xF) == 0;
        }
      }
      bits.clear(row, p, !stillAny, !stillGpu);
    }
    describe();
  }

  /**
   * Removes, in one pass, the entries whose pod {@code p} has {@code podState[p] == dead}, handing
   * each to {@code removed}; the row (if any) is rebuilt from what is left. O(n + row width).
   */
  void removeDead(byte[] podState, byte dead, IntConsumer removed) {
    int w = 0;
    for (int i = 0; i < n; i++) {
      int x = e[i];
      if (podState[x >>> 12] == dead) {
        removed.accept(x);
        if ((x & 0xF) != 0) {
          nonGpu--;
        }
      } else {
        e[w++] = x;
      }
    }
    if (w == n) {
      return;
    }
    n = w;
    if (row >= 0) {
      bits.clearRow(row);
      for (int i = 0; i < n; i++) {
        setBits(e[i]);
      }
    }
    describe();
  }

  /** Whether some entry's pod {@code p} has {@code podState[p] == dead}. */
  boolean anyDead(byte[] podState, byte dead) {
    for (int i = 0; i < n; i++) {
      if (podState[e[i] >>> 12] == dead) {
        return true;
      }
    }
    return false;
  }

  /** Whether every entry's pod {@code p} has {@code podState[p] == dead} (false when empty). */
  boolean allDead(byte[] podState, byte dead) {
    for (int i = 0; i < n; i++) {
      if (podState[e[i] >>> 12] != dead) {
        return false;
      }
    }
    return n > 0;
  }

  /** Returns the bitset row (the set is being dropped). */
  void release() {
    if (row >= 0) {
      bits.free(row);
      row = -1;
    }
    describe();
    id = -1;
  }
}
