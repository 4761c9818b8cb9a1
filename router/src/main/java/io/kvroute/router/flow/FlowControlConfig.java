package io.kvroute.router.flow;

import io.kvroute.scoring.LatencySlo;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * How flow control admits requests: the priority bands (each with its bound, TTL, ordering and
 * share of the fleet), fairness between tenants inside a band, the saturation detector's
 * thresholds, per-model objectives and the global bound. Built with {@link #builder()}; every field
 * has a default, so {@code FlowControlConfig.builder().build()} is flow control with three bands
 * ({@code critical} 100, {@code standard} 0, {@code sheddable} −100), round-robin fairness and
 * llm-d's saturation thresholds.
 *
 * <p>A request's priority is its {@value #PRIORITY_HEADER} header, else its model's objective, else
 * {@link Builder#defaultPriority}; it joins the band with the greatest priority not above its own
 * (the lowest band when all are above), so negative priorities land in {@code sheddable} as llm-d's
 * {@code InferenceObjective} convention has it.
 *
 * <p>Immutable and thread-safe.
 */
public final class FlowControlConfig {
  /** The request header carrying the request's priority (an integer; higher is more important). */
  public static final String PRIORITY_HEADER = "x-kvroute-priority";

  /** The tenant when the request names none. */
  public static final String DEFAULT_TENANT = "default";

  /** Order of requests inside one tenant's queue. */
  public enum Ordering {
    /** First come, first served. */
    FCFS,
    /**
     * Earliest deadline first: the deadline is the arrival plus the request's TTFT objective, or
     * plus the band's TTL when it has none.
     */
    EDF;

    /** Parses {@code fcfs} or {@code edf}. */
    public static Ordering parse(String s) {
      return switch (s.toLowerCase(Locale.ROOT)) {
        case "fcfs" -> FCFS;
        case "edf" -> EDF;
        default ->
            throw new IllegalArgumentException("ordering must be fcfs or edf, was \"" + s + "\"");
      };
    }
  }

  /** Which tenant of a band is served next. */
  public enum Fairness {
    /** None: the band's requests in its ordering, whoever sent them (llm-d's global-strict). */
    NONE,
    /** Backlogged tenants in turn, one request each. */
    ROUND_ROBIN,
    /**
     * Virtual token counter (Sheng et al., "Fairness in Serving Large Language Models", OSDI '24):
     * the backlogged tenant that was served the fewest tokens goes next; prompt tokens are charged
     * when a request is admitted, output tokens when it ends; a tenant that returns after an idle
     * spell starts from the least-served backlogged tenant's count, so idling earns no credit.
     */
    VIRTUAL_TOKEN_COUNTER;

    /** Parses {@code none}, {@code round-robin} or {@code vtc}. */
    public static Fairness parse(String s) {
      return switch (s.toLowerCase(Locale.ROOT)) {
        case "none" -> NONE;
        case "round-robin" -> ROUND_ROBIN;
        case "vtc" -> VIRTUAL_TOKEN_COUNTER;
        default ->
            throw new IllegalArgumentException(
                "fairness must be none, round-robin or vtc, was \"" + s + "\"");
      };
    }
  }

  /**
   * One priority band.
   *
   * @param name the band's name in metrics and logs
   * @param priority requests of this priority and above (up to the next band) join it
   * @param maxQueueLength requests it may hold waiting; beyond, {@code queue-full}
   * @param ttl how long a request may wait in it; beyond, {@code ttl-expired}
   * @param ordering the order inside a tenant's queue
   * @param maxSaturation its requests are admitted while the fleet's saturation is below this (1 =
   *     saturated); a lower value keeps headroom for the bands above
   * @param sheddable its waiting requests may be evicted to make room for higher bands' ({@code
   *     shed-lower-priority})
   */
  public record Band(
      String name,
      int priority,
      int maxQueueLength,
      Duration ttl,
      Ordering ordering,
      double maxSaturation,
      boolean sheddable) {
    /** Validates. */
    public Band {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("band.name must not be blank");
      }
      if (maxQueueLength < 0) {
        throw new IllegalArgumentException(
            "band " + name + ": maxQueueLength must be >= 0, was " + maxQueueLength);
      }
      Objects.requireNonNull(ttl, "ttl");
      if (ttl.isNegative() || ttl.isZero()) {
        throw new IllegalArgumentException("band " + name + ": ttl must be > 0, was " + ttl);
      }
      Objects.requireNonNull(ordering, "ordering");
      if (!(maxSaturation > 0) || maxSaturation > 100) {
        throw new IllegalArgumentException(
            "band " + name + ": maxSaturation must be in (0, 100], was " + maxSaturation);
      }
    }

    /**
     * A band with defaults: 1,000 waiting requests, a 30 s TTL, FCFS, admitted up to saturation 1,
     * sheddable when its priority is negative.
     */
    public static Band of(String name, int priority) {
      return new Band(
          name, priority, 1000, Duration.ofSeconds(30), Ordering.FCFS, 1.0, priority < 0);
    }
  }

  /**
   * What the saturation detector compares with. The fleet's saturation is the largest of: the mean
   * over the model's endpoints of {@code max(waiting / queueDepth, kvUsage / kvCacheUtilization)}
   * (fresh {@code /metrics}; an endpoint whose metrics went stale counts 1, one never scraped
   * counts 0), the requests in flight over {@code endpoints × maxInFlightPerEndpoint}, and the
   * uncached prompt tokens routed but not yet answered over {@code endpoints ×
   * maxPrefillTokensPerEndpoint}. A limit of 0 leaves its term out.
   *
   * @param queueDepth engine waiting requests at which an endpoint is saturated (llm-d's default 5)
   * @param kvCacheUtilization KV-cache usage at which an endpoint is saturated (llm-d's 0.8)
   * @param maxInFlightPerEndpoint requests in flight per endpoint at saturation (0: no limit)
   * @param maxPrefillTokensPerEndpoint uncached prompt tokens routed to an endpoint and awaiting
   *     their first token, at saturation (0: no limit)
   */
  public record Saturation(
      int queueDepth,
      double kvCacheUtilization,
      int maxInFlightPerEndpoint,
      long maxPrefillTokensPerEndpoint) {
    /** llm-d's thresholds (5 waiting, 80% KV), no in-flight limits. */
    public static final Saturation DEFAULT = new Saturation(5, 0.8, 0, 0);

    /** Validates. */
    public Saturation {
      if (queueDepth < 1) {
        throw new IllegalArgumentException("saturation.queueDepth must be >= 1, was " + queueDepth);
      }
      if (!(kvCacheUtilization > 0 && kvCacheUtilization <= 1)) {
        throw new IllegalArgumentException(
            "saturation.kvCacheUtilization must be in (0, 1], was " + kvCacheUtilization);
      }
      if (maxInFlightPerEndpoint < 0 || maxPrefillTokensPerEndpoint < 0) {
        throw new IllegalArgumentException("saturation limits must be >= 0");
      }
    }
  }

  /**
   * A model's objective, as llm-d's {@code InferenceObjective}: the priority and latency objective
   * of its requests when they carry none of their own.
   *
   * @param priority the requests' priority, or null for {@link Builder#defaultPriority}
   * @param slo the requests' latency objective ({@link LatencySlo#NONE} for none)
   */
  public record Objective(Integer priority, LatencySlo slo) {
    /** Validates. */
    public Objective {
      Objects.requireNonNull(slo, "slo");
    }
  }

  private final List<Band> bands;
  private final int defaultPriority;
  private final Map<String, Objective> objectives;
  private final Fairness fairness;
  private final String tenantHeader;
  private final boolean tenantFromApiKey;
  private final int maxQueued;
  private final Duration retryAfter;
  private final Saturation saturation;
  private final boolean sloAdmission;
  private final Duration recheckInterval;
  private final int maxTenantTags;

  private FlowControlConfig(Builder b) {
    List<Band> sorted = new ArrayList<>(b.bands);
    sorted.sort(Comparator.comparingInt(Band::priority).reversed());
    this.bands = List.copyOf(sorted);
    this.defaultPriority = b.defaultPriority;
    this.objectives = Map.copyOf(b.objectives);
    this.fairness = b.fairness;
    this.tenantHeader = b.tenantHeader;
    this.tenantFromApiKey = b.tenantFromApiKey;
    this.maxQueued = b.maxQueued;
    this.retryAfter = b.retryAfter;
    this.saturation = b.saturation;
    this.sloAdmission = b.sloAdmission;
    this.recheckInterval = b.recheckInterval;
    this.maxTenantTags = b.maxTenantTags;
  }

  /** A builder with every default. */
  public static Builder builder() {
    return new Builder();
  }

  /** The bands, highest priority first. */
  public List<Band> bands() {
    return bands;
  }

  /** The index in {@link #bands()} of the band a request of {@code priority} joins. */
  public int bandIndex(int priority) {
    for (int i = 0; i < bands.size(); i++) {
      if (bands.get(i).priority() <= priority) {
        return i;
      }
    }
    return bands.size() - 1;
  }

  /** The priority of requests that carry none and whose model's objective gives none. */
  public int defaultPriority() {
    return defaultPriority;
  }

  /** The objective of {@code model}'s requests, if configured. */
  public Optional<Objective> objective(String model) {
    return Optional.ofNullable(objectives.get(model));
  }

  /** The objectives by model. */
  public Map<String, Objective> objectives() {
    return objectives;
  }

  /** Fairness between the tenants of a band. */
  public Fairness fairness() {
    return fairness;
  }

  /** The header naming a request's tenant, if configured. */
  public Optional<String> tenantHeader() {
    return Optional.ofNullable(tenantHeader);
  }

  /**
   * Whether a request without a tenant header is the tenant of its API key ({@code Authorization:
   * Bearer …}, hashed: the key itself is never kept).
   */
  public boolean tenantFromApiKey() {
    return tenantFromApiKey;
  }

  /** Requests waiting in all bands and models together, at most. */
  public int maxQueued() {
    return maxQueued;
  }

  /** The {@code Retry-After} of a dropped request. */
  public Duration retryAfter() {
    return retryAfter;
  }

  /** The saturation detector's thresholds. */
  public Saturation saturation() {
    return saturation;
  }

  /**
   * Whether a request with a TTFT objective waits while no endpoint is predicted to meet it, and is
   * refused ({@code slo-unattainable}) when none can any more.
   */
  public boolean sloAdmission() {
    return sloAdmission;
  }

  /** How often waiting requests are looked at again while the fleet stays saturated. */
  public Duration recheckInterval() {
    return recheckInterval;
  }

  /** Distinct tenants named in meter tags; the others are tagged {@code other}. */
  public int maxTenantTags() {
    return maxTenantTags;
  }

  @Override
  public String toString() {
    return "FlowControlConfig{bands="
        + bands.stream().map(b -> b.name() + "(" + b.priority() + ")").toList()
        + ", fairness="
        + fairness
        + ", maxQueued="
        + maxQueued
        + ", saturation="
        + saturation
        + "}";
  }

  /** Builds a {@link FlowControlConfig}; validates at {@link #build()}. Not thread-safe. */
  public static final class Builder {
    private List<Band> bands =
        List.of(Band.of("critical", 100), Band.of("standard", 0), Band.of("sheddable", -100));
    private int defaultPriority;
    private final Map<String, Objective> objectives = new LinkedHashMap<>();
    private Fairness fairness = Fairness.ROUND_ROBIN;
    private String tenantHeader;
    private boolean tenantFromApiKey = true;
    private int maxQueued = 10_000;
    private Duration retryAfter = Duration.ofSeconds(1);
    private Saturation saturation = Saturation.DEFAULT;
    private boolean sloAdmission = true;
    private Duration recheckInterval = Duration.ofMillis(20);
    private int maxTenantTags = 64;

    private Builder() {}

    /** The bands (default {@code critical} 100, {@code standard} 0, {@code sheddable} −100). */
    public Builder bands(List<Band> bands) {
      this.bands = List.copyOf(bands);
      return this;
    }

    /** The priority of requests without one (default 0). */
    public Builder defaultPriority(int priority) {
      this.defaultPriority = priority;
      return this;
    }

    /** {@code model}'s objective. */
    public Builder objective(String model, Objective objective) {
      objectives.put(Objects.requireNonNull(model, "model"), Objects.requireNonNull(objective));
      return this;
    }

    /** Fairness between tenants (default round-robin). */
    public Builder fairness(Fairness fairness) {
      this.fairness = Objects.requireNonNull(fairness, "fairness");
      return this;
    }

    /** The header naming the tenant (default none). */
    public Builder tenantHeader(String header) {
      this.tenantHeader = header;
      return this;
    }

    /** Whether the API key's hash names the tenant when no header does (default true). */
    public Builder tenantFromApiKey(boolean on) {
      this.tenantFromApiKey = on;
      return this;
    }

    /** Requests waiting in all, at most (default 10,000). */
    public Builder maxQueued(int max) {
      this.maxQueued = max;
      return this;
    }

    /** The {@code Retry-After} of a dropped request (default 1 s). */
    public Builder retryAfter(Duration retryAfter) {
      this.retryAfter = Objects.requireNonNull(retryAfter, "retryAfter");
      return this;
    }

    /** The saturation thresholds (default {@link Saturation#DEFAULT}). */
    public Builder saturation(Saturation saturation) {
      this.saturation = Objects.requireNonNull(saturation, "saturation");
      return this;
    }

    /** Whether requests with a TTFT objective are admitted by predicted latency (default true). */
    public Builder sloAdmission(boolean on) {
      this.sloAdmission = on;
      return this;
    }

    /** How often a saturated fleet is looked at again (default 20 ms). */
    public Builder recheckInterval(Duration interval) {
      this.recheckInterval = Objects.requireNonNull(interval, "recheckInterval");
      return this;
    }

    /** Distinct tenants named in meter tags (default 64). */
    public Builder maxTenantTags(int max) {
      this.maxTenantTags = max;
      return this;
    }

    /**
     * The configuration.
     *
     * @throws IllegalArgumentException naming the field that is invalid
     */
    public FlowControlConfig build() {
      if (bands.isEmpty()) {
        throw new IllegalArgumentException("flowControl.bands must not be empty");
      }
      Set<String> names = new HashSet<>();
      Set<Integer> priorities = new HashSet<>();
      for (Band b : bands) {
        if (!names.add(b.name())) {
          throw new IllegalArgumentException("flowControl.bands: two bands named " + b.name());
        }
        if (!priorities.add(b.priority())) {
          throw new IllegalArgumentException(
              "flowControl.bands: two bands of priority " + b.priority());
        }
      }
      if (maxQueued < 0) {
        throw new IllegalArgumentException("flowControl.maxQueued must be >= 0, was " + maxQueued);
      }
      if (retryAfter.isNegative() || retryAfter.isZero()) {
        throw new IllegalArgumentException("flowControl.retryAfter must be > 0, was " + retryAfter);
      }
      if (recheckInterval.isNegative() || recheckInterval.isZero()) {
        throw new IllegalArgumentException(
            "flowControl.recheckInterval must be > 0, was " + recheckInterval);
      }
      if (maxTenantTags < 0) {
        throw new IllegalArgumentException(
            "flowControl.maxTenantTags must be >= 0, was " + maxTenantTags);
      }
      if (tenantHeader != null && tenantHeader.isBlank()) {
        throw new IllegalArgumentException("flowControl.tenantHeader must not be blank");
      }
      return new FlowControlConfig(this);
    }
  }
}
