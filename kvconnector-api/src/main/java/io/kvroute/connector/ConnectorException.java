package io.kvroute.connector;

import java.time.Duration;
import java.util.Optional;

/**
 * Base type of every error kvroute's connectors raise. Unchecked; each subclass says what went
 * wrong and what to do, and carries the HTTP status a gateway should answer with.
 */
public class ConnectorException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int httpStatus;

  /** An error a gateway should answer with {@code httpStatus}. */
  public ConnectorException(String message, int httpStatus, Throwable cause) {
    super(message, cause);
    this.httpStatus = httpStatus;
  }

  /** The status code a gateway should return to its client (e.g. 400, 403, 502, 503, 504). */
  public int httpStatus() {
    return httpStatus;
  }

  /** True when the same request may succeed on another prefill/decode pair. */
  public boolean retryable() {
    return false;
  }

  /** How long the upstream asked us to wait before retrying, if it said. */
  public Optional<Duration> retryAfter() {
    return Optional.empty();
  }

  /** The client's request is unusable: invalid JSON, not an object, too large, bad fields. */
  public static final class InvalidRequestException extends ConnectorException {
    private static final long serialVersionUID = 1L;

    /** Status 400 (or 413 for size) with a message naming the problem. */
    public InvalidRequestException(String message, int httpStatus) {
      super(message, httpStatus, null);
    }

    /** Status 400. */
    public InvalidRequestException(String message) {
      this(message, 400);
    }
  }

  /** A prefill target was rejected by the SSRF allowlist. Answer 403. */
  public static final class ForbiddenTargetException extends ConnectorException {
    private static final long serialVersionUID = 1L;

    /** Status 403. */
    public ForbiddenTargetException(String message) {
      super(message, 403, null);
    }
  }

  /** No connector is registered under a type. */
  public static final class UnknownConnectorException extends ConnectorException {
    private static final long serialVersionUID = 1L;

    /** Status 500 (it is a configuration error of the gateway). */
    public UnknownConnectorException(String message) {
      super(message, 500, null);
    }
  }

  /**
   * No endpoint can take the request now: none serves it, every one is ejected, or (when {@link
   * #saturated()}) endpoints serve it but the scheduler's filters refused them all. Answer 503, or
   * 429 when saturated.
   */
  public static final class NoAvailableEndpointException extends ConnectorException {
    private static final long serialVersionUID = 1L;

    private final boolean saturated;

    /** Status 503: no endpoint serves the request, or every one is ejected. */
    public NoAvailableEndpointException(String message) {
      this(message, false);
    }

    /**
     * Status 429 when {@code saturated} (endpoints serve the request but the scheduler's filters
     * refused them all, for example because every one is over its queue limit), else 503.
     */
    public NoAvailableEndpointException(String message, boolean saturated) {
      super(message, saturated ? 429 : 503, null);
      this.saturated = saturated;
    }

    /** True when endpoints serve the request but the scheduler refused them all for now. */
    public boolean saturated() {
      return saturated;
    }

    @Override
    public boolean retryable() {
      return true;
    }
  }
}
