package io.kvroute.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.math.BigDecimal;
import java.time.Duration;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class DurationsAndQuantitiesTest {
  @ParameterizedTest
  @CsvSource({
    "30s, PT30S",
    "1m30s, PT1M30S",
    "250ms, PT0.25S",
    "1h2m3.5s, PT1H2M3.5S",
    "10us, PT0.00001S",
    "10µs, PT0.00001S",
    "5ns, PT0.000000005S",
    "1.5h, PT1H30M",
    "-2s, PT-2S",
    "0, PT0S",
    "30, PT30S",
    "0.5, PT0.5S",
    "PT30S, PT30S",
    "pt1m, PT1M",
  })
  void parsesGoKubernetesAndIsoDurations(String text, String iso) {
    assertThat(Durations.parse(text)).isEqualTo(Duration.parse(iso));
  }

  @ParameterizedTest
  @ValueSource(strings = {"", " ", "soon", "s", "1x", "1m30", "--1s", "1..2s", "P1Q", "-"})
  void rejectsOtherDurations(String text) {
    assertThatThrownBy(() -> Durations.parse(text))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(text.isBlank() ? "must be a duration" : "\"" + text + "\"");
  }

  @ParameterizedTest
  @ValueSource(strings = {"0s", "250ms", "30s", "1m30s", "2h0m1s", "10us", "7ns", "1.5s", "-3s"})
  void formatReadsBack(String text) {
    Duration d = Durations.parse(text);
    assertThat(Durations.parse(Durations.format(d))).isEqualTo(d);
  }

  @ParameterizedTest
  @CsvSource({
    "32Gi, 34359738368",
    "500M, 500000000",
    "1.5Ki, 1536",
    "1k, 1000",
    "1e3, 1000",
    "1048576, 1048576",
    "0, 0",
    "1Ei, 1152921504606846976",
  })
  void parsesQuantities(String text, long value) {
    assertThat(Quantity.parse(text).value()).isEqualTo(value);
  }

  @ParameterizedTest
  @ValueSource(strings = {"", "Gi", "32Gb", "5m", "-1", "0.5", "1.1", "16Ei", "x"})
  void rejectsOtherQuantities(String text) {
    assertThatThrownBy(() -> Quantity.parse(text)).isInstanceOf(IllegalArgumentException.class);
  }

  @org.junit.jupiter.api.Test
  void numbersAreSecondsAndUnits() {
    assertThat(Durations.ofSeconds(new BigDecimal("1.25"))).isEqualTo(Duration.ofMillis(1250));
    assertThat(Quantity.of(new BigDecimal("1024")).value()).isEqualTo(1024);
  }
}
