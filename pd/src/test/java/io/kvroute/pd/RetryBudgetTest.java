package io.kvroute.pd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class RetryBudgetTest {

  @Test
  void retryBudgetBoundsRetriesToAFractionOfTraffic() {
    AtomicLong now = new AtomicLong();
    RetryBudget b = RetryBudget.of(0.1, 0, now::get);
    for (int i = 0; i < 100; i++) {
      b.recordRequest();
    }
    int granted = 0;
    for (int i = 0; i < 50; i++) {
      if (b.tryAcquireRetry()) {
        granted++;
      }
    }
    assertThat(granted).isEqualTo(10);
    now.addAndGet(Duration.ofSeconds(11).toNanos());
    assertThat(b.tryAcquireRetry()).as("window slid past all traffic").isFalse();
    RetryBudget floor = RetryBudget.of(0, 2, now::get);
    int f = 0;
    while (floor.tryAcquireRetry()) {
      f++;
    }
    assertThat(f).isEqualTo(20);
    assertThatThrownBy(() -> RetryBudget.of(2, 0, now::get)).hasMessageContaining("ratio");
  }
}
