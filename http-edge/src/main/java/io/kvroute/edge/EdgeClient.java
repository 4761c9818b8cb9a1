package io.kvroute.edge;

import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.edge.internal.NettyClient;
import java.security.KeyStore;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * The {@link HttpTransport} on Netty event loops: what {@code kvroute gateway} and {@code kvroute
 * proxy} use for their upstream legs, so a request costs no thread hand-off between the client's
 * connection and the engine's.
 *
 * <p>A call made on a Netty event-loop thread — an {@link EdgeServer} handler, or a callback of an
 * earlier leg — runs its upstream connection on that same loop: the response head, every body chunk
 * and the client's write happen on one thread, with no queue between them. A call made on any other
 * thread runs on this client's own event loops (started on first use). Connections are pooled per
 * loop and per upstream ({@code http} or {@code https}), HTTP/1.1 keep-alive, read only as fast as
 * the body's subscriber asks (back-pressure down to the socket). The timeout of an {@link
 * HttpTransport.Outbound} bounds the whole call when it is not streaming, and the response head and
 * each gap between body chunks when it is (a subscriber that asks for nothing pauses the clock).
 *
 * <p>A connection taken from the pool that turns out closed before the request could be written is
 * replaced once by a new connection; nothing is retried once the request may have reached the
 * upstream.
 *
 * <p>Thread-safe; share one per process. Futures complete, and body chunks are delivered, on the
 * connection's event loop: callers must not block there.
 */
public final class EdgeClient implements HttpTransport {
  private final NettyClient client;

  private EdgeClient(NettyClient client) {
    this.client = client;
  }

  /**
   * A client with default settings.
   *
   * @return the client
   */
  public static EdgeClient create() {
    return builder().build();
  }

  /**
   * A builder.
   *
   * @return a builder with the defaults
   */
  public static Builder builder() {
    return new Builder();
  }

  @Override
  public CompletableFuture<StreamingResponse> send(Outbound request) {
    return client.send(Objects.requireNonNull(request, "request"));
  }

  /**
   * Responses whose body is still open (not fully read, failed or cancelled). It returns to zero
   * when every caller has finished; a number that only grows means leaked streams.
   *
   * @return the count
   */
  public int openResponses() {
    return client.openResponses();
  }

  /**
   * Idle pooled connections, over every loop and upstream.
   *
   * @return the count
   */
  public int idleConnections() {
    return client.idleConnections();
  }

  /** Closes pooled connections, fails calls in flight and stops this client's own event loops. */
  @Override
  public void close() {
    client.close();
  }

  /** Builds an {@link EdgeClient}; not thread-safe. */
  public static final class Builder {
    private Duration connectTimeout = Duration.ofSeconds(5);
    private int maxIdlePerUpstream = 64;
    private Duration keepAlive = Duration.ofMinutes(5);
    private int maxResponseHeaderBytes = 64 << 10;
    private int ioThreads = 1;
    private KeyStore trustStore;
    private boolean insecure;
    private EdgeServer.Transport transport = EdgeServer.Transport.AUTO;
    private io.micrometer.core.instrument.MeterRegistry registry;

    private Builder() {}

    /**
     * Where to register the client's gauges: {@code kvroute.upstream.connections.idle} and {@code
     * kvroute.upstream.responses.open} (default: none).
     *
     * @param registry the registry
     * @return this builder
     */
    public Builder meterRegistry(io.micrometer.core.instrument.MeterRegistry registry) {
      this.registry = Objects.requireNonNull(registry, "registry");
      return this;
    }

    /**
     * TCP (and TLS) connect timeout (default 5 s).
     *
     * @param timeout a positive duration
     * @return this builder
     */
    public Builder connectTimeout(Duration timeout) {
      this.connectTimeout = positive(timeout, "connectTimeout");
      return this;
    }

    /**
     * Idle connections kept per event loop and upstream (default 64), and how long an idle one is
     * kept (default 5 min; upstreams usually close sooner, which the pool notices).
     *
     * @param maxIdle at least 0
     * @param keepAlive a positive duration
     * @return this builder
     */
    public Builder connectionPool(int maxIdle, Duration keepAlive) {
      if (maxIdle < 0) {
        throw new IllegalArgumentException("maxIdle must be >= 0, was " + maxIdle);
      }
      this.maxIdlePerUpstream = maxIdle;
      this.keepAlive = positive(keepAlive, "keepAlive");
      return this;
    }

    /**
     * The largest response head accepted (default 64 KiB); a larger one fails the call.
     *
     * @param bytes at least 1,024
     * @return this builder
     */
    public Builder maxResponseHeaderBytes(int bytes) {
      if (bytes < 1024) {
        throw new IllegalArgumentException("maxResponseHeaderBytes must be >= 1024, was " + bytes);
      }
      this.maxResponseHeaderBytes = bytes;
      return this;
    }

    /**
     * Threads of this client's own event loops, which serve calls made off any event loop (default
     * 1: health probes, scrapes and tokenizer calls are light).
     *
     * @param n at least 1
     * @return this builder
     */
    public Builder ioThreads(int n) {
      if (n < 1) {
        throw new IllegalArgumentException("ioThreads must be >= 1, was " + n);
      }
      this.ioThreads = n;
      return this;
    }

    /**
     * How this client's own event loops reach the sockets (default {@link
     * EdgeServer.Transport#AUTO}).
     *
     * @param transport the transport
     * @return this builder
     */
    public Builder transport(EdgeServer.Transport transport) {
      this.transport = Objects.requireNonNull(transport, "transport");
      return this;
    }

    /**
     * Trusts the certificates in {@code trustStore} for {@code https} upstreams (default: the JDK's
     * trusted certificates).
     *
     * @param trustStore the trusted certificates
     * @return this builder
     */
    public Builder trustStore(KeyStore trustStore) {
      this.trustStore = Objects.requireNonNull(trustStore, "trustStore");
      return this;
    }

    /**
     * Skips certificate and host name verification. For tests against self-signed servers only:
     * never in production.
     *
     * @return this builder
     */
    public Builder insecureSkipVerifyForTestsOnly() {
      this.insecure = true;
      return this;
    }

    /**
     * The client.
     *
     * @return a new client (its own event loops start on first use)
     */
    public EdgeClient build() {
      EdgeClient c =
          new EdgeClient(
              new NettyClient(
                  new NettyClient.Settings(
                      connectTimeout,
                      maxIdlePerUpstream,
                      keepAlive,
                      maxResponseHeaderBytes,
                      ioThreads,
                      transport.name().toLowerCase(java.util.Locale.ROOT),
                      trustStore,
                      insecure)));
      if (registry != null) {
        io.micrometer.core.instrument.Gauge.builder(
                "kvroute.upstream.connections.idle", c, EdgeClient::idleConnections)
            .description("Idle pooled upstream connections")
            .register(registry);
        io.micrometer.core.instrument.Gauge.builder(
                "kvroute.upstream.responses.open", c, EdgeClient::openResponses)
            .description("Upstream responses whose body is still open")
            .register(registry);
      }
      return c;
    }

    private static Duration positive(Duration d, String name) {
      Objects.requireNonNull(d, name);
      if (d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(name + " must be > 0, was " + d);
      }
      return d;
    }
  }
}
