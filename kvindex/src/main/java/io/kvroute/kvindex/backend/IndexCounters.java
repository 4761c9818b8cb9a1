package io.kvroute.kvindex.backend;

import io.kvroute.kvindex.IndexStats;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;

/**
 * The counters every block index keeps (events applied, blocks stored and removed, lookups,
 * evictions and drops by reason), their {@code kvroute.kvindex.*} meters, their part of {@link
 * IndexStats}, and the warnings logged once per cause.
 *
 * <p>Reasons are fixed at construction: counting an unknown reason throws. The drop reasons of
 * {@link #DROP_REASONS} are always present.
 *
 * <p><b>Thread-safety.</b> Thread-safe: the counters are {@link LongAdder}s in maps that are not
 * modified after construction; the set of warnings given is synchronized.
 */
public final class IndexCounters {
  /** The drop reasons every index counts (lossy or malformed events). */
  public static final List<String> DROP_REASONS =
      List.of(
          "unknown_parent",
          "unknown_engine_key",
          "unknown_pod",
          "non_dense",
          "block_size",
          "max_pods",
          "group_idx",
          "partial_parent");

  private final Logger log;
  private final LongAdder evStored = new LongAdder();
  private final LongAdder evRemoved = new LongAdder();
  private final LongAdder evCleared = new LongAdder();
  private final LongAdder evPodRemoved = new LongAdder();
  private final LongAdder blocksStored = new LongAdder();
  private final LongAdder blocksRemoved = new LongAdder();
  private final LongAdder lookups = new LongAdder();
  private final Map<String, LongAdder> evictions = new TreeMap<>();
  private final Map<String, LongAdder> dropped = new TreeMap<>();
  private final Set<String> warned = Collections.synchronizedSet(new TreeSet<>());

  /**
   * Counters with the given eviction reasons, and the drop reasons of {@link #DROP_REASONS} plus
   * {@code moreDropReasons}; warnings go to {@code log}.
   */
  public IndexCounters(Logger log, List<String> evictionReasons, List<String> moreDropReasons) {
    this.log = Objects.requireNonNull(log, "log");
    for (String r : evictionReasons) {
      evictions.put(r, new LongAdder());
    }
    for (String r : DROP_REASONS) {
      dropped.put(r, new LongAdder());
    }
    for (String r : moreDropReasons) {
      dropped.put(r, new LongAdder());
    }
  }

  /** Counts a {@code BlockStored} event. */
  public void eventStored() {
    evStored.increment();
  }

  /** Counts a {@code BlockRemoved} event. */
  public void eventRemoved() {
    evRemoved.increment();
  }

  /** Counts an {@code AllBlocksCleared} event. */
  public void eventCleared() {
    evCleared.increment();
  }

  /** Counts a pod removal. */
  public void eventPodRemoved() {
    evPodRemoved.increment();
  }

  /** Counts {@code n} blocks stored. */
  public void blocksStored(long n) {
    blocksStored.add(n);
  }

  /** Counts {@code n} blocks removed. */
  public void blocksRemoved(long n) {
    blocksRemoved.add(n);
  }

  /** The lookup counter (an index increments it on its read path). */
  public LongAdder lookups() {
    return lookups;
  }

  /** Counts {@code n} evictions for {@code reason} (one given at construction). */
  public void evicted(String reason, long n) {
    evictions.get(reason).add(n);
  }

  /** Counts {@code n} dropped blocks for {@code reason} (one given at construction). */
  public void dropped(String reason, long n) {
    if (n > 0) {
      dropped.get(reason).add(n);
    }
  }

  /**
   * True if {@code group} is a valid KV-cache group index (0 to 255); else counts the {@code n}
   * blocks of the event as dropped ({@code group_idx}).
   */
  public boolean validGroup(int group, long n) {
    if (group < 0 || group > 255) {
      dropped("group_idx", n);
      return false;
    }
    return true;
  }

  /** Logs {@code message} as a warning the first time {@code key} is given. */
  public void warnOnce(String key, String message) {
    if (warned.add(key)) {
      log.warn("kvindex: {}", message);
    }
  }

  /**
   * A stats builder holding these counters (events, evictions, drops, lookups); the index adds its
   * sizes.
   */
  public IndexStats.Builder stats() {
    return IndexStats.builder()
        .events(
            Map.of(
                "stored", evStored.sum(),
                "removed", evRemoved.sum(),
                "cleared", evCleared.sum(),
                "pod_removed", evPodRemoved.sum()))
        .evictions(sums(evictions))
        .dropped(sums(dropped))
        .lookups(lookups.sum());
  }

  private static Map<String, Long> sums(Map<String, LongAdder> m) {
    Map<String, Long> out = new TreeMap<>();
    m.forEach((k, v) -> out.put(k, v.sum()));
    return out;
  }

  /**
   * Registers the meters of these counters: {@code kvroute.kvindex.applied.events}, {@code
   * .blocks}, {@code .lookups}, {@code .evictions} and {@code .apply.dropped}.
   */
  public void bind(MeterRegistry r) {
    counter(r, "kvroute.kvindex.applied.events", "type", "stored", evStored);
    counter(r, "kvroute.kvindex.applied.events", "type", "removed", evRemoved);
    counter(r, "kvroute.kvindex.applied.events", "type", "cleared", evCleared);
    counter(r, "kvroute.kvindex.applied.events", "type", "pod_removed", evPodRemoved);
    counter(r, "kvroute.kvindex.blocks", "op", "stored", blocksStored);
    counter(r, "kvroute.kvindex.blocks", "op", "removed", blocksRemoved);
    counter(r, "kvroute.kvindex.lookups", null, null, lookups);
    evictions.forEach((k, v) -> counter(r, "kvroute.kvindex.evictions", "reason", k, v));
    dropped.forEach((k, v) -> counter(r, "kvroute.kvindex.apply.dropped", "reason", k, v));
  }

  /** Registers a function counter reading {@code adder}, tagged {@code tag=value} unless null. */
  public static void counter(
      MeterRegistry r, String name, String tag, String value, LongAdder adder) {
    FunctionCounter.Builder<LongAdder> b = FunctionCounter.builder(name, adder, LongAdder::sum);
    if (tag != null) {
      b.tag(tag, value);
    }
    b.register(r);
  }
}
