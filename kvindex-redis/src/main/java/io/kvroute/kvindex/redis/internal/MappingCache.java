package io.kvroute.kvindex.redis.internal;

/**
 * A direct-mapped local cache of engine key → (last request key, kind: {@code StoreSpan}'s {@code
 * BOUNDARY}, {@code MID} or {@code MULTI}) for the mappings this replica wrote or read: resolving
 * an event's parent costs no round trip when it hits. A colliding put replaces the older mapping.
 * 17 bytes per slot. Thread-safe (one monitor; ingestion threads only).
 */
final class MappingCache {
  private final long[] keys;
  private final long[] values;
  private final byte[] kinds;
  private final int mask;

  MappingCache(int size) {
    int cap = Integer.highestOneBit(Math.max(1, size - 1)) << 1;
    if (cap < size) {
      cap = size;
    }
    keys = new long[cap];
    values = new long[cap];
    kinds = new byte[cap];
    mask = cap - 1;
  }

  private int slot(long ek) {
    long h = ek * 0x9E3779B97F4A7C15L;
    return (int) (h >>> 40) & mask;
  }

  synchronized void put(long ek, long lastRk, byte kind) {
    int s = slot(ek);
    keys[s] = ek;
    values[s] = lastRk;
    kinds[s] = kind;
  }

  /** The kind (>= 0) and, in {@code out[0]}, the last request key; -1 if absent. */
  synchronized int get(long ek, long[] out) {
    int s = slot(ek);
    if (keys[s] != ek || ek == 0) {
      return -1;
    }
    out[0] = values[s];
    return kinds[s];
  }
}
