package io.kvroute.kvindex.redis.internal;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reachability of the server: failures counted per operation, logged once per outage (WARN when it
 * starts, INFO when the server answers again). Thread-safe.
 */
final class Health {
  private static final Logger LOG = LoggerFactory.getLogger(Health.class);
  private final String where;
  private final AtomicBoolean down = new AtomicBoolean();
  private final Map<String, LongAdder> failures = new ConcurrentHashMap<>();

  Health(String where) {
    this.where = where;
  }

  boolean available() {
    return !down.get();
  }

  /** A command failed: counts it, and logs if this starts an outage. */
  void failed(String op, Throwable cause) {
    failures.computeIfAbsent(op, k -> new LongAdder()).increment();
    if (down.compareAndSet(false, true)) {
      LOG.warn(
          "kvindex: Redis at {} unreachable ({}: {}); lookups answer \"no cache information\" and"
              + " writes are dropped until it answers again (counted in"
              + " kvroute_kvindex_redis_unavailable_total)",
          where,
          op,
          cause == null ? "not connected" : cause.toString());
    }
  }

  /** A command succeeded: logs the end of an outage. */
  void ok() {
    if (down.get() && down.compareAndSet(true, false)) {
      LOG.info("kvindex: Redis at {} answers again", where);
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
