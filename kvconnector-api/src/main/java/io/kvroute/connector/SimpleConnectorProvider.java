package io.kvroute.connector;

import java.util.Objects;
import java.util.function.Function;

/**
 * A {@link KVConnectorProvider} made of a type, a description and a constructor. {@link
 * java.util.ServiceLoader} needs a public no-argument constructor, so subclass it:
 *
 * <pre>{@code
 * public static final class Provider extends SimpleConnectorProvider {
 *   public Provider() {
 *     super("my-kv", "my KV-transfer protocol", MyConnector::new);
 *   }
 * }
 * }</pre>
 *
 * <p>Thread-safe when the constructor function is.
 */
public abstract class SimpleConnectorProvider implements KVConnectorProvider {
  private final String type;
  private final String description;
  private final Function<Context, ? extends KVConnector> factory;

  /**
   * A provider of {@code type} connectors built by {@code factory}.
   *
   * @param type the lower-case type name configurations refer to
   * @param description one line for help texts and error messages
   * @param factory builds a connector in a context (may throw {@link ConnectorConfigException})
   */
  protected SimpleConnectorProvider(
      String type, String description, Function<Context, ? extends KVConnector> factory) {
    this.type = Objects.requireNonNull(type, "type");
    this.description = Objects.requireNonNull(description, "description");
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
  public final KVConnector create(Context context) {
    return factory.apply(Objects.requireNonNull(context, "context"));
  }
}
