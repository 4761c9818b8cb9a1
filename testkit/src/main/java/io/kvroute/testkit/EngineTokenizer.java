package io.kvroute.testkit;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * How a simulated pod turns requests into token ids: {@link #simulated()} (the built-in {@link
 * SimTokenizer}, the default) or a real model's tokenizer so that a demo or a test runs with a real
 * vocabulary and chat template (for example {@code kvroute-tokenizer-hf}'s {@code HfTokenizer},
 * adapted in a few lines; testkit itself does not depend on it).
 *
 * <p>Implementations must be thread-safe: a pod calls them from its request threads.
 */
public interface EngineTokenizer {

  /** The ids of a {@code /v1/completions} (or {@code /tokenize}) prompt string. */
  int[] encodePrompt(String prompt);

  /**
   * The ids of a {@code /v1/chat/completions} (or {@code /tokenize}) request: its messages through
   * the chat template, honouring {@code add_generation_prompt} (default true), {@code tools} and
   * {@code chat_template_kwargs} when the implementation supports them.
   *
   * @throws IllegalArgumentException when the request is malformed (the pod answers 400)
   */
  int[] encodeChat(JsonNode request);

  /**
   * The ids of a piece of generated text (no special tokens), used for the simulated output; the
   * simulator generates one short word per step.
   */
  int[] encodeText(String text);

  /** The built-in deterministic tokenizer and ChatML-like template ({@link SimTokenizer}). */
  static EngineTokenizer simulated() {
    return SimTokenizer.ENGINE;
  }
}
