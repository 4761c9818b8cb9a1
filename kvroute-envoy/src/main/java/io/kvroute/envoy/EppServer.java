package io.kvroute.envoy;

import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.kvroute.envoy.internal.Health;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * A gRPC server (Netty, plaintext HTTP/2) serving an {@link EndpointPicker} and the standard gRPC
 * health service the endpoint-picker protocol asks for: {@code liveness}, {@code readiness} and
 * {@code envoy.service.ext_proc.v3.ExternalProcessor}, ready while the router knows at least one
 * endpoint.
 *
 * <pre>{@code
 * try (EppServer server = EppServer.builder(EndpointPicker.builder(router).build())
 *         .port(9002).build().start()) {
 *   server.awaitTermination();
 * }
 * }</pre>
 *
 * <p>Thread-safe. To serve the picker from a gRPC server you already run (TLS, interceptors), add
 * the {@link EndpointPicker} to it instead.
 */
public final class EppServer implements AutoCloseable {
  private final EndpointPicker picker;
  private final String host;
  private final int port;
  private final Duration shutdownGrace;
  private final BooleanSupplier ready;
  private final Executor executor;
  private volatile Server server;

  private EppServer(Builder b) {
    this.picker = b.picker;
    this.host = b.host;
    this.port = b.port;
    this.shutdownGrace = b.shutdownGrace;
    this.ready = b.ready != null ? b.ready : () -> !b.picker.router().endpoints().isEmpty();
    this.executor = b.executor;
  }

  /** A builder serving {@code picker}. */
  public static Builder builder(EndpointPicker picker) {
    return new Builder(picker);
  }

  /**
   * Binds and starts serving.
   *
   * @return this
   * @throws UncheckedIOException when the port cannot be bound (its cause a {@link BindException})
   * @throws IllegalStateException when already started
   */
  public synchronized EppServer start() {
    if (server != null) {
      throw new IllegalStateException("EppServer already started");
    }
    NettyServerBuilder nb =
        NettyServerBuilder.forAddress(new InetSocketAddress(host, port))
            .addService(picker)
            .addService(new Health(ready));
    if (executor != null) {
      nb.executor(executor);
    }
    Server s = nb.build();
    try {
      s.start();
    } catch (IOException e) {
      BindException be = new BindException("cannot listen on " + host + ":" + port + ": " + e);
      be.initCause(e);
      throw new UncheckedIOException(be);
    }
    server = s;
    return this;
  }

  /** The port bound (useful with port 0). */
  public int port() {
    Server s = server;
    if (s == null) {
      throw new IllegalStateException("EppServer not started");
    }
    return s.getPort();
  }

  /** The picker served. */
  public EndpointPicker picker() {
    return picker;
  }

  /** Blocks until the server has stopped. */
  public void awaitTermination() throws InterruptedException {
    Server s = server;
    if (s != null) {
      s.awaitTermination();
    }
  }

  /**
   * Stops taking streams, lets open ones finish for the grace period, then cancels the rest (their
   * decisions complete as cancelled). Idempotent.
   */
  @Override
  public void close() {
    Server s = server;
    if (s == null) {
      return;
    }
    s.shutdown();
    try {
      if (!s.awaitTermination(shutdownGrace.toMillis(), TimeUnit.MILLISECONDS)) {
        s.shutdownNow();
        s.awaitTermination(5, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      s.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  /** Builds an {@link EppServer}; not thread-safe. */
  public static final class Builder {
    private final EndpointPicker picker;
    private String host = "127.0.0.1";
    private int port = 9002;
    private Duration shutdownGrace = Duration.ofSeconds(10);
    private BooleanSupplier ready;
    private Executor executor;

    private Builder(EndpointPicker picker) {
      this.picker = Objects.requireNonNull(picker, "picker");
    }

    /** The address to bind (default {@code 127.0.0.1}; {@code 0.0.0.0} in a pod). */
    public Builder host(String host) {
      this.host = Objects.requireNonNull(host, "host");
      return this;
    }

    /** The port (default 9002, GIE's; 0 for any free port). */
    public Builder port(int port) {
      if (port < 0 || port > 65535) {
        throw new IllegalArgumentException("port must be in 0..65535, was " + port);
      }
      this.port = port;
      return this;
    }

    /** How long {@link #close()} lets open streams finish (default 10 s). */
    public Builder shutdownGrace(Duration grace) {
      if (grace == null || grace.isNegative()) {
        throw new IllegalArgumentException("shutdownGrace must be >= 0, was " + grace);
      }
      this.shutdownGrace = grace;
      return this;
    }

    /** Readiness (default: the router knows at least one endpoint). */
    public Builder ready(BooleanSupplier ready) {
      this.ready = Objects.requireNonNull(ready, "ready");
      return this;
    }

    /**
     * The executor that runs the picker's stream handlers (default: gRPC's shared cached pool).
     * Handlers never block on I/O themselves, but the router's scheduler runs on this executor up
     * to its first asynchronous step: pass {@code MoreExecutors.directExecutor()}-like {@code
     * Runnable::run} to save a thread hand-off per message only when the scheduler and its prefix
     * index never block (an in-memory index; not a remote one).
     */
    public Builder executor(Executor executor) {
      this.executor = Objects.requireNonNull(executor, "executor");
      return this;
    }

    /** The server, not started. */
    public EppServer build() {
      return new EppServer(this);
    }
  }
}
