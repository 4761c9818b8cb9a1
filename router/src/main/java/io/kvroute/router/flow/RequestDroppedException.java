package io.kvroute.router.flow;

import io.kvroute.connector.ConnectorException;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;

/**
 * Flow control refused a request, or dropped it while it waited: every front answers 429 with
 * {@code Retry-After} and {@code x-kvroute-dropped-reason: }{@link Reason#header()} ({@link
 * io.kvroute.router.FailureAnswer}). No stack trace is filled in: it is an expected outcome under
 * overload, not a fault.
 */
public final class RequestDroppedException extends ConnectorException {
  private static final long serialVersionUID = 1L;

  /** The response header naming why a request was dropped. */
  public static final String HEADER = "x-kvroute-dropped-reason";

  /** Why a request was dropped. */
  public enum Reason {
    /** Its band (or the whole queue) was full when it arrived. */
    QUEUE_FULL("queue-full"),
    /** It waited longer than its band's TTL. */
    TTL_EXPIRED("ttl-expired"),
    /** It waited in a lower band and was evicted to make room for a higher band's request. */
    SHED_LOWER_PRIORITY("shed-lower-priority"),
    /**
     * It has a TTFT objective that no endpoint is predicted to meet any more, even idle, in the
     * time it has left.
     */
    SLO_UNATTAINABLE("slo-unattainable");

    private final String header;

    Reason(String header) {
      this.header = header;
    }

    /** The value of {@link RequestDroppedException#HEADER}, e.g. {@code queue-full}. */
    public String header() {
      return header;
    }
  }

  private final Reason reason;
  private final transient Duration retryAfter;

  /**
   * A drop.
   *
   * @param reason why
   * @param message what happened, for the answer's body
   * @param retryAfter when the client may try again
   */
  public RequestDroppedException(Reason reason, String message, Duration retryAfter) {
    super(message, 429, null);
    this.reason = Objects.requireNonNull(reason, "reason");
    this.retryAfter = Objects.requireNonNull(retryAfter, "retryAfter");
  }

  /** Why the request was dropped. */
  public Reason reason() {
    return reason;
  }

  @Override
  public Optional<Duration> retryAfter() {
    return Optional.of(retryAfter);
  }

  @Override
  public boolean retryable() {
    return false;
  }

  @Override
  public synchronized Throwable fillInStackTrace() {
    return this;
  }
}
