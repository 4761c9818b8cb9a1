package io.kvroute.connector.http;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.SimpleConnectorProvider;
import java.util.Objects;
import java.util.Optional;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * A {@link KVConnectorProvider} whose connectors take their parameters as a record: {@link
 * #checkParameters} and {@link #create} bind the {@code config:} block onto it with {@link
 * ConnectorParameters#bind} (unknown keys refused with the closest known one), and the connector is
 * built from the bound record. {@link java.util.ServiceLoader} needs a public no-argument
 * constructor, so subclass it:
 *
 * <pre>{@code
 * public static final class Provider extends TypedConnectorProvider<MyConnector.Parameters> {
 *   public Provider() {
 *     super("my-kv", "my KV-transfer protocol", Parameters.class, MyConnector::new);
 *   }
 * }
 * }</pre>
 *
 * <p>Thread-safe when the constructor function is.
 *
 * @param <P> the parameter record
 */
public abstract class TypedConnectorProvider<P extends Record> extends SimpleConnectorProvider {
  private final Class<P> parameters;

  /**
   * A provider of {@code type} connectors built by {@code factory}.
   *
   * @param type the lower-case type name configurations refer to
   * @param description one line for help texts and error messages
   * @param parameters the record the {@code config:} block binds to
   * @param factory builds a connector from its context and its bound parameters
   */
  protected TypedConnectorProvider(
      String type,
      String description,
      Class<P> parameters,
      BiFunction<Context, P, ? extends KVConnector> factory) {
    super(type, description, bound(parameters, factory));
    this.parameters = parameters;
  }

  private static <P extends Record> Function<Context, KVConnector> bound(
      Class<P> parameters, BiFunction<Context, P, ? extends KVConnector> factory) {
    Objects.requireNonNull(parameters, "parameters");
    Objects.requireNonNull(factory, "factory");
    return context ->
        factory.apply(context, ConnectorParameters.bind(context.config(), parameters));
  }

  @Override
  public final Optional<Class<? extends Record>> parameters() {
    return Optional.of(parameters);
  }

  @Override
  public void checkParameters(ConnectorConfig config) {
    ConnectorParameters.bind(config, parameters);
  }
}
