package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.scoring.internal.ApproximatePrefixIndex;
import io.kvroute.scoring.internal.InFlightTracker;
import io.kvroute.scoring.internal.SchedulerMeters;
import io.kvroute.scoring.internal.SpeculativeIndex;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.random.RandomGenerator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Picks endpoints for inference requests: runs named {@link Profile}s (filters → weighted scorers →
 * picker) and decides per request between decode-only and prefill + decode.
 *
 * <h2>Use</h2>
 *
 * <pre>{@code
 * Scheduler scheduler = Scheduler.builder().prefixCacheLookup(index).build();
 * Decision d = scheduler.pick(request);          // in-memory only: safe on an event loop
 * if (d.routed()) {
 *   scheduler.onRouted(d);                        // when the request is sent
 *   ... proxy to d.primary(), with d.requestHeaders() ...
 *   scheduler.onComplete(d);                      // when it ends (success or not)
 * }
 * }</pre>
 *
 * <h2>Profiles and PD</h2>
 *
 * The primary profile (default {@code decode}) always runs first. When PD is enabled and a prefill
 * profile exists, the {@link PdDecider} (default {@link PdDecider#prefixBased(int)} with 10
 * non-cached tokens) is asked with the chosen decode endpoint; if it says yes, the prefill profile
 * runs with that endpoint as {@link SchedulingContext#peer()}. A request may instead name one
 * profile to run alone ({@link SchedulingRequest#profile()}).
 *
 * <h2>Gateway replicas</h2>
 *
 * With a {@link Builder#fleet(FleetState) fleet}, the scheduler is one replica of several that
 * route the same endpoints: {@link #onRouted} reports the request to the fleet ({@link
 * FleetState#requestStarted}, a {@link FleetState#speculate speculative entry} for its request
 * keys, so the other replicas see where its prefix went before the engine's KV events arrive, and
 * its approximate prefix hashes to the fleet's {@link FleetState#remember routing memory}) and
 * {@link #onComplete} ends it; each scheduling cycle reads one {@link
 * io.kvroute.kvindex.fleet.FleetView} of the candidates: the in-flight counts the load scorers read
 * are every replica's, the approximate prefix match of a candidate is at least the blocks some
 * replica sent to it within the memory's TTL, the no-hit LRU scorer orders endpoints by the last
 * cold request any replica sent them ({@link FleetState#coldRouted}), and the precise prefix match
 * is at least the blocks some replica just sent to it. The cycle reads the view on the thread that
 * runs it, as it reads a shared (Redis) index: with a fleet on Redis, {@link #pick} is no longer
 * I/O-free, but waits at most the fleet's {@code viewTimeout}, then this replica's own view
 * answers. (Completing on the store's I/O thread instead would run the index's blocking lookup
 * there.)
 *
 * <h2>Threads</h2>
 *
 * Thread-safe: one instance serves all requests. {@link #pick} runs entirely on the caller's thread
 * and reads only in-memory state. {@link #pickAsync} tokenizes first when the request has no token
 * ids and a {@link Tokenizer} is configured; the returned future completes on the tokenizer's
 * thread (or the JDK's timeout thread). The hooks may be called from any thread.
 */
public final class Scheduler {
  private static final Logger log = LoggerFactory.getLogger(Scheduler.class);

  /** Name of the default primary profile. */
  public static final String DECODE_PROFILE = "decode";

  /** Name of the default prefill profile. */
  public static final String PREFILL_PROFILE = "prefill";

  final PrefixCacheLookup lookup;
  final ApproximatePrefixIndex approximate;
  final int approxBlockSize;

  /** One scheduling cycle in this many has its plugins timed ({@code plugin.duration}). */
  static final int PLUGIN_TIMING_SAMPLE = 8;

  private final java.util.concurrent.atomic.AtomicLong cycles =
      new java.util.concurrent.atomic.AtomicLong();
  final int approxMaxBlocks;
  final SpeculativeIndex speculative;
  final InFlightTracker inFlight;
  final FleetState fleet;
  final MetricsStore metrics;
  private final LatencyPredictor latencyPredictor;
  private final Map<String, Runtime> profiles;
  private final String primaryProfile;
  private final String prefillProfile;
  private final boolean pdEnabled;
  private final PdDecider decider;
  private final RandomGenerator random;
  private final LongSupplier clock;
  private final Tokenizer tokenizer;
  private final Duration tokenizeTimeout;
  private final SchedulerMeters meters;
  private final EnumMap<Decision.Result, Counter> decisionCounters =
      new EnumMap<>(Decision.Result.class);
  private final EnumMap<Decision.Result, Timer> cycleTimers = new EnumMap<>(Decision.Result.class);
  private final EnumMap<Decision.PdOutcome, Counter> pdCounters =
      new EnumMap<>(Decision.PdOutcome.class);
  private final Counter tokenizationFailures;

  /** A profile with its precomputed plugin timers. */
  private static final class Runtime {
    final Profile profile;
    final Filter[] filters;
    final Scorer[] scorers;
    final double[] weights;
    final String[] scorerNames;
    final Timer[] filterTimers;
    final Timer[] scorerTimers;
    final Timer pickerTimer;
    final boolean needsCold;

    Runtime(Profile p, SchedulerMeters meters) {
      this.profile = p;
      this.filters = p.filters().toArray(new Filter[0]);
      int k = p.scorers().size();
      this.scorers = new Scorer[k];
      this.weights = new double[k];
      this.scorerNames = new String[k];
      boolean cold = false;
      for (int i = 0; i < k; i++) {
        scorers[i] = p.scorers().get(i).scorer();
        weights[i] = p.scorers().get(i).weight();
        scorerNames[i] = scorers[i].name();
        cold |= scorers[i] instanceof Scorers.NoHitLruScorer;
      }
      this.needsCold = cold;
      this.filterTimers = new Timer[filters.length];
      for (int i = 0; i < filters.length; i++) {
        filterTimers[i] = meters.pluginTimer(p.name(), filters[i].name(), "filter");
      }
      this.scorerTimers = new Timer[k];
      for (int i = 0; i < k; i++) {
        scorerTimers[i] = meters.pluginTimer(p.name(), scorerNames[i], "scorer");
      }
      this.pickerTimer = meters.pluginTimer(p.name(), p.picker().name(), "picker");
    }
  }

  private Scheduler(Builder b) {
    this.lookup = b.lookup;
    this.clock = b.clock;
    this.random = b.random;
    this.metrics =
        b.metrics != null ? b.metrics : MetricsStore.create(b.staleAfter, b.clock, 100_000);
    this.inFlight = new InFlightTracker(b.maxTrackedEndpoints);
    this.latencyPredictor =
        b.latencyPredictor != null
            ? b.latencyPredictor
            : LatencyPredictor.builder()
                .metricsStore(metrics)
                .maxEndpoints(b.maxTrackedEndpoints)
                .meterRegistry(b.registry)
                .build();
    this.fleet = b.fleet;
    this.approxBlockSize = b.approxBlockSize;
    this.approxMaxBlocks = b.approxMaxBlocks;
    this.approximate =
        b.approximateIndexing
            ? new ApproximatePrefixIndex(b.approxLruPerEndpoint, b.maxTrackedEndpoints)
            : null;
    this.speculative =
        b.lookup != null && !b.speculativeTtl.isZero()
            ? new SpeculativeIndex(b.speculativeTtl.toNanos(), b.speculativeMaxEntries)
            : null;
    this.meters = new SchedulerMeters(b.registry);
    List<Profile> ps =
        b.profiles.isEmpty() ? defaultProfiles(b.lookup != null, b.isDown) : b.profiles;
    LinkedHashMap<String, Runtime> m = new LinkedHashMap<>();
    for (Profile p : ps) {
      if (m.put(p.name(), new Runtime(p, meters)) != null) {
        throw new IllegalArgumentException("scheduler has two profiles named \"" + p.name() + "\"");
      }
    }
    this.profiles = m;
    this.primaryProfile = b.primaryProfile != null ? b.primaryProfile : ps.get(0).name();
    if (!m.containsKey(primaryProfile)) {
      throw new IllegalArgumentException(
          "primaryProfile \"" + primaryProfile + "\" is not a profile; known: " + m.keySet());
    }
    String pre = b.prefillProfile;
    if (pre == null
        && (b.profiles.isEmpty()
            || (m.containsKey(PREFILL_PROFILE) && !PREFILL_PROFILE.equals(primaryProfile)))) {
      // A profile named "prefill" is the prefill profile unless another one is named.
      pre = PREFILL_PROFILE;
    }
    if (pre != null && !m.containsKey(pre)) {
      throw new IllegalArgumentException(
          "prefillProfile \"" + pre + "\" is not a profile; known: " + m.keySet());
    }
    if (pre != null && pre.equals(primaryProfile)) {
      throw new IllegalArgumentException(
          "prefillProfile must differ from primaryProfile, both are \"" + pre + "\"");
    }
    this.prefillProfile = pre;
    this.pdEnabled = b.pdEnabled && pre != null;
    this.decider = b.decider;
    this.tokenizer = b.tokenizer;
    this.tokenizeTimeout = b.tokenizeTimeout;
    for (Decision.Result r : Decision.Result.values()) {
      String tag = r.name().toLowerCase(java.util.Locale.ROOT);
      decisionCounters.put(r, meters.counter("kvroute.scheduler.decisions", "result", tag));
      cycleTimers.put(r, meters.cycleTimer(tag));
    }
    for (Decision.PdOutcome o : Decision.PdOutcome.values()) {
      pdCounters.put(
          o,
          meters.counter(
              "kvroute.scheduler.pd.decisions",
              "outcome",
              o.name().toLowerCase(java.util.Locale.ROOT)));
    }
    this.tokenizationFailures = meters.counter("kvroute.scheduler.tokenization.failures");
    SchedulerGauges.register(meters, inFlight, approximate, speculative, metrics, profiles());
  }

  /** A new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * The default profiles: {@code decode} (decode role, health and LoRA filters; precise prefix ×3
   * and approximate prefix ×1 when an index is set, else approximate prefix ×3; queue ×2, KV
   * utilization ×2, load-aware, active requests, LoRA affinity, session affinity and no-hit LRU ×1;
   * top-3 picker) and {@code prefill} (prefill role, health, PD pairing on {@code
   * kvroute.io/pd-group}; the same prefix scorers, queue ×2, KV utilization ×2, load-aware and
   * active requests ×1; top-2 picker). The approximate scorer beside the precise one keeps a prefix
   * on the engines it was sent to when the index shows no holder (evicted, or still in flight); see
   * {@code docs/routing-quality.md} for the replay that measured it.
   */
  public static List<Profile> defaultProfiles(boolean precise) {
    return defaultProfiles(precise, id -> false);
  }

  /**
   * The default profiles (see {@link #defaultProfiles(boolean)}) whose health filters also drop
   * endpoints for which {@code isDown} is true (the connector layer's circuit breakers, a {@link
   * HealthProbe}, ...).
   */
  public static List<Profile> defaultProfiles(
      boolean precise, java.util.function.Predicate<String> isDown) {
    return DefaultProfiles.of(precise, Objects.requireNonNull(isDown, "isDown"));
  }

  /**
   * The precise prefix-cache index the scheduler reads ({@link Builder#prefixCacheLookup}), if any.
   */
  public Optional<PrefixCacheLookup> prefixCacheLookup() {
    return Optional.ofNullable(lookup);
  }

  /** The engine metrics store (push metrics into it, or let a {@link MetricsScraper} fill it). */
  public MetricsStore metricsStore() {
    return metrics;
  }

  /**
   * The latency predictor the {@code predicted-latency-scorer} and flow control read: feed it a
   * {@link LatencyPredictor#dispatched ticket} per routed request (the router does).
   */
  public LatencyPredictor latencyPredictor() {
    return latencyPredictor;
  }

  /** The profiles by name. */
  public Map<String, Profile> profiles() {
    Map<String, Profile> m = new LinkedHashMap<>();
    profiles.forEach((k, v) -> m.put(k, v.profile));
    return java.util.Collections.unmodifiableMap(m);
  }

  /** Router-tracked in-flight requests of an endpoint. */
  public int inFlight(String endpointId) {
    return inFlight.get(endpointId);
  }

  /**
   * Schedules a request from in-memory state only (no I/O, no blocking): safe on an event loop.
   * Without token ids the precise scorer falls back to the approximate index.
   *
   * @return a decision; never throws for an unroutable request (see {@link Decision#result()})
   */
  public Decision pick(SchedulingRequest request) {
    return pick(request, false);
  }

  /**
   * Tokenizes when needed ({@link Tokenizer}; bounded by the tokenize timeout), then {@link
   * #pick}s. A tokenizer failure or timeout is not an error: the request is scheduled without token
   * ids ({@link Decision#tokenizationFailed()}).
   */
  public CompletableFuture<Decision> pickAsync(SchedulingRequest request) {
    Objects.requireNonNull(request, "request");
    if (request.hasTokenIds()
        || tokenizer == null
        || request.candidates().isEmpty()
        || (request.prompt().isEmpty() && request.messages().isEmpty())) {
      return CompletableFuture.completedFuture(pick(request));
    }
    CompletableFuture<int[]> f;
    try {
      f = tokenizer.tokenize(request).toCompletableFuture().copy();
    } catch (RuntimeException e) {
      f = CompletableFuture.failedFuture(e);
    }
    return f.orTimeout(tokenizeTimeout.toNanos(), TimeUnit.NANOSECONDS)
        .handle(
            (tokens, err) -> {
              if (err != null || tokens == null) {
                SchedulerMeters.increment(tokenizationFailures);
                log.debug(
                    "tokenization failed, scheduling without token ids: {}", String.valueOf(err));
                return pick(request, true);
              }
              return pick(request.withTokenIds(tokens), false);
            });
  }

  private Decision pick(SchedulingRequest request, boolean tokenizationFailed) {
    Objects.requireNonNull(request, "request");
    long start = clock.getAsLong();
    RandomGenerator rnd = random != null ? random : ThreadLocalRandom.current();
    CycleContext ctx = new CycleContext(this, request, rnd, start);
    Decision d = schedule(ctx, request, tokenizationFailed);
    long end = clock.getAsLong();
    SchedulerMeters.record(cycleTimers.get(d.result()), end - start);
    SchedulerMeters.increment(decisionCounters.get(d.result()));
    if (d.routed()) {
      SchedulerMeters.increment(pdCounters.get(d.pdOutcome()));
    }
    return d;
  }

  private Decision schedule(CycleContext ctx, SchedulingRequest request, boolean tokFailed) {
    // Plugin timings are sampled: one cycle in PLUGIN_TIMING_SAMPLE is timed (the first one
    // included). Timing every plugin of every cycle cost about 7% of a gateway request's CPU.
    ctx.timePlugins = meters.enabled() && cycles.getAndIncrement() % PLUGIN_TIMING_SAMPLE == 0;
    LinkedHashMap<String, ProfileResult> results = new LinkedHashMap<>(4);
    List<Endpoint> all = request.candidates();
    if (all.isEmpty()) {
      return decision(
          Decision.Result.NO_CANDIDATES,
          ctx,
          results,
          primaryProfile,
          Decision.PdOutcome.NOT_CONFIGURED,
          tokFailed);
    }
    Optional<String> only = request.profile();
    if (only.isPresent()) {
      Runtime rt = profiles.get(only.get());
      if (rt == null) {
        return decision(
            Decision.Result.UNKNOWN_PROFILE,
            ctx,
            results,
            only.get(),
            Decision.PdOutcome.NOT_CONFIGURED,
            tokFailed);
      }
      ProfileResult r = run(rt, ctx, all);
      results.put(rt.profile.name(), r);
      return decision(
          r.endpoints().isEmpty() ? Decision.Result.ALL_FILTERED : Decision.Result.ROUTED,
          ctx,
          results,
          rt.profile.name(),
          Decision.PdOutcome.NOT_CONFIGURED,
          tokFailed);
    }
    ProfileResult primary = run(profiles.get(primaryProfile), ctx, all);
    results.put(primaryProfile, primary);
    if (primary.endpoints().isEmpty()) {
      return decision(
          Decision.Result.ALL_FILTERED,
          ctx,
          results,
          primaryProfile,
          Decision.PdOutcome.NOT_CONFIGURED,
          tokFailed);
    }
    Decision.PdOutcome pd = Decision.PdOutcome.NOT_CONFIGURED;
    Boolean force = request.disaggregation().orElse(null);
    if (pdEnabled && !Boolean.FALSE.equals(force)) {
      Endpoint decode = primary.endpoints().get(0);
      ctx.profile(primaryProfile);
      boolean want = Boolean.TRUE.equals(force) || decider.disaggregate(ctx, decode);
      pd = Decision.PdOutcome.DECODE_ONLY;
      if (want) {
        ctx.peer(decode);
        ProfileResult pre = run(profiles.get(prefillProfile), ctx, all);
        results.put(prefillProfile, pre);
        if (pre.endpoints().isEmpty()) {
          pd = Decision.PdOutcome.PREFILL_UNAVAILABLE;
        } else if (pre.endpoints().get(0).equals(decode)) {
          pd = Decision.PdOutcome.DECODE_ONLY; // same endpoint: nothing to transfer
        } else {
          pd = Decision.PdOutcome.PREFILL_DECODE;
        }
      }
    } else if (pdEnabled) {
      pd = Decision.PdOutcome.DECODE_ONLY;
    }
    return decision(Decision.Result.ROUTED, ctx, results, primaryProfile, pd, tokFailed);
  }

  private Decision decision(
      Decision.Result r,
      CycleContext ctx,
      Map<String, ProfileResult> results,
      String primary,
      Decision.PdOutcome pd,
      boolean tokFailed) {
    return new Decision(
        this,
        r,
        ctx.request(),
        results,
        primary,
        prefillProfile,
        pd,
        tokFailed,
        ctx.request().hasTokenIds() ? ctx.promptTokens() : -1,
        ctx);
  }

  private ProfileResult run(Runtime rt, CycleContext ctx, List<Endpoint> all) {
    String name = rt.profile.name();
    ctx.profile(name);
    List<Endpoint> c = all;
    boolean timed = ctx.timePlugins;
    // One clock read per plugin: each plugin's time runs from the previous one's end.
    long t = timed ? clock.getAsLong() : 0;
    for (int i = 0; i < rt.filters.length; i++) {
      c = rt.filters[i].filter(ctx, c);
      if (timed) {
        long now = clock.getAsLong();
        SchedulerMeters.record(rt.filterTimers[i], now - t);
        t = now;
      }
      if (c.isEmpty()) {
        return ProfileResult.emptied(name, rt.filters[i].name());
      }
    }
    int n = c.size();
    int k = rt.scorers.length;
    double[][] raw = new double[k][n];
    double[] totals = new double[n];
    for (int s = 0; s < k; s++) {
      double[] out = raw[s];
      rt.scorers[s].score(ctx, c, out);
      double w = rt.weights[s];
      for (int i = 0; i < n; i++) {
        double v = out[i];
        v = v > 0 ? (v < 1 ? v : 1) : 0; // clamp; NaN → 0
        out[i] = v;
        totals[i] += v * w;
      }
      if (timed) {
        long now = clock.getAsLong();
        SchedulerMeters.record(rt.scorerTimers[s], now - t);
        t = now;
      }
    }
    List<Endpoint> picked = rt.profile.picker().pick(ctx, c, totals);
    if (timed) {
      SchedulerMeters.record(rt.pickerTimer, clock.getAsLong() - t);
    }
    if (picked.isEmpty()) {
      throw new IllegalStateException(
          "picker \""
              + rt.profile.picker().name()
              + "\" returned no endpoint for "
              + n
              + " candidates");
    }
    boolean cold = false;
    if (rt.needsCold) {
      cold = Scorers.NoHitLruScorer.isCold(ctx, c);
    }
    return new ProfileResult(name, c, picked, rt.scorerNames, rt.weights, raw, totals, null, cold);
  }

  /**
   * Re-runs the prefill profile of a disaggregated decision for another decode endpoint (a
   * fallback), so that pairing filters see the right peer: returns the prefill endpoints in order,
   * or an empty list when the decision is not disaggregated or nothing passes. In-memory only.
   */
  public List<Endpoint> prefillEndpointsFor(Decision decision, Endpoint decode) {
    Objects.requireNonNull(decision, "decision");
    Objects.requireNonNull(decode, "decode");
    checkOwn(decision);
    if (!decision.disaggregated()) {
      return List.of();
    }
    if (decision.primary().map(decode::equals).orElse(false)) {
      return decision.prefillEndpoints();
    }
    CycleContext ctx = decision.context;
    synchronized (ctx) {
      ctx.peer(decode);
      ProfileResult r = run(profiles.get(prefillProfile), ctx, decision.request().candidates());
      List<Endpoint> out = new ArrayList<>(r.endpoints());
      out.remove(decode);
      return List.copyOf(out);
    }
  }

  // ------------------------------------------------------------------ lifecycle hooks

  /** {@link #onRouted(Decision, Endpoint, Endpoint)} with the decision's primary and prefill. */
  public void onRouted(Decision decision) {
    if (decision.routed()) {
      onRouted(decision, decision.primary().get(), decision.prefill().orElse(null));
    }
  }

  /**
   * Call when the request was sent to {@code decode} (the primary or a fallback) and, when
   * disaggregated, {@code prefill} (nullable). Counts it in flight, records its blocks in the
   * approximate index and as speculative entries, refreshes the no-hit LRU and stateful sessions.
   * Call once per attempt; pair every call with {@link #onComplete}.
   */
  public void onRouted(Decision decision, Endpoint decode, Endpoint prefill) {
    Objects.requireNonNull(decision, "decision");
    Objects.requireNonNull(decode, "decode");
    checkOwn(decision);
    long now = clock.getAsLong();
    inFlight.increment(decode.id());
    if (prefill != null) {
      inFlight.increment(prefill.id());
    }
    CycleContext ctx = decision.context;
    long[] h = null;
    long[] keys = null;
    synchronized (ctx) { // the context may be read here on another thread than the pick's
      if (approximate != null) {
        h = ctx.approximateHashes();
      }
      if (speculative != null || fleet != null) {
        keys = ctx.requestKeys();
      }
    }
    if (fleet != null) {
      long tokens = Math.max(0, decision.promptTokens());
      fleet.requestStarted(decode.id(), tokens);
      if (keys != null && keys.length > 0) {
        fleet.speculate(decode.id(), keys, keys.length);
      }
      if (h != null && h.length > 0) {
        fleet.remember(decode.id(), h, h.length);
      }
      if (prefill != null) {
        fleet.requestStarted(prefill.id(), tokens);
        if (keys != null && keys.length > 0) {
          fleet.speculate(prefill.id(), keys, keys.length);
        }
        if (h != null && h.length > 0) {
          fleet.remember(prefill.id(), h, h.length);
        }
      }
      for (ProfileResult pr : decision.profiles().values()) {
        if (pr.cold()) { // every replica's no-hit LRU hears of it
          boolean pre = pr.name().equals(decision.prefillProfileName());
          Endpoint target = pre ? prefill : decode;
          if (target != null) {
            fleet.coldRouted(target.id());
          }
        }
      }
    }
    if (approximate != null) {
      approximate.add(decode.id(), h, now);
      if (prefill != null) {
        approximate.add(prefill.id(), h, now);
      }
    }
    if (speculative != null) {
      if (keys != null && keys.length > 0) {
        speculative.add(decode.id(), keys, now);
        if (prefill != null) {
          speculative.add(prefill.id(), keys, now);
        }
      }
    }
    forEachPlugin(decision, decode, prefill, now, true);
  }

  /** {@link #onComplete(Decision, Endpoint, Endpoint)} with the decision's primary and prefill. */
  public void onComplete(Decision decision) {
    if (decision.routed()) {
      onComplete(decision, decision.primary().get(), decision.prefill().orElse(null));
    }
  }

  /**
   * Call when a request sent with {@link #onRouted(Decision, Endpoint, Endpoint)} ended, whatever
   * the outcome, with the same endpoints.
   */
  public void onComplete(Decision decision, Endpoint decode, Endpoint prefill) {
    Objects.requireNonNull(decision, "decision");
    Objects.requireNonNull(decode, "decode");
    checkOwn(decision);
    inFlight.decrement(decode.id());
    if (prefill != null) {
      inFlight.decrement(prefill.id());
    }
    if (fleet != null) {
      long tokens = Math.max(0, decision.promptTokens());
      fleet.requestFinished(decode.id(), tokens);
      if (prefill != null) {
        fleet.requestFinished(prefill.id(), tokens);
      }
    }
    forEachPlugin(decision, decode, prefill, clock.getAsLong(), false);
  }

  /**
   * Forgets everything about an endpoint that left the pool: metrics, in-flight count, approximate
   * and speculative entries.
   */
  public void removeEndpoint(String endpointId) {
    metrics.remove(endpointId);
    inFlight.remove(endpointId);
    latencyPredictor.remove(endpointId);
    if (approximate != null) {
      approximate.remove(endpointId);
    }
    if (speculative != null) {
      speculative.remove(endpointId);
    }
    if (fleet != null) {
      fleet.removeEndpoint(endpointId);
    }
  }

  /** The fleet this scheduler is a replica of, if any ({@link Builder#fleet}). */
  public Optional<FleetState> fleet() {
    return Optional.ofNullable(fleet);
  }

  private void checkOwn(Decision d) {
    if (d.scheduler() != this) {
      throw new IllegalArgumentException("decision was made by another Scheduler");
    }
  }

  private void forEachPlugin(
      Decision d, Endpoint decode, Endpoint prefill, long now, boolean routed) {
    PluginHooks.lifecycle(d, this::profileOf, decode, prefill, now, routed);
  }

  void collectResponseHeaders(
      Decision d, Endpoint decode, Endpoint prefill, Map<String, String> out) {
    PluginHooks.responseHeaders(d, this::profileOf, decode, prefill, out);
  }

  private Profile profileOf(String name) {
    Runtime rt = profiles.get(name);
    return rt == null ? null : rt.profile;
  }

  @Override
  public String toString() {
    return "Scheduler{profiles="
        + profiles.keySet()
        + ", primary="
        + primaryProfile
        + ", prefill="
        + prefillProfile
        + ", pd="
        + pdEnabled
        + "}";
  }

  // ------------------------------------------------------------------ builder

  /** Builds {@link Scheduler}s; validates at {@link #build()}. Not thread-safe. */
  public static final class Builder {
    private final List<Profile> profiles = new ArrayList<>();
    private String primaryProfile;
    private String prefillProfile;
    private boolean pdEnabled;
    private PdDecider decider = PdDecider.prefixBased(10);
    private PrefixCacheLookup lookup;
    private MetricsStore metrics;
    private Duration staleAfter = Duration.ofSeconds(2);
    private boolean approximateIndexing = true;
    private int approxBlockSize = 64;
    private int approxMaxBlocks = 2048;
    private int approxLruPerEndpoint = 31_250;
    private Duration speculativeTtl = Duration.ofSeconds(2);
    private int speculativeMaxEntries = 1_000_000;
    private int maxTrackedEndpoints = 10_000;
    private RandomGenerator random;
    private LongSupplier clock = System::nanoTime;
    private Tokenizer tokenizer;
    private Duration tokenizeTimeout = Duration.ofSeconds(2);
    private MeterRegistry registry;
    private java.util.function.Predicate<String> isDown = id -> false;
    private LatencyPredictor latencyPredictor;
    private FleetState fleet;

    private Builder() {}

    /**
     * The latency predictor (default: a new one reading this scheduler's metrics store, bounded by
     * {@link #maxTrackedEndpoints}, with meters in {@link #meterRegistry}).
     */
    public Builder latencyPredictor(LatencyPredictor predictor) {
      this.latencyPredictor = Objects.requireNonNull(predictor, "latencyPredictor");
      return this;
    }

    /**
     * Makes this scheduler one replica of a fleet sharing {@code fleet} (default none: in-flight
     * counts and speculative entries are this scheduler's own). See the class comment. The
     * scheduler does not close it.
     */
    public Builder fleet(FleetState fleet) {
      this.fleet = fleet;
      return this;
    }

    /**
     * For the default profiles: endpoints for which {@code isDown} is true are dropped by their
     * health filters (for example {@code breakers::isOpen}, or {@link HealthProbe#isDown()}).
     * Evaluated on every pick, so it must be fast and thread-safe.
     */
    public Builder isDown(java.util.function.Predicate<String> isDown) {
      this.isDown = Objects.requireNonNull(isDown, "isDown");
      return this;
    }

    /**
     * Adds a profile. Without any, {@link Scheduler#defaultProfiles(boolean)} are used (with PD off
     * unless {@link #pdEnabled(boolean)}).
     */
    public Builder profile(Profile profile) {
      profiles.add(Objects.requireNonNull(profile, "profile"));
      return this;
    }

    /** The profile that picks the decode (or aggregated) endpoint; default: the first profile. */
    public Builder primaryProfile(String name) {
      this.primaryProfile = name;
      return this;
    }

    /** The profile that picks the prefill endpoint (none by default for custom profiles). */
    public Builder prefillProfile(String name) {
      this.prefillProfile = name;
      return this;
    }

    /** The switch for PD disaggregation (default off). */
    public Builder pdEnabled(boolean enabled) {
      this.pdEnabled = enabled;
      return this;
    }

    /** The PD decider (default {@link PdDecider#prefixBased(int)} with 10). */
    public Builder pdDecider(PdDecider decider) {
      this.decider = Objects.requireNonNull(decider, "pdDecider");
      return this;
    }

    /** The precise prefix-cache index (kvindex); enables precise scoring and request keys. */
    public Builder prefixCacheLookup(PrefixCacheLookup lookup) {
      this.lookup = lookup;
      return this;
    }

    /** The engine metrics store; default: a new one with {@link #metricsStaleAfter}. */
    public Builder metricsStore(MetricsStore store) {
      this.metrics = store;
      return this;
    }

    /** Staleness of the default metrics store (default 2 s). */
    public Builder metricsStaleAfter(Duration staleAfter) {
      this.staleAfter = Objects.requireNonNull(staleAfter, "metricsStaleAfter");
      return this;
    }

    /** Keep the approximate prefix index (default on). */
    public Builder approximateIndexing(boolean enabled) {
      this.approximateIndexing = enabled;
      return this;
    }

    /**
     * Geometry of the approximate index: tokens per block (default 64, the llm-d floor), blocks per
     * prompt (default 2048) and hashes remembered per endpoint (default 31,250).
     */
    public Builder approximatePrefix(int blockSizeTokens, int maxBlocks, int lruPerEndpoint) {
      this.approxBlockSize = blockSizeTokens;
      this.approxMaxBlocks = maxBlocks;
      this.approxLruPerEndpoint = lruPerEndpoint;
      return this;
    }

    /**
     * Speculative prefix entries: TTL (default 2 s, as llm-d's {@code speculativeTTL}; zero
     * disables) and the bound on entries (default 1,000,000).
     */
    public Builder speculative(Duration ttl, int maxEntries) {
      this.speculativeTtl = Objects.requireNonNull(ttl, "speculativeTtl");
      this.speculativeMaxEntries = maxEntries;
      return this;
    }

    /** Bound on endpoints tracked by the in-flight counter and approximate index (10,000). */
    public Builder maxTrackedEndpoints(int max) {
      this.maxTrackedEndpoints = max;
      return this;
    }

    /** The random source (default {@link ThreadLocalRandom}); must be thread-safe if shared. */
    public Builder random(RandomGenerator random) {
      this.random = random;
      return this;
    }

    /** The clock (default {@link System#nanoTime()}). */
    public Builder nanoClock(LongSupplier clock) {
      this.clock = Objects.requireNonNull(clock, "nanoClock");
      return this;
    }

    /** The tokenizer used by {@link Scheduler#pickAsync} when a request has no token ids. */
    public Builder tokenizer(Tokenizer tokenizer) {
      this.tokenizer = tokenizer;
      return this;
    }

    /** Upper bound on tokenization in {@link Scheduler#pickAsync} (default 2 s). */
    public Builder tokenizeTimeout(Duration timeout) {
      this.tokenizeTimeout = Objects.requireNonNull(timeout, "tokenizeTimeout");
      return this;
    }

    /** Micrometer registry for the scheduler's metrics (none by default). */
    public Builder meterRegistry(MeterRegistry registry) {
      this.registry = registry;
      return this;
    }

    /**
     * Builds the scheduler.
     *
     * @throws IllegalArgumentException naming the bad field
     */
    public Scheduler build() {
      if (approxBlockSize < 1) {
        throw new IllegalArgumentException(
            "approximatePrefix.blockSizeTokens must be >= 1, was " + approxBlockSize);
      }
      if (approxMaxBlocks < 0) {
        throw new IllegalArgumentException(
            "approximatePrefix.maxBlocks must be >= 0 (0 = unlimited), was " + approxMaxBlocks);
      }
      if (approxLruPerEndpoint < 1) {
        throw new IllegalArgumentException(
            "approximatePrefix.lruCapacityPerServer must be >= 1, was " + approxLruPerEndpoint);
      }
      if (speculativeTtl.isNegative()) {
        throw new IllegalArgumentException("speculativeTTL must be >= 0, was " + speculativeTtl);
      }
      if (speculativeMaxEntries < 1) {
        throw new IllegalArgumentException(
            "speculative.maxEntries must be >= 1, was " + speculativeMaxEntries);
      }
      if (maxTrackedEndpoints < 1) {
        throw new IllegalArgumentException(
            "maxTrackedEndpoints must be >= 1, was " + maxTrackedEndpoints);
      }
      if (tokenizeTimeout.isNegative() || tokenizeTimeout.isZero()) {
        throw new IllegalArgumentException("tokenizeTimeout must be > 0, was " + tokenizeTimeout);
      }
      if (staleAfter.isNegative() || staleAfter.isZero()) {
        throw new IllegalArgumentException("metricsStaleAfter must be > 0, was " + staleAfter);
      }
      return new Scheduler(this);
    }
  }
}
