package io.kvroute.config;

import java.math.BigDecimal;

/**
 * A Kubernetes resource quantity that counts whole units (bytes, bytes per second): {@code "32Gi"},
 * {@code "500M"}, {@code "1.5Ki"}, {@code "1e9"} or a plain number. Binary suffixes {@code Ki Mi Gi
 * Ti Pi Ei} are powers of 1024, decimal suffixes {@code k M G T P E} powers of 1000. Bound by
 * {@link ConfigBinder} from a string or a number.
 *
 * @param value the quantity in units (≥ 0)
 */
public record Quantity(long value) {
  /** What a valid quantity looks like, for error messages. */
  public static final String EXPECTED = "a quantity such as \"32Gi\", \"500M\" or 1048576";

  private static final String[] SUFFIXES = {
    "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E"
  };
  private static final BigDecimal[] FACTORS = {
    BigDecimal.valueOf(1L << 10),
    BigDecimal.valueOf(1L << 20),
    BigDecimal.valueOf(1L << 30),
    BigDecimal.valueOf(1L << 40),
    BigDecimal.valueOf(1L << 50),
    BigDecimal.valueOf(1L << 60),
    BigDecimal.valueOf(1_000L),
    BigDecimal.valueOf(1_000_000L),
    BigDecimal.valueOf(1_000_000_000L),
    BigDecimal.valueOf(1_000_000_000_000L),
    BigDecimal.valueOf(1_000_000_000_000_000L),
    BigDecimal.valueOf(1_000_000_000_000_000_000L)
  };

  /** Validates. */
  public Quantity {
    if (value < 0) {
      throw new IllegalArgumentException("must be >= 0, was " + value);
    }
  }

  /**
   * Parses a quantity.
   *
   * @throws IllegalArgumentException with a message that says what is expected
   */
  public static Quantity parse(String text) {
    String s = text.trim();
    BigDecimal factor = BigDecimal.ONE;
    String number = s;
    for (int i = 0; i < SUFFIXES.length; i++) {
      if (s.endsWith(SUFFIXES[i])) {
        factor = FACTORS[i];
        number = s.substring(0, s.length() - SUFFIXES[i].length());
        break;
      }
    }
    BigDecimal n;
    try {
      if (number.isEmpty() || !Character.isDigit(number.charAt(number.length() - 1))) {
        throw new NumberFormatException();
      }
      n = new BigDecimal(number).multiply(factor);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("must be " + EXPECTED + ", was \"" + text + "\"");
    }
    return of(n, text);
  }

  /** A quantity from a number (as a bare YAML number is read). */
  public static Quantity of(BigDecimal n) {
    return of(n, n.toPlainString());
  }

  private static Quantity of(BigDecimal n, String text) {
    if (n.signum() < 0) {
      throw new IllegalArgumentException("must be >= 0, was \"" + text + "\"");
    }
    try {
      return new Quantity(n.toBigIntegerExact().longValueExact());
    } catch (ArithmeticException e) {
      throw new IllegalArgumentException(
          n.stripTrailingZeros().scale() > 0
              ? "must be a whole number of units, was \"" + text + "\""
              : "is out of range, was \"" + text + "\"");
    }
  }
}
