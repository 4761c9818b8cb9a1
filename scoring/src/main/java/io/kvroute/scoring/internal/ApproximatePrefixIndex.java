package io.kvroute.scoring.internal;

import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.ToIntFunction;

/**
 * The router's own record of which endpoint it sent which prompt blocks to, for fleets without KV
 * events (llm-d's approximate prefix producer). A global map from block hash to the endpoints that
 * (probably) hold it, plus one LRU of hashes per endpoint; evicting from an endpoint's LRU removes
 * the endpoint from the global map.
 *
 * <p>Bounds: {@code lruCapacityPerEndpoint} hashes per endpoint and {@code maxEndpoints} endpoints
 * (when a new endpoint does not fit, the one updated longest ago is dropped). Thread-safe: reads
 * are lock-free; updates lock the one endpoint's LRU.
 */
public final class ApproximatePrefixIndex {
  private static final String[] NONE = new String[0];

  private final int lruCapacityPerEndpoint;
  private final int maxEndpoints;
  private final ConcurrentHashMap<Long, String[]> holders = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, EndpointLru> lrus = new ConcurrentHashMap<>();
  private final LongAdder evictions = new LongAdder();
  private final LongAdder entries = new LongAdder();

  /**
   * An empty index.
   *
   * @param lruCapacityPerEndpoint hashes remembered per endpoint (>= 1)
   * @param maxEndpoints endpoints remembered (>= 1)
   */
  public ApproximatePrefixIndex(int lruCapacityPerEndpoint, int maxEndpoints) {
    this.lruCapacityPerEndpoint = lruCapacityPerEndpoint;
    this.maxEndpoints = maxEndpoints;
  }

  /** Records that {@code endpointId} now holds these blocks (most recent use). */
  public void add(String endpointId, long[] hashes, long nanoTime) {
    if (hashes == null || hashes.length == 0) {
      return;
    }
    EndpointLru lru = lrus.get(endpointId);
    if (lru == null) {
      if (lrus.size() >= maxEndpoints) {
        evictOldestEndpoint();
      }
      lru = lrus.computeIfAbsent(endpointId, EndpointLru::new);
    }
    synchronized (lru) {
      lru.lastUpdate = nanoTime;
      for (long h : hashes) {
        if (lru.put(h, Boolean.TRUE) == null) {
          entries.increment();
          holders.compute(h, (k, v) -> append(v, endpointId));
        }
      }
    }
  }

  /**
   * For each candidate, the number of consecutive blocks from block 0 it holds.
   *
   * @param indexOf candidate index of an endpoint id, or -1 when it is not a candidate
   * @param out per-candidate match counts; must be zeroed by the caller
   */
  public void match(long[] hashes, ToIntFunction<String> indexOf, int[] out) {
    for (int i = 0; i < hashes.length; i++) {
      String[] ids = holders.get(hashes[i]);
      if (ids == null) {
        return;
      }
      boolean progressed = false;
      for (String id : ids) {
        int c = indexOf.applyAsInt(id);
        if (c >= 0 && out[c] == i) {
          out[c] = i + 1;
          progressed = true;
        }
      }
      if (!progressed) {
        return;
      }
    }
  }

  /** Forgets everything about an endpoint. */
  public void remove(String endpointId) {
    EndpointLru lru = lrus.remove(endpointId);
    if (lru != null) {
      synchronized (lru) {
        for (Long h : lru.keySet()) {
          holders.computeIfPresent(h, (k, v) -> without(v, endpointId));
          entries.decrement();
        }
        lru.clear();
      }
    }
  }

  /** (hash, endpoint) entries held. */
  public long size() {
    return entries.sum();
  }

  /** Endpoints tracked. */
  public int endpoints() {
    return lrus.size();
  }

  /** Entries dropped because an LRU or the endpoint table was full. */
  public long evictions() {
    return evictions.sum();
  }

  private void evictOldestEndpoint() {
    String oldest = null;
    long t = Long.MAX_VALUE;
    for (Iterator<EndpointLru> it = lrus.values().iterator(); it.hasNext(); ) {
      EndpointLru l = it.next();
      if (l.lastUpdate < t) {
        t = l.lastUpdate;
        oldest = l.endpointId;
      }
    }
    if (oldest != null) {
      EndpointLru l = lrus.get(oldest);
      int n = l == null ? 0 : l.size();
      remove(oldest);
      evictions.add(n);
    }
  }

  private static String[] append(String[] v, String id) {
    if (v == null) {
      return new String[] {id};
    }
    for (String s : v) {
      if (s.equals(id)) {
        return v;
      }
    }
    String[] n = Arrays.copyOf(v, v.length + 1);
    n[v.length] = id;
    return n;
  }

  private static String[] without(String[] v, String id) {
    int at = -1;
    for (int i = 0; i < v.length; i++) {
      if (v[i].equals(id)) {
        at = i;
        break;
      }
    }
    if (at < 0) {
      return v;
    }
    if (v.length == 1) {
      return null;
    }
    String[] n = new String[v.length - 1];
    System.arraycopy(v, 0, n, 0, at);
    System.arraycopy(v, at + 1, n, at, v.length - at - 1);
    return n.length == 0 ? NONE : n;
  }

  private final class EndpointLru extends LinkedHashMap<Long, Boolean> {
    private static final long serialVersionUID = 1L;
    final String endpointId;
    long lastUpdate;

    EndpointLru(String endpointId) {
      super(16, 0.75f, true);
      this.endpointId = endpointId;
    }

    @Override
    protected boolean removeEldestEntry(Map.Entry<Long, Boolean> eldest) {
      if (size() > lruCapacityPerEndpoint) {
        holders.computeIfPresent(eldest.getKey(), (k, v) -> without(v, endpointId));
        evictions.increment();
        entries.decrement();
        return true;
      }
      return false;
    }
  }
}
