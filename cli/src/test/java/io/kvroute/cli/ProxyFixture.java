package io.kvroute.cli;

import java.util.ArrayList;
import java.util.List;
import mockwebserver3.MockWebServer;

/**
 * {@code kvroute proxy --connector http} running in the background in front of two MockWebServer
 * engines (prefill and decode), one attempt per request; stopped and checked for exit code 0 by
 * {@link #stop()}.
 */
final class ProxyFixture {
  final MockWebServer prefill = new MockWebServer();
  final MockWebServer decode = new MockWebServer();
  final ProxyCommand command = new ProxyCommand();
  private RunningCommand<ProxyCommand> running;

  private ProxyFixture() {}

  /** Starts the engines and the proxy with {@code extraArgs} after the fixture's own. */
  static ProxyFixture start(String... extraArgs) throws Exception {
    ProxyFixture f = new ProxyFixture();
    f.prefill.start();
    f.decode.start();
    List<String> args =
        new ArrayList<>(
            List.of(
                "--connector",
                "http",
                "--prefill",
                "http://127.0.0.1:" + f.prefill.getPort(),
                "--decode",
                "http://127.0.0.1:" + f.decode.getPort(),
                "--port",
                "0",
                "--max-attempts",
                "1"));
    args.addAll(List.of(extraArgs));
    f.running =
        RunningCommand.start(f.command, () -> f.command.running, args.toArray(new String[0]));
    return f;
  }

  /** The proxy's port. */
  int port() {
    return command.running.port();
  }

  /** Stops the proxy (expecting exit code 0) and the engines. */
  void stop() throws Exception {
    try {
      running.stop(command::shutdown);
    } finally {
      prefill.close();
      decode.close();
    }
  }
}
