package io.kvroute.testkit;

import java.time.Duration;
import java.util.List;

/**
 * A snapshot of one simulator's counters since start (or {@link VllmSimulator#resetStats()}).
 * Immutable; thread-safe.
 *
 * @param requests completion and chat requests answered successfully
 * @param errors completion and chat requests answered with an error (injected or not)
 * @param promptTokens prompt tokens of successful requests
 * @param cachedTokens of those, tokens served from cache (local prefix cache, CPU tier or KV
 *     transfer) — the {@code usage.prompt_tokens_details.cached_tokens} reported
 * @param generatedTokens output tokens
 * @param ttft time to first token of each successful request (newest last, at most 10 000)
 */
public record SimStats(
    long requests,
    long errors,
    long promptTokens,
    long cachedTokens,
    long generatedTokens,
    List<Duration> ttft) {

  /** Copies the samples. */
  public SimStats {
    ttft = List.copyOf(ttft);
  }

  /** {@code cachedTokens / promptTokens}, 0 when there were none. */
  public double cachedTokenRatio() {
    return promptTokens == 0 ? 0 : (double) cachedTokens / promptTokens;
  }

  /** Mean TTFT, zero without samples. */
  public Duration meanTtft() {
    if (ttft.isEmpty()) {
      return Duration.ZERO;
    }
    long sum = 0;
    for (Duration d : ttft) {
      sum += d.toNanos();
    }
    return Duration.ofNanos(sum / ttft.size());
  }
}
