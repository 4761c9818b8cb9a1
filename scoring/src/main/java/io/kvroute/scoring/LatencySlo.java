package io.kvroute.scoring;

import java.time.Duration;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;

/**
 * A request's latency objective: a bound on its time to first token (TTFT), on its time per output
 * token after the first (TPOT), or both. A client sets it with the {@value #TTFT_HEADER} and
 * {@value #TPOT_HEADER} headers (whole milliseconds); a router may give a model a default ({@link
 * #orElse}). The {@code predicted-latency-scorer} prefers endpoints predicted to meet it, and flow
 * control holds or refuses a request that no endpoint can meet.
 *
 * <p>Immutable value.
 */
public final class LatencySlo {
  /** The request header bounding the time to first token, in milliseconds. */
  public static final String TTFT_HEADER = "x-kvroute-slo-ttft-ms";

  /** The request header bounding the time per output token, in milliseconds. */
  public static final String TPOT_HEADER = "x-kvroute-slo-tpot-ms";

  /** No objective. */
  public static final LatencySlo NONE = new LatencySlo(0, 0);

  /** The largest bound a header may give: one day. */
  private static final long MAX_MILLIS = 86_400_000L;

  private final long ttftNanos;
  private final long tpotNanos;

  private LatencySlo(long ttftNanos, long tpotNanos) {
    this.ttftNanos = ttftNanos;
    this.tpotNanos = tpotNanos;
  }

  /**
   * An objective; either bound may be null (none).
   *
   * @throws IllegalArgumentException when a bound is zero or negative
   */
  public static LatencySlo of(Duration ttft, Duration tpot) {
    return new LatencySlo(nanos(ttft, "ttft"), nanos(tpot, "tpot"));
  }

  private static long nanos(Duration d, String what) {
    if (d == null) {
      return 0;
    }
    if (d.isNegative() || d.isZero()) {
      throw new IllegalArgumentException("slo." + what + " must be > 0, was " + d);
    }
    return d.toNanos();
  }

  /**
   * The objective a request's headers give ({@value #TTFT_HEADER}, {@value #TPOT_HEADER}), {@link
   * #NONE} without them.
   *
   * @param header a request header by (lower-case) name
   * @throws IllegalArgumentException naming the header when its value is not a whole number of
   *     milliseconds in 1..86400000
   */
  public static LatencySlo fromHeaders(Function<String, Optional<String>> header) {
    Objects.requireNonNull(header, "header");
    long ttft = millis(header.apply(TTFT_HEADER), TTFT_HEADER);
    long tpot = millis(header.apply(TPOT_HEADER), TPOT_HEADER);
    return ttft == 0 && tpot == 0 ? NONE : new LatencySlo(ttft, tpot);
  }

  private static long millis(Optional<String> value, String name) {
    if (value == null || value.isEmpty()) {
      return 0;
    }
    String v = value.get().trim();
    long ms;
    try {
      ms = Long.parseLong(v);
    } catch (NumberFormatException e) {
      ms = -1;
    }
    if (ms < 1 || ms > MAX_MILLIS) {
      throw new IllegalArgumentException(
          "header "
              + name
              + " must be a whole number of milliseconds in 1.."
              + MAX_MILLIS
              + ", was \""
              + v
              + "\"");
    }
    return ms * 1_000_000L;
  }

  /** This objective, each missing bound taken from {@code defaults}. */
  public LatencySlo orElse(LatencySlo defaults) {
    Objects.requireNonNull(defaults, "defaults");
    if ((ttftNanos != 0 || defaults.ttftNanos == 0)
        && (tpotNanos != 0 || defaults.tpotNanos == 0)) {
      return this;
    }
    return new LatencySlo(
        ttftNanos != 0 ? ttftNanos : defaults.ttftNanos,
        tpotNanos != 0 ? tpotNanos : defaults.tpotNanos);
  }

  /** The bound on time to first token, if any. */
  public Optional<Duration> ttft() {
    return ttftNanos == 0 ? Optional.empty() : Optional.of(Duration.ofNanos(ttftNanos));
  }

  /** The bound on time per output token, if any. */
  public Optional<Duration> tpot() {
    return tpotNanos == 0 ? Optional.empty() : Optional.of(Duration.ofNanos(tpotNanos));
  }

  /** The TTFT bound in nanoseconds, 0 when none. */
  public long ttftNanos() {
    return ttftNanos;
  }

  /** The TPOT bound in nanoseconds, 0 when none. */
  public long tpotNanos() {
    return tpotNanos;
  }

  /** True when there is no bound at all. */
  public boolean isEmpty() {
    return ttftNanos == 0 && tpotNanos == 0;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof LatencySlo s && s.ttftNanos == ttftNanos && s.tpotNanos == tpotNanos;
  }

  @Override
  public int hashCode() {
    return Long.hashCode(ttftNanos) * 31 + Long.hashCode(tpotNanos);
  }

  @Override
  public String toString() {
    if (isEmpty()) {
      return "LatencySlo{none}";
    }
    return String.format(
        Locale.ROOT,
        "LatencySlo{ttft=%s, tpot=%s}",
        ttftNanos == 0 ? "-" : ttftNanos / 1e6 + "ms",
        tpotNanos == 0 ? "-" : tpotNanos / 1e6 + "ms");
  }
}
