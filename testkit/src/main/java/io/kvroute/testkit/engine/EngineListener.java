package io.kvroute.testkit.engine;

/**
 * What an {@link EngineModel} reports about its requests, at the virtual time it happens. Methods
 * are called on the thread driving the engine, in event order; they must not call back into it.
 */
public interface EngineListener {
  /** Ignores everything. */
  EngineListener NONE = new EngineListener() {};

  /**
   * The request was scheduled for the first time; {@code cachedTokens} is vLLM's {@code
   * num_cached_tokens} (prefix-cache hit, plus KV received for a decode leg): what the response's
   * {@code usage.prompt_tokens_details.cached_tokens} reports.
   */
  default void onScheduled(EngineRequest request, long nanos, int cachedTokens) {}

  /** The first output token was sampled (the end of the step that finished the prompt). */
  default void onFirstToken(EngineRequest request, long nanos) {}

  /** The last output token was sampled; the request's blocks are freed (unless held). */
  default void onFinished(EngineRequest request, long nanos) {}

  /** The request can never run here ({@code max_model_len} or the KV capacity is too small). */
  default void onRejected(EngineRequest request, long nanos, String reason) {}
}
