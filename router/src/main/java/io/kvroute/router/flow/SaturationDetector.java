package io.kvroute.router.flow;

import io.kvroute.connector.Endpoint;
import io.kvroute.scoring.EndpointMetrics;
import io.kvroute.scoring.MetricsStore;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;
import java.util.function.ToLongFunction;

/**
 * How saturated the endpoints of a model are: 0 idle, 1 saturated (beyond 1, more so). Flow control
 * admits a band's requests while the saturation is below the band's {@code maxSaturation} and holds
 * them in the gateway's queue otherwise, instead of piling them onto engines that would only queue
 * them.
 *
 * <p>Implementations must be thread-safe and fast (called under flow control's lock, once per
 * admission); they must not block.
 */
@FunctionalInterface
public interface SaturationDetector {

  /**
   * The saturation of {@code model}'s endpoints, with {@code inFlightRequests} of its requests
   * admitted and not yet finished.
   */
  double saturation(String model, long inFlightRequests);

  /**
   * The detector from what kvroute knows (see {@link FlowControlConfig.Saturation}): the engines'
   * waiting queue and KV-cache usage from their {@code /metrics}, the requests in flight, and the
   * uncached prompt tokens awaiting their first token. A model without endpoints is never saturated
   * (the scheduler answers it).
   *
   * @param limits the thresholds
   * @param endpoints a model's endpoints
   * @param metrics the scraped engine metrics
   * @param prefillTokens an endpoint's uncached prompt tokens awaiting their first token (the
   *     scheduler's {@code LatencyPredictor#prefillQueueTokens})
   */
  static SaturationDetector of(
      FlowControlConfig.Saturation limits,
      Function<String, List<Endpoint>> endpoints,
      MetricsStore metrics,
      ToLongFunction<String> prefillTokens) {
    Objects.requireNonNull(limits, "limits");
    Objects.requireNonNull(endpoints, "endpoints");
    Objects.requireNonNull(metrics, "metrics");
    Objects.requireNonNull(prefillTokens, "prefillTokens");
    return (model, inFlight) -> {
      List<Endpoint> eps = endpoints.apply(model);
      int n = eps.size();
      if (n == 0) {
        return 0;
      }
      double metricSum = 0;
      long prefill = 0;
      for (Endpoint e : eps) {
        String id = e.id();
        Optional<EndpointMetrics> m = metrics.fresh(id);
        if (m.isPresent()) {
          EndpointMetrics em = m.get();
          double q = Math.max(0, em.waitingRequests()) / (double) limits.queueDepth();
          double kv =
              Double.isNaN(em.kvCacheUsage()) ? 0 : em.kvCacheUsage() / limits.kvCacheUtilization();
          metricSum += Math.max(q, kv);
        } else if (metrics.freshness(id) == MetricsStore.Freshness.STALE) {
          metricSum += 1;
        }
        if (limits.maxPrefillTokensPerEndpoint() > 0) {
          prefill += prefillTokens.applyAsLong(id);
        }
      }
      double s = metricSum / n;
      if (limits.maxInFlightPerEndpoint() > 0) {
        s = Math.max(s, inFlight / ((double) n * limits.maxInFlightPerEndpoint()));
      }
      if (limits.maxPrefillTokensPerEndpoint() > 0) {
        s = Math.max(s, prefill / ((double) n * limits.maxPrefillTokensPerEndpoint()));
      }
      return s;
    };
  }
}
