package io.kvroute.pd;

import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorConfig;
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
 * missing fields take {@link ConnectorConfig}'s defaults. Thread-safe.
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
}
