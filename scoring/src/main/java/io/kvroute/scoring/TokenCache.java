package io.kvroute.scoring;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * A bounded LRU of token ids for {@link Tokenizer}s, keyed by whatever decides the ids (model,
 * prompt or conversation, options): at most {@code maxEntries} entries and {@code maxTokens} tokens
 * in total, the least recently used evicted first; counts hits and misses. Arrays are stored and
 * returned as they are (a caller that hands them out copies them).
 *
 * <p>Thread-safe: the lock is held only for map operations.
 */
public final class TokenCache {
  private final int maxEntries;
  private final long maxTokens;
  private final LinkedHashMap<Object, int[]> map = new LinkedHashMap<>(64, 0.75f, true);
  private long tokens;
  private final LongAdder hits = new LongAdder();
  private final LongAdder misses = new LongAdder();

  /**
   * A cache of at most {@code maxEntries} entries (0 disables it: every lookup misses) and {@code
   * maxTokens} tokens in total; an array longer than {@code maxTokens} is never stored.
   *
   * @throws IllegalArgumentException when a bound is negative
   */
  public TokenCache(int maxEntries, long maxTokens) {
    if (maxEntries < 0 || maxTokens < 0) {
      throw new IllegalArgumentException(
          "cache bounds must be >= 0, were " + maxEntries + ", " + maxTokens);
    }
    this.maxEntries = maxEntries;
    this.maxTokens = maxTokens;
  }

  /** The ids stored under {@code key}, or null; counts a hit or a miss. */
  public int[] get(Object key) {
    if (maxEntries == 0) {
      misses.increment();
      return null;
    }
    int[] v;
    synchronized (map) {
      v = map.get(key);
    }
    (v != null ? hits : misses).increment();
    return v;
  }

  /** Stores {@code ids} under {@code key}, evicting the least recently used beyond the bounds. */
  public void put(Object key, int[] ids) {
    if (maxEntries == 0 || ids.length > maxTokens) {
      return;
    }
    synchronized (map) {
      int[] old = map.put(key, ids);
      if (old != null) {
        tokens -= old.length;
      }
      tokens += ids.length;
      Iterator<Map.Entry<Object, int[]>> it = map.entrySet().iterator();
      while ((map.size() > maxEntries || tokens > maxTokens) && it.hasNext()) {
        tokens -= it.next().getValue().length;
        it.remove();
      }
    }
  }

  /** Lookups that found ids so far. */
  public long hits() {
    return hits.sum();
  }

  /** Lookups that found none so far. */
  public long misses() {
    return misses.sum();
  }

  /** Entries in the cache. */
  public int size() {
    synchronized (map) {
      return map.size();
    }
  }

  /**
   * Registers the cache's meters: the gauge {@code sizeName} and the counters {@code hitsName} and
   * {@code missesName}, each with {@code tags}.
   */
  public void bindTo(
      MeterRegistry registry,
      String sizeName,
      String hitsName,
      String missesName,
      Iterable<Tag> tags) {
    Gauge.builder(sizeName, this, TokenCache::size).tags(tags).register(registry);
    FunctionCounter.builder(hitsName, this, TokenCache::hits).tags(tags).register(registry);
    FunctionCounter.builder(missesName, this, TokenCache::misses).tags(tags).register(registry);
  }
}
