package io.kvroute.cli;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/** {@code kvroute proxy --connector http}: clients that half-close (issue 34). */
class ProxyHalfCloseTest extends HalfCloseContract {
  private RunningCommand<ProxyCommand> proxy;

  @BeforeEach
  void startProxy() throws Exception {
    prefill.start();
    decode.start();
    proxy =
        ProxyFixture.run(
            "http",
            "http://127.0.0.1:" + prefill.getPort(),
            "http://127.0.0.1:" + decode.getPort());
  }

  @AfterEach
  void stopProxy() throws Exception {
    proxy.stop(proxy.command::shutdown);
  }

  @Override
  int port() {
    return proxy.command.running.port();
  }

  @Override
  int inFlight() {
    return proxy.command.running.inFlight();
  }
}
