package io.kvroute.pd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorConfig;
import java.io.InputStream;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The {@code kvConnector} section through the configuration binder: the seed's ModelServer examples
 * (src/test/resources/seed-examples, copied from the project's seed documents) load as written,
 * defaults fill what they omit, and every bad value is a one-line error naming its path.
 */
class ConnectorConfigsTest {
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

  @SuppressWarnings("unchecked")
  private static ConnectorConfig fromModelServer(String resource) throws Exception {
    try (InputStream in = ConnectorConfigsTest.class.getResourceAsStream(resource)) {
      assertThat(in).as(resource).isNotNull();
      Map<String, Object> doc = YAML.readValue(in, Map.class);
      Map<String, Object> spec = (Map<String, Object>) doc.get("spec");
      return ConnectorConfigs.bind(
          (Map<String, Object>) spec.get("kvConnector"), "spec.kvConnector");
    }
  }

  private static ConnectorConfig bind(Map<String, ?> section) {
    return ConnectorConfigs.bind(section, "models.m.kvConnector");
  }

  @ParameterizedTest
  @ValueSource(strings = {"000-1", "000-2", "000-3", "001-4", "001-5", "001-6", "001-7"})
  void everySeedExampleLoadsAsWritten(String name) throws Exception {
    ConnectorConfig c = fromModelServer("/seed-examples/" + name + ".yaml");
    assertThat(c.type()).isIn("http", "lmcache", "nixl", "mooncake");
  }

  @Test
  void seedNixlExampleKeepsEveryField() throws Exception {
    ConnectorConfig c = fromModelServer("/seed-examples/000-2.yaml");
    assertThat(c.type()).isEqualTo("nixl");
    assertThat(c.timeouts().prefill()).isEqualTo(Duration.ofSeconds(60));
    assertThat(c.timeouts().decode()).isEqualTo(Duration.ofSeconds(300));
    assertThat(c.retry().maxAttempts()).isEqualTo(3);
    assertThat(c.retry().backoffBase()).isEqualTo(Duration.ofSeconds(1));
    assertThat(c.retry().backoffMax()).isEqualTo(Duration.ofSeconds(10));
    assertThat(c.resources().maxMemory()).contains(32L << 30);
    assertThat((List<?>) c.params().get("clusterEndpoints")).hasSize(4);
    assertThat(c.intParam("connectionPoolSize", 0)).isEqualTo(20);
    assertThat(c.durationParam("keepAliveInterval", Duration.ZERO))
        .isEqualTo(Duration.ofSeconds(30));
    assertThat(c.param("protocol")).contains("tcp");
  }

  @Test
  void seedHttpExampleTakesDefaultsForWhatItOmits() throws Exception {
    ConnectorConfig c = fromModelServer("/seed-examples/000-1.yaml");
    assertThat(c.type()).isEqualTo("http");
    assertThat(c.timeouts().prefill()).isEqualTo(Duration.ofSeconds(30));
    assertThat(c.timeouts().cleanup()).isEqualTo(ConnectorConfig.Timeouts.DEFAULTS.cleanup());
    assertThat(c.retry().backoffBase()).isEqualTo(Duration.ofSeconds(1));
    assertThat(c.retry().backoffMax()).isEqualTo(ConnectorConfig.Retry.DEFAULTS.backoffMax());
  }

  @Test
  void anEmptyOrAbsentSectionIsTheHttpDefault() {
    assertThat(bind(Map.of())).isEqualTo(ConnectorConfig.of("http"));
    assertThat(bind(null)).isEqualTo(ConnectorConfig.of("http"));
    assertThat(ConnectorConfigs.readYaml("{}")).isEqualTo(ConnectorConfig.of("http"));
    assertThat(ConnectorConfigs.readYaml("kvConnector: {type: nixl, timeouts: {decode: 2m}}"))
        .satisfies(
            c -> {
              assertThat(c.type()).isEqualTo("nixl");
              assertThat(c.timeouts().decode()).isEqualTo(Duration.ofMinutes(2));
            });
  }

  @Test
  void invalidValuesNameTheirPath() {
    assertThatThrownBy(() -> bind(Map.of("timeouts", Map.of("prefill", "-5s"))))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("models.m.kvConnector.timeouts.prefill")
        .hasMessageContaining("must be > 0");
    assertThatThrownBy(() -> bind(Map.of("timeouts", Map.of("decode", "0s"))))
        .hasMessageContaining("models.m.kvConnector.timeouts.decode")
        .hasMessageContaining("must be > 0");
    assertThatThrownBy(() -> bind(Map.of("timeouts", Map.of("decode", "soon"))))
        .hasMessageContaining("models.m.kvConnector.timeouts.decode");
    assertThatThrownBy(() -> bind(Map.of("retry", Map.of("maxAttempts", 0))))
        .hasMessageContaining("models.m.kvConnector.retry.maxAttempts")
        .hasMessageContaining("must be >= 1, was 0");
    assertThatThrownBy(() -> bind(Map.of("retry", Map.of("maxAttempts", "three"))))
        .hasMessageContaining("models.m.kvConnector.retry.maxAttempts");
    assertThatThrownBy(() -> bind(Map.of("retry", Map.of("backoffBase", "5s", "backoffMax", "1s"))))
        .hasMessageContaining("models.m.kvConnector.retry.backoffMax")
        .hasMessageContaining("must be >= backoffBase");
    assertThatThrownBy(() -> bind(Map.of("resources", Map.of("maxMemory", "lots"))))
        .hasMessageContaining("models.m.kvConnector.resources.maxMemory");
  }

  @Test
  void unknownFieldsAndWrongTypesAreErrorsNotSilentlyIgnored() {
    assertThatThrownBy(() -> bind(Map.of("timeout", Map.of())))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("models.m.kvConnector.timeout");
    assertThatThrownBy(() -> bind(Map.of("timeouts", Map.of("prefil", "1s"))))
        .hasMessageContaining("models.m.kvConnector.timeouts.prefil");
    assertThatThrownBy(() -> bind(Map.of("type", 7)))
        .hasMessageContaining("models.m.kvConnector.type");
    assertThatThrownBy(() -> bind(Map.of("config", "x")))
        .hasMessageContaining("models.m.kvConnector.config");
    assertThatThrownBy(
            () -> ConnectorConfigs.readYaml("kvConnector: {type: nixl}\nkvConnector: {}"))
        .isInstanceOf(ConfigException.class);
  }

  /** Checked against the connectors: the type must exist and its connector take the block. */
  @Test
  void theTypeAndTheParametersAreCheckedAgainstTheConnectors() {
    io.kvroute.connector.KVConnectors connectors =
        io.kvroute.connector.KVConnectors.discover(getClass().getClassLoader());
    assertThatThrownBy(
            () -> ConnectorConfigs.bind(Map.of("type", "htp"), "models.m.kvConnector", connectors))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith(
            "models.m.kvConnector.type: unknown connector type \"htp\"; did you mean \"http\"?");
    assertThatThrownBy(
            () ->
                ConnectorConfigs.bind(
                    Map.of("type", "http", "config", Map.of("maxPrefillResponseByte", 1024)),
                    "models.m.kvConnector",
                    connectors))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith(
            "models.m.kvConnector.config.maxPrefillResponseByte: unknown http parameter"
                + " \"maxPrefillResponseByte\"; did you mean \"maxPrefillResponseBytes\"?");
    assertThatThrownBy(
            () ->
                ConnectorConfigs.readYaml(
                    "kvConnector: {type: http, config: {maxPrefillResponseBytes: 0}}", connectors))
        .hasMessage("kvConnector.config.maxPrefillResponseBytes: must be >= 1, was 0");
    assertThat(
            ConnectorConfigs.bind(
                    Map.of("type", "shared-storage", "config", Map.of("cacheHitThreshold", 0.5)),
                    "m",
                    connectors)
                .params())
        .containsEntry("cacheHitThreshold", 0.5);
  }
}
