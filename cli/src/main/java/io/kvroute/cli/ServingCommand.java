package io.kvroute.cli;

import java.util.concurrent.Callable;
import picocli.CommandLine;

/**
 * A command that serves until it is stopped ({@code serve}, {@code sim}, {@code proxy}, {@code
 * gateway}, {@code epp}): its picocli spec, what it serves once it does, and the {@link StopLatch}
 * its {@code call()} waits on.
 *
 * @param <S> what the command serves
 */
abstract class ServingCommand<S> implements Callable<Integer> {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  /** What the command serves, set once it does; tests learn its port and stop it through this. */
  volatile S running;

  /** Released by SIGINT/SIGTERM (through the hook {@code call()} installs) or {@link #shutdown}. */
  final StopLatch stop = new StopLatch();

  /** Stops serving (tests): {@link #stopServing} on what is served, then releases the latch. */
  void shutdown() {
    S s = running;
    if (s != null) {
      stopServing(s);
    }
    stop.release();
  }

  /** What {@link #shutdown()} does to what is served before releasing the latch; nothing here. */
  void stopServing(S served) {}
}
