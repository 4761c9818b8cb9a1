package io.kvroute.pd;

import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.pd.internal.ConnectorSection;
import java.util.Map;
import java.util.Objects;

/**
 * Reads the {@code kvConnector} section (the seed's ModelServer {@code spec.kvConnector}) into a
 * {@link ConnectorConfig}, through kvroute's one strict configuration binder:
 *
 * <pre>{@code
 * kvConnector:
 *   type: nixl                       # default http
 *   config: { ... }                  # the connector's own parameters, passed as they are
 *   timeouts: { prefill: 60s, decode: 300s, cleanup: 10s, healthCheck: 5s }
 *   retry: { maxAttempts: 3, backoffBase: 1s, backoffMax: 10s }
 *   resources: { maxMemory: 32Gi, maxDisk: 1Ti, maxBandwidth: 10G }
 * }</pre>
 *
 * <p>Unknown and duplicate keys, wrong types and invalid values are {@link ConfigException}s naming
 * the field's path; durations are Go/Kubernetes durations, quantities Kubernetes quantities;
 * missing fields take {@link ConnectorConfig}'s defaults. Given the connectors a router will use
 * ({@link #bind(Map, String, KVConnectors)}), the type must be one of theirs and the {@code config}
 * block must be what that connector takes ({@link KVConnectorProvider#checkParameters}): {@code
 * models.qwen.kvConnector.config.remoteHostRewrit: unknown nixl parameter "remoteHostRewrit"; did
 * you mean "remoteHostRewrite"? ...}. Thread-safe.
 */
public final class ConnectorConfigs {
  private static final ConfigBinder BINDER = ConfigBinder.create();

  private ConnectorConfigs() {}

  /**
   * Binds a {@code kvConnector} section given as a YAML/JSON-shaped tree (maps, lists, strings,
   * numbers, as Jackson or SnakeYAML produce).
   *
   * @param section the section itself (its {@code type}, {@code config}, ... keys)
   * @param path the section's path, for messages (e.g. {@code models.qwen.kvConnector})
   * @throws ConfigException naming the field's path
   */
  public static ConnectorConfig bind(Map<String, ?> section, String path) {
    Objects.requireNonNull(path, "path");
    if (section == null) {
      return ConnectorConfig.of(ConnectorConfig.DEFAULT_TYPE);
    }
    ConnectorSection s = BINDER.convert(section, ConnectorSection.class, path);
    try {
      return s.toConnectorConfig();
    } catch (ConfigException e) {
      throw e.under(path);
    }
  }

  /**
   * Binds a {@code kvConnector} section as {@link #bind(Map, String)} does, and checks it against
   * {@code connectors}: the type is one of theirs (else the error names {@code <path>.type}, the
   * closest type and the known ones) and its connector accepts the {@code config} block (else the
   * error names {@code <path>.config.<key>}).
   *
   * @param section the section itself (its {@code type}, {@code config}, ... keys)
   * @param path the section's path, for messages (e.g. {@code models.qwen.kvConnector})
   * @param connectors the connectors the configuration is for
   * @throws ConfigException naming the field's path
   */
  public static ConnectorConfig bind(Map<String, ?> section, String path, KVConnectors connectors) {
    return check(bind(section, path), path, connectors);
  }

  /**
   * Checks a connector configuration against {@code connectors}: its type is one of theirs and its
   * connector accepts its parameters.
   *
   * @param config the configuration
   * @param path the {@code kvConnector} section's path, for messages
   * @param connectors the connectors the configuration is for
   * @return {@code config}
   * @throws ConfigException naming {@code <path>.type} or {@code <path>.config.<key>}
   */
  public static ConnectorConfig check(
      ConnectorConfig config, String path, KVConnectors connectors) {
    Objects.requireNonNull(connectors, "connectors");
    if (!connectors.types().contains(config.type())) {
      throw ConfigException.unknown(
          ConfigException.join(path, "type"), "connector type", config.type(), connectors.types());
    }
    try {
      connectors.provider(config.type()).checkParameters(config);
    } catch (ConnectorConfigException e) {
      String field = e.field().startsWith("kvConnector.") ? e.field().substring(12) : e.field();
      throw new ConfigException(ConfigException.join(path, field), e.problem(), e);
    }
    return config;
  }

  /**
   * Reads a YAML document holding a {@code kvConnector} section.
   *
   * @throws ConfigException naming the field's path
   */
  public static ConnectorConfig readYaml(String yaml) {
    ConnectorSection s = BINDER.readYaml(yaml, ConnectorSection.Document.class).kvConnector();
    try {
      return s.toConnectorConfig();
    } catch (ConfigException e) {
      throw e.under("kvConnector");
    }
  }

  /**
   * Reads a YAML document holding a {@code kvConnector} section and checks it against {@code
   * connectors} ({@link #check}).
   *
   * @throws ConfigException naming the field's path
   */
  public static ConnectorConfig readYaml(String yaml, KVConnectors connectors) {
    return check(readYaml(yaml), "kvConnector", connectors);
  }
}
