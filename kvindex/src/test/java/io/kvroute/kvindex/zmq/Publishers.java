package io.kvroute.kvindex.zmq;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;
import org.zeromq.ZMQException;

/** How the tests make their {@link KvEventPublisher}s: on loopback, with a short handshake. */
final class Publishers {
  private Publishers() {}

  /** A publisher binding an ephemeral loopback port. */
  static KvEventPublisher.Builder bound() {
    return at("tcp://127.0.0.1:0").bind(true);
  }

  /** A publisher connecting to {@code endpoint} (a subscriber in bind mode). */
  static KvEventPublisher.Builder connecting(String endpoint) {
    return at(endpoint).bind(false);
  }

  /** A publisher on {@code endpoint} (binding or connecting as the test says). */
  static KvEventPublisher.Builder at(String endpoint) {
    return KvEventPublisher.builder().handshakeTimeout(Duration.ofMillis(500)).endpoint(endpoint);
  }

  /**
   * Builds a publisher, again while its bind fails: the port of a closed publisher (a restart on
   * the same endpoint) may still be being released. Gives up after 30 s.
   */
  static KvEventPublisher rebind(Supplier<KvEventPublisher> build) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      try {
        return build.get();
      } catch (ZMQException e) {
        if (System.nanoTime() - deadline > 0) {
          throw e; // the port was never released
        }
        LockSupport.parkNanos(5_000_000);
      }
    }
  }
}
