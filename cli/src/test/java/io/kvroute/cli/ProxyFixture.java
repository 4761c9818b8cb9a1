package io.kvroute.cli;

import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import mockwebserver3.MockWebServer;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * {@code kvroute proxy --connector http} in front of two MockWebServer engines (prefill and
 * decode), one attempt per request, as a JUnit extension: registered on a test's field with
 * {@code @RegisterExtension}, it starts engines and proxy before each test and, after it, closes
 * the raw connections, stops the proxy (expecting exit code 0) and the engines. {@link #run} starts
 * the proxy in front of any other engines.
 */
final class ProxyFixture implements BeforeEachCallback, AfterEachCallback {
  final MockWebServer prefill = new MockWebServer();
  final MockWebServer decode = new MockWebServer();
  final ProxyCommand command = new ProxyCommand();
  private final String[] extraArgs;
  private final List<Socket> sockets = new ArrayList<>();
  private RunningCommand<ProxyCommand> running;

  /** A fixture whose proxy gets {@code extraArgs} after the fixture's own arguments. */
  ProxyFixture(String... extraArgs) {
    this.extraArgs = extraArgs;
  }

  @Override
  public void beforeEach(ExtensionContext context) throws Exception {
    prefill.start();
    decode.start();
    running =
        run(
            command,
            "http",
            "http://127.0.0.1:" + prefill.getPort(),
            "http://127.0.0.1:" + decode.getPort(),
            extraArgs);
  }

  @Override
  public void afterEach(ExtensionContext context) throws Exception {
    for (Socket s : sockets) {
      s.close();
    }
    try {
      if (running != null) {
        running.stop(command::shutdown);
      }
    } finally {
      prefill.close();
      decode.close();
    }
  }

  /**
   * Starts {@code kvroute proxy --connector connector} between the engines at {@code prefill} and
   * {@code decode} (base URLs), on a free port, one attempt per request, with {@code extraArgs}
   * after those; waits until it serves.
   */
  static RunningCommand<ProxyCommand> run(
      String connector, String prefill, String decode, String... extraArgs)
      throws InterruptedException {
    return run(new ProxyCommand(), connector, prefill, decode, extraArgs);
  }

  private static RunningCommand<ProxyCommand> run(
      ProxyCommand command, String connector, String prefill, String decode, String... extraArgs)
      throws InterruptedException {
    List<String> args =
        new ArrayList<>(
            List.of(
                "--connector",
                connector,
                "--prefill",
                prefill,
                "--decode",
                decode,
                "--port",
                "0",
                "--max-attempts",
                "1"));
    args.addAll(List.of(extraArgs));
    return RunningCommand.start(command, () -> command.running, args.toArray(new String[0]));
  }

  /** The base URL of the proxy {@code running}. */
  static String base(RunningCommand<ProxyCommand> running) {
    return "http://127.0.0.1:" + running.command.running.port();
  }

  /** The proxy's port. */
  int port() {
    return command.running.port();
  }

  /** A raw connection to the proxy (30 s read timeout), closed after the test. */
  Socket connect() throws IOException {
    Socket s = new Socket(InetAddress.getLoopbackAddress(), port());
    s.setSoTimeout(30_000);
    sockets.add(s);
    return s;
  }
}
