package io.kvroute.connector;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.io.InputStream;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ConnectorConfigTest {
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

  @SuppressWarnings("unchecked")
  private static Map<String, Object> yaml(String resource) throws Exception {
    try (InputStream in = ConnectorConfigTest.class.getResourceAsStream(resource)) {
      assertThat(in).as(resource).isNotNull();
      return YAML.readValue(in, Map.class);
    }
  }

  @SuppressWarnings("unchecked")
  private static ConnectorConfig fromModelServer(String resource) throws Exception {
    Map<String, Object> doc = yaml(resource);
    return ConnectorConfig.fromMap((Map<String, Object>) doc.get("spec"));
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
    assertThat(c.retry().backoffMax()).isGreaterThanOrEqualTo(Duration.ofSeconds(1));
  }

  @Test
  void emptyMapIsTheHttpDefault() {
    ConnectorConfig c = ConnectorConfig.fromMap(Map.of());
    assertThat(c).isEqualTo(ConnectorConfig.of("http"));
  }

  @Test
  void durationsInEveryAcceptedForm() {
    assertThat(ConnectorConfig.parseDuration("f", "30s")).isEqualTo(Duration.ofSeconds(30));
    assertThat(ConnectorConfig.parseDuration("f", "1m30s")).isEqualTo(Duration.ofSeconds(90));
    assertThat(ConnectorConfig.parseDuration("f", "1h2m3.5s"))
        .isEqualTo(Duration.ofHours(1).plusMinutes(2).plusMillis(3500));
    assertThat(ConnectorConfig.parseDuration("f", "250ms")).isEqualTo(Duration.ofMillis(250));
    assertThat(ConnectorConfig.parseDuration("f", "10us")).isEqualTo(Duration.ofNanos(10_000));
    assertThat(ConnectorConfig.parseDuration("f", "PT2S")).isEqualTo(Duration.ofSeconds(2));
    assertThat(ConnectorConfig.parseDuration("f", 5)).isEqualTo(Duration.ofSeconds(5));
    assertThat(ConnectorConfig.parseDuration("f", "1.5")).isEqualTo(Duration.ofMillis(1500));
  }

  @Test
  void badDurationsNameTheField() {
    for (Object bad : List.of("30x", "s", "", "1m-3s", true, List.of())) {
      assertThatThrownBy(() -> ConnectorConfig.parseDuration("kvConnector.timeouts.prefill", bad))
          .as(String.valueOf(bad))
          .isInstanceOf(ConnectorConfigException.class)
          .hasMessageStartingWith("kvConnector.timeouts.prefill ");
    }
  }

  @Test
  void negativeOrZeroTimeoutsAreRejected() {
    assertThatThrownBy(() -> ConnectorConfig.fromMap(Map.of("timeouts", Map.of("prefill", "-5s"))))
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessageContaining("kvConnector.timeouts.prefill must be > 0");
    assertThatThrownBy(() -> ConnectorConfig.fromMap(Map.of("timeouts", Map.of("decode", "0s"))))
        .hasMessageContaining("kvConnector.timeouts.decode must be > 0");
    assertThatThrownBy(
            () ->
                new ConnectorConfig.Timeouts(
                    null, Duration.ofSeconds(1), Duration.ofSeconds(1), Duration.ofSeconds(1)))
        .hasMessageContaining("kvConnector.timeouts.prefill must be set");
  }

  @Test
  void retryValidation() {
    assertThatThrownBy(() -> ConnectorConfig.fromMap(Map.of("retry", Map.of("maxAttempts", 0))))
        .hasMessage("kvConnector.retry.maxAttempts must be >= 1, was 0");
    assertThatThrownBy(
            () -> ConnectorConfig.fromMap(Map.of("retry", Map.of("maxAttempts", "three"))))
        .hasMessageContaining("kvConnector.retry.maxAttempts must be an integer");
    assertThatThrownBy(
            () ->
                ConnectorConfig.fromMap(
                    Map.of("retry", Map.of("backoffBase", "5s", "backoffMax", "1s"))))
        .hasMessageContaining("kvConnector.retry.backoffMax must be >= backoffBase");
  }

  @Test
  void unknownFieldsAreErrorsNotSilentlyIgnored() {
    assertThatThrownBy(() -> ConnectorConfig.fromMap(Map.of("timeout", Map.of())))
        .hasMessageContaining("kvConnector.timeout is not a known field");
    assertThatThrownBy(() -> ConnectorConfig.fromMap(Map.of("timeouts", Map.of("prefil", "1s"))))
        .hasMessageContaining("kvConnector.timeouts.prefil is not a known field");
    assertThatThrownBy(() -> ConnectorConfig.fromMap(Map.of("type", 7)))
        .hasMessageContaining("kvConnector.type must be a string");
    assertThatThrownBy(() -> ConnectorConfig.fromMap(Map.of("config", "x")))
        .hasMessageContaining("kvConnector.config must be an object");
  }

  @Test
  void quantities() {
    assertThat(ConnectorConfig.parseQuantity("q", "32Gi")).isEqualTo(32L << 30);
    assertThat(ConnectorConfig.parseQuantity("q", "500M")).isEqualTo(500_000_000L);
    assertThat(ConnectorConfig.parseQuantity("q", 8589934592L)).isEqualTo(8589934592L);
    assertThat(ConnectorConfig.parseQuantity("q", "1.5Ki")).isEqualTo(1536);
    assertThatThrownBy(
            () -> ConnectorConfig.parseQuantity("kvConnector.resources.maxMemory", "lots"))
        .hasMessageStartingWith("kvConnector.resources.maxMemory is not a valid quantity");
  }

  @Test
  void backoffDoublesUpToTheCap() {
    ConnectorConfig.Retry r =
        new ConnectorConfig.Retry(5, Duration.ofMillis(100), Duration.ofMillis(350));
    assertThat(r.backoff(1)).isEqualTo(Duration.ofMillis(100));
    assertThat(r.backoff(2)).isEqualTo(Duration.ofMillis(200));
    assertThat(r.backoff(3)).isEqualTo(Duration.ofMillis(350));
    assertThat(r.backoff(60)).isEqualTo(Duration.ofMillis(350));
  }

  @Test
  void paramsAreImmutableCopies() {
    Map<String, Object> p = new LinkedHashMap<>();
    p.put("a", "1");
    ConnectorConfig c = ConnectorConfig.of("nixl").withParams(p);
    p.put("b", "2");
    assertThat(c.params()).containsOnlyKeys("a");
    assertThatThrownBy(() -> c.params().put("c", 3))
        .isInstanceOf(UnsupportedOperationException.class);
    assertThatThrownBy(() -> c.booleanParam("a", false))
        .hasMessageContaining("kvConnector.config.a must be true or false");
  }
}
