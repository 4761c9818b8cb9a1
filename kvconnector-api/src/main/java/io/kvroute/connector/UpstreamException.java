package io.kvroute.connector;

import java.time.Duration;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;

/**
 * A prefill or decode leg failed: the upstream answered with an error status, timed out, or the
 * connection failed or closed early.
 *
 * <p>{@link #retryable()} follows the gateway rules: transport errors, timeouts, 5xx and 429 may be
 * retried on another pair; any other 4xx is the client's error and is returned as is.
 */
public final class UpstreamException extends ConnectorException {
  private static final long serialVersionUID = 1L;

  /** What failed. */
  public enum Kind {
    /** The upstream answered with a non-2xx status. */
    STATUS,
    /** No answer within the leg's timeout. */
    TIMEOUT,
    /** Connection refused, reset, DNS, TLS, or the body ended early. */
    IO,
    /** The upstream's answer was not what the protocol requires (e.g. prefill body not JSON). */
    PROTOCOL,
    /** The caller cancelled the request. */
    CANCELLED
  }

  private final Leg leg;
  private final String endpointId;
  private final Kind kind;
  private final int upstreamStatus;
  private final transient Duration retryAfter;
  private final String upstreamBody;

  /**
   * A failure of one leg.
   *
   * @param upstreamStatus the upstream's HTTP status for {@link Kind#STATUS}, else 0
   * @param retryAfter the upstream's {@code Retry-After}, or null
   * @param upstreamBody a short prefix of the upstream error body (for 4xx passthrough), or null
   */
  public UpstreamException(
      Leg leg,
      String endpointId,
      Kind kind,
      int upstreamStatus,
      Duration retryAfter,
      String upstreamBody,
      String message,
      Throwable cause) {
    super(message, gatewayStatus(kind, upstreamStatus), cause);
    this.leg = Objects.requireNonNull(leg, "leg");
    this.endpointId = Objects.requireNonNull(endpointId, "endpointId");
    this.kind = Objects.requireNonNull(kind, "kind");
    this.upstreamStatus = upstreamStatus;
    this.retryAfter = retryAfter;
    this.upstreamBody = upstreamBody;
  }

  /**
   * A {@link Kind#PROTOCOL} failure: the upstream answered, but not as the protocol requires (no
   * status, body or {@code Retry-After} to carry).
   */
  public static UpstreamException protocol(
      Leg leg, String endpointId, String message, Throwable cause) {
    return new UpstreamException(leg, endpointId, Kind.PROTOCOL, 0, null, null, message, cause);
  }

  /**
   * A failure of a transport sending {@code out} that got no answer ({@link Kind#TIMEOUT}, {@link
   * Kind#IO}, {@link Kind#CANCELLED}, or a {@link Kind#PROTOCOL} error reading the answer), with
   * the message every transport uses: {@code "<leg> request to <url> <what>"}.
   */
  public static UpstreamException transport(
      HttpTransport.Outbound out, Kind kind, String what, Throwable cause) {
    return new UpstreamException(
        out.leg(),
        out.endpoint().id(),
        kind,
        0,
        null,
        null,
        out.leg().name().toLowerCase(Locale.ROOT) + " request to " + out.url() + " " + what,
        cause);
  }

  private static int gatewayStatus(Kind kind, int upstreamStatus) {
    switch (kind) {
      case STATUS:
        if (upstreamStatus >= 400 && upstreamStatus < 500) {
          return upstreamStatus;
        }
        return upstreamStatus == 503 ? 503 : 502;
      case TIMEOUT:
        return 504;
      case CANCELLED:
        return 499;
      default:
        return 502;
    }
  }

  /** Which leg failed. */
  public Leg leg() {
    return leg;
  }

  /** The endpoint that failed. */
  public String endpointId() {
    return endpointId;
  }

  /** The failure kind. */
  public Kind kind() {
    return kind;
  }

  /** The upstream's HTTP status, or 0 when it gave none. */
  public int upstreamStatus() {
    return upstreamStatus;
  }

  /** A prefix of the upstream's error body, when it sent one. */
  public Optional<String> upstreamBody() {
    return Optional.ofNullable(upstreamBody);
  }

  @Override
  public Optional<Duration> retryAfter() {
    return Optional.ofNullable(retryAfter);
  }

  /** True when the failure says the endpoint is unhealthy (counts against its circuit breaker). */
  public boolean endpointFault() {
    switch (kind) {
      case STATUS:
        return upstreamStatus >= 500;
      case TIMEOUT:
      case IO:
      case PROTOCOL:
        return true;
      default:
        return false;
    }
  }

  /** Every endpoint fault, and also a 429 or 408 (the endpoint is busy, not broken). */
  @Override
  public boolean retryable() {
    return endpointFault()
        || (kind == Kind.STATUS && (upstreamStatus == 429 || upstreamStatus == 408));
  }
}
