package io.kvroute.kvindex.fleet;

import io.micrometer.core.instrument.MeterRegistry;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.function.LongSupplier;

/**
 * Immutable configuration of one gateway replica's {@link FleetState}, built by a validating {@link
 * Builder}. Replicas of one fleet use the same {@code fleet} name, {@code speculativeStride},
 * {@code speculativeTtl} and {@code memoryTtl}; each has its own {@code replicaId}.
 *
 * <table>
 *   <caption>Options</caption>
 *   <tr><th>option</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>fleet</td><td>default</td><td>the fleet's name: replicas sharing state use the same
 *       one (in Redis, the hash tag {@code {keyPrefix:fleet:<fleet>}})</td></tr>
 *   <tr><td>replicaId</td><td>random</td><td>this replica's name, unique in the fleet</td></tr>
 *   <tr><td>leaseTtl</td><td>10 s</td><td>a replica's in-flight counts leave the fleet view at
 *       most this long after its last heartbeat (sent every third of it): a killed replica leaks
 *       nothing</td></tr>
 *   <tr><td>speculativeTtl</td><td>2 s</td><td>how long a speculative entry ("this replica just
 *       sent these request keys to that endpoint") counts, as llm-d's {@code
 *       speculativeTTL}</td></tr>
 *   <tr><td>memoryTtl</td><td>5 min</td><td>how long a routing-memory entry ("this replica
 *       sent a prompt with these approximate prefix hashes to that endpoint", {@link
 *       FleetState#remember}) counts for the other replicas; {@code 0} shares no memory</td></tr>
 *   <tr><td>speculativeStride</td><td>8</td><td>a speculative or routing-memory entry is written
 *       at every stride-th key (plus the exact tail of each stride): 1 is exact, more costs fewer
 *       writes and matches a diverging prompt to a stride's precision</td></tr>
 *   <tr><td>maxEntriesPerKey</td><td>16</td><td>speculative entries kept per checkpoint key (the
 *       oldest go first)</td></tr>
 *   <tr><td>maxEndpoints</td><td>65,536</td><td>endpoints whose in-flight counts this replica
 *       tracks; beyond, idle ones are dropped first, then new ones are not counted (counted in
 *       {@code kvroute.fleet.endpoints.overflow})</td></tr>
 *   <tr><td>maxSpeculativeEntries</td><td>1,000,000</td><td>speculative entries held in memory
 *       (this replica's local view; the whole store of an {@link InMemoryFleet}); beyond, the
 *       oldest go first</td></tr>
 *   <tr><td>maxMemoryEntries</td><td>1,000,000</td><td>routing-memory entries held in memory, as
 *       {@code maxSpeculativeEntries} (counted in {@code kvroute.fleet.memory.evicted})</td></tr>
 *   <tr><td>writeQueueCapacity</td><td>16,384</td><td>speculative and routing-memory writes
 *       (one per request each) waiting for a shared
 *       store (Redis); beyond, new ones are dropped and counted</td></tr>
 *   <tr><td>viewTimeout</td><td>20 ms</td><td>the deadline of a fleet-wide read; past it the
 *       local view answers</td></tr>
 *   <tr><td>viewBackoff</td><td>1 s</td><td>after a fleet read failed or timed out, reads answer
 *       from the local view this long before the shared store is tried again</td></tr>
 *   <tr><td>nanoClock</td><td>{@link System#nanoTime()}</td><td>the monotonic clock</td></tr>
 *   <tr><td>meterRegistry</td><td>none</td><td>Micrometer registry for the {@code
 *       kvroute.fleet.*} meters</td></tr>
 * </table>
 */
public final class FleetConfig {
  private final String fleet;
  private final String replicaId;
  private final Duration leaseTtl;
  private final Duration speculativeTtl;
  private final Duration memoryTtl;
  private final int speculativeStride;
  private final int maxEntriesPerKey;
  private final int maxEndpoints;
  private final int maxSpeculativeEntries;
  private final int maxMemoryEntries;
  private final int writeQueueCapacity;
  private final Duration viewTimeout;
  private final Duration viewBackoff;
  private final LongSupplier nanoClock;
  private final MeterRegistry meterRegistry;

  private FleetConfig(Builder b) {
    this.fleet = b.fleet;
    this.replicaId = b.replicaId;
    this.leaseTtl = b.leaseTtl;
    this.speculativeTtl = b.speculativeTtl;
    this.memoryTtl = b.memoryTtl;
    this.speculativeStride = b.speculativeStride;
    this.maxEntriesPerKey = b.maxEntriesPerKey;
    this.maxEndpoints = b.maxEndpoints;
    this.maxSpeculativeEntries = b.maxSpeculativeEntries;
    this.maxMemoryEntries = b.maxMemoryEntries;
    this.writeQueueCapacity = b.writeQueueCapacity;
    this.viewTimeout = b.viewTimeout;
    this.viewBackoff = b.viewBackoff;
    this.nanoClock = b.nanoClock;
    this.meterRegistry = b.meterRegistry;
  }

  /** A builder with the defaults above. */
  public static Builder builder() {
    return new Builder();
  }

  /** The defaults (a random replica id). */
  public static FleetConfig defaults() {
    return builder().build();
  }

  /** A builder holding this configuration's values. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.fleet = fleet;
    b.replicaId = replicaId;
    b.leaseTtl = leaseTtl;
    b.speculativeTtl = speculativeTtl;
    b.memoryTtl = memoryTtl;
    b.speculativeStride = speculativeStride;
    b.maxEntriesPerKey = maxEntriesPerKey;
    b.maxEndpoints = maxEndpoints;
    b.maxSpeculativeEntries = maxSpeculativeEntries;
    b.maxMemoryEntries = maxMemoryEntries;
    b.writeQueueCapacity = writeQueueCapacity;
    b.viewTimeout = viewTimeout;
    b.viewBackoff = viewBackoff;
    b.nanoClock = nanoClock;
    b.meterRegistry = meterRegistry;
    return b;
  }

  /** The fleet's name. */
  public String fleet() {
    return fleet;
  }

  /** This replica's name. */
  public String replicaId() {
    return replicaId;
  }

  /** How long a silent replica's counts stay in the fleet view at most. */
  public Duration leaseTtl() {
    return leaseTtl;
  }

  /** How long a speculative entry counts. */
  public Duration speculativeTtl() {
    return speculativeTtl;
  }

  /**
   * How long a routing-memory entry ({@link FleetState#remember}) counts; {@link Duration#ZERO}:
   * the replicas share no routing memory.
   */
  public Duration memoryTtl() {
    return memoryTtl;
  }

  /** Keys per speculative (and routing-memory) checkpoint. */
  public int speculativeStride() {
    return speculativeStride;
  }

  /** Speculative entries per checkpoint key. */
  public int maxEntriesPerKey() {
    return maxEntriesPerKey;
  }

  /** Endpoints tracked. */
  public int maxEndpoints() {
    return maxEndpoints;
  }

  /** Speculative entries held in memory. */
  public int maxSpeculativeEntries() {
    return maxSpeculativeEntries;
  }

  /** Routing-memory entries held in memory. */
  public int maxMemoryEntries() {
    return maxMemoryEntries;
  }

  /** Speculative and routing-memory writes waiting for the shared store. */
  public int writeQueueCapacity() {
    return writeQueueCapacity;
  }

  /** The deadline of a fleet-wide read. */
  public Duration viewTimeout() {
    return viewTimeout;
  }

  /** How long reads stay local after a failed fleet read. */
  public Duration viewBackoff() {
    return viewBackoff;
  }

  /** The monotonic clock, in nanoseconds. */
  public LongSupplier nanoClock() {
    return nanoClock;
  }

  /** The Micrometer registry, if any. */
  public Optional<MeterRegistry> meterRegistry() {
    return Optional.ofNullable(meterRegistry);
  }

  @Override
  public String toString() {
    return "FleetConfig{fleet="
        + fleet
        + ", replicaId="
        + replicaId
        + ", leaseTtl="
        + leaseTtl
        + ", speculativeTtl="
        + speculativeTtl
        + ", memoryTtl="
        + memoryTtl
        + ", speculativeStride="
        + speculativeStride
        + ", maxEntriesPerKey="
        + maxEntriesPerKey
        + ", maxEndpoints="
        + maxEndpoints
        + ", maxSpeculativeEntries="
        + maxSpeculativeEntries
        + ", maxMemoryEntries="
        + maxMemoryEntries
        + ", writeQueueCapacity="
        + writeQueueCapacity
        + ", viewTimeout="
        + viewTimeout
        + ", viewBackoff="
        + viewBackoff
        + "}";
  }

  /** Validating builder of {@link FleetConfig}; not thread-safe. */
  public static final class Builder {
    private String fleet = "default";
    private String replicaId = "replica-" + Long.toHexString(new SecureRandom().nextLong());
    private Duration leaseTtl = Duration.ofSeconds(10);
    private Duration speculativeTtl = Duration.ofSeconds(2);
    private Duration memoryTtl = Duration.ofMinutes(5);
    private int speculativeStride = 8;
    private int maxEntriesPerKey = 16;
    private int maxEndpoints = 65_536;
    private int maxSpeculativeEntries = 1_000_000;
    private int maxMemoryEntries = 1_000_000;
    private int writeQueueCapacity = 16_384;
    private Duration viewTimeout = Duration.ofMillis(20);
    private Duration viewBackoff = Duration.ofSeconds(1);
    private LongSupplier nanoClock = System::nanoTime;
    private MeterRegistry meterRegistry;

    private Builder() {}

    /** The fleet's name (default {@code default}). */
    public Builder fleet(String fleet) {
      this.fleet = Objects.requireNonNull(fleet, "fleet");
      return this;
    }

    /** This replica's name (default: random). */
    public Builder replicaId(String replicaId) {
      this.replicaId = Objects.requireNonNull(replicaId, "replicaId");
      return this;
    }

    /** How long a silent replica's counts stay in the fleet view at most (default 10 s). */
    public Builder leaseTtl(Duration ttl) {
      this.leaseTtl = Objects.requireNonNull(ttl, "leaseTtl");
      return this;
    }

    /** How long a speculative entry counts (default 2 s). */
    public Builder speculativeTtl(Duration ttl) {
      this.speculativeTtl = Objects.requireNonNull(ttl, "speculativeTtl");
      return this;
    }

    /**
     * How long a routing-memory entry counts for the other replicas (default 5 min; {@link
     * Duration#ZERO}: share no routing memory).
     */
    public Builder memoryTtl(Duration ttl) {
      this.memoryTtl = Objects.requireNonNull(ttl, "memoryTtl");
      return this;
    }

    /** Keys per speculative and routing-memory checkpoint (default 8; 1 is exact). */
    public Builder speculativeStride(int stride) {
      this.speculativeStride = stride;
      return this;
    }

    /** Speculative entries per checkpoint key (default 16). */
    public Builder maxEntriesPerKey(int max) {
      this.maxEntriesPerKey = max;
      return this;
    }

    /** Endpoints tracked (default 65,536). */
    public Builder maxEndpoints(int max) {
      this.maxEndpoints = max;
      return this;
    }

    /** Speculative entries held in memory (default 1,000,000). */
    public Builder maxSpeculativeEntries(int max) {
      this.maxSpeculativeEntries = max;
      return this;
    }

    /** Routing-memory entries held in memory (default 1,000,000). */
    public Builder maxMemoryEntries(int max) {
      this.maxMemoryEntries = max;
      return this;
    }

    /** Speculative and routing-memory writes waiting for the shared store (default 16,384). */
    public Builder writeQueueCapacity(int capacity) {
      this.writeQueueCapacity = capacity;
      return this;
    }

    /** The deadline of a fleet-wide read (default 20 ms). */
    public Builder viewTimeout(Duration timeout) {
      this.viewTimeout = Objects.requireNonNull(timeout, "viewTimeout");
      return this;
    }

    /** How long reads stay local after a failed fleet read (default 1 s). */
    public Builder viewBackoff(Duration backoff) {
      this.viewBackoff = Objects.requireNonNull(backoff, "viewBackoff");
      return this;
    }

    /** The monotonic clock in nanoseconds (default {@link System#nanoTime()}). */
    public Builder nanoClock(LongSupplier clock) {
      this.nanoClock = Objects.requireNonNull(clock, "nanoClock");
      return this;
    }

    /** Registers the {@code kvroute.fleet.*} meters in {@code registry}. */
    public Builder meterRegistry(MeterRegistry registry) {
      this.meterRegistry = registry;
      return this;
    }

    /**
     * Builds the configuration.
     *
     * @throws IllegalArgumentException naming the first invalid field
     */
    public FleetConfig build() {
      check(
          !fleet.isEmpty() && fleet.indexOf('{') < 0 && fleet.indexOf('}') < 0,
          "fleet.name must be non-empty and hold no braces, was \"" + fleet + "\"");
      check(
          !replicaId.isEmpty() && replicaId.indexOf(' ') < 0,
          "fleet.replicaId must be non-empty and hold no spaces, was \"" + replicaId + "\"");
      check(leaseTtl.toMillis() >= 300, "fleet.leaseTtl must be >= 300ms, was " + leaseTtl);
      check(
          speculativeTtl.toMillis() >= 1,
          "fleet.speculativeTtl must be >= 1ms, was " + speculativeTtl);
      check(
          !memoryTtl.isNegative() && (memoryTtl.isZero() || memoryTtl.toMillis() >= 1),
          "fleet.memoryTtl must be 0 (no shared memory) or >= 1ms, was " + memoryTtl);
      check(
          speculativeStride >= 1 && speculativeStride <= 4096,
          "fleet.speculativeStride must be in [1, 4096], was " + speculativeStride);
      check(
          maxEntriesPerKey >= 1 && maxEntriesPerKey <= 1024,
          "fleet.maxEntriesPerKey must be in [1, 1024], was " + maxEntriesPerKey);
      check(maxEndpoints >= 1, "fleet.maxEndpoints must be >= 1, was " + maxEndpoints);
      check(
          maxSpeculativeEntries >= 1,
          "fleet.maxSpeculativeEntries must be >= 1, was " + maxSpeculativeEntries);
      check(maxMemoryEntries >= 1, "fleet.maxMemoryEntries must be >= 1, was " + maxMemoryEntries);
      check(
          writeQueueCapacity >= 1,
          "fleet.writeQueueCapacity must be >= 1, was " + writeQueueCapacity);
      check(viewTimeout.toMillis() >= 1, "fleet.viewTimeout must be >= 1ms, was " + viewTimeout);
      check(!viewBackoff.isNegative(), "fleet.viewBackoff must be >= 0, was " + viewBackoff);
      return new FleetConfig(this);
    }

    private static void check(boolean ok, String message) {
      if (!ok) {
        throw new IllegalArgumentException(message);
      }
    }
  }
}
