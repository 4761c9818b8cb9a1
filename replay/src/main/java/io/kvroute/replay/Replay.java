package io.kvroute.replay;

import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.replay.internal.Simulation;
import io.kvroute.router.flow.FlowControlConfig;
import io.kvroute.router.flow.FlowController;
import io.kvroute.testkit.engine.EngineProfile;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Replays a {@link Workload} against a simulated vLLM fleet in virtual time, once per {@link
 * Strategy}, and reports what each achieved.
 *
 * <pre>{@code
 * ReplayReport report =
 *     Replay.builder(Workload.mooncakeTrace(Path.of("trace.jsonl")))
 *         .pods(16)
 *         .profile(EngineProfile.LLAMA_70B_FP8_2XH100)
 *         .speed(4)
 *         .build()
 *         .run(ReplayListener.NONE);
 * System.out.println(report.toTable());
 * }</pre>
 *
 * <p>The fleet is {@link io.kvroute.testkit.engine.EngineModel}s (vLLM's scheduler and prefix
 * cache, a cited cost model); the routing is kvroute's own {@code Scheduler} with the strategy's
 * profiles, the precise strategy reading a {@code BlockIndex} fed by the engines' KV events through
 * the msgpack codec after {@link Builder#eventLag(Duration)}. Nothing sleeps and nothing reads the
 * clock except to time the run itself: the same inputs and seed give the same report (bar {@code
 * wallSeconds}).
 *
 * <p>Immutable; {@link #run} may be called more than once (each call replays afresh). Not meant to
 * be run concurrently with itself (it is CPU-bound on one thread).
 */
public final class Replay {
  private final Workload workload;
  private final Simulation.Settings settings;
  private final List<Strategy> strategies;

  private Replay(Builder b) {
    this.workload = b.workload;
    this.strategies = List.copyOf(b.strategies);
    this.settings =
        new Simulation.Settings(
            b.profile,
            b.prefill > 0 ? 0 : b.pods,
            b.prefill,
            b.prefill > 0 ? b.decode : 0,
            b.speed,
            b.slo,
            b.seed,
            b.eventLag.toNanos(),
            b.scrapeInterval.toNanos(),
            b.kvBytesPerSecond,
            b.flowControl,
            b.replicas,
            b.sharing,
            b.assignment == Assignment.HASH,
            b.fleetStaleness.toNanos(),
            b.fleetMemoryTtl.toNanos(),
            b.latencyWeight,
            b.latencyObjective);
  }

  /** How the replay spreads requests over gateway replicas ({@link Builder#replicas}). */
  public enum Assignment {
    /** Request i goes to replica i mod R (a round-robin load balancer in front of the gateways). */
    ROUND_ROBIN,
    /**
     * Request i goes to the replica a hash of i names (an L4 balancer hashing connections: an even
     * spread with no regard to what the requests share).
     */
    HASH;

    /** Parses {@code round-robin} or {@code hash}. */
    public static Assignment parse(String s) {
      switch (s.trim().toLowerCase(java.util.Locale.ROOT)) {
        case "round-robin":
        case "round_robin":
        case "rr":
          return ROUND_ROBIN;
        case "hash":
          return HASH;
        default:
          throw new IllegalArgumentException(
              "unknown replica assignment \"" + s + "\"; known: round-robin, hash");
      }
    }
  }

  /** A builder replaying {@code workload}. */
  public static Builder builder(Workload workload) {
    return new Builder(workload);
  }

  /** Runs every strategy in turn, reporting progress to {@code listener}. */
  public ReplayReport run(ReplayListener listener) {
    Objects.requireNonNull(listener, "listener");
    long start = System.nanoTime();
    List<StrategyResult> results = new ArrayList<>();
    for (Strategy s : strategies) {
      results.add(new Simulation(settings, s, workload.records(), listener).run());
    }
    return new ReplayReport(
        settings.engines(),
        workload.size(),
        (System.nanoTime() - start) / 1e9,
        results,
        describe());
  }

  private String describe() {
    String fleet =
        settings.disaggregated()
            ? settings.prefill() + " prefill + " + settings.decode() + " decode engines"
            : settings.pods() + " engines";
    return workload
        + " at speed "
        + settings.speed()
        + "x on "
        + fleet
        + " of "
        + settings.profile().name()
        + "; SLO "
        + settings.slo()
        + "; seed "
        + settings.seed()
        + (settings.flowControl() == null ? "" : "; flow control on")
        + (strategies.contains(Strategy.PRECISE_LATENCY)
            ? "; predicted-latency scorer x"
                + settings.latencyWeight()
                + (settings.latencyObjective() ? " aiming at the SLO" : " without an objective")
            : "")
        + (settings.replicas() > 1
            ? "; "
                + settings.replicas()
                + " gateway replicas ("
                + (settings.hashAssignment() ? "hash" : "round-robin")
                + "), sharing "
                + (settings.sharing()
                    ? "on (staleness "
                        + settings.fleetStalenessNanos() / 1e6
                        + " ms, routing memory "
                        + (settings.fleetMemoryTtlNanos() == 0
                            ? "not shared"
                            : settings.fleetMemoryTtlNanos() / 1e9 + " s")
                        + ")"
                    : "off")
            : "");
  }

  /** Validating builder of {@link Replay}; not thread-safe. */
  public static final class Builder {
    /** {@link #latencyWeight}'s default. */
    public static final double DEFAULT_LATENCY_WEIGHT = 3;

    private final Workload workload;
    private int pods = 16;
    private int prefill;
    private int decode;
    private EngineProfile profile = EngineProfile.LLAMA_70B_FP8_2XH100;
    private double speed = 1;
    private List<Strategy> strategies = Strategy.DEFAULTS;
    private Slo slo = Slo.DEFAULT;
    private long seed = 42;
    private Duration eventLag = Duration.ofMillis(5);
    private Duration scrapeInterval = Duration.ofMillis(50);
    private double kvBytesPerSecond = 50e9;
    private FlowControlConfig flowControl;
    private int replicas = 1;
    private boolean sharing = true;
    private Assignment assignment = Assignment.ROUND_ROBIN;
    private Duration fleetStaleness = Duration.ofMillis(3);
    private Duration fleetMemoryTtl = FleetConfig.defaults().memoryTtl();
    private double latencyWeight = DEFAULT_LATENCY_WEIGHT;
    private boolean latencyObjective = true;

    private Builder(Workload workload) {
      this.workload = Objects.requireNonNull(workload, "workload");
    }

    /** Aggregated engines, each prefilling and decoding (default 16). */
    public Builder pods(int pods) {
      this.pods = pods;
      this.prefill = 0;
      this.decode = 0;
      return this;
    }

    /** Prefill/decode disaggregation: {@code prefill} prefill and {@code decode} decode engines. */
    public Builder prefillDecode(int prefill, int decode) {
      this.prefill = prefill;
      this.decode = decode;
      return this;
    }

    /** The engines' profile (default {@link EngineProfile#LLAMA_70B_FP8_2XH100}). */
    public Builder profile(EngineProfile profile) {
      this.profile = Objects.requireNonNull(profile, "profile");
      return this;
    }

    /** Arrival-time compression: 2 replays the trace twice as fast (default 1). */
    public Builder speed(double speed) {
      this.speed = speed;
      return this;
    }

    /** The strategies, in order (default {@link Strategy#DEFAULTS}). */
    public Builder strategies(List<Strategy> strategies) {
      this.strategies = List.copyOf(strategies);
      return this;
    }

    /** The SLO for goodput (default {@link Slo#DEFAULT}). */
    public Builder slo(Slo slo) {
      this.slo = Objects.requireNonNull(slo, "slo");
      return this;
    }

    /** Seed of the schedulers' randomness (default 42). */
    public Builder seed(long seed) {
      this.seed = seed;
      return this;
    }

    /** Delay from an engine step to its KV events reaching the index (default 5 ms). */
    public Builder eventLag(Duration lag) {
      this.eventLag = Objects.requireNonNull(lag, "eventLag");
      return this;
    }

    /** Interval of engine metrics refreshes into the scheduler (default 50 ms). */
    public Builder scrapeInterval(Duration interval) {
      this.scrapeInterval = Objects.requireNonNull(interval, "scrapeInterval");
      return this;
    }

    /** KV transfer bandwidth from prefill to decode engines, bytes/s (default 50 GB/s). */
    public Builder kvTransferBandwidth(double bytesPerSecond) {
      this.kvBytesPerSecond = bytesPerSecond;
      return this;
    }

    /**
     * Flow control in front of every strategy's scheduler (default none): each request is admitted,
     * queued or dropped by a {@link FlowController} with this configuration, in virtual time, with
     * the saturation detector reading the simulated engines' metrics and the scheduler's latency
     * predictor; its priority and tenant are its class's ({@link RequestClass}), its objective its
     * class's or {@link #slo}. Null turns it off.
     */
    public Builder flowControl(FlowControlConfig config) {
      this.flowControl = config;
      return this;
    }

    /**
     * Gateway replicas (default 1): each request is routed by one of {@code replicas} schedulers,
     * each with its own in-flight counts, speculative entries and approximate index, all reading
     * the one shared KV-event index (as replicas sharing a Redis index do).
     */
    public Builder replicas(int replicas) {
      this.replicas = replicas;
      return this;
    }

    /**
     * With several replicas, whether they share in-flight counts, speculative entries and the
     * routing memory (the approximate prefix scorer's record of where prompts went, kept {@link
     * #fleetMemoryTtl}) through an in-memory {@code FleetState} with {@link #fleetStaleness}
     * (default on).
     */
    public Builder sharing(boolean sharing) {
      this.sharing = sharing;
      return this;
    }

    /** How requests are spread over the replicas (default {@link Assignment#ROUND_ROBIN}). */
    public Builder assignment(Assignment assignment) {
      this.assignment = Objects.requireNonNull(assignment, "assignment");
      return this;
    }

    /**
     * How long what one replica records takes to reach the others when sharing (default 3 ms, the
     * p99 change-to-visibility measured on Redis by {@code FleetStalenessRun}: docs/scaling.md).
     */
    public Builder fleetStaleness(Duration staleness) {
      this.fleetStaleness = Objects.requireNonNull(staleness, "fleetStaleness");
      return this;
    }

    /**
     * How long the shared routing memory keeps where a replica sent a prompt, when sharing (default
     * {@code FleetConfig}'s, 5 min; {@link Duration#ZERO}: each replica keeps its own memory only,
     * the fleet shares in-flight counts and speculative entries).
     */
    public Builder fleetMemoryTtl(Duration ttl) {
      this.fleetMemoryTtl = Objects.requireNonNull(ttl, "fleetMemoryTtl");
      return this;
    }

    /**
     * Weight of the {@code predicted-latency-scorer} in {@link Strategy#PRECISE_LATENCY}'s profiles
     * (default {@value #DEFAULT_LATENCY_WEIGHT}, the precise prefix scorer's weight; 0 routes as
     * {@link Strategy#PRECISE}).
     */
    public Builder latencyWeight(double weight) {
      this.latencyWeight = weight;
      return this;
    }

    /**
     * Whether {@link Strategy#PRECISE_LATENCY}'s scorer is given each request's objective (its
     * class's or {@link #slo}), as a gateway gives it a request's {@code x-kvroute-slo-*} headers
     * or its model's objective (default on: it prefers endpoints predicted to meet the objective
     * with the most headroom); off, the scorer sees none, as for a request without one, and prefers
     * the lowest predicted time to first token. Goodput is counted against the objective either
     * way.
     */
    public Builder latencyObjective(boolean on) {
      this.latencyObjective = on;
      return this;
    }

    /**
     * Builds the replay.
     *
     * @throws IllegalArgumentException naming the invalid option
     */
    public Replay build() {
      if (prefill > 0 || decode > 0) {
        if (prefill < 1 || decode < 1) {
          throw new IllegalArgumentException(
              "prefill and decode must both be >= 1, were " + prefill + " and " + decode);
        }
      } else if (pods < 1) {
        throw new IllegalArgumentException("pods must be >= 1, was " + pods);
      }
      if (!(speed > 0) || Double.isInfinite(speed)) {
        throw new IllegalArgumentException("speed must be > 0, was " + speed);
      }
      if (strategies.isEmpty()) {
        throw new IllegalArgumentException("strategies must not be empty");
      }
      if (eventLag.isNegative()) {
        throw new IllegalArgumentException("eventLag must be >= 0, was " + eventLag);
      }
      if (scrapeInterval.isNegative() || scrapeInterval.isZero()) {
        throw new IllegalArgumentException("scrapeInterval must be > 0, was " + scrapeInterval);
      }
      if (replicas < 1 || replicas > 1024) {
        throw new IllegalArgumentException("replicas must be in [1, 1024], was " + replicas);
      }
      if (fleetMemoryTtl.isNegative()) {
        throw new IllegalArgumentException("fleetMemoryTtl must be >= 0, was " + fleetMemoryTtl);
      }
      if (fleetStaleness.isNegative()) {
        throw new IllegalArgumentException("fleetStaleness must be >= 0, was " + fleetStaleness);
      }
      if (!(latencyWeight >= 0) || Double.isInfinite(latencyWeight)) {
        throw new IllegalArgumentException(
            "latencyWeight must be a finite number >= 0, was " + latencyWeight);
      }
      if (!(kvBytesPerSecond > 0)) {
        throw new IllegalArgumentException(
            "kvTransferBandwidth must be > 0, was " + kvBytesPerSecond);
      }
      return new Replay(this);
    }
  }
}
