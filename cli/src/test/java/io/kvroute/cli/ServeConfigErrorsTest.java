package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

/** {@code kvroute serve} stops on a configuration mistake with one line naming the field. */
class ServeConfigErrorsTest {
  @TempDir Path dir;

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          a publisher over http | {"model": "m", "pods": [{"id": "a", "events": "http://nope"}]} | pods[0].events: must be a tcp:// or ipc:// endpoint such as "tcp://10.0.0.5:5557", was "http://nope"
          a typo | {"model": "m", "pods_file": "p.json", "htpp": {"port": 1}} | htpp: unknown key; did you mean "http"? known:
          a duplicate key | {"model": "m", "pods_file": "p.json", "model": "n"} | model: duplicate key (line 1)
          a duplicate pod | {"model": "m", "pods": [{"id": "a", "events": "tcp://h:1"}, {"id": "a", "events": "tcp://h:2"}]} | pods[1].id: "a" is listed twice (also pods[0])
          a string port | {"model": "m", "pods_file": "p.json", "http": {"port": "80"}} | http.port: must be an integer, was "80"
          """)
  void oneLineAndExitCode2(String name, String json, String message) throws Exception {
    Path cfg = dir.resolve("serve.json");
    Files.writeString(cfg, json, StandardCharsets.UTF_8);
    CommandLine cl = Main.commandLine();
    StringWriter err = new StringWriter();
    cl.setErr(new PrintWriter(err));
    cl.setOut(new PrintWriter(new StringWriter()));
    assertThat(cl.execute("serve", "--config", cfg.toString())).isEqualTo(2);
    assertThat(err.toString().strip())
        .startsWith("kvroute serve: invalid configuration: " + cfg + ": " + message)
        .doesNotContain("\n");
  }
}
