package io.kvroute.config;

import java.math.BigDecimal;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.Locale;

/**
 * Durations as Go and Kubernetes write them ({@code "30s"}, {@code "1m30s"}, {@code "250ms"},
 * {@code "1h2m3.5s"}, {@code "10us"}), ISO-8601 ({@code "PT30S"}) or a plain number of seconds
 * ({@code 30}, {@code "0.5"}). Every {@link java.time.Duration} that {@link ConfigBinder} binds is
 * read this way.
 */
public final class Durations {
  /** What a valid duration looks like, for error messages. */
  public static final String EXPECTED = "a duration such as \"30s\", \"1m30s\" or \"250ms\"";

  private static final BigDecimal NANOS_PER_SECOND = BigDecimal.valueOf(1_000_000_000L);

  private Durations() {}

  /**
   * Parses a duration.
   *
   * @throws IllegalArgumentException with a message that says what is expected
   */
  public static Duration parse(String text) {
    String s = text.trim();
    if (s.isEmpty()) {
      throw invalid(text);
    }
    if (s.startsWith("P") || s.startsWith("p")) {
      try {
        return Duration.parse(s.toUpperCase(Locale.ROOT));
      } catch (DateTimeParseException e) {
        throw invalid(text);
      }
    }
    if (s.chars().allMatch(c -> (c >= '0' && c <= '9') || c == '.')) {
      return seconds(number(s, text), text);
    }
    boolean negative = s.startsWith("-");
    int i = negative || s.startsWith("+") ? 1 : 0;
    if (i == s.length()) {
      throw invalid(text);
    }
    BigDecimal nanos = BigDecimal.ZERO;
    while (i < s.length()) {
      int start = i;
      while (i < s.length() && (Character.isDigit(s.charAt(i)) || s.charAt(i) == '.')) {
        i++;
      }
      if (start == i) {
        throw invalid(text);
      }
      BigDecimal n = number(s.substring(start, i), text);
      int unitStart = i;
      while (i < s.length() && !Character.isDigit(s.charAt(i)) && s.charAt(i) != '.') {
        i++;
      }
      String unit = s.substring(unitStart, i);
      long perUnit =
          switch (unit) {
            case "ns" -> 1L;
            case "us", "µs", "μs" -> 1_000L;
            case "ms" -> 1_000_000L;
            case "s" -> 1_000_000_000L;
            case "m" -> 60_000_000_000L;
            case "h" -> 3_600_000_000_000L;
            case "" -> {
              if (start == (negative || s.startsWith("+") ? 1 : 0) && n.signum() == 0) {
                yield 0L; // Go accepts a bare "0"
              }
              throw new IllegalArgumentException(
                  "must be "
                      + EXPECTED
                      + " (a unit is required after "
                      + n
                      + "), was \""
                      + text
                      + "\"");
            }
            default ->
                throw new IllegalArgumentException(
                    "has unknown unit \""
                        + unit
                        + "\" in \""
                        + text
                        + "\"; use ns, us, ms, s, m or h (e.g. \"30s\", \"1m30s\")");
          };
      nanos = nanos.add(n.multiply(BigDecimal.valueOf(perUnit)));
    }
    Duration d = nanos(nanos, text);
    return negative ? d.negated() : d;
  }

  /** A duration of {@code seconds} (fractions allowed), as a bare YAML number is read. */
  public static Duration ofSeconds(BigDecimal seconds) {
    return seconds(seconds, seconds.toPlainString());
  }

  /**
   * Formats a duration the Go way ({@code 1m30s}, {@code 250ms}, {@code 0s}), so that {@link
   * #parse} reads it back.
   */
  public static String format(Duration d) {
    if (d.isZero()) {
      return "0s";
    }
    StringBuilder b = new StringBuilder();
    if (d.isNegative()) {
      b.append('-');
      d = d.negated();
    }
    long h = d.toHours();
    int m = d.toMinutesPart();
    int s = d.toSecondsPart();
    int nanos = d.toNanosPart();
    if (h == 0 && m == 0 && s == 0) {
      if (nanos % 1_000_000 == 0) {
        return b.append(nanos / 1_000_000).append("ms").toString();
      }
      if (nanos % 1_000 == 0) {
        return b.append(nanos / 1_000).append("us").toString();
      }
      return b.append(nanos).append("ns").toString();
    }
    if (h > 0) {
      b.append(h).append('h');
    }
    if (m > 0) {
      b.append(m).append('m');
    }
    if (s > 0 || nanos > 0) {
      b.append(
              BigDecimal.valueOf(s)
                  .add(BigDecimal.valueOf(nanos, 9))
                  .stripTrailingZeros()
                  .toPlainString())
          .append('s');
    }
    return b.toString();
  }

  private static BigDecimal number(String digits, String text) {
    try {
      return new BigDecimal(digits);
    } catch (NumberFormatException e) {
      throw invalid(text);
    }
  }

  private static Duration seconds(BigDecimal secs, String text) {
    return nanos(secs.multiply(NANOS_PER_SECOND), text);
  }

  private static Duration nanos(BigDecimal nanos, String text) {
    try {
      return Duration.ofNanos(nanos.setScale(0, java.math.RoundingMode.DOWN).longValueExact());
    } catch (ArithmeticException e) {
      throw new IllegalArgumentException(
          "is out of range (at most about 292 years): \"" + text + "\"");
    }
  }

  private static IllegalArgumentException invalid(String text) {
    return new IllegalArgumentException("must be " + EXPECTED + ", was \"" + text + "\"");
  }
}
