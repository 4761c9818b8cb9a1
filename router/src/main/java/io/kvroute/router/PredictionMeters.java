package io.kvroute.router;

import io.kvroute.scoring.ReuseSplit;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.MeterRegistry;

/**
 * Routing accuracy: whether the index predicted the engine's prefix-cache hits. For each routed
 * request whose computing engine reported {@code usage.prompt_tokens_details.cached_tokens},
 * compares the tokens the index said that engine holds ({@link
 * RouteDecision#predictedCachedTokens}) with the tokens the engine says it did not compute. The
 * computing engine is the prefill endpoint of a disaggregated request (its usage comes up with the
 * response, {@link io.kvroute.connector.StreamingResponse#prefillUsage()}, read by the connector
 * from the answer it parses anyway; the decode engine would count the transferred KV as cached) and
 * the decode endpoint otherwise. The prediction is capped at what vLLM can report (it never counts
 * the prompt's last token as cached: at most the full blocks before it; {@link
 * ReuseSplit#captured()}). Thread-safe.
 */
final class PredictionMeters {
  private final DistributionSummary predicted;
  private final DistributionSummary actual;
  private final DistributionSummary error;
  private final Counter exact;
  private final Counter over;
  private final Counter under;

  PredictionMeters(MeterRegistry registry) {
    this.predicted =
        DistributionSummary.builder("kvroute.routing.predicted.tokens")
            .description("Prompt tokens the index predicted the serving engine holds")
            .baseUnit("tokens")
            .register(registry);
    this.actual =
        DistributionSummary.builder("kvroute.routing.actual.cached.tokens")
            .description("Prompt tokens the serving engine reported as cached")
            .baseUnit("tokens")
            .register(registry);
    this.error =
        DistributionSummary.builder("kvroute.routing.prediction.error")
            .description("|predicted - actual| cached tokens / prompt tokens")
            .register(registry);
    this.exact = predictions(registry, "exact");
    this.over = predictions(registry, "over");
    this.under = predictions(registry, "under");
  }

  private static Counter predictions(MeterRegistry registry, String result) {
    return Counter.builder("kvroute.routing.predictions")
        .description("Measured cache-hit predictions: exact, over or under the engine's report")
        .tag("result", result)
        .register(registry);
  }

  /**
   * Records a measured split: its {@code captured} (the index's prediction for the computing
   * engine, capped at what vLLM can report) against its {@code delivered}.
   */
  void record(ReuseSplit split) {
    long promptTokens = split.promptTokens();
    long cachedTokens = split.delivered();
    if (promptTokens <= 0 || cachedTokens < 0) {
      return;
    }
    long p = split.captured();
    predicted.record(p);
    actual.record(cachedTokens);
    long diff = Math.abs(p - cachedTokens);
    error.record(Math.min(1.0, (double) diff / promptTokens));
    if (diff == 0) {
      exact.increment();
    } else if (p > cachedTokens) {
      over.increment();
    } else {
      under.increment();
    }
  }
}
