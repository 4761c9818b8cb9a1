package io.kvroute.connector;

import java.time.Duration;
import java.util.Objects;
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
   * Creates a connector.
   *
   * @throws ConnectorConfigException if {@code context.config().params()} is invalid for this type
   */
  KVConnector create(Context context);

  /**
   * Everything a connector needs from its host.
   *
   * @param config the connector's configuration
   * @param transport the shared HTTP transport
   * @param listener the observability listener
   * @param scheduler for timeouts and background work (not for blocking I/O)
   * @param nanoClock monotonic time source
   */
  record Context(
      ConnectorConfig config,
      HttpTransport transport,
      ConnectorListener listener,
      ScheduledExecutorService scheduler,
      LongSupplier nanoClock) {
    /** Validates. */
    public Context {
      Objects.requireNonNull(config, "config");
      Objects.requireNonNull(transport, "transport");
      Objects.requireNonNull(listener, "listener");
      Objects.requireNonNull(scheduler, "scheduler");
      Objects.requireNonNull(nanoClock, "nanoClock");
    }

    /** The prefill timeout from the config. */
    public Duration prefillTimeout() {
      return config.timeouts().prefill();
    }

    /** The decode timeout from the config. */
    public Duration decodeTimeout() {
      return config.timeouts().decode();
    }
  }
}
