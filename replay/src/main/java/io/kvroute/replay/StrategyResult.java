package io.kvroute.replay;

import io.kvroute.scoring.ReuseSplit;
import java.util.List;
import java.util.Objects;

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
    List<Double> hitRatioOverTime) {

  /** Copies the lists. */
  public StrategyResult {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(reuse, "reuse");
    ttftCdfMs = List.copyOf(ttftCdfMs);
    hitRatioOverTime = List.copyOf(hitRatioOverTime);
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
