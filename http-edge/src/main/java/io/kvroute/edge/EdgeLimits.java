package io.kvroute.edge;

import java.time.Duration;
import java.util.Objects;

/**
 * Limits and timeouts of an {@link EdgeServer}; immutable, built by {@link #builder()} with safe
 * defaults. Every limit that bites answers with a status line, a JSON error body and a counter.
 *
 * <ul>
 *   <li>{@code maxConnections} (16384): open connections on the traffic listener; more are answered
 *       503 and closed.
 *   <li>{@code maxHeaderBytes} (16 KiB): the request line and headers; more is 431.
 *   <li>{@code maxHeaderCount} (100): request headers; more is 431.
 *   <li>{@code maxBodyBytes} (16 MiB): a request body; a larger {@code Content-Length} is answered
 *       413 before any body byte is read, a chunked body is refused with 413 as soon as it grows
 *       past the limit.
 *   <li>{@code maxBufferedBodyBytes} (a quarter of the heap, at most 256 MiB, at least {@code
 *       maxBodyBytes}): request-body bytes buffered by the whole server. A connection that would
 *       buffer more pauses (stops reading) until memory is freed; bodies beyond 64 KiB may use at
 *       most three quarters of it, so that small requests go on being served.
 *   <li>{@code headerTimeout} (10 s): time to receive a request's line and headers, counted from
 *       the connection's start for its first request (a connection that sends nothing is closed
 *       then) and from the first byte for later ones; 408.
 *   <li>{@code bodyTimeout} (30 s): time to receive the body once the headers are in; 408.
 *   <li>{@code idleTimeout} (60 s): how long a keep-alive connection may wait between requests.
 *   <li>{@code writeTimeout} (60 s): how long a response may stall because the client does not
 *       read; the connection is then closed (and a streamed body cancelled).
 * </ul>
 */
public final class EdgeLimits {
  private static final long SMALL_BODY_DEFAULT_BUDGET = 256L << 20;

  /** The most {@code maxConnections} may be: 2^24. */
  public static final int MAX_CONNECTIONS_LIMIT = 1 << 24;

  /** The least {@code maxHeaderBytes} may be: 256 (a request line and a few headers). */
  public static final int MIN_HEADER_BYTES = 256;

  /** The most {@code maxHeaderBytes} may be: 1 MiB. */
  public static final int MAX_HEADER_BYTES_LIMIT = 1 << 20;

  /** The most {@code maxHeaderCount} may be: 10,000. */
  public static final int MAX_HEADER_COUNT_LIMIT = 10_000;

  /** The most {@code maxBodyBytes} may be: 1 GiB. */
  public static final int MAX_BODY_BYTES_LIMIT = 1 << 30;

  private final int maxConnections;
  private final int maxHeaderBytes;
  private final int maxHeaderCount;
  private final int maxBodyBytes;
  private final long maxBufferedBodyBytes;
  private final Duration headerTimeout;
  private final Duration bodyTimeout;
  private final Duration idleTimeout;
  private final Duration writeTimeout;

  private EdgeLimits(Builder b) {
    this.maxConnections = b.maxConnections;
    this.maxHeaderBytes = b.maxHeaderBytes;
    this.maxHeaderCount = b.maxHeaderCount;
    this.maxBodyBytes = b.maxBodyBytes;
    this.maxBufferedBodyBytes =
        b.maxBufferedBodyBytes > 0
            ? b.maxBufferedBodyBytes
            : Math.max(
                b.maxBodyBytes,
                Math.min(SMALL_BODY_DEFAULT_BUDGET, Runtime.getRuntime().maxMemory() / 4));
    this.headerTimeout = b.headerTimeout;
    this.bodyTimeout = b.bodyTimeout;
    this.idleTimeout = b.idleTimeout;
    this.writeTimeout = b.writeTimeout;
  }

  /** The defaults listed in the class comment. */
  public static EdgeLimits defaults() {
    return builder().build();
  }

  /** A builder starting from the defaults. */
  public static Builder builder() {
    return new Builder();
  }

  /** A builder starting from these limits. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.maxConnections = maxConnections;
    b.maxHeaderBytes = maxHeaderBytes;
    b.maxHeaderCount = maxHeaderCount;
    b.maxBodyBytes = maxBodyBytes;
    b.maxBufferedBodyBytes = maxBufferedBodyBytes;
    b.headerTimeout = headerTimeout;
    b.bodyTimeout = bodyTimeout;
    b.idleTimeout = idleTimeout;
    b.writeTimeout = writeTimeout;
    return b;
  }

  /** Open connections allowed on the traffic listener. */
  public int maxConnections() {
    return maxConnections;
  }

  /** Bytes allowed for the request line and headers. */
  public int maxHeaderBytes() {
    return maxHeaderBytes;
  }

  /** Request headers allowed. */
  public int maxHeaderCount() {
    return maxHeaderCount;
  }

  /** Bytes allowed in one request body. */
  public int maxBodyBytes() {
    return maxBodyBytes;
  }

  /** Request-body bytes the whole server may buffer at once. */
  public long maxBufferedBodyBytes() {
    return maxBufferedBodyBytes;
  }

  /** Time allowed to receive a request's line and headers. */
  public Duration headerTimeout() {
    return headerTimeout;
  }

  /** Time allowed to receive a request's body once its headers are in. */
  public Duration bodyTimeout() {
    return bodyTimeout;
  }

  /** Time a keep-alive connection may wait for its next request. */
  public Duration idleTimeout() {
    return idleTimeout;
  }

  /** Time a response may stall because the client does not read. */
  public Duration writeTimeout() {
    return writeTimeout;
  }

  @Override
  public String toString() {
    return "EdgeLimits{maxConnections="
        + maxConnections
        + ", maxHeaderBytes="
        + maxHeaderBytes
        + ", maxHeaderCount="
        + maxHeaderCount
        + ", maxBodyBytes="
        + maxBodyBytes
        + ", maxBufferedBodyBytes="
        + maxBufferedBodyBytes
        + ", headerTimeout="
        + headerTimeout
        + ", bodyTimeout="
        + bodyTimeout
        + ", idleTimeout="
        + idleTimeout
        + ", writeTimeout="
        + writeTimeout
        + "}";
  }

  /** Builds {@link EdgeLimits}; {@link #build()} validates every field. */
  public static final class Builder {
    private int maxConnections = 16384;
    private int maxHeaderBytes = 16 << 10;
    private int maxHeaderCount = 100;
    private int maxBodyBytes = 16 << 20;
    private long maxBufferedBodyBytes;
    private Duration headerTimeout = Duration.ofSeconds(10);
    private Duration bodyTimeout = Duration.ofSeconds(30);
    private Duration idleTimeout = Duration.ofSeconds(60);
    private Duration writeTimeout = Duration.ofSeconds(60);

    private Builder() {}

    /**
     * Open connections allowed on the traffic listener.
     *
     * @param v at least 1
     * @return this builder
     */
    public Builder maxConnections(int v) {
      this.maxConnections = v;
      return this;
    }

    /**
     * Bytes allowed for the request line and headers.
     *
     * @param v 256 to 1 MiB
     * @return this builder
     */
    public Builder maxHeaderBytes(int v) {
      this.maxHeaderBytes = v;
      return this;
    }

    /**
     * Request headers allowed.
     *
     * @param v 1 to 10000
     * @return this builder
     */
    public Builder maxHeaderCount(int v) {
      this.maxHeaderCount = v;
      return this;
    }

    /**
     * Bytes allowed in one request body.
     *
     * @param v 0 to 1 GiB
     * @return this builder
     */
    public Builder maxBodyBytes(int v) {
      this.maxBodyBytes = v;
      return this;
    }

    /**
     * Request-body bytes the whole server may buffer at once; 0 for the default.
     *
     * @param v 0, or at least {@code maxBodyBytes}
     * @return this builder
     */
    public Builder maxBufferedBodyBytes(long v) {
      this.maxBufferedBodyBytes = v;
      return this;
    }

    /**
     * Time allowed to receive a request's line and headers.
     *
     * @param v positive
     * @return this builder
     */
    public Builder headerTimeout(Duration v) {
      this.headerTimeout = v;
      return this;
    }

    /**
     * Time allowed to receive a request body once the headers are in.
     *
     * @param v positive
     * @return this builder
     */
    public Builder bodyTimeout(Duration v) {
      this.bodyTimeout = v;
      return this;
    }

    /**
     * Time a keep-alive connection may wait for its next request.
     *
     * @param v positive
     * @return this builder
     */
    public Builder idleTimeout(Duration v) {
      this.idleTimeout = v;
      return this;
    }

    /**
     * Time a response may stall because the client does not read.
     *
     * @param v positive
     * @return this builder
     */
    public Builder writeTimeout(Duration v) {
      this.writeTimeout = v;
      return this;
    }

    /**
     * Validates and builds.
     *
     * @return the limits
     * @throws EdgeConfigException naming the first field out of range
     */
    public EdgeLimits build() {
      range("maxConnections", maxConnections, 1, MAX_CONNECTIONS_LIMIT);
      range("maxHeaderBytes", maxHeaderBytes, MIN_HEADER_BYTES, MAX_HEADER_BYTES_LIMIT);
      range("maxHeaderCount", maxHeaderCount, 1, MAX_HEADER_COUNT_LIMIT);
      range("maxBodyBytes", maxBodyBytes, 0, MAX_BODY_BYTES_LIMIT);
      if (maxBufferedBodyBytes != 0 && maxBufferedBodyBytes < maxBodyBytes) {
        throw new EdgeConfigException(
            "maxBufferedBodyBytes must be 0 (default) or at least maxBodyBytes ("
                + maxBodyBytes
                + "), was "
                + maxBufferedBodyBytes);
      }
      positive("headerTimeout", headerTimeout);
      positive("bodyTimeout", bodyTimeout);
      positive("idleTimeout", idleTimeout);
      positive("writeTimeout", writeTimeout);
      return new EdgeLimits(this);
    }

    private static void range(String name, long v, long min, long max) {
      if (v < min || v > max) {
        throw new EdgeConfigException(
            name + " must be between " + min + " and " + max + ", was " + v);
      }
    }

    private static void positive(String name, Duration d) {
      Objects.requireNonNull(d, name);
      if (d.isNegative() || d.isZero()) {
        throw new EdgeConfigException(name + " must be positive, was " + d);
      }
    }
  }
}
