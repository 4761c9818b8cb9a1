package io.kvroute.connector;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ConnectorConfigTest {
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
          .hasMessageStartingWith("kvConnector.timeouts.prefill: ");
    }
  }

  @Test
  void negativeOrZeroTimeoutsAreRejected() {
    assertThatThrownBy(
            () ->
                new ConnectorConfig.Timeouts(
                    null, Duration.ofSeconds(1), Duration.ofSeconds(1), Duration.ofSeconds(1)))
        .hasMessageContaining("kvConnector.timeouts.prefill: must be set");
  }

  @Test
  void quantities() {
    assertThat(ConnectorConfig.parseQuantity("q", "32Gi")).isEqualTo(32L << 30);
    assertThat(ConnectorConfig.parseQuantity("q", "500M")).isEqualTo(500_000_000L);
    assertThat(ConnectorConfig.parseQuantity("q", 8589934592L)).isEqualTo(8589934592L);
    assertThat(ConnectorConfig.parseQuantity("q", "1.5Ki")).isEqualTo(1536);
    assertThatThrownBy(
            () -> ConnectorConfig.parseQuantity("kvConnector.resources.maxMemory", "lots"))
        .hasMessageStartingWith("kvConnector.resources.maxMemory: is not a valid quantity");
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
        .hasMessageContaining("kvConnector.config.a: must be true or false");
  }
}
