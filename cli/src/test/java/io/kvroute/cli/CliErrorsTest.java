package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * What a user sees when something is wrong: one line naming the problem and exit code 2, a stack
 * trace only with {@code --verbose}; help texts that read whole.
 */
class CliErrorsTest {
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  private int run(String... args) {
    CommandLine cl = Main.commandLine();
    cl.setOut(new PrintWriter(out, true));
    cl.setErr(new PrintWriter(err, true));
    return cl.execute(args);
  }

  private String errLines() {
    return err.toString().strip();
  }

  private void assertOneLine(String prefix) {
    assertThat(errLines()).doesNotContain("\n").doesNotContain("\tat ").startsWith(prefix);
  }

  @Test
  void anUnknownOptionIsOneLineAndExitCode2() {
    assertThat(run("proxy", "--decode", "http://127.0.0.1:1", "--no-such-option")).isEqualTo(2);
    assertOneLine("kvroute proxy: Unknown option: '--no-such-option'");
  }

  /** Issue 14: an admin API anyone could use is refused at start. */
  @Test
  void theAdminApiNeedsAToken(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
      throws IOException {
    java.nio.file.Path cfg = dir.resolve("gateway.yaml");
    java.nio.file.Files.writeString(
        cfg, "listen: {port: 0}\nendpoints: [{id: d, url: \"http://127.0.0.1:1\"}]\n");
    java.nio.file.Path shortToken = dir.resolve("short.token");
    java.nio.file.Files.writeString(shortToken, "secret\n");
    assertThat(
            run(
                "gateway",
                "--config",
                cfg.toString(),
                "--admin",
                "--admin-token-file",
                shortToken.toString()))
        .isEqualTo(2);
    assertOneLine("kvroute gateway: admin.tokenFile " + shortToken);
    assertThat(errLines()).contains("shorter than 16 characters");
    assertThat(errLines()).doesNotContain("secret");
    if (System.getenv(FrontConfig.Admin.DEFAULT_TOKEN_ENV) == null) {
      err.getBuffer().setLength(0);
      assertThat(run("gateway", "--config", cfg.toString(), "--admin")).isEqualTo(2);
      assertOneLine(
          "kvroute gateway: admin.tokenEnv $KVROUTE_ADMIN_TOKEN gives no token; the admin listener"
              + " does not start without one");
    }
  }

  @Test
  void aPortInUseNamesThePort() throws IOException {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      assertThat(
              run(
                  "proxy",
                  "--decode",
                  "http://127.0.0.1:1",
                  "--host",
                  "127.0.0.1",
                  "--port",
                  Integer.toString(port)))
          .isEqualTo(2);
      assertOneLine("kvroute proxy: cannot listen on 127.0.0.1:" + port + ": ");
    }
  }

  @Test
  void anUnknownConnectorListsTheKnownOnes() {
    assertThat(run("proxy", "--decode", "http://127.0.0.1:1", "--connector", "nixl2")).isEqualTo(2);
    assertOneLine("kvroute proxy: ");
    assertThat(errLines()).contains("nixl2").contains("nixl").contains("http");
  }

  @Test
  void anUnresolvableHostIsNamed() {
    assertThat(run("proxy", "--decode", "http://127.0.0.1:1", "--host", "no-such-host.invalid"))
        .isEqualTo(2);
    assertOneLine("kvroute proxy: ");
    assertThat(errLines()).contains("no-such-host.invalid");
  }

  @Test
  void aConfigErrorIsOneLine(@TempDir Path dir) throws IOException {
    Path cfg = dir.resolve("gateway.yaml");
    Files.writeString(cfg, "listen: [1, 2\n", StandardCharsets.UTF_8);
    assertThat(run("gateway", "--config", cfg.toString())).isEqualTo(2);
    assertOneLine("kvroute gateway: ");
    Path missing = dir.resolve("missing.yaml");
    err.getBuffer().setLength(0);
    assertThat(run("gateway", "--config", missing.toString())).isEqualTo(2);
    assertOneLine("kvroute gateway: ");
    assertThat(errLines()).contains("missing.yaml");
  }

  @Test
  void verboseAddsTheStackTrace() {
    assertThat(run("proxy", "--decode", "http://127.0.0.1:1", "--connector", "nixl2", "--verbose"))
        .isEqualTo(2);
    assertThat(errLines()).contains("\tat ");
  }

  @Test
  void eventsDecodeNeedsAFileOrDash() {
    assertThat(run("events", "decode")).isEqualTo(2);
    assertOneLine("kvroute events decode: Missing required parameter: 'FILE|-'");
  }

  @Test
  void helpTextsReadWhole() {
    assertThat(run("--help")).isZero();
    String top = out.toString().replaceAll("\\s+", " ");
    Main.commandLine()
        .getSubcommands()
        .forEach(
            (name, sub) -> {
              String[] header = sub.getCommandSpec().usageMessage().header();
              String summary =
                  header.length > 0
                      ? header[0]
                      : sub.getCommandSpec().usageMessage().description()[0];
              assertThat(summary).as("summary of %s is a whole sentence", name).endsWith(".");
              assertThat(top)
                  .as("kvroute --help lists %s whole", name)
                  .contains(name + " " + summary);
            });
    out.getBuffer().setLength(0);
    assertThat(run("proxy", "--help")).isZero();
    assertThat(out.toString().replaceAll("\\s+", " "))
        .contains("one of: fallback, http, lmcache, mooncake")
        .contains("Default: 8000")
        .doesNotContain("Default: {}")
        .doesNotContain("Default: []");
  }
}
