package io.kvroute.scoring;

import io.kvroute.scoring.internal.ApproximatePrefixIndex;
import io.kvroute.scoring.internal.InFlightTracker;
import io.kvroute.scoring.internal.SchedulerMeters;
import io.kvroute.scoring.internal.SpeculativeIndex;
import java.util.Map;

/**
 * Registers the {@link Scheduler}'s gauges and function counters (in-flight tracking, prefix
 * indexes, engine metrics, session and no-hit LRU state of its plugins). Called once, at build.
 */
final class SchedulerGauges {
  private SchedulerGauges() {}

  static void register(
      SchedulerMeters meters,
      InFlightTracker inFlight,
      ApproximatePrefixIndex approximate,
      SpeculativeIndex speculative,
      MetricsStore metrics,
      Map<String, Profile> profiles) {
    meters.gauge(
        "kvroute.scheduler.inflight.endpoints",
        "Endpoints with tracked in-flight counts",
        inFlight,
        InFlightTracker::size);
    meters.gauge(
        "kvroute.scheduler.inflight.requests",
        "Requests in flight (router-tracked)",
        inFlight,
        t -> t.total());
    meters.functionCounter(
        "kvroute.scheduler.inflight.overflows",
        "In-flight increments dropped because the tracker was full",
        inFlight,
        t -> t.overflows());
    if (approximate != null) {
      meters.gauge(
          "kvroute.scheduler.approx.prefix.entries",
          "(block, endpoint) entries of the approximate prefix index",
          approximate,
          a -> a.size());
      meters.functionCounter(
          "kvroute.scheduler.approx.prefix.evictions",
          "Approximate prefix entries evicted by a bound",
          approximate,
          a -> a.evictions());
    }
    if (speculative != null) {
      meters.gauge(
          "kvroute.scheduler.speculative.entries",
          "Speculative prefix entries held",
          speculative,
          SpeculativeIndex::size);
      meters.functionCounter(
          "kvroute.scheduler.speculative.evictions",
          "Speculative entries dropped before expiry by the bound",
          speculative,
          s -> s.evictions());
    }
    meters.gauge(
        "kvroute.scheduler.metrics.endpoints",
        "Endpoints with engine metrics",
        metrics,
        MetricsStore::size);
    meters.gauge(
        "kvroute.scheduler.metrics.stale",
        "Endpoints whose engine metrics are stale",
        metrics,
        MetricsStore::staleCount);
    for (Profile p : profiles.values()) {
      for (Filter f : p.filters()) {
        if (f instanceof Filters.SessionFilter sf) {
          sessionGauges(meters, p.name(), f.name(), sf.affinity);
        }
      }
      for (Profile.WeightedScorer w : p.scorers()) {
        Scorer s = w.scorer();
        if (s instanceof Scorers.SessionScorer ss) {
          sessionGauges(meters, p.name(), s.name(), ss.affinity);
        } else if (s instanceof Scorers.NoHitLruScorer n) {
          meters.gauge(
              "kvroute.scheduler.nohit.lru.size",
              "plugin",
              p.name() + "/" + s.name(),
              n,
              Scorers.NoHitLruScorer::size);
        }
      }
    }
  }

  private static void sessionGauges(
      SchedulerMeters meters, String profile, String plugin, SessionAffinity a) {
    if (a.stateful()) {
      meters.gauge(
          "kvroute.scheduler.sessions", "plugin", profile + "/" + plugin, a, SessionAffinity::size);
      meters.gauge(
          "kvroute.scheduler.sessions.evictions",
          "plugin",
          profile + "/" + plugin,
          a,
          x -> x.evictions());
    }
  }
}
