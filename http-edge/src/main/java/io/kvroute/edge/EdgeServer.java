package io.kvroute.edge;

import io.kvroute.edge.internal.EdgeSettings;
import io.kvroute.edge.internal.NettyEdge;
import io.kvroute.edge.internal.Routes;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.util.Objects;
import java.util.function.LongSupplier;

/**
 * An HTTP/1.1 server for kvroute's commands: routes to {@link Handler}s, answers whole or streamed
 * with back-pressure, {@link EdgeLimits limits and timeouts} on everything a client controls, TLS,
 * and an optional token-protected admin listener.
 *
 * <pre>{@code
 * EdgeServer server = EdgeServer.builder()
 *     .listen("0.0.0.0", 8080)
 *     .route("GET", "/healthz", ex -> ex.respond(200, "application/json", OK))
 *     .route("POST", "/v1/completions", completions)
 *     .build()
 *     .start();
 * }</pre>
 *
 * <p>What it accepts: HTTP/1.1 and HTTP/1.0, keep-alive and pipelining (answered in order), {@code
 * Content-Length} and chunked bodies, {@code Expect: 100-continue}, {@code HEAD}. What it refuses,
 * each with a status line, a JSON body ({@link ErrorRenderer}) and a counter: malformed request
 * lines and headers, folded headers, bare-LF line ends, a missing {@code Host} on HTTP/1.1, {@code
 * Content-Length} with {@code Transfer-Encoding} or conflicting lengths, transfer codings other
 * than chunked, bad chunk framing, heads or bodies over the limits, slow heads and bodies, and
 * connections beyond the maximum. After a refusal the connection is closed (after a short linger,
 * so that the client can read why).
 *
 * <p>Thread-safe. Handlers run on the event loops and must not block.
 */
public final class EdgeServer implements AutoCloseable {
  /** How the event loops reach the sockets. */
  public enum Transport {
    /** Native epoll where available (Linux), NIO otherwise. */
    AUTO,
    /** Java NIO. */
    NIO,
    /** Native epoll; fails to start where it is not available. */
    EPOLL
  }

  private final NettyEdge edge;

  private EdgeServer(NettyEdge edge) {
    this.edge = edge;
  }

  /** A builder. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Binds the listeners and starts serving.
   *
   * @return this server
   * @throws EdgeBindException if a listener cannot be bound (port in use, unknown host)
   * @throws EdgeConfigException if a TLS file or the admin token cannot be used
   */
  public EdgeServer start() {
    edge.start();
    return this;
  }

  /** The traffic listener's port (useful after binding port 0). */
  public int port() {
    return edge.port();
  }

  /** The admin listener's port, or -1 if there is none. */
  public int adminPort() {
    return edge.adminPort();
  }

  /** The transport in use: {@code epoll} or {@code nio}. */
  public String transport() {
    return edge.transport();
  }

  /** Connections, buffered body bytes and paused connections now. */
  public EdgeStats stats() {
    return edge.stats();
  }

  /**
   * Stops accepting, lets requests in flight finish for up to {@code grace}, then closes.
   *
   * @param grace how long to wait for requests in flight
   */
  public void shutdown(Duration grace) {
    edge.shutdown(grace);
  }

  /** Closes every listener and connection now. */
  @Override
  public void close() {
    edge.close();
  }

  /** Builds an {@link EdgeServer}. */
  public static final class Builder {
    private String host = "127.0.0.1";
    private int port;
    private TlsConfig tls;
    private EdgeLimits limits = EdgeLimits.defaults();
    private final Routes routes = new Routes();
    private AdminConfig admin;
    private final Routes adminRoutes = new Routes();
    private int adminRouteCount;
    private MeterRegistry registry;
    private String metricPrefix = "kvroute.edge";
    private int ioThreads = Runtime.getRuntime().availableProcessors();
    private String threadName = "kvroute-edge";
    private Transport transport = Transport.AUTO;
    private ErrorRenderer errors = ErrorRenderer.OPENAI;
    private LongSupplier nanoClock = System::nanoTime;
    private Duration timeoutTick = Duration.ofMillis(100);
    private Clock wallClock = Clock.systemUTC();

    private Builder() {}

    /**
     * The traffic listener's address; {@code 127.0.0.1} and any free port unless set.
     *
     * @param host a host name or address ({@code 0.0.0.0} for every interface)
     * @param port 0 (any free port) to 65535
     * @return this builder
     */
    public Builder listen(String host, int port) {
      if (port < 0 || port > 65535) {
        throw new EdgeConfigException("listen.port must be between 0 and 65535, was " + port);
      }
      this.host = Objects.requireNonNull(host, "host");
      this.port = port;
      return this;
    }

    /**
     * Serves the traffic listener over TLS.
     *
     * @param tls certificate and key
     * @return this builder
     */
    public Builder tls(TlsConfig tls) {
      this.tls = tls;
      return this;
    }

    /**
     * Limits and timeouts of the traffic listener (the admin listener uses them too, with at most
     * 64 connections and 1 MiB bodies).
     *
     * @param limits the limits
     * @return this builder
     */
    public Builder limits(EdgeLimits limits) {
      this.limits = Objects.requireNonNull(limits, "limits");
      return this;
    }

    /**
     * Adds a route to the traffic listener. Unknown paths are answered 404, known paths with
     * another method 405 (with {@code Allow}); {@code HEAD} falls back to the {@code GET} route.
     *
     * @param method e.g. {@code POST}; {@code *} for any
     * @param path an exact path, or a prefix ending in {@code /*}
     * @param handler the handler
     * @return this builder
     */
    public Builder route(String method, String path, Handler handler) {
      routes.add(method, path, Objects.requireNonNull(handler, "handler"));
      return this;
    }

    /**
     * Adds the admin listener.
     *
     * @param admin address, TLS and token source
     * @return this builder
     */
    public Builder admin(AdminConfig admin) {
      this.admin = admin;
      return this;
    }

    /**
     * Adds a route to the admin listener (served only with the bearer token).
     *
     * @param method e.g. {@code POST}
     * @param path an exact path, or a prefix ending in {@code /*}
     * @param handler the handler
     * @return this builder
     */
    public Builder adminRoute(String method, String path, Handler handler) {
      adminRoutes.add(method, path, Objects.requireNonNull(handler, "handler"));
      adminRouteCount++;
      return this;
    }

    /**
     * Where the meters go ({@code <prefix>_connections}, {@code _refused_total}, …).
     *
     * @param registry a Micrometer registry
     * @return this builder
     */
    public Builder meterRegistry(MeterRegistry registry) {
      this.registry = Objects.requireNonNull(registry, "registry");
      return this;
    }

    /**
     * The meter name prefix; {@code kvroute.edge} unless set (dotted: Prometheus renders {@code
     * kvroute_edge_...}).
     *
     * @param prefix e.g. {@code kvroute.service.http} (dotted; Prometheus renders {@code
     *     kvroute_service_http_...})
     * @return this builder
     */
    public Builder metricPrefix(String prefix) {
      this.metricPrefix = Objects.requireNonNull(prefix, "prefix");
      return this;
    }

    /**
     * Event-loop threads; the number of processors unless set.
     *
     * @param n at least 1
     * @return this builder
     */
    public Builder ioThreads(int n) {
      if (n < 1) {
        throw new EdgeConfigException("ioThreads must be at least 1, was " + n);
      }
      this.ioThreads = n;
      return this;
    }

    /**
     * The event-loop threads' name prefix.
     *
     * @param name e.g. {@code kvroute-gateway}
     * @return this builder
     */
    public Builder threadName(String name) {
      this.threadName = Objects.requireNonNull(name, "name");
      return this;
    }

    /**
     * The transport; {@link Transport#AUTO} unless set.
     *
     * @param transport the transport
     * @return this builder
     */
    public Builder transport(Transport transport) {
      this.transport = Objects.requireNonNull(transport, "transport");
      return this;
    }

    /**
     * How error bodies are written; {@link ErrorRenderer#OPENAI} unless set.
     *
     * @param errors the renderer
     * @return this builder
     */
    public Builder errorRenderer(ErrorRenderer errors) {
      this.errors = Objects.requireNonNull(errors, "errors");
      return this;
    }

    /**
     * The clock of timeouts (nanoseconds, like {@link System#nanoTime()}); tests move it.
     *
     * @param nanoClock the clock
     * @return this builder
     */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /**
     * How often deadlines are checked against the clock; 100 ms unless set.
     *
     * @param tick at least 1 ms
     * @return this builder
     */
    public Builder timeoutTick(Duration tick) {
      this.timeoutTick = Objects.requireNonNull(tick, "tick");
      return this;
    }

    /**
     * The clock of {@code Date} headers.
     *
     * @param clock the clock
     * @return this builder
     */
    public Builder wallClock(Clock clock) {
      this.wallClock = Objects.requireNonNull(clock, "clock");
      return this;
    }

    /**
     * Validates and builds the server (not started).
     *
     * @return the server
     * @throws EdgeConfigException if admin routes are given without an admin listener
     */
    public EdgeServer build() {
      if (admin == null && adminRouteCount > 0) {
        throw new EdgeConfigException(
            "admin routes are defined but no admin listener is configured (admin)");
      }
      return new EdgeServer(
          new NettyEdge(
              new EdgeSettings(
                  host,
                  port,
                  tls,
                  limits,
                  routes.copy(),
                  admin,
                  adminRoutes.copy(),
                  registry == null ? new SimpleMeterRegistry() : registry,
                  metricPrefix,
                  ioThreads,
                  threadName,
                  transport.name().toLowerCase(java.util.Locale.ROOT),
                  errors,
                  nanoClock,
                  timeoutTick,
                  wallClock)));
    }
  }
}
