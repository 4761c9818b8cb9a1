package io.kvroute.replay;

import java.time.Duration;
import java.util.Locale;
import java.util.Objects;

/**
 * A service-level objective: a request meets it when its time to first token is at most {@code
 * ttft} and its time per output token (after the first) at most {@code tpot}.
 *
 * @param ttft bound on time to first token
 * @param tpot bound on time per output token
 */
public record Slo(Duration ttft, Duration tpot) {
  /** The default: TTFT 2 s, TPOT 50 ms. */
  public static final Slo DEFAULT = new Slo(Duration.ofSeconds(2), Duration.ofMillis(50));

  /** Validates. */
  public Slo {
    Objects.requireNonNull(ttft, "ttft");
    Objects.requireNonNull(tpot, "tpot");
    if (ttft.isNegative() || ttft.isZero() || tpot.isNegative() || tpot.isZero()) {
      throw new IllegalArgumentException("slo bounds must be > 0, were " + ttft + ", " + tpot);
    }
  }

  /**
   * Parses {@code ttft=2s,tpot=50ms} (units ms or s; either part may be left out for its default).
   *
   * @throws IllegalArgumentException naming the part that does not parse
   */
  public static Slo parse(String text) {
    Duration ttft = DEFAULT.ttft;
    Duration tpot = DEFAULT.tpot;
    for (String part : text.split(",")) {
      String p = part.trim();
      if (p.isEmpty()) {
        continue;
      }
      int eq = p.indexOf('=');
      if (eq < 0) {
        throw new IllegalArgumentException(
            "slo: expected key=value (ttft=2s,tpot=50ms), got \"" + p + "\"");
      }
      String key = p.substring(0, eq).trim().toLowerCase(Locale.ROOT);
      Duration d = duration(p.substring(eq + 1).trim(), key);
      switch (key) {
        case "ttft":
          ttft = d;
          break;
        case "tpot":
          tpot = d;
          break;
        default:
          throw new IllegalArgumentException("slo: unknown key \"" + key + "\"; known: ttft, tpot");
      }
    }
    return new Slo(ttft, tpot);
  }

  private static Duration duration(String v, String key) {
    String s = v.toLowerCase(Locale.ROOT);
    try {
      if (s.endsWith("ms")) {
        return Duration.ofNanos(
            Math.round(Double.parseDouble(s.substring(0, s.length() - 2)) * 1e6));
      }
      if (s.endsWith("s")) {
        return Duration.ofNanos(
            Math.round(Double.parseDouble(s.substring(0, s.length() - 1)) * 1e9));
      }
    } catch (NumberFormatException e) {
      // fall through
    }
    throw new IllegalArgumentException(
        "slo: " + key + " must be a duration like 2s or 50ms, got \"" + v + "\"");
  }

  @Override
  public String toString() {
    return String.format(
        Locale.ROOT, "ttft=%sms,tpot=%sms", ttft.toNanos() / 1e6, tpot.toNanos() / 1e6);
  }
}
