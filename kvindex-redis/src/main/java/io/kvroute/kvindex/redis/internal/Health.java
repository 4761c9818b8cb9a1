package io.kvroute.kvindex.redis.internal;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reachability of the server: failures counted per operation, logged once per outage (WARN when it
 * starts, INFO when the server answers again), at most one WARN per 10 s (on a Cluster with one
 * shard down, failures and successes alternate). Thread-safe.
 */
final class Health {
  private static final Logger LOG = LoggerFactory.getLogger(Health.class);
  private final String where;
  private final AtomicBoolean down = new AtomicBoolean();
  private final Map<String, LongAdder> failures = new ConcurrentHashMap<>();
  private final AtomicBoolean warned = new AtomicBoolean();
  private final AtomicLong lastWarn = new AtomicLong(Long.MIN_VALUE / 2);
  private static final long WARN_EVERY_NANOS = 10_000_000_000L;

  Health(String where) {
    this.where = where;
  }

  boolean available() {
    return !down.get();
  }

  /** A command failed: counts it, and logs if this starts an outage. */
  void failed(String op, Throwable cause) {
    failures.computeIfAbsent(op, k -> new LongAdder()).increment();
    long now = System.nanoTime();
    long last = lastWarn.get();
    if (down.compareAndSet(false, true)
        && now - last >= WARN_EVERY_NANOS
        && lastWarn.compareAndSet(last, now)) {
      warned.set(true);
      LOG.warn(
          "kvindex: Redis {} unreachable ({}: {}); lookups answer \"no cache information\" and"
              + " writes are dropped until it answers again (counted in"
              + " kvroute_kvindex_redis_unavailable_total)",
          where,
          op,
          cause == null ? "not connected" : cause.toString());
    }
  }

  /** A command succeeded: logs the end of an outage. */
  void ok() {
    if (down.get() && down.compareAndSet(true, false) && warned.getAndSet(false)) {
      LOG.info("kvindex: Redis {} answers again", where);
    }
  }

  LongAdder counter(String op) {
    return failures.computeIfAbsent(op, k -> new LongAdder());
  }

  Map<String, Long> failures() {
    Map<String, Long> m = new TreeMap<>();
    failures.forEach((k, v) -> m.put(k, v.sum()));
    return m;
  }
}
