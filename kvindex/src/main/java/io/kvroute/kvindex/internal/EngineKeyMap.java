package io.kvroute.kvindex.internal;

/**
 * Open-addressing (linear probing, backward-shift deletion) map from engine key to request key,
 * with a small flag per entry and approximate-LRU eviction by sampling access stamps. Key 0 is
 * reserved. Not thread-safe: guarded by the index lock.
 */
final class EngineKeyMap {
  static final byte BOUNDARY = 0; // the engine block ends at an index-block boundary
  static final byte MID = 1; // the engine block ends inside its (complete) index block
  static final byte MULTI = 2; // maps to several request keys (see the index's multi map)

  private static final int SAMPLES = 8;

  private long[] keys;
  private long[] vals;
  private byte[] meta;
  private int[] stamps;
  private int mask;
  private int size;
  private final int maxSize;
  private final int maxCapacity;
  private long rnd = 0x2545F4914F6CDD1DL;

  EngineKeyMap(int maxSize) {
    this.maxSize = maxSize;
    this.maxCapacity = InMemoryBlockIndex.tableCapacity(maxSize);
    alloc(Math.min(1024, maxCapacity));
  }

  private void alloc(int cap) {
    keys = new long[cap];
    vals = new long[cap];
    meta = new byte[cap];
    stamps = new int[cap];
    mask = cap - 1;
  }

  int size() {
    return size;
  }

  int find(long k) {
    long[] ks = keys;
    int i = InMemoryBlockIndex.spread(k) & mask;
    while (true) {
      long x = ks[i];
      if (x == k) {
        return i;
      }
      if (x == 0) {
        return -1;
      }
      i = (i + 1) & mask;
    }
  }

  long value(int slot) {
    return vals[slot];
  }

  byte meta(int slot) {
    return meta[slot];
  }

  void touch(int slot, int stamp) {
    stamps[slot] = stamp;
  }

  /**
   * Puts a mapping; returns the key evicted to make room (0 if none) so the caller can drop side
   * data.
   */
  long put(long k, long v, byte m, int stamp) {
    int s = find(k);
    if (s >= 0) {
      vals[s] = v;
      meta[s] = m;
      stamps[s] = stamp;
      return 0;
    }
    long evicted = 0;
    if (size >= maxSize) {
      evicted = evictOne(stamp);
    } else if (size + 1 > (keys.length >> 2) * 3 && keys.length < maxCapacity) {
      rehash(keys.length * 2);
    }
    int i = InMemoryBlockIndex.spread(k) & mask;
    while (keys[i] != 0) {
      i = (i + 1) & mask;
    }
    keys[i] = k;
    vals[i] = v;
    meta[i] = m;
    stamps[i] = stamp;
    size++;
    return evicted;
  }

  private long evictOne(int now) {
    int best = -1;
    int bestAge = -1;
    for (int n = 0; n < SAMPLES; n++) {
      rnd ^= rnd << 13;
      rnd ^= rnd >>> 7;
      rnd ^= rnd << 17;
      int i = (int) rnd & mask;
      while (keys[i] == 0) {
        i = (i + 1) & mask;
      }
      int age = now - stamps[i];
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
    int j = i;
    while (true) {
      j = (j + 1) & mask;
      long k = keys[j];
      if (k == 0) {
        break;
      }
      int home = InMemoryBlockIndex.spread(k) & mask;
      // move j to i if home is not cyclically in (i, j]
      if (((j - home) & mask) >= ((j - i) & mask)) {
        keys[i] = k;
        vals[i] = vals[j];
        meta[i] = meta[j];
        stamps[i] = stamps[j];
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
    int[] os = stamps;
    alloc(cap);
    for (int s = 0; s < ok.length; s++) {
      long k = ok[s];
      if (k != 0) {
        int i = InMemoryBlockIndex.spread(k) & mask;
        while (keys[i] != 0) {
          i = (i + 1) & mask;
        }
        keys[i] = k;
        vals[i] = ov[s];
        meta[i] = om[s];
        stamps[i] = os[s];
      }
    }
  }

  void clear() {
    alloc(Math.min(1024, maxCapacity));
    size = 0;
  }
}
