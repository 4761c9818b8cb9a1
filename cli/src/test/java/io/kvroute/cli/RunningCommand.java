package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import picocli.CommandLine;

/**
 * A server command ({@code gateway}, {@code proxy}) run in the background by a test: started with
 * its arguments, awaited until it serves, stopped and checked for exit code 0.
 *
 * @param <C> the command
 */
final class RunningCommand<C> {
  final C command;
  final CompletableFuture<Integer> exit;
  final StringWriter out = new StringWriter();
  final StringWriter err = new StringWriter();

  private RunningCommand(C command, String... args) {
    this.command = command;
    CommandLine cl = new CommandLine(command);
    cl.setOut(new PrintWriter(out, true));
    cl.setErr(new PrintWriter(err, true));
    this.exit = CompletableFuture.supplyAsync(() -> cl.execute(args));
  }

  /**
   * Starts {@code command} with {@code args} and waits (up to 60 s) until {@code serving} answers
   * non-null.
   */
  static <C> RunningCommand<C> start(C command, Supplier<?> serving, String... args)
      throws InterruptedException {
    RunningCommand<C> r = new RunningCommand<>(command, args);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (serving.get() == null) {
      assertThat(r.exit).as(() -> "exited before serving: " + r.err).isNotDone();
      assertThat(System.nanoTime()).as("started within 60 s").isLessThan(deadline);
      TimeUnit.MILLISECONDS.sleep(10);
    }
    return r;
  }

  /** Runs {@code stop}, then expects exit code 0 within 30 s. */
  void stop(Runnable stop) throws Exception {
    stop.run();
    assertThat(exit.get(30, TimeUnit.SECONDS)).as(() -> "exit code; " + err).isZero();
  }
}
