package io.kvroute.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.testkit.EngineTokenizer;
import io.kvroute.tokenizer.hf.ChatRequest;
import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.HfTokenizer;

/**
 * A real model's tokenizer for simulated pods ({@code kvroute sim --tokenizer DIR}): prompts, chat
 * requests (messages, tools, kwargs) and generated words go through {@link HfTokenizer}, so the
 * pods' KV events and {@code /tokenize} answers are those of that model. Thread-safe.
 */
final class HfEngineTokenizer implements EngineTokenizer {
  private final HfTokenizer tokenizer;

  HfEngineTokenizer(HfTokenizer tokenizer) {
    this.tokenizer = tokenizer;
  }

  @Override
  public int[] encodePrompt(String prompt) {
    return tokenizer.encode(prompt);
  }

  @Override
  public int[] encodeChat(JsonNode request) {
    try {
      return tokenizer.encodeChat(ChatRequest.fromJson(request));
    } catch (ChatTemplateException e) {
      throw new IllegalArgumentException(e.getMessage(), e);
    }
  }

  @Override
  public int[] encodeText(String text) {
    int[] ids = tokenizer.encode(text, false);
    return ids.length > 0 ? ids : new int[] {0};
  }

  @Override
  public String toString() {
    return tokenizer.toString();
  }
}
