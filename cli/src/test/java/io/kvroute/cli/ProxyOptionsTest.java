package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

/**
 * {@code kvroute proxy} refuses options that cannot work, with one line naming the option and exit
 * code 2, before it binds a port (the regressions of issue 14).
 */
class ProxyOptionsTest {
  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          a decode list of commas | --decode , | --decode: lists no URL; give at least one, e.g. --decode http://10.0.0.2:8000
          a stray comma | --decode http://127.0.0.1:1,,http://127.0.0.1:2 | --decode[1]: is empty (a stray comma?)
          a malformed URL | --decode http//x | --decode[0]: not an http(s) URL: "http//x"
          a URL twice | --decode http://127.0.0.1:1,http://127.0.0.1:1 | --decode[1]: "http://127.0.0.1:1" is listed twice (also --decode[0])
          a prefill list of commas | --decode http://127.0.0.1:1 --prefill , | --prefill: lists no URL; give at least one, e.g. --prefill http://10.0.0.2:8000
          an unknown connector | --decode http://127.0.0.1:1 --connector nixl2 | --connector: unknown connector type "nixl2"; did you mean "nixl"? known:
          a bad timeout | --decode http://127.0.0.1:1 --prefill-timeout soon | --prefill-timeout: must be a duration such as "30s", "1m30s" or "250ms", was "soon"
          a zero timeout | --decode http://127.0.0.1:1 --decode-timeout 0s | --decode-timeout: must be > 0, was "0s"
          no attempts | --decode http://127.0.0.1:1 --max-attempts 0 | --max-attempts: must be in [1, 100], was 0
          a port out of range | --decode http://127.0.0.1:1 --port 70000 | --port: must be in [0, 65535], was 70000
          """)
  void refusesOptionsThatCannotWork(String name, String args, String message) throws Exception {
    List<String> argv = new ArrayList<>(List.of(args.trim().split("\\s+")));
    argv.addAll(List.of("--port", "0"));
    if (args.contains("--port")) {
      argv = new ArrayList<>(argv.subList(0, argv.size() - 2));
    }
    argv.add(0, "proxy");
    CommandLine cl = Main.commandLine();
    ProxyCommand cmd = cl.getSubcommands().get("proxy").getCommand();
    StringWriter err = new StringWriter();
    cl.setErr(new PrintWriter(err));
    cl.setOut(new PrintWriter(new StringWriter()));
    String[] a = argv.toArray(String[]::new);
    CompletableFuture<Integer> run = CompletableFuture.supplyAsync(() -> cl.execute(a));
    int exit;
    try {
      exit = run.get(60, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      cmd.shutdown();
      throw new AssertionError("the proxy started with " + argv, e);
    }
    assertThat(exit).as(err.toString()).isEqualTo(2);
    assertThat(err.toString()).startsWith("kvroute proxy: " + message);
    assertThat(err.toString().strip().lines()).hasSize(1);
  }
}
