package io.kvroute.kvindex;

import java.util.Map;
import java.util.Objects;

/**
 * A snapshot of a {@link BlockIndex}'s size and counters (the same values the {@code
 * kvroute.kvindex.*} Micrometer meters report). Implementations build it with {@link #builder()};
 * new counters can be added without breaking them.
 *
 * <p>Immutable (the maps are copied); thread-safe.
 */
public final class IndexStats {
  private final long keys;
  private final long entries;
  private final long engineKeys;
  private final int pods;
  private final Map<String, Long> events;
  private final Map<String, Long> evictions;
  private final Map<String, Long> dropped;
  private final long lookups;

  private IndexStats(Builder b) {
    this.keys = b.keys;
    this.entries = b.entries;
    this.engineKeys = b.engineKeys;
    this.pods = b.pods;
    this.events = Map.copyOf(b.events);
    this.evictions = Map.copyOf(b.evictions);
    this.dropped = Map.copyOf(b.dropped);
    this.lookups = b.lookups;
  }

  /** A builder (every value 0 or empty). */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Request keys held. Both shipped backends invalidate a cleared pod's entries at once and reclaim
   * their storage lazily, so this may count keys left holding only such stale entries until they
   * are reclaimed (in memory: {@code kvroute.kvindex.entries.stale} says how many entries wait).
   */
  public long keys() {
    return keys;
  }

  /**
   * (key, pod, tier, group) entries held by the pods as they are now: a cleared or removed pod's
   * entries are no longer counted, even before their storage is reclaimed.
   */
  public long entries() {
    return entries;
  }

  /** Engine-key mappings held. */
  public long engineKeys() {
    return engineKeys;
  }

  /** Pods known. */
  public int pods() {
    return pods;
  }

  /**
   * Events applied, by type ({@code stored}, {@code removed}, {@code cleared}, {@code
   * pod_removed}).
   */
  public Map<String, Long> events() {
    return events;
  }

  /** Evictions by reason ({@code max_keys}, {@code max_pods_per_key}, {@code max_engine_keys}). */
  public Map<String, Long> evictions() {
    return evictions;
  }

  /**
   * Blocks or events that could not be applied, by reason ({@code unknown_parent}, {@code
   * unknown_engine_key}, {@code non_dense}, {@code block_size}, {@code max_pods}, ...).
   */
  public Map<String, Long> dropped() {
    return dropped;
  }

  /** Lookups served. */
  public long lookups() {
    return lookups;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof IndexStats)) {
      return false;
    }
    IndexStats s = (IndexStats) o;
    return keys == s.keys
        && entries == s.entries
        && engineKeys == s.engineKeys
        && pods == s.pods
        && events.equals(s.events)
        && evictions.equals(s.evictions)
        && dropped.equals(s.dropped)
        && lookups == s.lookups;
  }

  @Override
  public int hashCode() {
    return Objects.hash(keys, entries, engineKeys, pods, events, evictions, dropped, lookups);
  }

  @Override
  public String toString() {
    return "IndexStats[keys="
        + keys
        + ", entries="
        + entries
        + ", engineKeys="
        + engineKeys
        + ", pods="
        + pods
        + ", events="
        + events
        + ", evictions="
        + evictions
        + ", dropped="
        + dropped
        + ", lookups="
        + lookups
        + "]";
  }

  /** Builds {@link IndexStats}. Not thread-safe. */
  public static final class Builder {
    private long keys;
    private long entries;
    private long engineKeys;
    private int pods;
    private Map<String, Long> events = Map.of();
    private Map<String, Long> evictions = Map.of();
    private Map<String, Long> dropped = Map.of();
    private long lookups;

    private Builder() {}

    /** Request keys held. */
    public Builder keys(long keys) {
      this.keys = keys;
      return this;
    }

    /** Entries held. */
    public Builder entries(long entries) {
      this.entries = entries;
      return this;
    }

    /** Engine-key mappings held. */
    public Builder engineKeys(long engineKeys) {
      this.engineKeys = engineKeys;
      return this;
    }

    /** Pods known. */
    public Builder pods(int pods) {
      this.pods = pods;
      return this;
    }

    /** Events applied by type. */
    public Builder events(Map<String, Long> events) {
      this.events = Objects.requireNonNull(events, "events");
      return this;
    }

    /** Evictions by reason. */
    public Builder evictions(Map<String, Long> evictions) {
      this.evictions = Objects.requireNonNull(evictions, "evictions");
      return this;
    }

    /** Drops by reason. */
    public Builder dropped(Map<String, Long> dropped) {
      this.dropped = Objects.requireNonNull(dropped, "dropped");
      return this;
    }

    /** Lookups served. */
    public Builder lookups(long lookups) {
      this.lookups = lookups;
      return this;
    }

    /** The snapshot. */
    public IndexStats build() {
      return new IndexStats(this);
    }
  }
}
