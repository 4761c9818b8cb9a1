package io.kvroute.cli;

import java.util.concurrent.CountDownLatch;

/**
 * How a serving command ({@code serve}, {@code sim}, {@code proxy}, {@code gateway}, {@code epp})
 * waits to be stopped: by SIGINT/SIGTERM, through a JVM shutdown hook that first drains what the
 * command serves, or by {@link #release()} (the commands' {@code shutdown()}, for tests).
 */
final class StopLatch {
  private final CountDownLatch released = new CountDownLatch(1);
  private volatile Thread hook;

  /**
   * Installs the shutdown hook, a thread named {@code threadName}: on SIGINT/SIGTERM it runs {@code
   * drain}, then releases {@link #await()}.
   */
  void onSignal(String threadName, Runnable drain) {
    Thread h =
        new Thread(
            () -> {
              drain.run();
              released.countDown();
            },
            threadName);
    Runtime.getRuntime().addShutdownHook(h);
    hook = h;
  }

  /** Blocks until released, then removes the shutdown hook unless the JVM is already running it. */
  void await() throws InterruptedException {
    released.await();
    Thread h = hook;
    if (h != null) {
      try {
        Runtime.getRuntime().removeShutdownHook(h);
      } catch (IllegalStateException e) {
        // already shutting down
      }
    }
  }

  /** Releases {@link #await()} without a signal. */
  void release() {
    released.countDown();
  }
}
