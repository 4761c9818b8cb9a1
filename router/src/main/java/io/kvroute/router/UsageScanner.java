package io.kvroute.router;

import io.kvroute.connector.InferenceRequest;
import java.nio.ByteBuffer;

/**
 * Finds an OpenAI usage block's {@code "prompt_tokens"} and {@code "cached_tokens"} (vLLM's {@code
 * usage.prompt_tokens_details.cached_tokens}), or the Responses or Messages API's (see {@link
 * #UsageScanner(InferenceRequest.Api)}), in a response body as it streams by, without buffering it:
 * a few ints of state, one pass over each chunk, chunk boundaries anywhere. The last value seen
 * wins (an SSE stream carries its usage in its last data event; with {@code continuous_usage_stats}
 * every event carries one). Keys inside JSON strings are escaped ({@code \"}) and so never match.
 *
 * <p>A stream can also be fed through {@link #keep} and scanned once at its end by {@link #finish}:
 * only its last {@value #TAIL} bytes are kept and scanned. An OpenAI usage block ends a response
 * (vLLM writes {@code usage} after {@code choices}; a stream's last data event before {@code
 * [DONE]} carries it), so the tail holds it, and a long answer is not scanned byte by byte as it
 * streams (that scan was a fifth of the gateway's CPU on a 12 KiB SSE answer).
 *
 * <p>Not thread-safe: feed it the chunks of one stream in order (Flow signals are serial).
 */
final class UsageScanner {
  /** Bytes kept by {@link #keep}: a usage block and what may follow it, with room to spare. */
  static final int TAIL = 2048;

  private static final byte[][] OPENAI = keys("prompt_tokens", "cached_tokens");
  private static final byte[][] RESPONSES = keys("input_tokens", "cached_tokens");
  private static final byte[][] MESSAGES =
      keys("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens");
  private static final int PROMPT = 0;
  private static final int CACHED = 1;
  private static final int CREATED = 2;
  private static final int SCANNING = 0;
  private static final int BEFORE_COLON = 1;
  private static final int BEFORE_VALUE = 2;
  private static final int IN_VALUE = 3;

  private final byte[][] keys;
  private final boolean anthropic;
  private final int[] matched;
  private final int longest; // the longest key's length
  private final long[] values = {-1, -1, -1};
  private int phase = SCANNING;
  private int key;
  private long number;
  private int digits;
  private byte[] tail;
  private int tailLen;

  /** A scanner of OpenAI usage blocks ({@code /v1/completions}, {@code /v1/chat/completions}). */
  UsageScanner() {
    this(InferenceRequest.Api.CHAT_COMPLETIONS);
  }

  /**
   * A scanner of {@code api}'s usage blocks: OpenAI's {@code prompt_tokens} and {@code
   * cached_tokens}; the Responses API's {@code input_tokens} and {@code
   * input_tokens_details.cached_tokens}; Anthropic's {@code input_tokens}, {@code
   * cache_read_input_tokens} and {@code cache_creation_input_tokens} (the prompt is their sum: vLLM
   * writes {@code input_tokens} without the cached part, as Anthropic defines it).
   */
  UsageScanner(InferenceRequest.Api api) {
    this.keys =
        switch (api) {
          case RESPONSES -> RESPONSES;
          case MESSAGES -> MESSAGES;
          default -> OPENAI;
        };
    this.anthropic = api == InferenceRequest.Api.MESSAGES;
    this.matched = new int[keys.length];
    int l = 0;
    for (byte[] k : keys) {
      l = Math.max(l, k.length);
    }
    this.longest = l;
  }

  private static byte[][] keys(String... names) {
    byte[][] out = new byte[names.length][];
    for (int i = 0; i < names.length; i++) {
      out[i] = ('"' + names[i] + '"').getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    }
    return out;
  }

  /** Scans {@code chunk}'s remaining bytes without moving its position. */
  void scan(ByteBuffer chunk) {
    int end = chunk.limit();
    int i = chunk.position();
    if (chunk.hasArray()) {
      byte[] a = chunk.array();
      int off = chunk.arrayOffset();
      while (i < end) {
        if (idle()) {
          // Every key starts with a quote: nothing before the next one can start a match.
          while (i < end && a[off + i] != '"') {
            i++;
          }
          if (i == end) {
            return;
          }
          if (end - i >= longest) {
            // the whole of any key fits: compare at once instead of byte by byte (a key holds no
            // quote but its first and last, so no match can begin inside another's)
            int k = keyAt(a, off + i);
            if (k < 0) {
              i++; // no key starts at this quote
              continue;
            }
            key = k;
            phase = BEFORE_COLON;
            i += keys[k].length;
            continue;
          }
        }
        accept(a[off + i]);
        i++;
      }
      return;
    }
    while (i < end) {
      if (idle()) {
        while (i < end && chunk.get(i) != '"') {
          i++;
        }
        if (i == end) {
          return;
        }
      }
      accept(chunk.get(i));
      i++;
    }
  }

  /** Keeps the last {@value #TAIL} bytes seen, without moving {@code chunk}'s position. */
  void keep(ByteBuffer chunk) {
    int n = chunk.remaining();
    if (n == 0) {
      return;
    }
    int from = chunk.position();
    if (n >= TAIL) {
      if (tail == null || tail.length < TAIL) {
        tail = new byte[TAIL];
      }
      chunk.get(from + n - TAIL, tail, 0, TAIL);
      tailLen = TAIL;
      return;
    }
    int keepOld = Math.min(tailLen, TAIL - n);
    if (tail == null || tail.length < keepOld + n) {
      // sized to what is kept: a short answer costs a short array, not TAIL bytes to clear; the
      // first chunk exactly (a JSON answer is often one chunk), later ones with room to grow
      byte[] grown = new byte[tail == null ? n : Math.min(TAIL, Math.max(2 * (keepOld + n), 256))];
      if (tail != null) {
        System.arraycopy(tail, tailLen - keepOld, grown, 0, keepOld);
        tailLen = keepOld;
      }
      tail = grown;
      chunk.get(from, tail, keepOld, n);
      tailLen = keepOld + n;
      return;
    }
    if (keepOld < tailLen) {
      System.arraycopy(tail, tailLen - keepOld, tail, 0, keepOld);
    }
    chunk.get(from, tail, keepOld, n);
    tailLen = keepOld + n;
  }

  /** Scans what {@link #keep} kept; returns this scanner. */
  UsageScanner finish() {
    if (tailLen > 0) {
      scan(ByteBuffer.wrap(tail, 0, tailLen));
      tailLen = 0;
    }
    return this;
  }

  /** The key starting at {@code a[from]} (a quote, with a whole key's length after it), or -1. */
  private int keyAt(byte[] a, int from) {
    for (int k = 0; k < keys.length; k++) {
      byte[] kb = keys[k];
      if (java.util.Arrays.equals(a, from, from + kb.length, kb, 0, kb.length)) {
        return k;
      }
    }
    return -1;
  }

  /** Scanning with no partial match: only a quote can change the state. */
  private boolean idle() {
    if (phase != SCANNING) {
      return false;
    }
    for (int m : matched) {
      if (m != 0) {
        return false;
      }
    }
    return true;
  }

  private void accept(byte b) {
    switch (phase) {
      case BEFORE_COLON:
        if (b == ':') {
          phase = BEFORE_VALUE;
        } else if (!whitespace(b)) {
          restart(b);
        }
        return;
      case BEFORE_VALUE:
        if (b >= '0' && b <= '9') {
          phase = IN_VALUE;
          number = b - '0';
          digits = 1;
        } else if (!whitespace(b)) {
          restart(b);
        }
        return;
      case IN_VALUE:
        if (b >= '0' && b <= '9' && digits < 18) {
          number = number * 10 + (b - '0');
          digits++;
          return;
        }
        values[key] = number;
        restart(b);
        return;
      default:
        match(b);
    }
  }

  private void restart(byte b) {
    phase = SCANNING;
    java.util.Arrays.fill(matched, 0);
    match(b);
  }

  private void match(byte b) {
    for (int k = 0; k < keys.length; k++) {
      byte[] kb = keys[k];
      int m = matched[k];
      if (kb[m] == b) {
        m++;
      } else {
        m = b == '"' ? 1 : 0;
      }
      if (m == kb.length) {
        key = k;
        phase = BEFORE_COLON;
        java.util.Arrays.fill(matched, 0);
        return;
      }
      matched[k] = m;
    }
  }

  private static boolean whitespace(byte b) {
    return b == ' ' || b == '\t' || b == '\r' || b == '\n';
  }

  /**
   * The prompt's length: the last {@code prompt_tokens} (Responses: {@code input_tokens}) value
   * seen; for Anthropic's Messages the sum of the last input, cache-read and cache-creation values;
   * -1 when none was seen.
   */
  long promptTokens() {
    if (!anthropic || values[PROMPT] < 0) {
      return values[PROMPT];
    }
    return values[PROMPT] + Math.max(values[CACHED], 0) + Math.max(values[CREATED], 0);
  }

  /** The last {@code cached_tokens} value seen, or -1. */
  long cachedTokens() {
    return values[CACHED];
  }

  /** What was found, or null when neither value was. */
  io.kvroute.connector.EngineUsage usage() {
    long prompt = promptTokens();
    return prompt < 0 && values[CACHED] < 0
        ? null
        : new io.kvroute.connector.EngineUsage(prompt, values[CACHED]);
  }
}
