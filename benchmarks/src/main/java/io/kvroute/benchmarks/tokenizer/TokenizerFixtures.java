package io.kvroute.benchmarks.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.testkit.EngineTokenizer;
import io.kvroute.tokenizer.hf.ChatRequest;
import io.kvroute.tokenizer.hf.HfTokenizer;
import io.kvroute.tokenizer.hf.ReferenceTokenizers;
import io.kvroute.tokenizer.hf.ReferenceVectors;
import java.util.Arrays;

/**
 * Inputs shared by the tokenizer benchmarks: the real Qwen3 tokenizer (fetched and verified by
 * {@link ReferenceTokenizers}), an 8,192-token prompt cut from the reference vectors' longest mixed
 * prompt (English, other scripts, emoji, code, whitespace), and a 20-turn chat.
 */
final class TokenizerFixtures {
  private TokenizerFixtures() {}

  /** A Qwen3 tokenizer without result cache, so every call tokenizes. */
  static HfTokenizer qwen3(HfTokenizer.Engine engine) {
    return ReferenceTokenizers.builder("qwen3").engine(engine).cache(0, 0).build();
  }

  /** Text that encodes to {@code tokens} ids (± a few at the cut) with Qwen3. */
  static String prompt(HfTokenizer t, int tokens) {
    String longest = null;
    for (ReferenceVectors.Case c : ReferenceVectors.all()) {
      if (c.tokenizer().equals("qwen3") && !c.isChat() && c.json().has("count")) {
        String p = c.json().get("prompt").asText();
        if (longest == null || p.length() > longest.length()) {
          longest = p;
        }
      }
    }
    StringBuilder sb = new StringBuilder(longest);
    while (t.encode(sb.toString(), false).length < tokens) {
      sb.append(longest);
    }
    int[] ids = t.encode(sb.toString(), false);
    return t.decode(Arrays.copyOf(ids, tokens), false);
  }

  /** A system prompt and 19 alternating user/assistant turns of ≈ 60–120 tokens each. */
  static ChatRequest chat20(HfTokenizer t) {
    String text = prompt(t, 2400);
    ChatRequest.Builder b = ChatRequest.builder();
    b.message("system", "You are a careful assistant. Answer precisely and cite the context.");
    int pos = 0;
    for (int turn = 1; turn < 20; turn++) {
      int len = 240 + (turn * 37) % 240;
      int end = Math.min(text.length(), pos + len);
      if (end < text.length() && Character.isLowSurrogate(text.charAt(end))) {
        end--; // never split a surrogate pair: both engines then see the same valid text
      }
      String part = text.substring(pos, end);
      pos = end % Math.max(1, text.length() - 500);
      if (Character.isLowSurrogate(text.charAt(pos))) {
        pos++;
      }
      b.message(turn % 2 == 1 ? "user" : "assistant", part);
    }
    return b.build();
  }

  /** The simulator's hook for a real tokenizer. */
  static EngineTokenizer engineTokenizer(HfTokenizer t) {
    return new EngineTokenizer() {
      @Override
      public int[] encodePrompt(String prompt) {
        return t.encode(prompt);
      }

      @Override
      public int[] encodeChat(JsonNode request) {
        return t.encodeChat(ChatRequest.fromJson(request));
      }

      @Override
      public int[] encodeText(String text) {
        return t.encode(text, false);
      }
    };
  }
}
