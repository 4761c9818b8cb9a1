package io.kvroute.kvindex.internal;

import java.util.Arrays;

/**
 * The pod bitsets of the dense {@link PodSet}s of one index, packed in one {@code long[]} so that a
 * lookup reads a key's pods from a compact array with one load per 64 pods (no object per set, no
 * pointer to chase). Row {@code r} is {@code 2 * stride} words at {@code r * 2 * stride}: the pods
 * holding the key on any tier, then those holding it on GPU. {@code stride} grows (every row is
 * re-laid) when a pod id beyond it is set. Freed rows are reused.
 *
 * <p>Thread-safety: written by one thread at a time (the index's write lock), in the open slot of
 * the key whose row changes; read by lookups, which validate what they read (the slot's version,
 * and the index's {@link Seq} for a re-layout) or hold the read lock. Arrays are replaced when they
 * grow, never shrunk: a lookup reads them through the references it took.
 */
final class PodBits {
  private static final int MAX_ARRAY = Integer.MAX_VALUE - 16;

  private long[] bits = new long[64];
  private final Seq seq;

  /** Rows whose re-layout ({@code stride} growing) is announced through {@code seq}. */
  PodBits(Seq seq) {
    this.seq = seq;
    Arrays.fill(desc, -1);
  }

  private int stride = 1;
  private int top; // rows ever handed out
  private int[] free = new int[16];
  private int freeCount;
  private int[] desc = new int[64]; // by set index: row << 1 | (1 if off GPU entries), or -1

  /**
   * By set index (the index of the set in the index's {@code sets[]}): {@code row << 1 | 1} if the
   * set has a row and entries off GPU, {@code row << 1} if it has a row and all its entries are on
   * GPU, -1 if it has no row. Lookups read this compact array instead of each set object. Replaced
   * when it grows: read it after any write.
   */
  int[] descriptors() {
    return desc;
  }

  /** Records set {@code set}'s descriptor (see {@link #descriptors()}). */
  void describe(int set, int row, boolean offGpu) {
    if (set >= desc.length) {
      int old = desc.length;
      desc = Arrays.copyOf(desc, Math.max(set + 1, old + (old >> 1)));
      Arrays.fill(desc, old, desc.length, -1);
    }
    desc[set] = row < 0 ? -1 : row << 1 | (offGpu ? 1 : 0);
  }

  /** The words per half-row (pods {@code 0 .. 64 * stride - 1}). */
  int stride() {
    return stride;
  }

  /** The packed rows (replaced when they grow: read it after any write). */
  long[] bits() {
    return bits;
  }

  /** A zeroed row wide enough for pods below {@code podHigh}. */
  int alloc(int podHigh) {
    int words = (podHigh + 63) >>> 6;
    if (words > stride) {
      widen(words);
    }
    int r;
    if (freeCount > 0) {
      r = free[--freeCount];
      Arrays.fill(bits, r * 2 * stride, (r + 1) * 2 * stride, 0);
    } else {
      r = top++;
      long need = (long) top * 2 * stride;
      if (need > bits.length) {
        long len = Math.max(need, (long) bits.length + (bits.length >> 1));
        if (len > MAX_ARRAY) {
          throw new IllegalStateException("kvindex: pod bitsets exceed " + MAX_ARRAY + " words");
        }
        bits = Arrays.copyOf(bits, (int) len);
      }
    }
    return r;
  }

  /** Returns row {@code r} to the free list. */
  void free(int r) {
    if (freeCount == free.length) {
      free = Arrays.copyOf(free, freeCount * 2);
    }
    free[freeCount++] = r;
  }

  /** Sets pod {@code p} in row {@code r}, in its GPU half too if {@code gpu}. */
  void set(int r, int p, boolean gpu) {
    int w = p >>> 6;
    if (w >= stride) {
      widen(w + 1);
    }
    int base = r * 2 * stride;
    bits[base + w] |= 1L << p;
    if (gpu) {
      bits[base + stride + w] |= 1L << p;
    }
  }

  /** Clears pod {@code p} from row {@code r}'s any-tier half and/or its GPU half. */
  void clear(int r, int p, boolean any, boolean gpu) {
    int w = p >>> 6;
    if (w >= stride) {
      return;
    }
    int base = r * 2 * stride;
    if (any) {
      bits[base + w] &= ~(1L << p);
    }
    if (gpu) {
      bits[base + stride + w] &= ~(1L << p);
    }
  }

  /** Clears both halves of row {@code r}. */
  void clearRow(int r) {
    Arrays.fill(bits, r * 2 * stride, (r + 1) * 2 * stride, 0);
  }

  /**
   * Whether row {@code r}'s any-tier half has a pod of {@code mask} (a bitset of pod ids, {@code
   * words} long).
   */
  boolean intersects(int r, long[] mask, int words) {
    int base = r * 2 * stride;
    int lim = Math.min(stride, words);
    for (int w = 0; w < lim; w++) {
      if ((bits[base + w] & mask[w]) != 0) {
        return true;
      }
    }
    return false;
  }

  /** Whether pod {@code p} is set in row {@code r}'s any-tier (or, if {@code gpu}, GPU) half. */
  boolean get(int r, int p, boolean gpu) {
    int w = p >>> 6;
    return w < stride && (bits[r * 2 * stride + (gpu ? stride : 0) + w] & 1L << p) != 0;
  }

  private void widen(int words) {
    int s = Math.max(words, stride * 2);
    long len = Math.max((long) top * 2 * s, 64);
    if (len > MAX_ARRAY) {
      throw new IllegalStateException("kvindex: pod bitsets exceed " + MAX_ARRAY + " words");
    }
    long[] nb = new long[(int) len];
    for (int r = 0; r < top; r++) {
      System.arraycopy(bits, r * 2 * stride, nb, r * 2 * s, stride);
      System.arraycopy(bits, r * 2 * stride + stride, nb, r * 2 * s + s, stride);
    }
    seq.open(); // bits and stride change together: a lookup reading both across it retries
    bits = nb;
    stride = s;
    seq.close();
  }
}
