package io.kvroute.kvindex.redis;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** Waits for a condition with a generous deadline (tests must pass on a loaded machine). */
final class Await {
  private Await() {}

  static void until(String what, BooleanSupplier condition) {
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after 60 s waiting for " + what);
      }
      try {
        Thread.sleep(20); // polling interval, not synchronisation
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }
}
