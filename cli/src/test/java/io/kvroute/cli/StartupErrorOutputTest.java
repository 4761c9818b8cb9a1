package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A command that cannot start prints one line, the error, and nothing before it: run as a real
 * process, so that log lines (SLF4J's binding writes to the process's stderr) count too.
 */
class StartupErrorOutputTest {

  /** The command's whole output (stdout and stderr) and its exit code. */
  private record Result(int exitCode, String output) {}

  private static Result kvroute(String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add("io.kvroute.cli.Main");
    command.addAll(List.of(args));
    Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
    try {
      byte[] out = p.getInputStream().readAllBytes();
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("the command exits").isTrue();
      return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8).strip());
    } finally {
      p.destroyForcibly();
    }
  }

  @Test
  void servesPortInUseIsTheOnlyLine(@TempDir Path dir) throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      Path cfg = dir.resolve("serve.json");
      Files.writeString(
          cfg,
          "{\"model\": \"m\", \"http\": {\"host\": \"127.0.0.1\", \"port\": "
              + taken.getLocalPort()
              + "}, \"pods\": [{\"id\": \"p\", \"events\": \"tcp://127.0.0.1:1\","
              + " \"http\": \"http://127.0.0.1:1\"}]}");
      Result r = kvroute("serve", "--config", cfg.toString());
      assertThat(r.exitCode()).isEqualTo(2);
      assertThat(r.output())
          .doesNotContain("\n")
          .startsWith("kvroute serve: cannot listen on 127.0.0.1:" + taken.getLocalPort());
    }
  }

  @Test
  void aShortAdminTokenIsTheOnlyLine(@TempDir Path dir) throws Exception {
    Path cfg = dir.resolve("gateway.yaml");
    Files.writeString(
        cfg, "listen: {port: 0}\nendpoints: [{id: d, url: \"http://127.0.0.1:1\"}]\n");
    Path token = dir.resolve("short.token");
    Files.writeString(token, "secret\n"); // readable by others too: no warning before the error
    Result r =
        kvroute(
            "gateway",
            "--config",
            cfg.toString(),
            "--admin",
            "--admin-token-file",
            token.toString());
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.output())
        .doesNotContain("\n")
        .startsWith("kvroute gateway: admin.tokenFile " + token)
        .contains("shorter than 16 characters");
  }
}
