package io.kvroute.edge.internal;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The server-wide budget of buffered request-body bytes. A connection reserves before it grows a
 * body array and releases when its exchange ends; one that cannot reserve pauses and waits here
 * until memory is released. Bodies past {@link #SMALL} bytes may use at most three quarters of the
 * budget, so that stalled large uploads cannot starve small requests.
 *
 * <p>Thread-safe (atomics and a lock-free queue).
 */
final class BodyBudget {
  /** Bodies up to this size may use the whole budget. */
  static final int SMALL = 64 << 10;

  private final long max;
  private final long largeMax;
  private final AtomicLong used = new AtomicLong();
  private final AtomicLong peak = new AtomicLong();
  private final AtomicLong epoch = new AtomicLong();
  private final AtomicInteger paused = new AtomicInteger();
  private final ConcurrentLinkedQueue<Http1Connection> waiting = new ConcurrentLinkedQueue<>();

  BodyBudget(long max) {
    this.max = max;
    this.largeMax = Math.max(max - max / 4, 1);
  }

  /** Reserves {@code n} bytes for a body that will be {@code total} bytes; false if over. */
  boolean tryReserve(long n, long total) {
    long limit = total > SMALL ? largeMax : max;
    while (true) {
      long u = used.get();
      long next = u + n;
      if (next > limit && u > 0) {
        return false;
      }
      if (used.compareAndSet(u, next)) {
        long p = peak.get();
        while (next > p && !peak.compareAndSet(p, next)) {
          p = peak.get();
        }
        return true;
      }
    }
  }

  /** Incremented at every release; a connection reads it before trying to reserve. */
  long epoch() {
    return epoch.get();
  }

  /** Releases {@code n} bytes and wakes the connections waiting for memory. */
  void release(long n) {
    if (n == 0) {
      return;
    }
    used.addAndGet(-n);
    epoch.incrementAndGet();
    wakeAll();
  }

  private void wakeAll() {
    Http1Connection c;
    while ((c = waiting.poll()) != null) {
      c.resumeAfterMemory();
    }
  }

  /**
   * Parks a connection until memory is released; {@code seen} is the {@link #epoch()} read before
   * its failed reservation, so that a release in between is not missed.
   */
  void await(Http1Connection c, long seen) {
    waiting.add(c);
    if (epoch.get() != seen) {
      wakeAll();
    }
  }

  void pausedDelta(int d) {
    paused.addAndGet(d);
  }

  int paused() {
    return paused.get();
  }

  long used() {
    return used.get();
  }

  long peak() {
    return peak.get();
  }
}
