package io.kvroute.scoring.internal;

import io.kvroute.scoring.SchedulerPlugin;
import io.kvroute.scoring.SchedulerPluginProvider.NoParameters;
import io.kvroute.scoring.Scorers;
import java.time.Duration;

/**
 * kvroute's scorer plugins, registered through {@code META-INF/services}. Range checks the
 * factories in {@link Scorers} make (weights in [0, 1], thresholds ≥ 1) are reported at the
 * parameter by the loader; the records hold the defaults.
 */
public final class BuiltinScorers {
  private BuiltinScorers() {}

  /**
   * {@code precise-prefix-cache-scorer}.
   *
   * @param matchLengthWeight weight w of the absolute match length against the ratio (default 0)
   * @param matchLengthScaleTokens tokens at which the length score saturates (default 8192)
   * @param fallbackToApproximate score the approximate index when there are no token ids (default
   *     true)
   * @param speculativeIndexing remember where a prefix was just sent, for a TTL (default true)
   * @param speculativeTTL how long a speculative entry lives (default 2s)
   * @param speculativeMaxEntries bound on speculative entries (default 1,000,000)
   * @param tokenProcessorConfig llm-d's, accepted and ignored
   * @param indexerConfig llm-d's, accepted and ignored
   * @param kvEventsConfig llm-d's, accepted and ignored
   * @param kvCacheBackendConfigs llm-d's, accepted and ignored
   */
  public record PrecisePrefix(
      Double matchLengthWeight,
      Integer matchLengthScaleTokens,
      Boolean fallbackToApproximate,
      Boolean speculativeIndexing,
      Duration speculativeTTL,
      Integer speculativeMaxEntries,
      Object tokenProcessorConfig,
      Object indexerConfig,
      Object kvEventsConfig,
      Object kvCacheBackendConfigs) {
    /** Applies the defaults. */
    public PrecisePrefix {
      matchLengthWeight = matchLengthWeight == null ? 0.0 : matchLengthWeight;
      matchLengthScaleTokens = matchLengthScaleTokens == null ? 8192 : matchLengthScaleTokens;
      fallbackToApproximate = fallbackToApproximate == null || fallbackToApproximate;
      speculativeIndexing = speculativeIndexing == null || speculativeIndexing;
      speculativeTTL = speculativeTTL == null ? Duration.ofSeconds(2) : speculativeTTL;
      speculativeMaxEntries = speculativeMaxEntries == null ? 1_000_000 : speculativeMaxEntries;
    }
  }

  /** {@code precise-prefix-cache-scorer}: prefix match from the KV-event index. */
  public static final class PrecisePrefixCacheScorer extends Builtin<PrecisePrefix> {
    /** The provider. */
    public PrecisePrefixCacheScorer() {
      super(
          "precise-prefix-cache-scorer",
          PrecisePrefix.class,
          (p, c) -> {
            Duration ttl = p.speculativeIndexing() ? p.speculativeTTL() : Duration.ZERO;
            int max = p.speculativeMaxEntries();
            return SchedulerPlugin.scorer(
                    Scorers.precisePrefixCache(
                        c.name(),
                        p.matchLengthWeight(),
                        p.matchLengthScaleTokens(),
                        p.fallbackToApproximate()))
                .withSchedulerSettings(b -> b.speculative(ttl, max));
          });
    }
  }

  /**
   * {@code prefix-cache-scorer} (approximate).
   *
   * @param matchLengthWeight weight w of the absolute match length (default 0)
   * @param matchLengthScaleTokens tokens at which the length score saturates (default 8192)
   * @param prefixMatchInfoProducerName llm-d's, accepted and ignored
   */
  public record Prefix(
      Double matchLengthWeight,
      Integer matchLengthScaleTokens,
      String prefixMatchInfoProducerName) {
    /** Applies the defaults. */
    public Prefix {
      matchLengthWeight = matchLengthWeight == null ? 0.0 : matchLengthWeight;
      matchLengthScaleTokens = matchLengthScaleTokens == null ? 8192 : matchLengthScaleTokens;
    }
  }

  /** {@code prefix-cache-scorer}: prefix match from the router's own LRU. */
  public static final class PrefixCacheScorer extends Builtin<Prefix> {
    /** The provider. */
    public PrefixCacheScorer() {
      super(
          "prefix-cache-scorer",
          Prefix.class,
          (p, c) ->
              SchedulerPlugin.scorer(
                  Scorers.approximatePrefixCache(
                      c.name(), p.matchLengthWeight(), p.matchLengthScaleTokens())));
    }
  }

  /**
   * {@code load-aware-scorer}.
   *
   * @param threshold waiting requests at which the score reaches 0 (default 10)
   */
  public record LoadAware(Integer threshold) {
    /** Applies the default. */
    public LoadAware {
      threshold = threshold == null ? 10 : threshold;
    }
  }

  /** {@code load-aware-scorer}. */
  public static final class LoadAwareScorer extends Builtin<LoadAware> {
    /** The provider. */
    public LoadAwareScorer() {
      super(
          "load-aware-scorer",
          LoadAware.class,
          (p, c) -> SchedulerPlugin.scorer(Scorers.loadAware(c.name(), p.threshold())));
    }
  }

  /**
   * {@code active-request-scorer}.
   *
   * @param idleThreshold in-flight requests still counted as idle (default 0)
   * @param maxBusyScore the score of a busy endpoint with the fewest requests (default 1)
   * @param requestTimeout llm-d's (deprecated there), accepted and ignored
   * @param inFlightLoadProducerName llm-d's, accepted and ignored
   */
  public record ActiveRequest(
      Integer idleThreshold,
      Double maxBusyScore,
      Object requestTimeout,
      String inFlightLoadProducerName) {
    /** Applies the defaults. */
    public ActiveRequest {
      idleThreshold = idleThreshold == null ? 0 : idleThreshold;
      maxBusyScore = maxBusyScore == null ? 1.0 : maxBusyScore;
    }
  }

  /** {@code active-request-scorer}: in-flight requests counted by the router. */
  public static final class ActiveRequestScorer extends Builtin<ActiveRequest> {
    /** The provider. */
    public ActiveRequestScorer() {
      super(
          "active-request-scorer",
          ActiveRequest.class,
          (p, c) ->
              SchedulerPlugin.scorer(
                  Scorers.activeRequests(c.name(), p.idleThreshold(), p.maxBusyScore())));
    }
  }

  /**
   * {@code predicted-latency-scorer}: TTFT and TPOT predicted by the scheduler's latency predictor
   * against the request's objective (see {@link Scorers#predictedLatency(String)}).
   */
  public static final class PredictedLatencyScorer extends Builtin<NoParameters> {
    /** The provider. */
    public PredictedLatencyScorer() {
      super(
          "predicted-latency-scorer",
          NoParameters.class,
          (p, c) -> SchedulerPlugin.scorer(Scorers.predictedLatency(c.name())));
    }
  }

  /** {@code queue-scorer}: engine waiting queue, min-max normalised. */
  public static final class QueueScorer extends Builtin<NoParameters> {
    /** The provider. */
    public QueueScorer() {
      super(
          "queue-scorer",
          NoParameters.class,
          (p, c) -> SchedulerPlugin.scorer(Scorers.queue(c.name())));
    }
  }

  /** {@code running-requests-size-scorer}: engine running requests, min-max normalised. */
  public static final class RunningRequestsSizeScorer extends Builtin<NoParameters> {
    /** The provider. */
    public RunningRequestsSizeScorer() {
      super(
          "running-requests-size-scorer",
          NoParameters.class,
          (p, c) -> SchedulerPlugin.scorer(Scorers.runningRequests(c.name())));
    }
  }

  /** {@code kv-cache-utilization-scorer}: 1 − KV-cache usage. */
  public static final class KvCacheUtilizationScorer extends Builtin<NoParameters> {
    /** The provider. */
    public KvCacheUtilizationScorer() {
      super(
          "kv-cache-utilization-scorer",
          NoParameters.class,
          (p, c) -> SchedulerPlugin.scorer(Scorers.kvCacheUtilization(c.name())));
    }
  }

  /** {@code lora-affinity-scorer}: prefers endpoints running the request's adapter. */
  public static final class LoraAffinityScorer extends Builtin<NoParameters> {
    /** The provider. */
    public LoraAffinityScorer() {
      super(
          "lora-affinity-scorer",
          NoParameters.class,
          (p, c) -> SchedulerPlugin.scorer(Scorers.loraAffinity(c.name())));
    }
  }

  /** {@code session-affinity-scorer}: 1 for the session's endpoint. */
  public static final class SessionAffinityScorer extends Builtin<BuiltinFilters.Session> {
    /** The provider. */
    public SessionAffinityScorer() {
      super(
          "session-affinity-scorer",
          BuiltinFilters.Session.class,
          (p, c) -> SchedulerPlugin.scorer(Scorers.sessionAffinity(c.name(), p.affinity())));
    }
  }

  /**
   * {@code no-hit-lru-scorer}.
   *
   * @param lruSize endpoints remembered (default 1024)
   * @param prefixMatchInfoProducerName llm-d's, accepted and ignored
   * @param prefixPluginType llm-d's (deprecated there), accepted and ignored
   * @param prefixPluginName llm-d's (deprecated there), accepted and ignored
   */
  public record NoHitLru(
      Integer lruSize,
      String prefixMatchInfoProducerName,
      String prefixPluginType,
      String prefixPluginName) {
    /** Applies the default. */
    public NoHitLru {
      lruSize = lruSize == null ? 1024 : lruSize;
    }
  }

  /** {@code no-hit-lru-scorer}: spreads cold requests over the least recently used endpoints. */
  public static final class NoHitLruScorer extends Builtin<NoHitLru> {
    /** The provider. */
    public NoHitLruScorer() {
      super(
          "no-hit-lru-scorer",
          NoHitLru.class,
          (p, c) -> SchedulerPlugin.scorer(Scorers.noHitLru(c.name(), p.lruSize())));
    }
  }
}
