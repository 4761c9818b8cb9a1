package io.kvroute.replay;

import io.kvroute.scoring.ReuseSplit;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * What one strategy did on a workload. Times are virtual (the simulated fleet's), except {@code
 * wallSeconds}.
 *
 * @param name the strategy's name
 * @param requests requests completed
 * @param promptTokens prompt tokens of the completed requests
 * @param rejected requests no engine could run ({@code max_model_len} or KV capacity)
 * @param hitRatio prompt tokens the engines found cached (vLLM's {@code num_cached_tokens}) over
 *     all prompt tokens of completed requests
 * @param ttftMs time to first token, milliseconds
 * @param tpotMs time per output token after the first, milliseconds (requests with one output token
 *     have none)
 * @param outputTokensPerSecond output tokens over the run's span (first arrival to last finish)
 * @param goodputRps requests meeting the SLO per second of that span
 * @param sloAttainment fraction of all requests meeting the SLO
 * @param imbalance the busiest engine's busy time over the mean busy time (1 is perfect)
 * @param reuse the reuse split summed over completed requests, in prompt tokens: <em>available</em>
 *     is the longest prefix any eligible engine held when the request was routed, <em>captured</em>
 *     what the chosen engine held then, <em>delivered</em> what the engine reported cached when it
 *     scheduled the request (for prefill/decode pairs, the prefill engine): the engines' true
 *     state, where the router's own meters use its index's view (see {@link ReuseSplit})
 * @param preemptions requests preempted by full KV caches, over all engines
 * @param simulatedSeconds the span, in virtual seconds
 * @param wallSeconds wall-clock seconds this strategy's replay took
 * @param ttftCdfMs TTFT quantiles 0, 0.005, ..., 1 (201 values; for plots)
 * @param timelineBucketSeconds width of a {@code hitRatioOverTime} bucket, virtual seconds
 * @param hitRatioOverTime hit ratio of the requests arriving in each bucket (NaN when none)
 * @param dropped requests flow control refused or dropped, by reason ({@code queue-full}, {@code
 *     ttl-expired}, {@code shed-lower-priority}, {@code slo-unattainable}); empty when it is off
 * @param ttftPredictionError the latency predictor's median absolute TTFT error, |predicted −
 *     actual| / actual, over the requests it predicted (the time from dispatch to first token; NaN
 *     when it never predicted)
 * @param fairness Jain's index of the tokens (prompt + output) of the requests whose service
 *     started (an engine scheduled them), per tenant, counted while every tenant had requests
 *     waiting (in flow control's queue or an engine's; 1 is equal service; NaN with fewer than two
 *     tenants or no such time)
 * @param classes per class, when the workload has classes ({@link RequestClass}); else empty
 */
public record StrategyResult(
    String name,
    int requests,
    long promptTokens,
    int rejected,
    double hitRatio,
    Percentiles ttftMs,
    Percentiles tpotMs,
    double outputTokensPerSecond,
    double goodputRps,
    double sloAttainment,
    double imbalance,
    ReuseSplit reuse,
    long preemptions,
    double simulatedSeconds,
    double wallSeconds,
    List<Double> ttftCdfMs,
    double timelineBucketSeconds,
    List<Double> hitRatioOverTime,
    Map<String, Integer> dropped,
    double ttftPredictionError,
    double fairness,
    List<ClassResult> classes) {

  /** Copies the lists. */
  public StrategyResult {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(reuse, "reuse");
    ttftCdfMs = List.copyOf(ttftCdfMs);
    hitRatioOverTime = List.copyOf(hitRatioOverTime);
    dropped = Collections.unmodifiableMap(new LinkedHashMap<>(dropped));
    classes = List.copyOf(classes);
  }

  /** Requests flow control refused or dropped, all reasons. */
  public int droppedTotal() {
    return dropped.values().stream().mapToInt(Integer::intValue).sum();
  }

  /** The figures of class {@code name}, if the workload had it. */
  public Optional<ClassResult> klass(String name) {
    return classes.stream().filter(c -> c.name().equals(name)).findFirst();
  }

  /**
   * What one class of requests got.
   *
   * @param name the class
   * @param offered its requests in the workload
   * @param requests of them, completed
   * @param dropped of them, refused or dropped by flow control, by reason
   * @param ttftMs time to first token of the completed ones (from arrival: the wait in flow
   *     control's queue included)
   * @param goodputRps of them, meeting the class's SLO, per second of the run's span
   * @param sloAttainment that count over {@code offered}
   * @param outputTokensPerSecond output tokens of the completed ones over the span
   */
  public record ClassResult(
      String name,
      int offered,
      int requests,
      Map<String, Integer> dropped,
      Percentiles ttftMs,
      double goodputRps,
      double sloAttainment,
      double outputTokensPerSecond) {
    /** Copies the map. */
    public ClassResult {
      Objects.requireNonNull(name, "name");
      dropped = Collections.unmodifiableMap(new LinkedHashMap<>(dropped));
    }
  }

  /**
   * Percentiles (nearest rank); NaN when there was no sample.
   *
   * @param p50 median
   * @param p90 90th percentile
   * @param p99 99th percentile
   */
  public record Percentiles(double p50, double p90, double p99) {}
}
