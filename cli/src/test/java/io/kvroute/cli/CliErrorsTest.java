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

  // ---- issue 28: the smaller CLI slips, each named by its file, key or option

  private Path gatewayYaml(Path dir, String extra) throws IOException {
    Path cfg = dir.resolve("gateway.yaml");
    Files.writeString(
        cfg,
        "listen: {port: 0}\nendpoints: [{id: d, url: \"http://127.0.0.1:1\"}]\n" + extra,
        StandardCharsets.UTF_8);
    return cfg;
  }

  @Test
  void anUnknownConnectorTypeInAGatewayFileNamesTheFileAndTheKey(@TempDir Path dir)
      throws IOException {
    Path cfg = gatewayYaml(dir, "models:\n  m: {kvConnector: {type: nixl2}}\n");
    assertThat(run("gateway", "--config", cfg.toString())).isEqualTo(2);
    assertOneLine(
        "kvroute gateway: "
            + cfg
            + ": models.m.kvConnector.type: unknown connector type \"nixl2\"; did you mean"
            + " \"nixl\"? known: fallback, http, ");
  }

  @Test
  void aMisspeltConnectorParameterInAGatewayFileIsRefused(@TempDir Path dir) throws IOException {
    Path cfg =
        gatewayYaml(dir, "defaultConnector: {type: nixl, config: {remoteHostRewrit: always}}\n");
    assertThat(run("gateway", "--config", cfg.toString())).isEqualTo(2);
    assertOneLine(
        "kvroute gateway: "
            + cfg
            + ": defaultConnector.config.remoteHostRewrit: unknown nixl parameter"
            + " \"remoteHostRewrit\"; did you mean \"remoteHostRewrite\"? known:"
            + " maxPrefillResponseBytes, remoteHostRewrite");
    err.getBuffer().setLength(0);
    cfg = gatewayYaml(dir, "defaultConnector: {type: mooncake, config: {bootstrapPort: \"x\"}}\n");
    assertThat(run("gateway", "--config", cfg.toString())).isEqualTo(2);
    assertOneLine(
        "kvroute gateway: "
            + cfg
            + ": defaultConnector.config.bootstrapPort: must be an integer, was \"x\"");
  }

  @Test
  void aMisspeltProxyParamIsRefusedWithTheClosestOne() {
    assertThat(
            run(
                "proxy",
                "--decode",
                "http://127.0.0.1:1",
                "--connector",
                "nixl",
                "--param",
                "nosuchparam=1"))
        .isEqualTo(2);
    assertOneLine(
        "kvroute proxy: --param nosuchparam: unknown nixl parameter \"nosuchparam\"; known:"
            + " maxPrefillResponseBytes, remoteHostRewrite");
    err.getBuffer().setLength(0);
    assertThat(
            run(
                "proxy",
                "--decode",
                "http://127.0.0.1:1",
                "--connector",
                "nixl",
                "--param",
                "rewriteLocalhost=true"))
        .as("the parameter the old help text named")
        .isEqualTo(2);
    assertOneLine("kvroute proxy: --param rewriteLocalhost: unknown nixl parameter");
    assertThat(errLines()).endsWith("known: maxPrefillResponseBytes, remoteHostRewrite");
    err.getBuffer().setLength(0);
    assertThat(
            run(
                "proxy",
                "--decode",
                "http://127.0.0.1:1",
                "--connector",
                "mooncake",
                "--param",
                "bootstrapPort=0"))
        .isEqualTo(2);
    assertOneLine("kvroute proxy: --param bootstrapPort: must be in [1, 65535], was 0");
    out.getBuffer().setLength(0);
    assertThat(run("proxy", "--help")).isZero();
    assertThat(out.toString()).contains("--param remoteHostRewrite=always");
  }

  @Test
  void listenLimitsNameTheirKey(@TempDir Path dir) throws IOException {
    Path cfg = gatewayYaml(dir, "");
    Files.writeString(
        cfg,
        "listen: {port: 0, maxHeaderBytes: 100}\nendpoints: [{id: d, url: \"http://127.0.0.1:1\"}]\n");
    assertThat(run("gateway", "--config", cfg.toString())).isEqualTo(2);
    assertOneLine(
        "kvroute gateway: " + cfg + ": listen.maxHeaderBytes: must be in [256, 1048576], was 100");
    err.getBuffer().setLength(0);
    assertThat(run("proxy", "--decode", "http://127.0.0.1:1", "--listen", "maxHeaderCount=20000"))
        .isEqualTo(2);
    assertOneLine("kvroute proxy: --listen maxHeaderCount: must be in [1, 10000], was 20000");
  }

  @Test
  void aMissingTlsFileIsNamedByTheDocumentedKey(@TempDir Path dir) throws IOException {
    Path cfg = gatewayYaml(dir, "");
    Files.writeString(
        cfg,
        "listen: {port: 0, tls: {certificate: cert.pem, key: key.pem}}\n"
            + "endpoints: [{id: d, url: \"http://127.0.0.1:1\"}]\n");
    assertThat(run("gateway", "--config", cfg.toString())).isEqualTo(2);
    assertOneLine(
        "kvroute gateway: "
            + cfg
            + ": listen.tls.certificate: no such file: "
            + dir.resolve("cert.pem"));
    err.getBuffer().setLength(0);
    Path cert = dir.resolve("cert.pem");
    Files.writeString(cert, "x");
    assertThat(
            run(
                "proxy",
                "--decode",
                "http://127.0.0.1:1",
                "--tls-certificate",
                cert.toString(),
                "--tls-key",
                dir.resolve("key.pem").toString()))
        .isEqualTo(2);
    assertOneLine("kvroute proxy: --tls-key: no such file: " + dir.resolve("key.pem"));
  }

  @Test
  void anUnknownOptionIsReportedBeforeAMissingOne() {
    assertThat(run("proxy", "--bogus")).isEqualTo(2);
    assertOneLine("kvroute proxy: Unknown option: '--bogus' (see kvroute proxy --help)");
    err.getBuffer().setLength(0);
    assertThat(run("proxy", "--port", "1", "--bogus=2")).isEqualTo(2);
    assertOneLine("kvroute proxy: Unknown option: '--bogus");
    err.getBuffer().setLength(0);
    assertThat(run("proxy", "--port", "1")).isEqualTo(2);
    assertOneLine("kvroute proxy: --decode: is required (or --registry");
  }

  @Test
  void everyCommandPrintsItsVersion() {
    for (String command : java.util.List.of("gateway", "proxy", "serve", "sim", "epp", "hash")) {
      out.getBuffer().setLength(0);
      assertThat(run(command, "-V")).as(command).isZero();
      assertThat(out.toString()).as(command).startsWith("kvroute ");
    }
  }

  /**
   * Every help screen ends with examples, and every option either shows its default, says it in
   * words, or is required, a flag, or one of a group.
   */
  @Test
  void everyHelpScreenHasExamplesAndEveryOptionItsDefault() {
    java.util.List<CommandLine> all = new java.util.ArrayList<>();
    java.util.ArrayDeque<CommandLine> todo = new java.util.ArrayDeque<>();
    todo.add(Main.commandLine());
    while (!todo.isEmpty()) {
      CommandLine c = todo.pop();
      all.add(c);
      todo.addAll(c.getSubcommands().values());
    }
    for (CommandLine c : all) {
      String name = c.getCommandSpec().qualifiedName();
      java.io.StringWriter usage = new java.io.StringWriter();
      c.usage(new PrintWriter(usage));
      assertThat(usage.toString()).as("%s --help has examples", name).contains("Examples:");
      for (CommandLine.Model.OptionSpec o : c.getCommandSpec().options()) {
        boolean flag = o.arity().max() == 0;
        boolean shown =
            o.defaultValue() != null && o.showDefaultValue() != CommandLine.Help.Visibility.NEVER;
        String text = String.join(" ", o.description()).toLowerCase(java.util.Locale.ROOT);
        assertThat(flag || o.required() || o.group() != null || shown || text.contains("default"))
            .as("%s %s shows or states its default", name, o.longestName())
            .isTrue();
      }
    }
  }

  @Test
  void simAndHashAgreeOnTheDefaultHashSeed() {
    CommandLine.Model.OptionSpec sim =
        Main.commandLine().getSubcommands().get("sim").getCommandSpec().findOption("--hash-seed");
    CommandLine.Model.OptionSpec hash =
        Main.commandLine().getSubcommands().get("hash").getCommandSpec().findOption("--hash-seed");
    assertThat(sim.defaultValue()).as("sim: unset, as a default vLLM").isNull();
    assertThat(hash.defaultValue()).isNull();
    assertThat(run("sim", "--hash-algo", "xxhash")).isEqualTo(2);
    assertOneLine("kvroute sim: --hash-seed: required with --hash-algo xxhash");
  }
}
