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

    // the reuse split per strategy, from the routers' own kvroute.routing.reuse.* meters
    assertThat(report).contains("reuse split").contains("misses: load / stale index / none");
    for (String strategy : new String[] {"random", "load", "approximate", "precise"}) {
      java.util.regex.Matcher row =
          java.util.regex.Pattern.compile(
                  "(?m)^"
                      + strategy
                      + " +(\\d+) +([0-9.]+)% +([0-9.]+)% +([0-9.]+)% +(\\d+) / (\\d+) / (\\d+)(.*)$")
              .matcher(report);
      assertThat(row.find()).as(strategy + "\n" + report).isTrue();
      long measured = Long.parseLong(row.group(1));
      double available = Double.parseDouble(row.group(2));
      double captured = Double.parseDouble(row.group(3));
      long load = Long.parseLong(row.group(5));
      long stale = Long.parseLong(row.group(6));
      long none = Long.parseLong(row.group(7));
      assertThat(measured).as(strategy + "\n" + report).isBetween(1L, 12L);
      assertThat(captured).as(strategy).isLessThanOrEqualTo(available);
      assertThat(load + stale + none).as(strategy).isLessThanOrEqualTo(2 * measured);
      if (strategy.equals("random") || strategy.equals("load")) {
        // no prefix index: nothing is available to these routers, whatever the pods reused
        assertThat(row.group(8)).contains("(no index)");
        assertThat(available).isZero();
        assertThat(none).isEqualTo(measured);
      } else {
        assertThat(row.group(8)).doesNotContain("(no index)");
      }
      if (strategy.equals("precise")) {
        // second turns of a conversation and shared system prompts: the index sees a prefix
        assertThat(available).as(report).isPositive();
        assertThat(captured).as(report).isPositive();
        assertThat(Double.parseDouble(row.group(4))).as(report).isPositive();
        assertThat(none).as(report).isLessThan(measured);
      }
    }
    assertThat(report).containsPattern("reuse split: available [0-9.]+%, captured [0-9.]+%");
    assertThat(Files.readString(html))
        .contains("<table id=\"reuse\">")
        .contains("<tr data-strategy=\"precise\">")
        .contains("stale-index misses");
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
