package io.kvroute.cli;

import com.fasterxml.jackson.annotation.JsonUnwrapped;
import io.kvroute.assembly.RouterSettings;
import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import java.nio.file.Path;

/**
 * {@code kvroute gateway}'s and {@code kvroute epp}'s configuration file, bound strictly by {@link
 * ConfigBinder} (YAML, or JSON when the file ends in {@code .json}): the listener sections of the
 * command, and beside them, at the same level, the keys of the composition root's {@link
 * RouterSettings} (endpoints, discovery, connectors, scheduler, index, tracing) that the Spring
 * starter reads from {@code kvroute.*}. The format is documented on {@link GatewayCommand} and, key
 * by key, in {@code docs/configuration.md}, which a test checks against these records.
 *
 * @param listen the traffic listener: address, limits, timeouts, TLS
 * @param admin the token-protected admin listener (default: none)
 * @param settings the router: endpoints, discovery, connectors, scheduler, index, tracing
 */
record GatewayConfig(
    FrontConfig.Listen listen, FrontConfig.Admin admin, @JsonUnwrapped RouterSettings settings) {

  static final ConfigBinder BINDER = ConfigBinder.create();

  /** Applies the defaults. */
  GatewayConfig {
    listen = (listen == null ? FrontConfig.Listen.loopback(8080) : listen).withDefaultPort(8080);
    settings = settings == null ? RouterSettings.defaults() : settings;
  }

  /**
   * Reads a configuration file.
   *
   * @throws ConfigException naming the file and the field
   */
  static GatewayConfig load(Path file) {
    return BINDER.read(file, GatewayConfig.class);
  }

  /** {@code path} resolved against the configuration file's directory. */
  static Path resolve(String path, Path dir) {
    return RouterSettings.resolve(path, dir);
  }
}
