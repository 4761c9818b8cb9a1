package io.kvroute.scoring.internal;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.kvroute.scoring.EndpointMetrics;

/**
 * Arbitrary {@code /metrics} pages never make the parser throw, and whatever it maps stays in
 * range. Runs its seeds in regression mode under {@code mvn verify}; fuzz with {@code
 * JAZZER_FUZZ=1}.
 */
class PrometheusTextFuzzTest {

  @FuzzTest(maxDuration = "20s")
  void pagesNeverThrow(FuzzedDataProvider data) {
    String page = data.consumeRemainingAsString();
    int[] samples = new int[1];
    int bad = PrometheusText.parse(page, n -> true, (n, l, v) -> samples[0]++);
    assertThat(bad).isNotNegative();
    EndpointMetrics m = EngineMetricsParser.parse(page);
    if (m != null) {
      assertThat(m.waitingRequests()).isGreaterThanOrEqualTo(-1);
      assertThat(m.runningRequests()).isGreaterThanOrEqualTo(-1);
    }
  }
}
