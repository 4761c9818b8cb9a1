package io.kvroute.envoy.internal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * Reads the OpenAI {@code usage} object of a response body as it passes through: {@code
 * prompt_tokens}, {@code completion_tokens} and {@code prompt_tokens_details.cached_tokens}.
 *
 * <p>Server-sent events ({@code text/event-stream}) are scanned line by line, so memory stays
 * bounded by the longest line (a line longer than the limit is skipped); the last {@code data:}
 * event that carries a usage object wins (vLLM sends it in the final chunk with {@code
 * stream_options.include_usage}). A JSON body is kept up to the limit and parsed at the end.
 *
 * <p>Not thread-safe: one scanner per response, fed in order.
 */
public final class UsageScanner {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final byte[] USAGE_MARK = "\"prompt_tokens\"".getBytes(StandardCharsets.US_ASCII);

  /**
   * Token counts from a response; -1 where the response did not say.
   *
   * @param promptTokens {@code usage.prompt_tokens}
   * @param completionTokens {@code usage.completion_tokens}
   * @param cachedTokens {@code usage.prompt_tokens_details.cached_tokens}
   */
  public record Usage(long promptTokens, long completionTokens, long cachedTokens) {
    /** No usage seen. */
    public static final Usage NONE = new Usage(-1, -1, -1);

    /** True when at least one count is known. */
    public boolean known() {
      return promptTokens >= 0 || completionTokens >= 0 || cachedTokens >= 0;
    }
  }

  private final boolean sse;
  private final int limit;
  private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();
  private boolean overflow;
  private Usage usage = Usage.NONE;

  /**
   * A scanner for a body of the given kind.
   *
   * @param sse true for {@code text/event-stream}
   * @param limit the largest line (SSE) or body (JSON) kept
   */
  public UsageScanner(boolean sse, int limit) {
    this.sse = sse;
    this.limit = limit;
  }

  /** Feeds the next chunk. */
  public void feed(byte[] chunk) {
    if (!sse) {
      if (overflow || buffer.size() + chunk.length > limit) {
        overflow = true;
        buffer.reset();
        return;
      }
      buffer.write(chunk, 0, chunk.length);
      return;
    }
    int start = 0;
    for (int i = 0; i < chunk.length; i++) {
      if (chunk[i] == '\n') {
        appendLine(chunk, start, i - start);
        endLine();
        start = i + 1;
      }
    }
    appendLine(chunk, start, chunk.length - start);
  }

  private void appendLine(byte[] b, int off, int len) {
    if (overflow) {
      return;
    }
    if (buffer.size() + len > limit) {
      overflow = true;
      buffer.reset();
      return;
    }
    buffer.write(b, off, len);
  }

  private void endLine() {
    if (!overflow && buffer.size() > 0) {
      byte[] line = buffer.toByteArray();
      if (startsWith(line, "data:") && contains(line, USAGE_MARK)) {
        int from = 5;
        while (from < line.length && (line[from] == ' ' || line[from] == '\r')) {
          from++;
        }
        int to = line.length;
        while (to > from && (line[to - 1] == '\r' || line[to - 1] == ' ')) {
          to--;
        }
        parse(line, from, to - from);
      }
    }
    overflow = false;
    buffer.reset();
  }

  /** Ends the body and returns the usage found, or {@link Usage#NONE}. */
  public Usage finish() {
    if (sse) {
      endLine();
    } else if (!overflow && buffer.size() > 0) {
      byte[] body = buffer.toByteArray();
      if (contains(body, USAGE_MARK)) {
        parse(body, 0, body.length);
      }
      buffer.reset();
    }
    return usage;
  }

  /** The usage found so far. */
  public Usage usage() {
    return usage;
  }

  private void parse(byte[] b, int off, int len) {
    JsonNode root;
    try {
      root = JSON.readTree(b, off, len);
    } catch (java.io.IOException | RuntimeException e) {
      return; // not JSON (or truncated): no usage from this part
    }
    if (root == null) {
      return;
    }
    JsonNode u = root.get("usage");
    if (u == null || !u.isObject()) {
      return;
    }
    usage =
        new Usage(
            count(u.get("prompt_tokens")),
            count(u.get("completion_tokens")),
            count(u.path("prompt_tokens_details").get("cached_tokens")));
  }

  private static long count(JsonNode n) {
    return n != null && n.canConvertToLong() && n.asLong() >= 0 ? n.asLong() : -1;
  }

  private static boolean startsWith(byte[] line, String prefix) {
    if (line.length < prefix.length()) {
      return false;
    }
    for (int i = 0; i < prefix.length(); i++) {
      if (line[i] != prefix.charAt(i)) {
        return false;
      }
    }
    return true;
  }

  private static boolean contains(byte[] hay, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= hay.length; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (hay[i + j] != needle[j]) {
          continue outer;
        }
      }
      return true;
    }
    return false;
  }
}
