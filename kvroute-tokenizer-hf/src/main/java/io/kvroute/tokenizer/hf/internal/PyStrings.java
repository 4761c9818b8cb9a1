package io.kvroute.tokenizer.hf.internal;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;

/**
 * Python's {@code str} methods as chat templates use them ({@code strip}, {@code split}, {@code
 * title}, {@code replace}, ...), on Java strings with Python's whitespace and code-point rules.
 *
 * <p>Stateless and thread-safe.
 */
final class PyStrings {
  private PyStrings() {}

  /** Python's {@code str.isspace()} for one UTF-16 unit (all whitespace is in the BMP). */
  static boolean isSpace(int c) {
    return switch (c) {
      case '\t',
          '\n',
          0x0b,
          0x0c,
          '\r',
          0x1c,
          0x1d,
          0x1e,
          0x1f,
          ' ',
          0x85,
          0xa0,
          0x1680,
          0x2028,
          0x2029,
          0x202f,
          0x205f,
          0x3000 ->
          true;
      default -> c >= 0x2000 && c <= 0x200a;
    };
  }

  static String strip(String s, String chars, boolean left, boolean right) {
    int a = 0;
    int b = s.length();
    if (left) {
      while (a < b && stripped(s.codePointAt(a), chars)) {
        a += Character.charCount(s.codePointAt(a));
      }
    }
    if (right) {
      while (b > a && stripped(s.codePointBefore(b), chars)) {
        b -= Character.charCount(s.codePointBefore(b));
      }
    }
    return s.substring(a, b);
  }

  static String rstrip(String s, String chars) {
    return strip(s, chars, false, true);
  }

  private static boolean stripped(int c, String chars) {
    return chars == null
        ? isSpace(c)
        : chars.indexOf(c) >= 0 || chars.contains(Character.toString(c));
  }

  static List<Object> split(String s, String sep, long maxsplit) {
    List<Object> out = new ArrayList<>();
    if (sep == null) {
      int k = 0;
      int n = s.length();
      while (true) {
        while (k < n && isSpace(s.charAt(k))) {
          k++;
        }
        if (k >= n) {
          break;
        }
        if (maxsplit >= 0 && out.size() >= maxsplit) {
          out.add(rstrip(s.substring(k), null));
          break;
        }
        int start = k;
        while (k < n && !isSpace(s.charAt(k))) {
          k++;
        }
        out.add(s.substring(start, k));
      }
      return out;
    }
    if (sep.isEmpty()) {
      throw Py.typeError("empty separator");
    }
    int k = 0;
    while (maxsplit < 0 || out.size() < maxsplit) {
      int f = s.indexOf(sep, k);
      if (f < 0) {
        break;
      }
      out.add(s.substring(k, f));
      k = f + sep.length();
    }
    out.add(s.substring(k));
    return out;
  }

  static List<Object> rsplit(String s, String sep, long maxsplit) {
    if (maxsplit < 0) {
      return split(s, sep, -1);
    }
    if (sep == null) {
      List<Object> rev = new ArrayList<>();
      int k = s.length();
      while (true) {
        while (k > 0 && isSpace(s.charAt(k - 1))) {
          k--;
        }
        if (k <= 0) {
          break;
        }
        if (rev.size() >= maxsplit) {
          rev.add(strip(s.substring(0, k), null, true, false));
          break;
        }
        int end = k;
        while (k > 0 && !isSpace(s.charAt(k - 1))) {
          k--;
        }
        rev.add(s.substring(k, end));
      }
      Collections.reverse(rev);
      return rev;
    }
    List<Object> rev = new ArrayList<>();
    int end = s.length();
    while (rev.size() < maxsplit) {
      int f = s.lastIndexOf(sep, end - sep.length());
      if (f < 0) {
        break;
      }
      rev.add(s.substring(f + sep.length(), end));
      end = f;
    }
    rev.add(s.substring(0, end));
    Collections.reverse(rev);
    return rev;
  }

  static String title(String s) {
    StringBuilder sb = new StringBuilder();
    boolean prevCased = false;
    for (int k = 0; k < s.length(); ) {
      int c = s.codePointAt(k);
      k += Character.charCount(c);
      if (Character.isLetter(c)) {
        sb.appendCodePoint(prevCased ? Character.toLowerCase(c) : Character.toTitleCase(c));
        prevCased = true;
      } else {
        sb.appendCodePoint(c);
        prevCased = false;
      }
    }
    return sb.toString();
  }

  static String capitalize(String s) {
    if (s.isEmpty()) {
      return s;
    }
    int c = s.codePointAt(0);
    return new String(Character.toChars(Character.toTitleCase(c)))
        + s.substring(Character.charCount(c)).toLowerCase(Locale.ROOT);
  }

  /** Python's {@code s.replace(old, rep, count)}; a negative count replaces all. */
  static String replace(String s, String old, String rep, long count) {
    if (count < 0) {
      if (old.isEmpty()) {
        StringBuilder sb = new StringBuilder(rep);
        s.codePoints().forEach(c -> sb.appendCodePoint(c).append(rep));
        return sb.toString();
      }
      return s.replace(old, rep);
    }
    StringBuilder sb = new StringBuilder();
    int from = 0;
    long n = 0;
    while (n < count && !old.isEmpty()) {
      int f = s.indexOf(old, from);
      if (f < 0) {
        break;
      }
      sb.append(s, from, f).append(rep);
      from = f + old.length();
      n++;
    }
    return sb.append(s.substring(from)).toString();
  }
}
