package io.kvroute.scoring.internal;

import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * Router-tracked in-flight request counts per endpoint id. Bounded: at most {@code maxEndpoints}
 * ids are tracked; when full, idle ids (count 0) are dropped first, and a new id that still does
 * not fit is not tracked (counted in {@link #overflows()}).
 *
 * <p>Thread-safe and lock-free.
 */
public final class InFlightTracker {
  private final ConcurrentHashMap<String, AtomicInteger> counts = new ConcurrentHashMap<>();
  private final int maxEndpoints;
  private final LongAdder overflows = new LongAdder();

  /** A tracker for at most {@code maxEndpoints} endpoint ids. */
  public InFlightTracker(int maxEndpoints) {
    this.maxEndpoints = maxEndpoints;
  }

  /** The in-flight count of an endpoint (0 when unknown). */
  public int get(String id) {
    AtomicInteger c = counts.get(id);
    return c == null ? 0 : c.get();
  }

  /** Counts one more request on the endpoint. */
  public void increment(String id) {
    AtomicInteger c = counts.get(id);
    if (c == null) {
      if (counts.size() >= maxEndpoints) {
        sweepIdle();
        if (counts.size() >= maxEndpoints) {
          overflows.increment();
          return;
        }
      }
      c = counts.computeIfAbsent(id, k -> new AtomicInteger());
    }
    c.incrementAndGet();
  }

  /** Counts one request less on the endpoint (never below 0). */
  public void decrement(String id) {
    AtomicInteger c = counts.get(id);
    if (c != null) {
      c.getAndUpdate(v -> v > 0 ? v - 1 : 0);
    }
  }

  /** Forgets an endpoint. */
  public void remove(String id) {
    counts.remove(id);
  }

  /** Tracked endpoint ids. */
  public int size() {
    return counts.size();
  }

  /** Sum of all in-flight counts. */
  public long total() {
    long t = 0;
    for (AtomicInteger c : counts.values()) {
      t += c.get();
    }
    return t;
  }

  /** Increments dropped because the tracker was full. */
  public long overflows() {
    return overflows.sum();
  }

  private void sweepIdle() {
    for (Iterator<Map.Entry<String, AtomicInteger>> it = counts.entrySet().iterator();
        it.hasNext(); ) {
      if (it.next().getValue().get() == 0) {
        it.remove();
      }
    }
  }
}
