package io.kvroute.kvindex.redis.internal;

import java.util.Arrays;

/**
 * The mappings this replica rewrote recently: engine key, pod group (a mapping key exists once per
 * group), last request key and kind, with the time of the write. A store of a block whose mapping
 * is here and younger than the window leaves the mapping's rewrite (its TTL refresh) out; the write
 * script still writes it if the request key it names was absent (the server lost it).
 *
 * <p>Only rewrites are recorded: a mapping Redis already held when this replica wrote it (the block
 * is stored again, typically a shared prefix). A first write (a new block, e.g. a private tail:
 * most blocks are stored once) is not, so new blocks do not push the recurring ones out.
 * Direct-mapped, fixed size (16 bytes per slot); a colliding write replaces the older record.
 *
 * <p><b>Thread-safety.</b> Thread-safe (one monitor; ingestion threads check, the writer thread
 * records).
 */
final class FreshMappings {
  private final long[] tags;
  private final long[] at;
  private final int mask;
  private final long windowMs;

  /**
   * @param size slots (rounded up to a power of two)
   * @param windowMs how long after a write its mapping counts as fresh
   */
  FreshMappings(int size, long windowMs) {
    int cap = Integer.highestOneBit(Math.max(1, size - 1)) << 1;
    tags = new long[cap];
    at = new long[cap];
    mask = cap - 1;
    this.windowMs = windowMs;
  }

  /** The record's tag: never 0 (an empty slot). */
  static long tag(long engineKey, int group, long lastRequestKey, byte kind) {
    long h = engineKey * 0x9E3779B97F4A7C15L;
    h ^= (h >>> 29) ^ (lastRequestKey * 0xC2B2AE3D27D4EB4FL);
    h ^= (h >>> 32) ^ ((group * 0x165667B1L) << 8) ^ kind;
    h *= 0xD6E8FEB86659FD93L;
    h ^= h >>> 32;
    return h == 0 ? 1 : h;
  }

  private int slot(long tag) {
    return (int) (tag >>> 40) & mask;
  }

  /** Whether the mapping of {@code tag} was rewritten less than the window before {@code nowMs}. */
  synchronized boolean fresh(long tag, long nowMs) {
    int s = slot(tag);
    return tags[s] == tag && nowMs - at[s] < windowMs;
  }

  /** Records that Redis applied a rewrite of {@code tag}'s mapping sent no earlier than atMs. */
  synchronized void rewritten(long tag, long atMs) {
    int s = slot(tag);
    tags[s] = tag;
    at[s] = atMs;
  }

  /** Forgets every record (the server may have lost what was written: it restarted). */
  synchronized void clear() {
    Arrays.fill(tags, 0);
  }
}
