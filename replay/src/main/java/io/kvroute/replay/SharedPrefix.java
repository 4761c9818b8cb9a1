package io.kvroute.replay;

import java.util.Locale;

/**
 * inference-perf's {@code shared_prefix} data generator as a replay workload: {@code groups} system
 * prompts of {@code systemPromptLength} tokens, each followed by {@code promptsPerGroup} questions
 * of {@code questionLength} tokens, with {@code outputLength} output tokens. As inference-perf does
 * ({@code inference_perf/datagen/shared_prefix_datagen.py}), the prompts are shuffled once and
 * requests cycle through them, so every prompt recurs; arrivals are Poisson at {@code rate} per
 * second (inference-perf's {@code load.type: poisson}).
 *
 * <p>llm-d's capacity study uses 150 groups × 5 prompts, a 6,000-token system prompt, a 1,200-token
 * question and 1,000 output tokens ({@link #llmdCapacityStudy(double, int)}).
 *
 * <p>Immutable and thread-safe.
 *
 * @param groups number of shared system prompts
 * @param promptsPerGroup questions per system prompt
 * @param systemPromptLength tokens of each system prompt
 * @param questionLength tokens of each question
 * @param outputLength output tokens of every request
 * @param rate requests per second (Poisson arrivals)
 * @param requests requests to send
 */
public record SharedPrefix(
    int groups,
    int promptsPerGroup,
    int systemPromptLength,
    int questionLength,
    int outputLength,
    double rate,
    int requests) {

  /** Validates the shape, naming the field. */
  public SharedPrefix {
    positive(groups, "groups");
    positive(promptsPerGroup, "promptsPerGroup");
    positive(systemPromptLength + questionLength, "systemPromptLength + questionLength");
    if (systemPromptLength < 0 || questionLength < 0) {
      throw new IllegalArgumentException("sharedPrefix lengths must be >= 0");
    }
    positive(outputLength, "outputLength");
    positive(requests, "requests");
    if (!(rate > 0) || Double.isInfinite(rate)) {
      throw new IllegalArgumentException("sharedPrefix.rate must be > 0, was " + rate);
    }
  }

  /** llm-d's capacity-study shape (150 × 5, 6,000 + 1,200 tokens, 1,000 out) at {@code rate}. */
  public static SharedPrefix llmdCapacityStudy(double rate, int requests) {
    return new SharedPrefix(150, 5, 6000, 1200, 1000, rate, requests);
  }

  private static void positive(int v, String name) {
    if (v < 1) {
      throw new IllegalArgumentException("sharedPrefix." + name + " must be >= 1, was " + v);
    }
  }

  @Override
  public String toString() {
    return String.format(
        Locale.ROOT,
        "shared-prefix %d groups x %d prompts, system %d + question %d tokens, %d out, %.1f req/s,"
            + " %d requests",
        groups,
        promptsPerGroup,
        systemPromptLength,
        questionLength,
        outputLength,
        rate,
        requests);
  }
}
