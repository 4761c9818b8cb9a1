package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** The README's main job, scaled down: every strategy runs on simulated pods and is reported. */
class DemoCommandTest {

  @Test
  void runsEveryStrategyAndReports(@TempDir Path dir) throws Exception {
    CommandLine cl = new CommandLine(new DemoCommand());
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    cl.setOut(new PrintWriter(out));
    cl.setErr(new PrintWriter(err));
    Path html = dir.resolve("report.html");
    int code =
        cl.execute(
            "--prefill", "1",
            "--decode", "2",
            "--conversations", "6",
            "--turns", "2",
            "--concurrency", "3",
            "--html", html.toString());
    assertThat(code).as(err.toString()).isZero();
    String report = out.toString();
    for (String strategy : new String[] {"random", "load", "approximate", "precise"}) {
      assertThat(report).containsPattern("(?m)^" + strategy + " +12 +0 ");
    }
    assertThat(report).contains("TTFT p50").contains("cache hit ratio");
    // precise routing proves its parity with the pods' KV events, and the pods hash as expected
    java.util.regex.Matcher parity =
        java.util.regex.Pattern.compile("parity check: ([0-9.]+) ").matcher(report);
    assertThat(parity.find()).as(report).isTrue();
    assertThat(Double.parseDouble(parity.group(1))).as(report).isGreaterThanOrEqualTo(0.99);
    assertThat(report).doesNotContain("DEGRADED");
    assertThat(err.toString()).contains("12/12 requests");
    assertThat(Files.readString(html)).contains("<table>").contains("precise");
  }

  @Test
  void unknownStrategyIsRejected() {
    CommandLine cl = new CommandLine(new DemoCommand());
    StringWriter err = new StringWriter();
    cl.setErr(new PrintWriter(err));
    cl.setOut(new PrintWriter(new StringWriter()));
    assertThat(cl.execute("--strategies", "random,psychic")).isEqualTo(2);
    assertThat(err.toString()).contains("unknown strategy \"psychic\"");
  }
}
