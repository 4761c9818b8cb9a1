package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The built-in {@link Scorer}s. Every score is in [0, 1], higher is better. Each factory takes the
 * instance name first (used in decisions and metrics); the no-name overloads use the upstream type
 * name.
 *
 * <p>All scorers are thread-safe. Those that need engine metrics give an endpoint whose metrics are
 * unknown or stale a score of 0 ("unknown", never "idle").
 */
public final class Scorers {
  private Scorers() {}

  // ---------------------------------------------------------------- prefix cache

  /**
   * Precise prefix-cache scorer: reads the KV-event fed index ({@link PrefixCacheLookup}, plus
   * speculative entries) for the longest consecutive prefix, tier-weighted. Score = {@code w ·
   * lengthScore + (1 − w) · ratio} with ratio = weightedBlocks / totalBlocks (capped at 1) and
   * lengthScore = min(1, matchedBlocks · blockSize / matchLengthScaleTokens)²; w = {@code
   * matchLengthWeight} (default 0 → the ratio alone). When the request has no token ids (the
   * tokenizer failed or none is configured) and {@code fallbackToApproximate} is set, it scores the
   * approximate index's match instead.
   *
   * @throws IllegalArgumentException when {@code matchLengthWeight} is outside [0, 1] or {@code
   *     matchLengthScaleTokens < 1}
   */
  public static Scorer precisePrefixCache(
      String name,
      double matchLengthWeight,
      int matchLengthScaleTokens,
      boolean fallbackToApproximate) {
    return new PrefixScorer(
        name, true, matchLengthWeight, matchLengthScaleTokens, fallbackToApproximate);
  }

  /** {@code precise-prefix-cache-scorer} with the ratio only and fallback to approximate. */
  public static Scorer precisePrefixCache() {
    return precisePrefixCache("precise-prefix-cache-scorer", 0.0, 8192, true);
  }

  /**
   * Approximate prefix-cache scorer: the same formula as {@link #precisePrefixCache} over the
   * router's own LRU of the prompt blocks it sent to each endpoint (updated in {@link
   * Scheduler#onRouted}); for fleets without KV events.
   */
  public static Scorer approximatePrefixCache(
      String name, double matchLengthWeight, int matchLengthScaleTokens) {
    return new PrefixScorer(name, false, matchLengthWeight, matchLengthScaleTokens, false);
  }

  /** {@code prefix-cache-scorer} (approximate) with the ratio only. */
  public static Scorer approximatePrefixCache() {
    return approximatePrefixCache("prefix-cache-scorer", 0.0, 8192);
  }

  static final class PrefixScorer extends NamedPlugin.NamedScorer {
    final boolean precise;
    private final double w;
    private final int scaleTokens;
    private final boolean fallback;

    PrefixScorer(String name, boolean precise, double w, int scaleTokens, boolean fallback) {
      super(name);
      if (!(w >= 0 && w <= 1)) {
        throw new IllegalArgumentException(name + ".matchLengthWeight must be in [0, 1], was " + w);
      }
      if (scaleTokens < 1) {
        throw new IllegalArgumentException(
            name + ".matchLengthScaleTokens must be >= 1, was " + scaleTokens);
      }
      this.precise = precise;
      this.w = w;
      this.scaleTokens = scaleTokens;
      this.fallback = fallback;
    }

    @Override
    public void score(SchedulingContext ctx, List<Endpoint> candidates, double[] out) {
      boolean usePrecise = precise && ctx.hasPreciseMatches();
      if (precise && !usePrecise && !fallback) {
        java.util.Arrays.fill(out, 0, candidates.size(), 0.0);
        return;
      }
      if (usePrecise && ctx instanceof CycleContext cc) {
        // per-request arrays, no match objects
        int total = cc.preciseTotalBlocks();
        int bs = cc.preciseBlockSize();
        for (int i = 0; i < candidates.size(); i++) {
          int slot = cc.slotOf(candidates.get(i), i);
          out[i] = formula(cc.preciseMatchedAt(slot), cc.preciseWeightedAt(slot), total, bs);
        }
        return;
      }
      for (int i = 0; i < candidates.size(); i++) {
        Endpoint e = candidates.get(i);
        PrefixCacheMatch m = usePrecise ? ctx.preciseMatch(e) : ctx.approximateMatch(e);
        out[i] = formula(m);
      }
    }

    double formula(PrefixCacheMatch m) {
      return formula(m.matchedBlocks(), m.weightedBlocks(), m.totalBlocks(), m.blockSizeTokens());
    }

    private double formula(int matched, double weighted, int total, int blockSize) {
      if (total == 0) {
        return 0;
      }
      double ratio = Math.min(1.0, weighted / total);
      if (w == 0) {
        return ratio;
      }
      double len = Math.min(1.0, (double) matched * blockSize / scaleTokens);
      return w * len * len + (1 - w) * ratio;
    }
  }

  // ---------------------------------------------------------------- predicted latency

  /**
   * Predicted-latency scorer: asks the scheduler's {@link LatencyPredictor} what TTFT and TPOT each
   * candidate would give the request (its uncached prompt tokens there, from the prefix match, and
   * what is routed there now). With a {@link LatencySlo} ({@link SchedulingRequest#slo()}) it
   * prefers endpoints predicted to meet it with the most headroom: with h the smallest of {@code
   * (bound − predicted) / bound} over the request's bounds, the score is {@code 0.5 + 0.5·h} when h
   * ≥ 0 (met) and {@code 0.5·max(0, 1 + h)} when not. Without an objective it prefers the lowest
   * predicted TTFT: {@code min / predicted} over the candidates. While the predictor has learnt too
   * little, every candidate scores 0.5.
   */
  public static Scorer predictedLatency(String name) {
    return new PredictedLatencyScorer(name);
  }

  /** {@code predicted-latency-scorer}. */
  public static Scorer predictedLatency() {
    return predictedLatency("predicted-latency-scorer");
  }

  static final class PredictedLatencyScorer extends NamedPlugin.NamedScorer {
    PredictedLatencyScorer(String name) {
      super(name);
    }

    @Override
    public void score(SchedulingContext ctx, List<Endpoint> candidates, double[] out) {
      int n = candidates.size();
      if (!(ctx instanceof CycleContext cc)) {
        java.util.Arrays.fill(out, 0, n, 0.5);
        return;
      }
      LatencyPredictor predictor = cc.scheduler().latencyPredictor();
      LatencySlo slo = ctx.request().slo();
      int prompt = Math.max(0, ctx.promptTokens());
      long[] ttft = new long[n];
      long[] tpot = new long[n];
      long best = Long.MAX_VALUE;
      for (int i = 0; i < n; i++) {
        Endpoint e = candidates.get(i);
        long cached = Math.min(prompt, ctx.prefixMatch(e).cachedTokens());
        LatencyPredictor.Prediction p = predictor.predict(e.id(), prompt - cached, cached);
        ttft[i] = p.ttftNanos();
        tpot[i] = p.tpotNanos();
        if (ttft[i] >= 0) {
          best = Math.min(best, ttft[i]);
        }
      }
      if (best == Long.MAX_VALUE) {
        java.util.Arrays.fill(out, 0, n, 0.5);
        return;
      }
      for (int i = 0; i < n; i++) {
        out[i] = slo.isEmpty() ? relative(best, ttft[i]) : headroomScore(slo, ttft[i], tpot[i]);
      }
    }

    private static double relative(long best, long predicted) {
      return predicted < 0 ? 0.5 : (double) Math.max(best, 1) / Math.max(predicted, 1);
    }

    static double headroomScore(LatencySlo slo, long ttft, long tpot) {
      double h = Double.POSITIVE_INFINITY;
      if (slo.ttftNanos() > 0 && ttft >= 0) {
        h = Math.min(h, (double) (slo.ttftNanos() - ttft) / slo.ttftNanos());
      }
      if (slo.tpotNanos() > 0 && tpot >= 0) {
        h = Math.min(h, (double) (slo.tpotNanos() - tpot) / slo.tpotNanos());
      }
      if (h == Double.POSITIVE_INFINITY) {
        return 0.5;
      }
      return h >= 0 ? 0.5 + 0.5 * h : 0.5 * Math.max(0, 1 + h);
    }
  }

  // ---------------------------------------------------------------- load

  /**
   * Load-aware scorer on the engine's waiting queue q with threshold T: q = 0 → 0.5; q ≥ T → 0;
   * otherwise 0.5 · (1 − q/T). The maximum is 0.5 by design (as upstream). kvroute's default T is
   * 10, as the llm-d seed documents ({@code LoadAwareScorer threshold: 10}); upstream llm-d's
   * {@code load-aware-scorer} defaults to 128. Unknown or stale metrics → 0.
   *
   * @throws IllegalArgumentException when {@code threshold < 1}
   */
  public static Scorer loadAware(String name, int threshold) {
    if (threshold < 1) {
      throw new IllegalArgumentException(name + ".threshold must be >= 1, was " + threshold);
    }
    return new MetricScorer(name) {
      @Override
      double score(EndpointMetrics m) {
        int q = m.waitingRequests();
        if (q < 0) {
          return 0;
        }
        if (q == 0) {
          return 0.5;
        }
        if (q >= threshold) {
          return 0;
        }
        return 0.5 * (1.0 - (double) q / threshold);
      }
    };
  }

  /** {@code load-aware-scorer} with threshold 10 (see {@link #loadAware(String, int)}). */
  public static Scorer loadAware() {
    return loadAware("load-aware-scorer", 10);
  }

  /**
   * KV-cache utilization scorer: {@code 1 − usage}, usage clamped to [0, 1]. Unknown or stale → 0.
   */
  public static Scorer kvCacheUtilization(String name) {
    return new MetricScorer(name) {
      @Override
      double score(EndpointMetrics m) {
        double u = m.kvCacheUsage();
        if (Double.isNaN(u)) {
          return 0;
        }
        return 1.0 - Math.max(0, Math.min(1, u));
      }
    };
  }

  /** {@code kv-cache-utilization-scorer}. */
  public static Scorer kvCacheUtilization() {
    return kvCacheUtilization("kv-cache-utilization-scorer");
  }

  /**
   * Queue scorer: min-max over the candidates with fresh metrics, {@code (maxQ − q) / (maxQ −
   * minQ)}; 1.0 for all when every q is equal; unknown or stale → 0.
   */
  public static Scorer queue(String name) {
    return new MinMaxScorer(name, true);
  }

  /** {@code queue-scorer}. */
  public static Scorer queue() {
    return queue("queue-scorer");
  }

  /** Running-requests scorer: as {@link #queue} on {@code vllm:num_requests_running}. */
  public static Scorer runningRequests(String name) {
    return new MinMaxScorer(name, false);
  }

  /**
   * Active-request scorer on the router's own in-flight count c: c ≤ {@code idleThreshold} → 1.0;
   * otherwise {@code (maxC − c) / maxC × maxBusyScore}, maxC over the candidates.
   *
   * @throws IllegalArgumentException when {@code idleThreshold < 0} or {@code maxBusyScore} is
   *     outside [0, 1]
   */
  public static Scorer activeRequests(String name, int idleThreshold, double maxBusyScore) {
    if (idleThreshold < 0) {
      throw new IllegalArgumentException(
          name + ".idleThreshold must be >= 0, was " + idleThreshold);
    }
    if (!(maxBusyScore >= 0 && maxBusyScore <= 1)) {
      throw new IllegalArgumentException(
          name + ".maxBusyScore must be in [0, 1], was " + maxBusyScore);
    }
    return new NamedPlugin.NamedScorer(name) {
      @Override
      public void score(SchedulingContext ctx, List<Endpoint> candidates, double[] out) {
        int size = candidates.size();
        int max = 0;
        for (int i = 0; i < size; i++) {
          int c = ctx.inFlight(candidates.get(i));
          out[i] = c;
          max = Math.max(max, c);
        }
        for (int i = 0; i < size; i++) {
          int c = (int) out[i];
          out[i] = c <= idleThreshold ? 1.0 : (double) (max - c) / max * maxBusyScore;
        }
      }
    };
  }

  /** {@code active-request-scorer} with idle threshold 0 and max busy score 1. */
  public static Scorer activeRequests() {
    return activeRequests("active-request-scorer", 0, 1.0);
  }

  /**
   * LoRA-affinity scorer from {@code vllm:lora_requests_info}: the adapter running → 1.0; else a
   * free adapter slot (|running| + |waiting| &lt; max) → 0.8; else the adapter waiting → 0.6; else
   * 0. A request without a LoRA scores 1.0 everywhere; unknown or stale metrics → 0.
   */
  public static Scorer loraAffinity(String name) {
    return new NamedPlugin.NamedScorer(name) {
      @Override
      public void score(SchedulingContext ctx, List<Endpoint> candidates, double[] out) {
        Optional<String> lora = ctx.request().lora();
        for (int i = 0; i < candidates.size(); i++) {
          if (lora.isEmpty()) {
            out[i] = 1.0;
            continue;
          }
          EndpointMetrics m = metricsOf(ctx, candidates, i);
          out[i] = m == null ? 0 : loraScore(m, lora.get());
        }
      }
    };
  }

  /** {@code lora-affinity-scorer}. */
  public static Scorer loraAffinity() {
    return loraAffinity("lora-affinity-scorer");
  }

  static double loraScore(EndpointMetrics m, String lora) {
    Set<String> running = m.runningLoras();
    Set<String> waiting = m.waitingLoras();
    if (running.contains(lora)) {
      return 1.0;
    }
    if (m.maxLoras() >= 0 && running.size() + waiting.size() < m.maxLoras()) {
      return 0.8;
    }
    if (waiting.contains(lora)) {
      return 0.6;
    }
    return 0;
  }

  // ---------------------------------------------------------------- sessions, spreading

  /**
   * Session-affinity scorer: 1.0 for the endpoint the request's session is on, 0 for the others
   * (see {@link SessionAffinity} for the two strategies). With the stateful strategy, {@link
   * Scheduler#onRouted} records the session's endpoint.
   */
  public static Scorer sessionAffinity(String name, SessionAffinity affinity) {
    return new SessionScorer(name, affinity);
  }

  /** {@code session-affinity-scorer} with the stateless {@code x-session-token} strategy. */
  public static Scorer sessionAffinity() {
    return sessionAffinity(
        "session-affinity-scorer",
        SessionAffinity.encodedEndpointHeader(SessionAffinity.DEFAULT_TOKEN_HEADER));
  }

  static final class SessionScorer extends NamedPlugin.SessionPlugin implements Scorer {
    SessionScorer(String name, SessionAffinity affinity) {
      super(name, affinity);
    }

    @Override
    public void score(SchedulingContext ctx, List<Endpoint> candidates, double[] out) {
      Optional<String> pinned = pinned(ctx);
      for (int i = 0; i < candidates.size(); i++) {
        out[i] = pinned.isPresent() && pinned.get().equals(candidates.get(i).id()) ? 1.0 : 0.0;
      }
    }
  }

  /**
   * No-hit LRU scorer: spreads cold requests. If any candidate has a prefix match (precise when
   * available, else approximate) the request is warm and every candidate scores 0.5. Otherwise
   * endpoints never used for a cold request score 1.0, and the others are ranked after them by
   * least-recent use, oldest first: score = 1 − rank/(n − 1), floored at 0 (a single candidate
   * scores 1.0). {@link Scheduler#onRouted} moves the chosen endpoint to the recent end, for cold
   * requests only. Upstream ranks never-used endpoints in candidate order; kvroute scores them all
   * 1.0 so that the picker's random tie-break spreads them.
   *
   * @throws IllegalArgumentException when {@code lruSize < 1}
   */
  public static Scorer noHitLru(String name, int lruSize) {
    return new NoHitLruScorer(name, lruSize);
  }

  /** {@code no-hit-lru-scorer} remembering 1024 endpoints. */
  public static Scorer noHitLru() {
    return noHitLru("no-hit-lru-scorer", 1024);
  }

  static final class NoHitLruScorer extends NamedPlugin.NamedScorer {
    private final int lruSize;
    private final LinkedHashMap<String, Long> lru;
    private long seq;

    NoHitLruScorer(String name, int lruSize) {
      super(name);
      if (lruSize < 1) {
        throw new IllegalArgumentException(name + ".lruSize must be >= 1, was " + lruSize);
      }
      this.lruSize = lruSize;
      this.lru =
          new LinkedHashMap<>(16, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
              return size() > NoHitLruScorer.this.lruSize;
            }
          };
    }

    @Override
    public void score(SchedulingContext ctx, List<Endpoint> candidates, double[] out) {
      int n = candidates.size();
      if (!isCold(ctx, candidates)) {
        java.util.Arrays.fill(out, 0, n, 0.5);
        return;
      }
      if (n == 1) {
        out[0] = 1.0;
        return;
      }
      // out[i] temporarily holds the endpoint's last-use sequence (or -1 when never used).
      int neverUsed = 0;
      io.kvroute.kvindex.fleet.FleetView fv =
          ctx instanceof CycleContext cc ? cc.fleetView() : null;
      if (fv != null) { // gateway replicas: the last cold request any replica sent there
        CycleContext cc = (CycleContext) ctx;
        for (int i = 0; i < n; i++) {
          int slot = cc.slotOf(candidates.get(i), i);
          long s = slot < 0 ? 0 : fv.lastColdRouted(slot);
          out[i] = s == 0 ? -1 : s;
          if (s == 0) {
            neverUsed++;
          }
        }
      } else {
        synchronized (lru) {
          for (int i = 0; i < n; i++) {
            Long s = lru.get(candidates.get(i).id());
            out[i] = s == null ? -1 : s;
            if (s == null) {
              neverUsed++;
            }
          }
        }
      }
      // Rank used endpoints by sequence, oldest first, after the never-used ones.
      Integer[] used = new Integer[n - neverUsed];
      int k = 0;
      for (int i = 0; i < n; i++) {
        if (out[i] >= 0) {
          used[k++] = i;
        }
      }
      double[] seqs = out.clone();
      java.util.Arrays.sort(used, (a, b) -> Double.compare(seqs[a], seqs[b]));
      for (int i = 0; i < n; i++) {
        if (seqs[i] < 0) {
          out[i] = 1.0;
        }
      }
      for (int r = 0; r < used.length; r++) {
        int rank = neverUsed + r;
        out[used[r]] = Math.max(0, 1.0 - (double) rank / (n - 1));
      }
    }

    static boolean isCold(SchedulingContext ctx, List<Endpoint> candidates) {
      if (ctx instanceof CycleContext cc) {
        for (int i = 0; i < candidates.size(); i++) {
          if (cc.prefixMatchedAt(cc.slotOf(candidates.get(i), i)) > 0) {
            return false;
          }
        }
        return true;
      }
      for (Endpoint e : candidates) {
        if (ctx.prefixMatch(e).matchedBlocks() > 0) {
          return false;
        }
      }
      return true;
    }

    @Override
    public void onRouted(Routed routed) {
      if (routed.cold()) {
        synchronized (lru) {
          lru.put(routed.endpoint().id(), ++seq);
        }
      }
    }

    int size() {
      synchronized (lru) {
        return lru.size();
      }
    }
  }

  // ---------------------------------------------------------------- helpers

  static EndpointMetrics metricsOf(SchedulingContext ctx, Endpoint e) {
    if (ctx instanceof CycleContext cc) {
      return cc.metricsOrNull(e);
    }
    return ctx.metrics(e).orElse(null);
  }

  /** The metrics of {@code candidates.get(i)}, looked up once per request when possible. */
  static EndpointMetrics metricsOf(SchedulingContext ctx, List<Endpoint> candidates, int i) {
    Endpoint e = candidates.get(i);
    if (ctx instanceof CycleContext cc) {
      return cc.metricsAt(e, i);
    }
    return ctx.metrics(e).orElse(null);
  }

  private abstract static class MetricScorer extends NamedPlugin.NamedScorer {
    MetricScorer(String name) {
      super(name);
    }

    abstract double score(EndpointMetrics m);

    @Override
    public void score(SchedulingContext ctx, List<Endpoint> candidates, double[] out) {
      for (int i = 0; i < candidates.size(); i++) {
        EndpointMetrics m = metricsOf(ctx, candidates, i);
        out[i] = m == null ? 0 : score(m);
      }
    }
  }

  private static final class MinMaxScorer extends NamedPlugin.NamedScorer {
    private final boolean waiting;

    MinMaxScorer(String name, boolean waiting) {
      super(name);
      this.waiting = waiting;
    }

    @Override
    public void score(SchedulingContext ctx, List<Endpoint> candidates, double[] out) {
      int n = candidates.size();
      int min = Integer.MAX_VALUE;
      int max = Integer.MIN_VALUE;
      for (int i = 0; i < n; i++) {
        EndpointMetrics m = metricsOf(ctx, candidates, i);
        int v = m == null ? -1 : waiting ? m.waitingRequests() : m.runningRequests();
        out[i] = v;
        if (v >= 0) {
          min = Math.min(min, v);
          max = Math.max(max, v);
        }
      }
      for (int i = 0; i < n; i++) {
        double v = out[i];
        if (v < 0) {
          out[i] = 0;
        } else if (max == min) {
          out[i] = 1.0;
        } else {
          out[i] = (max - v) / (max - min);
        }
      }
    }
  }
}
