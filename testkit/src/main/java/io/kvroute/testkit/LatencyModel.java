package io.kvroute.testkit;

import java.time.Duration;
import java.util.Objects;

/**
 * How long the simulated engine takes: a fixed cost per request, a cost per <em>uncached</em>
 * prompt token (so prefix-cache hits shorten TTFT) and a cost per generated token after the first.
 * Immutable and thread-safe.
 *
 * @param perRequest fixed cost before the first token
 * @param perUncachedPromptToken prefill cost per prompt token not found in the prefix cache
 * @param perOutputToken decode cost per generated token after the first
 */
public record LatencyModel(
    Duration perRequest, Duration perUncachedPromptToken, Duration perOutputToken) {

  /** No latency at all (for tests). */
  public static final LatencyModel ZERO =
      new LatencyModel(Duration.ZERO, Duration.ZERO, Duration.ZERO);

  /** Small defaults: 1 ms per request, 20 µs per uncached prompt token, 1 ms per output token. */
  public static final LatencyModel DEFAULT =
      new LatencyModel(Duration.ofMillis(1), Duration.ofNanos(20_000), Duration.ofMillis(1));

  /** Validates the durations. */
  public LatencyModel {
    check(perRequest, "latency.perRequest");
    check(perUncachedPromptToken, "latency.perUncachedPromptToken");
    check(perOutputToken, "latency.perOutputToken");
  }

  private static void check(Duration d, String name) {
    Objects.requireNonNull(d, name);
    if (d.isNegative()) {
      throw new IllegalArgumentException(name + " must be >= 0, was " + d);
    }
  }

  /** Prefill time for {@code uncachedTokens} tokens, in nanoseconds. */
  public long prefillNanos(int uncachedTokens) {
    return perRequest.toNanos() + perUncachedPromptToken.toNanos() * uncachedTokens;
  }
}
