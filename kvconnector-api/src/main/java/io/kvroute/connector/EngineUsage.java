package io.kvroute.connector;

/**
 * The usage block an engine wrote in one leg's answer ({@code usage} of an OpenAI completion):
 * {@code prompt_tokens}, and {@code prompt_tokens_details.cached_tokens}, the prompt tokens the
 * engine found in its prefix cache (vLLM reports them with {@code --enable-prompt-tokens-details};
 * on a decode engine of a disaggregated request they include the KV transferred from the prefill
 * engine). A connector reads it from the prefill answer it parses anyway and reports it upward with
 * {@link StreamingResponse#withPrefillUsage}; the router reads the decode answer's.
 *
 * @param promptTokens {@code usage.prompt_tokens}, or -1 when the answer did not carry it
 * @param cachedTokens {@code usage.prompt_tokens_details.cached_tokens}, or -1 when absent
 */
public record EngineUsage(long promptTokens, long cachedTokens) {
  /** Validates: each value is -1 (absent) or >= 0. */
  public EngineUsage {
    if (promptTokens < -1 || cachedTokens < -1) {
      throw new IllegalArgumentException(
          "usage values must be >= 0 or -1 (absent), were " + promptTokens + ", " + cachedTokens);
    }
  }

  /** True when the engine reported both the prompt's length and its cached part. */
  public boolean complete() {
    return promptTokens >= 0 && cachedTokens >= 0;
  }
}
