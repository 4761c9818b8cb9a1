package io.kvroute.scoring.internal;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * Speculative prefix entries: right after a request is routed, its request keys are marked as held
 * by the chosen endpoint for a short TTL, so a burst of one prefix does not scatter before the
 * engine's KV events arrive (llm-d's {@code speculativeIndexing}).
 *
 * <p>Bounded to {@code maxEntries} (key, endpoint) entries; the oldest go first. Entries expire in
 * insertion order because they all share one TTL. Thread-safe.
 */
public final class SpeculativeIndex {
  private record Key(long key, String endpointId) {}

  private record Entry(Key key, long expiresAt) {}

  private final long ttlNanos;
  private final int maxEntries;
  private final ConcurrentHashMap<Key, Long> entries = new ConcurrentHashMap<>();
  private final ConcurrentLinkedQueue<Entry> fifo = new ConcurrentLinkedQueue<>();
  private final AtomicInteger queued = new AtomicInteger();
  private final LongAdder evictions = new LongAdder();

  /** An index whose entries live {@code ttlNanos}, holding at most {@code maxEntries}. */
  public SpeculativeIndex(long ttlNanos, int maxEntries) {
    this.ttlNanos = ttlNanos;
    this.maxEntries = maxEntries;
  }

  /** Marks {@code keys} as held by the endpoint until {@code now + ttl}. */
  public void add(String endpointId, long[] keys, long now) {
    expire(now);
    long exp = now + ttlNanos;
    for (long k : keys) {
      Key key = new Key(k, endpointId);
      entries.put(key, exp);
      fifo.add(new Entry(key, exp));
      if (queued.incrementAndGet() > maxEntries) {
        Entry old = fifo.poll();
        if (old != null) {
          queued.decrementAndGet();
          if (entries.remove(old.key(), old.expiresAt())) {
            evictions.increment();
          }
        }
      }
    }
  }

  /** True when no entry is held (the read path then skips the overlay). */
  public boolean isEmpty() {
    return entries.isEmpty();
  }

  /**
   * Extends a match: starting at block {@code from}, counts further consecutive keys the endpoint
   * holds speculatively (unexpired), and returns the new match length.
   */
  public int extend(String endpointId, long[] keys, int from, long now) {
    int i = from;
    while (i < keys.length) {
      Long exp = entries.get(new Key(keys[i], endpointId));
      if (exp == null || exp - now <= 0) {
        break;
      }
      i++;
    }
    return i;
  }

  /** Drops expired entries. */
  public void expire(long now) {
    Entry e;
    while ((e = fifo.peek()) != null && e.expiresAt() - now <= 0) {
      if (fifo.remove(e)) {
        queued.decrementAndGet();
        entries.remove(e.key(), e.expiresAt());
      }
    }
  }

  /** Entries held. */
  public int size() {
    return entries.size();
  }

  /** Entries dropped before expiry because the index was full. */
  public long evictions() {
    return evictions.sum();
  }

  /** Forgets an endpoint's entries. */
  public void remove(String endpointId) {
    entries.keySet().removeIf(k -> k.endpointId().equals(endpointId));
  }
}
