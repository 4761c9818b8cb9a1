package io.kvroute.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The simulator's deterministic built-in tokenizer and chat template: the same text always gives
 * the same token ids, in every process, so gateways that tokenize locally (with this class) and the
 * simulator's {@code /tokenize} agree.
 *
 * <p>Text is split into pieces: special tokens ({@code <|im_start|>}, {@code <|im_end|>}), an
 * optional space followed by letters, an optional space followed by up to three digits, an optional
 * space followed by other symbols, or one whitespace character. A piece's id is 256 plus its FNV-1a
 * hash modulo {@code VOCAB_SIZE - 512}; special tokens have fixed ids at the top.
 *
 * <p>The chat template is ChatML-like: {@code <|im_start|>role\ncontent<|im_end|>\n} per message,
 * then {@code <|im_start|>assistant\n} when a generation prompt is added. Generated words are
 * chosen so that re-sending an assistant reply in the next turn reproduces its token ids.
 *
 * <p>Stateless and thread-safe.
 */
public final class SimTokenizer {

  /** Vocabulary size (Qwen-like). */
  public static final int VOCAB_SIZE = 151_936;

  /** Id of {@code <|im_start|>}. */
  public static final int IM_START = 151_644;

  /** Id of {@code <|im_end|>}. */
  public static final int IM_END = 151_645;

  private static final Pattern PIECES =
      Pattern.compile(
          "<\\|im_start\\|>|<\\|im_end\\|>|[ ]?[A-Za-z]+|[ ]?[0-9]{1,3}|[ ]?[^\\sA-Za-z0-9]+|\\s");

  private static final String[] WORDS = {
    "the", "cache", "block", "token", "prefix", "route", "model", "pod", "decode", "prefill",
    "event", "hash", "stream", "queue", "score", "index", "vector", "kernel", "tensor", "layer",
    "batch", "page", "memory", "latency", "gateway", "request", "reply", "shard", "epoch", "graph",
    "node", "edge"
  };

  private static final SimTokenizer INSTANCE = new SimTokenizer();

  /** This tokenizer as a pod's {@link EngineTokenizer} (the default). */
  static final EngineTokenizer ENGINE =
      new EngineTokenizer() {
        @Override
        public int[] encodePrompt(String prompt) {
          return INSTANCE.encode(prompt);
        }

        @Override
        public int[] encodeChat(JsonNode request) {
          return INSTANCE.encode(
              INSTANCE.applyChatTemplate(
                  request.get("messages"), request.path("add_generation_prompt").asBoolean(true)));
        }

        @Override
        public int[] encodeText(String text) {
          return new int[] {outputToken(text)};
        }

        @Override
        public String toString() {
          return "SimTokenizer";
        }
      };

  private SimTokenizer() {}

  /** The shared instance. */
  public static SimTokenizer get() {
    return INSTANCE;
  }

  /** Tokenizes {@code text}. */
  public int[] encode(String text) {
    Objects.requireNonNull(text, "text");
    List<Integer> out = new ArrayList<>(text.length() / 3 + 1);
    Matcher m = PIECES.matcher(text);
    while (m.find()) {
      out.add(pieceId(m.group()));
    }
    return out.stream().mapToInt(Integer::intValue).toArray();
  }

  /** The id of one piece (no splitting). */
  static int pieceId(String piece) {
    if (piece.equals("<|im_start|>")) {
      return IM_START;
    }
    if (piece.equals("<|im_end|>")) {
      return IM_END;
    }
    int h = 0x811c9dc5;
    for (byte b : piece.getBytes(StandardCharsets.UTF_8)) {
      h ^= b & 0xff;
      h *= 0x01000193;
    }
    return 256 + (int) (Integer.toUnsignedLong(h) % (VOCAB_SIZE - 512));
  }

  /**
   * Applies the chat template to OpenAI {@code messages} (content as a string or a list of {@code
   * {"type":"text","text":...}} parts).
   *
   * @throws IllegalArgumentException if {@code messages} is not an array of objects with a role
   */
  public String applyChatTemplate(JsonNode messages, boolean addGenerationPrompt) {
    if (messages == null || !messages.isArray()) {
      throw new IllegalArgumentException("messages must be an array");
    }
    StringBuilder sb = new StringBuilder();
    for (JsonNode msg : messages) {
      if (!msg.isObject() || !msg.path("role").isTextual()) {
        throw new IllegalArgumentException("each message must be an object with a string role");
      }
      sb.append("<|im_start|>").append(msg.get("role").asText()).append('\n');
      JsonNode content = msg.get("content");
      if (content != null && content.isTextual()) {
        sb.append(content.asText());
      } else if (content != null && content.isArray()) {
        for (JsonNode part : content) {
          if (part.path("text").isTextual()) {
            sb.append(part.get("text").asText());
          }
        }
      }
      sb.append("<|im_end|>\n");
    }
    if (addGenerationPrompt) {
      sb.append("<|im_start|>assistant\n");
    }
    return sb.toString();
  }

  /**
   * The {@code index}-th generated word for a prompt with fingerprint {@code seed}, with its
   * leading space (one token).
   */
  static String outputPiece(long seed, int index) {
    long x = seed * 0x9E3779B97F4A7C15L + index * 0xC2B2AE3D27D4EB4FL;
    x ^= x >>> 31;
    return " " + WORDS[(int) Math.floorMod(x, (long) WORDS.length)];
  }

  /** Decodes generated pieces back to text (only what {@link #outputPiece} produces). */
  static int outputToken(String piece) {
    return pieceId(piece);
  }
}
