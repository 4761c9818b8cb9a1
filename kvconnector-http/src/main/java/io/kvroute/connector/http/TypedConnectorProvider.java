package io.kvroute.connector.http;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import java.util.Objects;
import java.util.Optional;
import java.util.function.BiFunction;

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
public abstract class TypedConnectorProvider<P extends Record> implements KVConnectorProvider {
  private final String type;
  private final String description;
  private final Class<P> parameters;
  private final BiFunction<Context, P, ? extends KVConnector> factory;

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
    this.type = Objects.requireNonNull(type, "type");
    this.description = Objects.requireNonNull(description, "description");
    this.parameters = Objects.requireNonNull(parameters, "parameters");
    this.factory = Objects.requireNonNull(factory, "factory");
  }

  @Override
  public final String type() {
    return type;
  }

  @Override
  public final String description() {
    return description;
  }

  @Override
  public final Optional<Class<? extends Record>> parameters() {
    return Optional.of(parameters);
  }

  @Override
  public void checkParameters(ConnectorConfig config) {
    ConnectorParameters.bind(config, parameters);
  }

  @Override
  public KVConnector create(Context context) {
    Objects.requireNonNull(context, "context");
    return factory.apply(context, ConnectorParameters.bind(context.config(), parameters));
  }
}
