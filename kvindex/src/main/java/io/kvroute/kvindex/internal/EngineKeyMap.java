package io.kvroute.kvindex.internal;

import io.kvroute.kvindex.backend.StoreSpan;

/**
 * Open-addressing (linear probing, backward-shift deletion) map from engine key to request key,
 * with a small flag per entry and approximate-LRU eviction by sampling access stamps. Key 0 is
 * reserved.
 *
 * <p>Memory: 17 bytes per slot (key and value side by side in one {@code long[]}, so a probe brings
 * both in, and one byte holding the flag and a 6-bit stamp). The capacity doubles up to {@code
 * maxSize / 0.8}, so a full map costs about 21 bytes per mapping. Stamps count coarse ticks of
 * {@code maxSize / 16} inserts, so ages are compared over about four turnovers of the map.
 *
 * <p>Not thread-safe: guarded by the index lock.
 */
final class EngineKeyMap {
  static final byte BOUNDARY = StoreSpan.BOUNDARY; // ends at an index-block boundary
  static final byte MID = StoreSpan.MID; // ends inside its (complete) index block
  static final byte MULTI = StoreSpan.MULTI; // several request keys (see the index's multi map)

  private static final int SAMPLES = 8;
  private static final int FLAG_BITS = 2;
  private static final int FLAG_MASK = (1 << FLAG_BITS) - 1;
  private static final int STAMP_MASK = 0xFF >>> FLAG_BITS;

  // slot i: kv[2i] = engine key (0: empty), kv[2i + 1] = request key (one cache line for both)
  private long[] kv;
  private int cap;
  private byte[] meta; // flag | stamp << FLAG_BITS
  private int size;
  private final int maxSize;
  private final int maxCapacity;
  private final int tickLen;
  private int tick;
  private int sinceTick;
  private long rnd = 0x2545F4914F6CDD1DL;

  EngineKeyMap(int maxSize) {
    this.maxCapacity = Math.min(InMemoryBlockIndex.maxCapacity(maxSize), Integer.MAX_VALUE / 2 - 8);
    this.maxSize = InMemoryBlockIndex.maxSize(maxSize, maxCapacity);
    this.tickLen = Math.max(1, this.maxSize / (STAMP_MASK + 1) * 4);
    alloc(InMemoryBlockIndex.initialCapacity(maxCapacity));
  }

  private void alloc(int cap) {
    kv = new long[2 * cap];
    this.cap = cap;
    meta = new byte[cap];
  }

  int size() {
    return size;
  }

  int find(long k) {
    long[] ks = kv;
    int cap = this.cap;
    int i = InMemoryBlockIndex.home(k, cap);
    while (true) {
      long x = ks[2 * i];
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
    return kv[2 * InMemoryBlockIndex.home(k, cap)];
  }

  long value(int slot) {
    return kv[2 * slot + 1];
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
      kv[2 * s + 1] = v;
      meta[s] = pack(m);
      return 0;
    }
    long evicted = 0;
    if (size >= maxSize) {
      evicted = evictOne();
    } else if (InMemoryBlockIndex.needsGrowth(size, cap, maxCapacity)) {
      rehash(InMemoryBlockIndex.grownCapacity(cap, maxCapacity));
    }
    int i = InMemoryBlockIndex.home(k, cap);
    while (kv[2 * i] != 0) {
      if (++i == cap) {
        i = 0;
      }
    }
    kv[2 * i] = k;
    kv[2 * i + 1] = v;
    meta[i] = pack(m);
    size++;
    if (++sinceTick >= tickLen) {
      sinceTick = 0;
      tick++;
    }
    return evicted;
  }

  private long evictOne() {
    int best = -1;
    int bestAge = -1;
    for (int n = 0; n < SAMPLES; n++) {
      rnd ^= rnd << 13;
      rnd ^= rnd >>> 7;
      rnd ^= rnd << 17;
      int i = (int) (((rnd >>> 32) * cap) >>> 32);
      while (kv[2 * i] == 0) {
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
    long k = kv[2 * best];
    deleteSlot(best);
    return k;
  }

  void deleteSlot(int i) {
    int j = i;
    while (true) {
      if (++j == cap) {
        j = 0;
      }
      long k = kv[2 * j];
      if (k == 0) {
        break;
      }
      if (InMemoryBlockIndex.mayShift(InMemoryBlockIndex.home(k, cap), i, j, cap)) {
        kv[2 * i] = k;
        kv[2 * i + 1] = kv[2 * j + 1];
        meta[i] = meta[j];
        i = j;
      }
    }
    kv[2 * i] = 0;
    size--;
  }

  private void rehash(int capacity) {
    long[] old = kv;
    int oldCap = cap;
    byte[] om = meta;
    alloc(capacity);
    for (int s = 0; s < oldCap; s++) {
      long k = old[2 * s];
      if (k != 0) {
        int i = InMemoryBlockIndex.home(k, cap);
        while (kv[2 * i] != 0) {
          if (++i == cap) {
            i = 0;
          }
        }
        kv[2 * i] = k;
        kv[2 * i + 1] = old[2 * s + 1];
        meta[i] = om[s];
      }
    }
  }

  void clear() {
    alloc(InMemoryBlockIndex.initialCapacity(maxCapacity));
    size = 0;
  }
}
