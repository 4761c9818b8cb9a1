package io.kvroute.scoring;

import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * The latest engine metrics per endpoint id, with per-endpoint staleness. Filled by a {@link
 * MetricsScraper} or pushed by a gateway that already has the numbers ({@link #update}).
 *
 * <p>A snapshot older than {@code staleAfter} is {@link Freshness#STALE}: scorers that need it
 * treat the endpoint as unknown (no credit), never as idle, and the health filter can drop it.
 * Bounded to {@code maxEndpoints} ids (updates for new ids beyond that are dropped and counted).
 * Thread-safe and lock-free for readers.
 */
public final class MetricsStore {

  /** How current an endpoint's metrics are. */
  public enum Freshness {
    /** No metrics were ever recorded. */
    UNKNOWN,
    /** Updated within {@code staleAfter}. */
    FRESH,
    /** Last updated longer than {@code staleAfter} ago. */
    STALE
  }

  private record Entry(EndpointMetrics metrics, long updatedAt) {}

  private final ConcurrentHashMap<String, Entry> entries = new ConcurrentHashMap<>();
  private final long staleAfterNanos;
  private final LongSupplier clock;
  private final int maxEndpoints;
  private final LongAdder dropped = new LongAdder();
  private final LongAdder failures = new LongAdder();

  private MetricsStore(Duration staleAfter, LongSupplier clock, int maxEndpoints) {
    this.staleAfterNanos = staleAfter.toNanos();
    this.clock = clock;
    this.maxEndpoints = maxEndpoints;
  }

  /**
   * A store.
   *
   * @param staleAfter age after which a snapshot is stale (> 0); llm-d uses 2 s
   * @param nanoClock the clock (for example {@code System::nanoTime})
   * @param maxEndpoints bound on endpoint ids (>= 1)
   * @throws IllegalArgumentException naming the bad field
   */
  public static MetricsStore create(Duration staleAfter, LongSupplier nanoClock, int maxEndpoints) {
    Objects.requireNonNull(staleAfter, "staleAfter");
    Objects.requireNonNull(nanoClock, "nanoClock");
    if (staleAfter.isNegative() || staleAfter.isZero()) {
      throw new IllegalArgumentException("metrics.staleAfter must be > 0, was " + staleAfter);
    }
    if (maxEndpoints < 1) {
      throw new IllegalArgumentException("metrics.maxEndpoints must be >= 1, was " + maxEndpoints);
    }
    return new MetricsStore(staleAfter, nanoClock, maxEndpoints);
  }

  /** A store with 2 s staleness, {@link System#nanoTime()} and 100,000 endpoints. */
  public static MetricsStore create() {
    return create(Duration.ofSeconds(2), System::nanoTime, 100_000);
  }

  /** Records a fresh snapshot for an endpoint (the push API). */
  public void update(String endpointId, EndpointMetrics metrics) {
    Objects.requireNonNull(endpointId, "endpointId");
    Objects.requireNonNull(metrics, "metrics");
    if (!entries.containsKey(endpointId) && entries.size() >= maxEndpoints) {
      dropped.increment();
      return;
    }
    entries.put(endpointId, new Entry(metrics, clock.getAsLong()));
  }

  /**
   * Notes a failed scrape. The last snapshot is kept but ages; it becomes stale after {@code
   * staleAfter} without a successful update.
   */
  public void recordFailure(String endpointId) {
    failures.increment();
  }

  /** The endpoint's metrics if they are fresh. */
  public Optional<EndpointMetrics> fresh(String endpointId) {
    Entry e = entries.get(endpointId);
    if (e == null || clock.getAsLong() - e.updatedAt() > staleAfterNanos) {
      return Optional.empty();
    }
    return Optional.of(e.metrics());
  }

  /** The fresh snapshot, or {@code null}; for the hot path inside this package. */
  EndpointMetrics freshOrNull(String endpointId, long now) {
    Entry e = entries.get(endpointId);
    return e == null || now - e.updatedAt() > staleAfterNanos ? null : e.metrics();
  }

  /** The store's clock now. */
  long clockNow() {
    return clock.getAsLong();
  }

  /** The last snapshot whatever its age. */
  public Optional<EndpointMetrics> last(String endpointId) {
    Entry e = entries.get(endpointId);
    return e == null ? Optional.empty() : Optional.of(e.metrics());
  }

  /** How current the endpoint's metrics are. */
  public Freshness freshness(String endpointId) {
    return freshness(endpointId, clock.getAsLong());
  }

  Freshness freshness(String endpointId, long now) {
    Entry e = entries.get(endpointId);
    if (e == null) {
      return Freshness.UNKNOWN;
    }
    return now - e.updatedAt() > staleAfterNanos ? Freshness.STALE : Freshness.FRESH;
  }

  /** Forgets an endpoint. */
  public void remove(String endpointId) {
    entries.remove(endpointId);
  }

  /** Forgets every endpoint not in {@code endpointIds}. */
  public void retain(Collection<String> endpointIds) {
    HashSet<String> keep = new HashSet<>(endpointIds);
    entries.keySet().removeIf(k -> !keep.contains(k));
  }

  /** Endpoints with a snapshot. */
  public int size() {
    return entries.size();
  }

  /** Endpoints whose snapshot is stale now. */
  public int staleCount() {
    long now = clock.getAsLong();
    int n = 0;
    for (Entry e : entries.values()) {
      if (now - e.updatedAt() > staleAfterNanos) {
        n++;
      }
    }
    return n;
  }

  /** Updates dropped because the store was full. */
  public long dropped() {
    return dropped.sum();
  }

  /** Failed scrapes recorded. */
  public long failures() {
    return failures.sum();
  }
}
