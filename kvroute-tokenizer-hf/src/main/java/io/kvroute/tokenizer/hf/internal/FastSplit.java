package io.kvroute.tokenizer.hf.internal;

/**
 * A hand-written matcher for the pre-tokenization regex of Llama 3 ({@code \p{N}{1,3}}) and Qwen
 * 2/3 ({@code \p{N}}), the same leftmost-first, backtracking semantics as the regex, in one pass
 * without allocation:
 *
 * <pre>{@code
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
 *   |\s*[\r\n]+|\s+(?!\S)|\s+
 * }</pre>
 *
 * <p>{@code \s} is Unicode White_Space (Oniguruma's and Java's Unicode {@code \s}); {@code (?i)}
 * folds case as Java's {@code UNICODE_CASE} (so {@code 'ſ} matches like {@code 's}). Stateless.
 */
final class FastSplit {
  static final String QWEN2 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
          + " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  static final String LLAMA3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
          + " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

  private final int maxDigits;

  private FastSplit(int maxDigits) {
    this.maxDigits = maxDigits;
  }

  /** The matcher for {@code regex}, or null when it is not one of the two patterns. */
  static FastSplit forPattern(String regex) {
    if (regex.equals(QWEN2)) {
      return new FastSplit(1);
    }
    if (regex.equals(LLAMA3)) {
      return new FastSplit(3);
    }
    return null;
  }

  /** The end of the match starting at {@code i} (every position starts a match). */
  int matchEnd(String s, int i) {
    int n = s.length();
    int c = s.codePointAt(i);
    int next = i + Character.charCount(c);
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (c == '\'' && next < n) {
      int c1 = s.codePointAt(next);
      int after1 = next + Character.charCount(c1);
      if (is(c1, 's') || is(c1, 't') || is(c1, 'm') || is(c1, 'd')) {
        return after1;
      }
      if (after1 < n) {
        int c2 = s.codePointAt(after1);
        int after2 = after1 + Character.charCount(c2);
        if ((is(c1, 'r') && is(c2, 'e'))
            || (is(c1, 'v') && is(c2, 'e'))
            || (is(c1, 'l') && is(c2, 'l'))) {
          return after2;
        }
      }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (Character.isLetter(c)) {
      return letters(s, next);
    }
    if (c != '\r'
        && c != '\n'
        && !isNumber(c)
        && next < n
        && Character.isLetter(s.codePointAt(next))) {
      return letters(s, next);
    }
    // \p{N}{1,max}
    if (isNumber(c)) {
      int j = next;
      for (int k = 1; k < maxDigits && j < n; k++) {
        int d = s.codePointAt(j);
        if (!isNumber(d)) {
          break;
        }
        j += Character.charCount(d);
      }
      return j;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    int start = c == ' ' ? next : i;
    if (start < n && isOther(s.codePointAt(start))) {
      int j = start;
      while (j < n) {
        int d = s.codePointAt(j);
        if (!isOther(d)) {
          break;
        }
        j += Character.charCount(d);
      }
      while (j < n && (s.charAt(j) == '\r' || s.charAt(j) == '\n')) {
        j++;
      }
      return j;
    }
    // whitespace: \s*[\r\n]+ | \s+(?!\S) | \s+   (all White_Space characters are in the BMP)
    if (isWhiteSpace(c)) {
      int end = i;
      int lastNewline = -1;
      while (end < n && isWhiteSpace(s.charAt(end))) {
        char w = s.charAt(end);
        if (w == '\r' || w == '\n') {
          lastNewline = end;
        }
        end++;
      }
      if (lastNewline >= 0) {
        return lastNewline + 1;
      }
      if (end == n || end - 1 == i) {
        return end;
      }
      return end - 1;
    }
    return next; // unreachable: every character is a letter, number, other or whitespace
  }

  private static int letters(String s, int j) {
    int n = s.length();
    while (j < n) {
      int d = s.codePointAt(j);
      if (!Character.isLetter(d)) {
        break;
      }
      j += Character.charCount(d);
    }
    return j;
  }

  /** Case-insensitive equality with a lower-case ASCII letter, as Java's UNICODE_CASE. */
  private static boolean is(int c, char lower) {
    return c == lower
        || Character.toLowerCase(Character.toUpperCase(c)) == lower
        || Character.toLowerCase(c) == lower;
  }

  static boolean isNumber(int c) {
    int t = Character.getType(c);
    return t == Character.DECIMAL_DIGIT_NUMBER
        || t == Character.LETTER_NUMBER
        || t == Character.OTHER_NUMBER;
  }

  private static boolean isOther(int c) {
    return !isWhiteSpace(c) && !Character.isLetter(c) && !isNumber(c);
  }

  /** Unicode White_Space. */
  static boolean isWhiteSpace(int c) {
    return (c >= 0x09 && c <= 0x0d)
        || c == 0x20
        || c == 0x85
        || c == 0xa0
        || c == 0x1680
        || (c >= 0x2000 && c <= 0x200a)
        || c == 0x2028
        || c == 0x2029
        || c == 0x202f
        || c == 0x205f
        || c == 0x3000;
  }
}
