package io.kvroute.kvindex.zmq;

import static org.assertj.core.api.Assertions.fail;

import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * Polls a condition with a deadline (no sleeps of fixed length). The default deadline is generous
 * (60 s): conditions normally hold within milliseconds, and a fully loaded machine must not fail a
 * test that is only slow.
 */
final class Await {
  private Await() {}

  static void until(String what, BooleanSupplier condition) {
    until(what, Duration.ofSeconds(60), condition);
  }

  /**
   * Runs {@code attempt}, then polls {@code condition} for 20 ms; again until it holds (for what
   * must be sent more than once, such as the first batches while PUB/SUB joins asynchronously).
   */
  static void retrying(String what, Runnable attempt, BooleanSupplier condition) {
    until(
        what,
        () -> {
          attempt.run();
          long until = System.nanoTime() + 20_000_000;
          while (System.nanoTime() - until < 0) {
            if (condition.getAsBoolean()) {
              return true;
            }
            LockSupport.parkNanos(500_000);
          }
          return false;
        });
  }

  static void until(String what, Duration timeout, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        fail("timed out after " + timeout + " waiting for " + what);
      }
      LockSupport.parkNanos(1_000_000);
    }
  }
}
