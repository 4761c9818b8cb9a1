package io.kvroute.connector.http;

import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import io.kvroute.config.Durations;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorConfigException;
import java.lang.reflect.RecordComponent;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Binds a connector's {@code config:} block onto the record that declares its parameters, with
 * kvroute's one configuration binder ({@link ConfigBinder}): an unknown key is refused with the
 * closest known one, a value of the wrong type or out of range names the key.
 *
 * <pre>{@code
 * public record Parameters(Integer bootstrapPort, Integer maxRequestBytes, Integer maxPrefillResponseBytes) {
 *   public Parameters {
 *     bootstrapPort = bootstrapPort == null ? 8998 : bootstrapPort;
 *     Checks.range("bootstrapPort", bootstrapPort, 1, 65535);
 *   }
 * }
 * Parameters p = ConnectorParameters.bind(context.config(), Parameters.class);
 * // kvConnector.config.bootstrapPrt: unknown mooncake parameter "bootstrapPrt"; did you mean
 * // "bootstrapPort"? known: bootstrapPort, maxPrefillResponseBytes, maxRequestBytes
 * }</pre>
 *
 * <p>A parameter record has one boxed component per key (absent keys arrive as {@code null}), fills
 * in its defaults and checks its values in its compact constructor, throwing {@link
 * ConfigException} with the key as the path ({@code Checks.range("bootstrapPort", ...)}). Its
 * package must be open to {@code com.fasterxml.jackson.databind} on the module path. {@link
 * TypedConnectorProvider} does the binding for a provider. Thread-safe.
 */
public final class ConnectorParameters {
  /** The path every connector parameter is reported under. */
  public static final String PATH = "kvConnector.config";

  private static final ConfigBinder BINDER = ConfigBinder.create();

  private ConnectorParameters() {}

  /**
   * Binds {@code config.params()} onto {@code type}.
   *
   * @throws ConnectorConfigException naming the key ({@code kvConnector.config.<key>}) when a key
   *     is unknown or a value invalid
   */
  public static <P extends Record> P bind(ConnectorConfig config, Class<P> type) {
    Objects.requireNonNull(config, "config");
    Objects.requireNonNull(type, "type");
    Set<String> known = names(type);
    for (String key : config.params().keySet()) {
      if (!known.contains(key)) {
        throw unknown(config.type(), key, known);
      }
    }
    try {
      return BINDER.convert(tree(config.params()), type, PATH);
    } catch (ConfigException e) {
      throw new ConnectorConfigException(e.path().isEmpty() ? PATH : e.path(), e.problem());
    }
  }

  /** The keys {@code type} takes: its components' names, in declaration order. */
  public static Set<String> names(Class<? extends Record> type) {
    Set<String> out = new LinkedHashSet<>();
    for (RecordComponent c : type.getRecordComponents()) {
      com.fasterxml.jackson.annotation.JsonProperty p =
          c.getAccessor().getAnnotation(com.fasterxml.jackson.annotation.JsonProperty.class);
      out.add(p != null && !p.value().isEmpty() ? p.value() : c.getName());
    }
    return out;
  }

  /**
   * The error for a key no parameter of the {@code connectorType} connector has: {@code
   * kvConnector.config.<key>: unknown <type> parameter "<key>"; did you mean "<closest>"? known:
   * ...}.
   */
  public static ConnectorConfigException unknown(
      String connectorType, String key, java.util.Collection<String> known) {
    String field = ConfigException.join(PATH, key);
    return new ConnectorConfigException(
        field, ConfigException.unknown(field, connectorType + " parameter", key, known).problem());
  }

  /**
   * The parameters as the binder reads a document: a {@link Duration} given from Java becomes its
   * Go form ({@code "2s"}), so that programmatic and written configurations bind alike.
   */
  private static Map<String, Object> tree(Map<String, Object> params) {
    Map<String, Object> out = new LinkedHashMap<>();
    params.forEach((k, v) -> out.put(k, v instanceof Duration d ? Durations.format(d) : v));
    return out;
  }
}
