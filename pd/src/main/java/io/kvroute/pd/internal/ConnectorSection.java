package io.kvroute.pd.internal;

import io.kvroute.config.ConfigException;
import io.kvroute.config.Quantity;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorConfigException;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;

/**
 * The {@code kvConnector} section as the configuration binder reads it (the seed's ModelServer
 * {@code spec.kvConnector} shape). Missing fields take {@link ConnectorConfig}'s defaults.
 *
 * @param type the connector type (default {@code http})
 * @param config the connector's own parameters, passed as they are
 * @param timeouts the legs' timeouts
 * @param retry retry over prefill/decode pairs
 * @param resources resource limits
 */
public record ConnectorSection(
    String type, Map<String, Object> config, Timeouts timeouts, Retry retry, Resources resources) {

  /**
   * A document with one {@code kvConnector} key.
   *
   * @param kvConnector the section (empty when absent)
   */
  public record Document(ConnectorSection kvConnector) {
    /** Fills in an absent section. */
    public Document {
      kvConnector =
          kvConnector == null ? new ConnectorSection(null, null, null, null, null) : kvConnector;
    }
  }

  /**
   * {@code timeouts}.
   *
   * @param prefill the whole prefill leg (default 30s)
   * @param decode the decode leg's head and each gap between chunks (default 120s)
   * @param cleanup releasing remote state after a failure (default 10s)
   * @param healthCheck one health probe (default 5s)
   */
  public record Timeouts(
      Duration prefill, Duration decode, Duration cleanup, Duration healthCheck) {}

  /**
   * {@code retry}.
   *
   * @param maxAttempts attempts in total, first included (default 3)
   * @param backoffBase the first backoff, doubling per retry (default 100ms)
   * @param backoffMax the cap on one backoff (default 2s, or 10 × backoffBase when backoffBase is
   *     over 2s)
   */
  public record Retry(Integer maxAttempts, Duration backoffBase, Duration backoffMax) {}

  /**
   * {@code resources}.
   *
   * @param maxMemory memory for KV cache
   * @param maxDisk disk for KV cache
   * @param maxBandwidth network bandwidth (bytes per second)
   */
  public record Resources(Quantity maxMemory, Quantity maxDisk, Quantity maxBandwidth) {}

  /**
   * The connector configuration this section describes.
   *
   * @throws ConfigException naming the field (relative to the section) when a value is invalid
   */
  public ConnectorConfig toConnectorConfig() {
    ConnectorConfig.Timeouts td = ConnectorConfig.Timeouts.DEFAULTS;
    ConnectorConfig.Retry rd = ConnectorConfig.Retry.DEFAULTS;
    Timeouts t = timeouts == null ? new Timeouts(null, null, null, null) : timeouts;
    Retry r = retry == null ? new Retry(null, null, null) : retry;
    Resources res = resources == null ? new Resources(null, null, null) : resources;
    try {
      Duration base = or(r.backoffBase(), rd.backoffBase());
      Duration maxDefault =
          rd.backoffMax().compareTo(base) < 0 ? base.multipliedBy(10) : rd.backoffMax();
      return new ConnectorConfig(
          type == null ? ConnectorConfig.DEFAULT_TYPE : type,
          config == null ? Map.of() : config,
          new ConnectorConfig.Timeouts(
              or(t.prefill(), td.prefill()),
              or(t.decode(), td.decode()),
              or(t.cleanup(), td.cleanup()),
              or(t.healthCheck(), td.healthCheck())),
          new ConnectorConfig.Retry(
              r.maxAttempts() == null ? rd.maxAttempts() : r.maxAttempts(),
              base,
              or(r.backoffMax(), maxDefault)),
          new ConnectorConfig.Resources(
              bytes(res.maxMemory()), bytes(res.maxDisk()), bytes(res.maxBandwidth())));
    } catch (ConnectorConfigException e) {
      // the SPI's own checks name the field as kvConnector.<path>
      String field = e.field().startsWith("kvConnector.") ? e.field().substring(12) : e.field();
      throw new ConfigException(field, e.problem(), e);
    }
  }

  private static Duration or(Duration value, Duration fallback) {
    return value == null ? fallback : value;
  }

  private static Optional<Long> bytes(Quantity q) {
    return q == null ? Optional.empty() : Optional.of(q.value());
  }
}
