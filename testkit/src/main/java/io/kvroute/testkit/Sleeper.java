package io.kvroute.testkit;

import java.util.concurrent.TimeUnit;

/**
 * Waits a simulated duration. Inject {@link #NONE} (or use {@link LatencyModel#ZERO}) so tests run
 * without waiting; implementations must be thread-safe.
 */
@FunctionalInterface
public interface Sleeper {

  /** Sleeps with {@link TimeUnit#sleep(long)}. */
  Sleeper SYSTEM =
      nanos -> {
        if (nanos > 0) {
          TimeUnit.NANOSECONDS.sleep(nanos);
        }
      };

  /** Returns at once. */
  Sleeper NONE = nanos -> {};

  /**
   * Waits {@code nanos} nanoseconds (0 or less: returns at once).
   *
   * @throws InterruptedException if interrupted while waiting
   */
  void sleep(long nanos) throws InterruptedException;
}
