package io.kvroute.kvindex.internal;

import io.kvroute.kvindex.backend.StoreSpan;

/**
 * Map from engine key to request key, with a small flag per entry and approximate-LRU eviction by
 * sampling access stamps (a {@link SampledLruTable}). Key 0 is reserved.
 *
 * <p>Memory: 17 bytes per slot (key and value side by side in one {@code long[]}, so a probe brings
 * both in, and one {@code meta} byte holding the flag and a 6-bit stamp). The capacity doubles up
 * to {@code maxSize / 0.8}, so a full map costs about 21 bytes per mapping. Stamps count coarse
 * ticks of {@code maxSize / 16} inserts, so ages are compared over about four turnovers of the map.
 *
 * <p>Not thread-safe: guarded by the index lock.
 */
final class EngineKeyMap extends SampledLruTable {
  static final byte BOUNDARY = StoreSpan.BOUNDARY; // ends at an index-block boundary
  static final byte MID = StoreSpan.MID; // ends inside its (complete) index block
  static final byte MULTI = StoreSpan.MULTI; // several request keys (see the index's multi map)

  private static final int FLAG_BITS = 2;
  private static final int FLAG_MASK = (1 << FLAG_BITS) - 1;
  private static final int STAMP_MASK = 0xFF >>> FLAG_BITS;

  private long evicted; // put: the key evicted to make room, 0 if none

  EngineKeyMap(int maxSize) {
    super(maxSize, 8 - FLAG_BITS, 0, 0x2545F4914F6CDD1DL, true);
  }

  long value(int slot) {
    return tab[2 * slot + 1];
  }

  byte meta(int slot) {
    return (byte) (meta[slot] & FLAG_MASK);
  }

  /** Marks the mapping in {@code slot} as used now. */
  void touch(int slot) {
    meta[slot] = pack(meta[slot] & FLAG_MASK);
  }

  // meta: flag | stamp << FLAG_BITS
  private byte pack(int flag) {
    return (byte) (flag | (tick & STAMP_MASK) << FLAG_BITS);
  }

  @Override
  int stamp(int slot) {
    return (meta[slot] & 0xFF) >>> FLAG_BITS;
  }

  @Override
  void evicting(int slot) {
    evicted = tab[2 * slot];
  }

  /**
   * Puts a mapping; returns the key evicted to make room (0 if none) so the caller can drop side
   * data.
   */
  long put(long k, long v, byte m) {
    int s = find(k);
    if (s >= 0) {
      tab[2 * s + 1] = v;
      meta[s] = pack(m);
      return 0;
    }
    evicted = 0;
    byte packed = pack(m); // the stamp before this insert's tick
    int i = insert(k, v); // may reallocate meta
    meta[i] = packed;
    return evicted;
  }
}
