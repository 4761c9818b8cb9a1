package io.kvroute.connector;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ScheduledExecutorService;
import java.util.function.LongSupplier;

/**
 * Creates {@link KVConnector}s of one type. Implementations are found with {@link
 * java.util.ServiceLoader} through a {@code
 * META-INF/services/io.kvroute.connector.KVConnectorProvider} entry, or registered explicitly with
 * {@link KVConnectors.Builder#register}.
 *
 * <p>Providers must have a public no-argument constructor and be thread-safe.
 */
public interface KVConnectorProvider {

  /** The type name, lower case, e.g. {@code nixl}. Must be stable: configurations refer to it. */
  String type();

  /** A one-line description for {@code kvroute proxy --help} and error messages. */
  default String description() {
    return type();
  }

  /**
   * The record the {@code config:} block of this connector's configuration binds to: one component
   * per parameter, named as the key ({@code remoteHostRewrite}), boxed and {@code null} when the
   * key is absent, defaults and checks in the compact constructor. Hosts use it to document the
   * parameters and to read command-line {@code KEY=VALUE} parameters as the right types; {@link
   * #checkParameters} and {@link #create} bind it. Empty (the default) when the provider does not
   * declare its parameters: its {@code config:} block is then passed as written, unchecked.
   */
  default Optional<Class<? extends Record>> parameters() {
    return Optional.empty();
  }

  /**
   * Checks the {@code config:} block ({@code config.params()}) as {@link #create} would, without
   * creating a connector, so that a host can refuse a configuration when it loads it rather than
   * when the first connector is built: an unknown key (with the closest known one), a value of the
   * wrong type, a value out of range. The default checks nothing (a provider that declares no
   * {@link #parameters()}).
   *
   * @throws ConnectorConfigException naming the parameter ({@code kvConnector.config.<key>})
   */
  default void checkParameters(ConnectorConfig config) {}

  /**
   * Creates a connector.
   *
   * @throws ConnectorConfigException if {@code context.config().params()} is invalid for this type
   */
  KVConnector create(Context context);

  /**
   * Everything a connector needs from its host. Immutable; built with {@link #builder}.
   *
   * <pre>{@code
   * Context ctx = Context.builder(config, transport, scheduler).listener(listener).build();
   * }</pre>
   */
  final class Context {
    private final ConnectorConfig config;
    private final HttpTransport transport;
    private final ConnectorListener listener;
    private final ScheduledExecutorService scheduler;
    private final LongSupplier nanoClock;

    private Context(Builder b) {
      this.config = b.config;
      this.transport = b.transport;
      this.listener = b.listener;
      this.scheduler = b.scheduler;
      this.nanoClock = b.nanoClock;
    }

    /**
     * A builder.
     *
     * @param config the connector's configuration
     * @param transport the shared HTTP transport
     * @param scheduler for timeouts and background work (not for blocking I/O)
     */
    public static Builder builder(
        ConnectorConfig config, HttpTransport transport, ScheduledExecutorService scheduler) {
      return new Builder(config, transport, scheduler);
    }

    /** The connector's configuration. */
    public ConnectorConfig config() {
      return config;
    }

    /** The shared HTTP transport. */
    public HttpTransport transport() {
      return transport;
    }

    /** The observability listener. */
    public ConnectorListener listener() {
      return listener;
    }

    /** For timeouts and background work (not for blocking I/O). */
    public ScheduledExecutorService scheduler() {
      return scheduler;
    }

    /** The monotonic time source. */
    public LongSupplier nanoClock() {
      return nanoClock;
    }

    /** The prefill timeout from the config. */
    public Duration prefillTimeout() {
      return config.timeouts().prefill();
    }

    /** The decode timeout from the config. */
    public Duration decodeTimeout() {
      return config.timeouts().decode();
    }

    /** Builds a {@link Context}; not thread-safe. */
    public static final class Builder {
      private final ConnectorConfig config;
      private final HttpTransport transport;
      private final ScheduledExecutorService scheduler;
      private ConnectorListener listener = ConnectorListener.NONE;
      private LongSupplier nanoClock = System::nanoTime;

      private Builder(
          ConnectorConfig config, HttpTransport transport, ScheduledExecutorService scheduler) {
        this.config = Objects.requireNonNull(config, "config");
        this.transport = Objects.requireNonNull(transport, "transport");
        this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
      }

      /** The listener (default {@link ConnectorListener#NONE}). */
      public Builder listener(ConnectorListener listener) {
        this.listener = Objects.requireNonNull(listener, "listener");
        return this;
      }

      /** The monotonic clock (default {@link System#nanoTime()}). */
      public Builder nanoClock(LongSupplier nanoClock) {
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
        return this;
      }

      /** The context. */
      public Context build() {
        return new Context(this);
      }
    }
  }
}
