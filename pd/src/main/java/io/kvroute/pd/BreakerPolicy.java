package io.kvroute.pd;

import java.time.Duration;
import java.util.Objects;

/**
 * How an endpoint's circuit breaker judges it: the failure rate over a window of recent calls that
 * opens the breaker, how long it stays open, and how many trial calls it lets through when half
 * open. The breaker itself is internal to {@link PdOrchestrator}; this value is its whole
 * configuration, so the implementation can change without breaking callers.
 *
 * <p>Immutable and thread-safe. Built by {@link #builder()}, which validates at {@link
 * Builder#build()} with a message naming the field.
 */
public final class BreakerPolicy {
  private static final BreakerPolicy DEFAULTS = builder().build();

  private final int failureRatePercent;
  private final int windowSize;
  private final int minimumCalls;
  private final Duration openFor;
  private final int halfOpenCalls;

  private BreakerPolicy(Builder b) {
    this.failureRatePercent = b.failureRatePercent;
    this.windowSize = b.windowSize;
    this.minimumCalls = b.minimumCalls;
    this.openFor = b.openFor;
    this.halfOpenCalls = b.halfOpenCalls;
  }

  /**
   * The default: opens at 50% failures over the last 20 calls (once 10 were seen), stays open 10 s,
   * then lets 3 trial calls through.
   */
  public static BreakerPolicy defaults() {
    return DEFAULTS;
  }

  /** A builder starting from the defaults. */
  public static Builder builder() {
    return new Builder();
  }

  /** The failure rate, in percent of the window, at which the breaker opens. */
  public int failureRatePercent() {
    return failureRatePercent;
  }

  /** How many recent calls the failure rate is computed over. */
  public int windowSize() {
    return windowSize;
  }

  /** Calls needed in the window before the rate is judged at all. */
  public int minimumCalls() {
    return minimumCalls;
  }

  /** How long an open breaker stays open before it lets trial calls through. */
  public Duration openFor() {
    return openFor;
  }

  /** Trial calls let through while half open. */
  public int halfOpenCalls() {
    return halfOpenCalls;
  }

  @Override
  public String toString() {
    return "BreakerPolicy{failureRatePercent="
        + failureRatePercent
        + ", windowSize="
        + windowSize
        + ", minimumCalls="
        + minimumCalls
        + ", openFor="
        + openFor
        + ", halfOpenCalls="
        + halfOpenCalls
        + "}";
  }

  /** Builds a {@link BreakerPolicy}; not thread-safe. */
  public static final class Builder {
    private int failureRatePercent = 50;
    private int windowSize = 20;
    private int minimumCalls = 10;
    private Duration openFor = Duration.ofSeconds(10);
    private int halfOpenCalls = 3;

    private Builder() {}

    /** The failure rate in percent (1..100) that opens the breaker (default 50). */
    public Builder failureRatePercent(int percent) {
      this.failureRatePercent = percent;
      return this;
    }

    /** The window of recent calls (default 20). */
    public Builder windowSize(int calls) {
      this.windowSize = calls;
      return this;
    }

    /** Calls needed before the rate is judged (default 10). */
    public Builder minimumCalls(int calls) {
      this.minimumCalls = calls;
      return this;
    }

    /** How long the breaker stays open (default 10 s). */
    public Builder openFor(Duration duration) {
      this.openFor = Objects.requireNonNull(duration, "openFor");
      return this;
    }

    /** Trial calls while half open (default 3). */
    public Builder halfOpenCalls(int calls) {
      this.halfOpenCalls = calls;
      return this;
    }

    /**
     * The policy.
     *
     * @throws IllegalArgumentException naming the field that is out of range
     */
    public BreakerPolicy build() {
      if (failureRatePercent < 1 || failureRatePercent > 100) {
        throw new IllegalArgumentException(
            "breaker.failureRatePercent must be in 1..100, was " + failureRatePercent);
      }
      if (windowSize < 1) {
        throw new IllegalArgumentException("breaker.windowSize must be >= 1, was " + windowSize);
      }
      if (minimumCalls < 1) {
        throw new IllegalArgumentException(
            "breaker.minimumCalls must be >= 1, was " + minimumCalls);
      }
      if (openFor.isNegative() || openFor.isZero()) {
        throw new IllegalArgumentException("breaker.openFor must be > 0, was " + openFor);
      }
      if (halfOpenCalls < 1) {
        throw new IllegalArgumentException(
            "breaker.halfOpenCalls must be >= 1, was " + halfOpenCalls);
      }
      return new BreakerPolicy(this);
    }
  }
}
