package io.kvroute.kvindex.internal;

/**
 * Open-addressing (linear probing, backward-shift deletion) map from engine key to request key,
 * with a small flag per entry and approximate-LRU eviction by sampling access stamps. Key 0 is
 * reserved.
 *
 * <p>Memory: 17 bytes per slot ({@code keys[]}, {@code vals[]} and one byte holding the flag and a
 * 6-bit stamp). The capacity doubles up to {@code maxSize / 0.8}, so a full map costs about 21
 * bytes per mapping. Stamps count coarse ticks of {@code maxSize / 16} inserts, so ages are
 * compared over about four turnovers of the map.
 *
 * <p>Not thread-safe: guarded by the index lock.
 */
final class EngineKeyMap {
  static final byte BOUNDARY = 0; // the engine block ends at an index-block boundary
  static final byte MID = 1; // the engine block ends inside its (complete) index block
  static final byte MULTI = 2; // maps to several request keys (see the index's multi map)

  private static final int SAMPLES = 8;
  private static final int FLAG_BITS = 2;
  private static final int FLAG_MASK = (1 << FLAG_BITS) - 1;
  private static final int STAMP_MASK = 0xFF >>> FLAG_BITS;

  private long[] keys;
  private long[] vals;
  private byte[] meta; // flag | stamp << FLAG_BITS
  private int size;
  private final int maxSize;
  private final int maxCapacity;
  private final int tickLen;
  private int tick;
  private int sinceTick;
  private long rnd = 0x2545F4914F6CDD1DL;

  EngineKeyMap(int maxSize) {
    this.maxCapacity = InMemoryBlockIndex.maxCapacity(maxSize);
    this.maxSize = InMemoryBlockIndex.maxSize(maxSize, maxCapacity);
    this.tickLen = Math.max(1, this.maxSize / (STAMP_MASK + 1) * 4);
    alloc(InMemoryBlockIndex.initialCapacity(maxCapacity));
  }

  private void alloc(int cap) {
    keys = new long[cap];
    vals = new long[cap];
    meta = new byte[cap];
  }

  int size() {
    return size;
  }

  int find(long k) {
    long[] ks = keys;
    int cap = ks.length;
    int i = InMemoryBlockIndex.home(k, cap);
    while (true) {
      long x = ks[i];
      if (x == k) {
        return i;
      }
      if (x == 0) {
        return -1;
      }
      if (++i == cap) {
        i = 0;
      }
    }
  }

  /** The key in {@code k}'s home slot (a load that brings the slot into cache). */
  long peek(long k) {
    long[] ks = keys;
    return ks[InMemoryBlockIndex.home(k, ks.length)];
  }

  long value(int slot) {
    return vals[slot];
  }

  byte meta(int slot) {
    return (byte) (meta[slot] & FLAG_MASK);
  }

  /** Marks the mapping in {@code slot} as used now. */
  void touch(int slot) {
    meta[slot] = pack(meta[slot] & FLAG_MASK);
  }

  private byte pack(int flag) {
    return (byte) (flag | (tick & STAMP_MASK) << FLAG_BITS);
  }

  /**
   * Puts a mapping; returns the key evicted to make room (0 if none) so the caller can drop side
   * data.
   */
  long put(long k, long v, byte m) {
    int s = find(k);
    if (s >= 0) {
      vals[s] = v;
      meta[s] = pack(m);
      return 0;
    }
    long evicted = 0;
    if (size >= maxSize) {
      evicted = evictOne();
    } else if (InMemoryBlockIndex.needsGrowth(size, keys.length, maxCapacity)) {
      rehash(InMemoryBlockIndex.grownCapacity(keys.length, maxCapacity));
    }
    int cap = keys.length;
    int i = InMemoryBlockIndex.home(k, cap);
    while (keys[i] != 0) {
      if (++i == cap) {
        i = 0;
      }
    }
    keys[i] = k;
    vals[i] = v;
    meta[i] = pack(m);
    size++;
    if (++sinceTick >= tickLen) {
      sinceTick = 0;
      tick++;
    }
    return evicted;
  }

  private long evictOne() {
    int cap = keys.length;
    int best = -1;
    int bestAge = -1;
    for (int n = 0; n < SAMPLES; n++) {
      rnd ^= rnd << 13;
      rnd ^= rnd >>> 7;
      rnd ^= rnd << 17;
      int i = (int) (((rnd >>> 32) * cap) >>> 32);
      while (keys[i] == 0) {
        if (++i == cap) {
          i = 0;
        }
      }
      int age = (tick - ((meta[i] & 0xFF) >>> FLAG_BITS)) & STAMP_MASK;
      if (age > bestAge) {
        bestAge = age;
        best = i;
      }
    }
    long k = keys[best];
    deleteSlot(best);
    return k;
  }

  void deleteSlot(int i) {
    int cap = keys.length;
    int j = i;
    while (true) {
      if (++j == cap) {
        j = 0;
      }
      long k = keys[j];
      if (k == 0) {
        break;
      }
      if (InMemoryBlockIndex.mayShift(InMemoryBlockIndex.home(k, cap), i, j, cap)) {
        keys[i] = k;
        vals[i] = vals[j];
        meta[i] = meta[j];
        i = j;
      }
    }
    keys[i] = 0;
    size--;
  }

  private void rehash(int cap) {
    long[] ok = keys;
    long[] ov = vals;
    byte[] om = meta;
    alloc(cap);
    for (int s = 0; s < ok.length; s++) {
      long k = ok[s];
      if (k != 0) {
        int i = InMemoryBlockIndex.home(k, cap);
        while (keys[i] != 0) {
          if (++i == cap) {
            i = 0;
          }
        }
        keys[i] = k;
        vals[i] = ov[s];
        meta[i] = om[s];
      }
    }
  }

  void clear() {
    alloc(InMemoryBlockIndex.initialCapacity(maxCapacity));
    size = 0;
  }
}
