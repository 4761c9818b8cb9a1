package io.kvroute.service.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;

/**
 * A scanner for well-formed requests without string escapes: {@code parse()} returns false as soon
 * as anything unusual appears (escapes, non-integer tokens, limits exceeded, nulls, syntax errors),
 * and the caller re-parses with Jackson for the precise error.
 */
final class ScoreFastParser {
  private static final VarHandle LE_LONG =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

  private byte[] b;
  private int end;
  private ScoreCodec.Parsed out;
  private int maxTokens;
  private int maxBlocks;
  private int maxCandidates;
  private int i;

  boolean parse(
      byte[] b,
      int off,
      int len,
      ScoreCodec.Parsed out,
      int maxTokens,
      int maxBlocks,
      int maxCandidates) {
    this.b = b;
    this.i = off;
    this.end = off + len;
    this.out = out;
    this.maxTokens = maxTokens;
    this.maxBlocks = maxBlocks;
    this.maxCandidates = maxCandidates;
    try {
      return parse();
    } finally {
      this.b = null;
      this.out = null;
    }
  }

  private int peek() {
    while (i < end) {
      byte c = b[i];
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        i++;
      } else {
        return c;
      }
    }
    return -1;
  }

  private boolean expect(char c) {
    if (peek() != c) {
      return false;
    }
    i++;
    return true;
  }

  /** Returns [start, end) of a string without escapes or control bytes, or -1. */
  private int stringEnd() {
    if (peek() != '"') {
      return -1;
    }
    int j = ++i;
    while (j < end) {
      byte c = b[j];
      if (c == '"') {
        return j;
      }
      if (c == '\\' || c < 0x20) {
        return -1; // escapes, control bytes and non-ASCII (negative) bytes: the slow path
      }
      j++;
    }
    return -1;
  }

  private String string() {
    return string(null);
  }

  /** A string value; {@code reuse} is returned instead of a copy when its bytes are equal. */
  private String string(String reuse) {
    int e = stringEnd();
    if (e < 0) {
      return null;
    }
    int start = i;
    i = e + 1;
    if (reuse != null && reuse.length() == e - start) {
      int k = 0;
      while (k < e - start && b[start + k] == reuse.charAt(k)) {
        k++;
      }
      if (k == e - start) {
        return reuse;
      }
    }
    return new String(b, start, e - start, StandardCharsets.UTF_8);
  }

  private boolean parse() {
    if (!expect('{')) {
      return false;
    }
    if (peek() == '}') {
      i++;
      return peek() == -1;
    }
    while (true) {
      int ks = i;
      int ke = stringEnd();
      if (ke < 0) {
        return false;
      }
      ks = i;
      i = ke + 1;
      if (!expect(':')) {
        return false;
      }
      boolean ok;
      switch (keyOf(ks, ke)) {
        case 1:
          ok = tokens();
          break;
        case 2:
          ok = blocks();
          break;
        case 3:
          ok = (out.prompt = string()) != null;
          break;
        case 4:
          ok = (out.model = string(out.lastModel)) != null && !out.model.isEmpty();
          out.lastModel = out.model;
          break;
        case 5:
          ok = (out.lora = string()) != null && !out.lora.isEmpty();
          break;
        case 6:
          ok = candidates();
          break;
        default:
          return false;
      }
      if (!ok) {
        return false;
      }
      int c = peek();
      i++;
      if (c == '}') {
        return peek() == -1;
      }
      if (c != ',') {
        return false;
      }
      peek();
    }
  }

  private int keyOf(int s, int e) {
    int n = e - s;
    if (n == 9 && eq(s, "token_ids")) {
      return 1;
    }
    if (n == 13 && eq(s, "prompt_blocks")) {
      return 2;
    }
    if (n == 6 && eq(s, "prompt")) {
      return 3;
    }
    if (n == 5 && eq(s, "model")) {
      return 4;
    }
    if (n == 4 && eq(s, "lora")) {
      return 5;
    }
    if (n == 14 && eq(s, "candidate_pods")) {
      return 6;
    }
    return 0;
  }

  private boolean eq(int s, String k) {
    for (int j = 0; j < k.length(); j++) {
      if (b[s + j] != k.charAt(j)) {
        return false;
      }
    }
    return true;
  }

  private boolean tokens() {
    if (out.numTokens >= 0 || !expect('[')) {
      return false;
    }
    final byte[] a = b;
    final int e = end;
    int j = i;
    int n = 0;
    int[] buf = out.tokens;
    while (j < e && isSpace(a[j])) {
      j++;
    }
    if (j < e && a[j] == ']') {
      i = j + 1;
      out.numTokens = 0;
      return true;
    }
    while (true) {
      // Fast path: up to 7 digits read as one little-endian word, then ',' or ']'.
      if (j + 8 <= e) {
        long w = (long) LE_LONG.get(a, j);
        int digits = leadingDigits(w);
        if (digits > 0 && digits < 8 && (digits == 1 || a[j] != '0')) {
          byte c = a[j + digits];
          if (c == ',' || c == ']') {
            if (n == maxTokens) {
              return false;
            }
            if (n == buf.length) {
              buf = Arrays.copyOf(buf, Math.min(maxTokens, n * 2));
              out.tokens = buf;
            }
            buf[n++] = (int) digitsValue(w, digits);
            j += digits + 1;
            if (c == ',') {
              continue;
            }
            i = j;
            out.numTokens = n;
            return true;
          }
        }
      }
      while (j < e && isSpace(a[j])) {
        j++;
      }
      int start = j;
      long v = 0;
      while (j < e) {
        int d = a[j] - '0';
        if (d < 0 || d > 9) {
          break;
        }
        v = v * 10 + d;
        j++;
      }
      int digits = j - start;
      if (digits == 0 || digits > 10 || v > Integer.MAX_VALUE || (digits > 1 && a[start] == '0')) {
        return false; // not a plain non-negative int: the slow path explains
      }
      if (n == maxTokens) {
        return false;
      }
      if (n == buf.length) {
        buf = Arrays.copyOf(buf, Math.min(maxTokens, n * 2));
        out.tokens = buf;
      }
      buf[n++] = (int) v;
      while (j < e && isSpace(a[j])) {
        j++;
      }
      if (j >= e) {
        return false;
      }
      byte c = a[j++];
      if (c == ',') {
        continue;
      }
      if (c == ']') {
        i = j;
        out.numTokens = n;
        return true;
      }
      return false;
    }
  }

  /** How many of the word's bytes, from the lowest, are ASCII digits (0 to 8). */
  static int leadingDigits(long w) {
    long bad =
        ((w & 0xF0F0F0F0F0F0F0F0L) ^ 0x3030303030303030L)
            | (((w & 0x0F0F0F0F0F0F0F0FL) + 0x0606060606060606L) & 0xF0F0F0F0F0F0F0F0L);
    return Long.numberOfTrailingZeros(bad) >>> 3;
  }

  /** The value of the word's first {@code digits} (1 to 8) ASCII digits, lowest byte first. */
  static long digitsValue(long w, int digits) {
    long v = (w & 0x0F0F0F0F0F0F0F0FL) << ((8 - digits) << 3);
    v = (v * 2561) >>> 8;
    v = ((v & 0x00FF00FF00FF00FFL) * 6553601) >>> 16;
    return ((v & 0x0000FFFF0000FFFFL) * 42949672960001L) >>> 32;
  }

  private static boolean isSpace(byte c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
  }

  private boolean blocks() {
    if (out.numBlocks >= 0 || !expect('[')) {
      return false;
    }
    int n = 0;
    long[] buf = out.blocks;
    if (peek() == ']') {
      i++;
      out.numBlocks = 0;
      return true;
    }
    while (true) {
      int e = stringEnd();
      if (e < 0) {
        return false;
      }
      int s = i;
      if (e - s > 1 && b[s] == '0' && (b[s + 1] == 'x' || b[s + 1] == 'X')) {
        s += 2;
      }
      if (e - s < 1 || e - s > 16) {
        return false;
      }
      long v = 0;
      for (int j = s; j < e; j++) {
        int d = Character.digit(b[j], 16);
        if (d < 0) {
          return false;
        }
        v = (v << 4) | d;
      }
      i = e + 1;
      if (n == maxBlocks) {
        return false;
      }
      if (n == buf.length) {
        buf = Arrays.copyOf(buf, Math.min(maxBlocks, n * 2));
        out.blocks = buf;
      }
      buf[n++] = v;
      int c = peek();
      i++;
      if (c == ']') {
        out.numBlocks = n;
        return true;
      }
      if (c != ',') {
        return false;
      }
    }
  }

  private boolean candidates() {
    if (out.hasCandidates || !expect('[')) {
      return false;
    }
    out.hasCandidates = true;
    HashSet<String> seen = out.seen;
    seen.clear();
    if (peek() == ']') {
      i++;
      return true;
    }
    try {
      while (true) {
        String id = string();
        if (id == null
            || id.isEmpty()
            || id.length() > 253
            || out.candidates.size() == maxCandidates
            || !seen.add(id)) {
          return false;
        }
        out.candidates.add(id);
        int c = peek();
        i++;
        if (c == ']') {
          return true;
        }
        if (c != ',') {
          return false;
        }
      }
    } finally {
      seen.clear();
    }
  }
}
