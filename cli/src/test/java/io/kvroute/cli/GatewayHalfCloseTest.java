package io.kvroute.cli;

import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.io.TempDir;

/** {@code kvroute gateway} with a prefill and a decode pod: clients that half-close (issue 34). */
class GatewayHalfCloseTest extends HalfCloseContract {
  @TempDir Path dir;
  private RunningCommand<GatewayCommand> gateway;

  @BeforeEach
  void startGateway() throws Exception {
    prefill.start();
    decode.start();
    Path cfg =
        GatewayYaml.write(
            dir,
            GatewayYaml.HTTP_ONE_ATTEMPT
                + "endpoints:\n"
                + "  - { id: p0, url: \"http://127.0.0.1:"
                + prefill.getPort()
                + "\", role: prefill }\n"
                + "  - { id: d0, url: \"http://127.0.0.1:"
                + decode.getPort()
                + "\", role: decode }\n");
    gateway = GatewayYaml.run(cfg);
  }

  @AfterEach
  void stopGateway() throws Exception {
    gateway.stop(gateway.command::shutdown);
  }

  @Override
  int port() {
    return gateway.command.running.port();
  }

  @Override
  int inFlight() {
    return gateway.command.running.inFlight();
  }
}
