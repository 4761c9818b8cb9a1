package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.service.Chromium;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvroute replay} end to end: a small shared-prefix shape and a small trace through every
 * strategy, the JSON and HTML reports (the page rendered in a real headless Chromium), and the
 * one-line errors with exit code 2.
 */
class ReplayCommandTest {
  private static final String[] SMALL_SHAPE = {
    "--workload", "shared-prefix",
    "--groups", "4",
    "--prompts-per-group", "3",
    "--system-prompt-len", "800",
    "--question-len", "96",
    "--output-len", "8",
    "--rate", "40",
    "--requests", "60",
    "--pods", "3"
  };

  record Run(int code, String out, String err) {}

  static Run run(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    picocli.CommandLine cl = Main.commandLine();
    cl.setOut(new PrintWriter(out));
    cl.setErr(new PrintWriter(err));
    int code = cl.execute(args);
    return new Run(code, out.toString(), err.toString());
  }

  static String[] with(String[] base, String... more) {
    String[] all = new String[base.length + more.length + 1];
    all[0] = "replay";
    System.arraycopy(base, 0, all, 1, base.length);
    System.arraycopy(more, 0, all, base.length + 1, more.length);
    return all;
  }

  @Test
  void replaysAShapeThroughEveryStrategyAndWritesTheReports(@TempDir Path dir) throws Exception {
    Path json = dir.resolve("out.json");
    Path html = dir.resolve("out.html");
    Run r = run(with(SMALL_SHAPE, "--json", json.toString(), "--html", html.toString()));
    assertThat(r.code()).as(r.err()).isZero();
    for (String s :
        new String[] {"random", "round-robin", "least-load", "approximate", "precise", "oracle"}) {
      assertThat(r.out()).containsPattern("(?m)^" + s + " +60 ");
      assertThat(r.err()).contains(s);
    }
    assertThat(r.err()).contains("60/60 requests");
    JsonNode root = new ObjectMapper().readTree(Files.readString(json));
    assertThat(root.get("pods").asInt()).isEqualTo(3);
    assertThat(root.get("requests").asInt()).isEqualTo(60);
    assertThat(root.get("strategies")).hasSize(6);
    assertThat(root.get("strategies").get(4).get("reuse").get("available").asLong()).isPositive();
    assertThat(Files.readString(html)).contains("<svg id=\"ttft-cdf\"");
  }

  @Test
  void theHtmlReportDrawsItsChartsInABrowser(@TempDir Path dir) throws Exception {
    assumeTrue(
        Chromium.available(),
        "/usr/bin/chromium is absent: apt-get install -y chromium to run this test");
    Path html = dir.resolve("report.html");
    Run r =
        run(
            with(
                SMALL_SHAPE,
                "--strategies",
                "round-robin,precise,oracle",
                "--no-progress",
                "--html",
                html.toString()));
    assertThat(r.code()).as(r.err()).isZero();
    try (Chromium browser = Chromium.launch(Duration.ofSeconds(30))) {
      browser.navigate(html.toUri().toString());
      browser.waitFor("window.replayRendered === true", 15);
      for (String chart : new String[] {"ttft-cdf", "hit-ratio"}) {
        JsonNode lines =
            browser.eval(
                "Array.from(document.querySelectorAll('#"
                    + chart
                    + " polyline.series')).map(p => [p.dataset.strategy,"
                    + " p.getAttribute('points').trim().split(' ').length,"
                    + " p.getBBox().width > 0])");
        assertThat(lines).as(chart).hasSize(3);
        for (JsonNode l : lines) {
          assertThat(l.get(1).asInt()).as(chart + " " + l.get(0)).isGreaterThan(1);
          assertThat(l.get(2).asBoolean()).as(chart + " " + l.get(0) + " drawn").isTrue();
        }
        assertThat(
                browser.eval("document.querySelectorAll('#" + chart + " .xtick').length").asInt())
            .isGreaterThan(1);
      }
      assertThat(browser.eval("document.querySelectorAll('#figures tbody tr').length").asInt())
          .isEqualTo(3);
      assertThat(browser.eval("document.getElementById('legend').textContent").asText())
          .contains("round-robin")
          .contains("precise")
          .contains("oracle");
    }
  }

  @Test
  void comparesPreciseWithThePredictedLatencyScorer(@TempDir Path dir) throws Exception {
    Path json = dir.resolve("pl.json");
    Run r =
        run(
            with(
                SMALL_SHAPE,
                "--strategies",
                "precise,precise-latency",
                "--latency-weight",
                "2",
                "--latency-objective",
                "off",
                "--json",
                json.toString()));
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out())
        .contains("predicted-latency scorer x2.0 without an objective")
        .containsPattern("(?m)^precise +60 ")
        .containsPattern("(?m)^precise-latency +60 ");
    JsonNode s = new ObjectMapper().readTree(Files.readString(json)).get("strategies");
    assertThat(s).hasSize(2);
    assertThat(s.get(1).get("name").asText()).isEqualTo("precise-latency");
    assertThat(run(with(SMALL_SHAPE, "--latency-objective", "maybe")).err())
        .contains("--latency-objective must be on or off");
    Run negative = run(with(SMALL_SHAPE, "--latency-weight", "-1"));
    assertThat(negative.code()).isEqualTo(2);
    assertThat(negative.err()).contains("latencyWeight must be a finite number >= 0");
  }

  @Test
  void replaysAMooncakeTrace(@TempDir Path dir) throws Exception {
    StringBuilder t = new StringBuilder();
    for (int i = 0; i < 30; i++) {
      t.append(
          String.format(
              "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": 5, \"hash_ids\": [%d,"
                  + " %d, %d]}%n",
              i * 100, 1200 + i, i % 3, 10 + i % 3, 100 + i));
    }
    Path trace = dir.resolve("t.jsonl");
    Files.writeString(trace, t.toString());
    Run r =
        run(
            "replay",
            "--trace",
            trace.toString(),
            "--pods",
            "2",
            "--strategies",
            "round-robin,precise",
            "--no-progress",
            "--profile",
            "llama-3.1-8b-fp8-h200");
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out()).contains("t.jsonl (30 requests)").containsPattern("(?m)^precise +30 ");
  }

  @Test
  void problemsAreOneLineWithExitCode2(@TempDir Path dir) throws Exception {
    assertThat(run("replay", "--pods", "2").err())
        .contains("kvroute replay: give either --trace FILE or --workload shared-prefix");
    Run unknown = run(with(SMALL_SHAPE, "--strategies", "precise,psychic"));
    assertThat(unknown.code()).isEqualTo(2);
    assertThat(unknown.err()).contains("unknown strategy \"psychic\"");
    Path bad = dir.resolve("bad.jsonl");
    Files.writeString(bad, "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1}\n");
    Run badTrace = run("replay", "--trace", bad.toString());
    assertThat(badTrace.code()).isEqualTo(2);
    assertThat(badTrace.err()).contains("bad.jsonl:1: missing \"hash_ids\"");
    assertThat(run("replay", "--trace", dir.resolve("none.jsonl").toString()).err())
        .contains("no such file");
    assertThat(run(with(SMALL_SHAPE, "--prefill", "2")).err())
        .contains("--prefill and --decode go together");
    assertThat(run(with(SMALL_SHAPE, "--profile", "gpt-5")).err())
        .contains("unknown engine profile \"gpt-5\"");
    assertThat(run(with(SMALL_SHAPE, "--slo", "ttft=soon")).code()).isEqualTo(2);
  }

  @Test
  void replaysWithFlowControlAndReportsEachClass(@TempDir Path dir) throws Exception {
    Path json = dir.resolve("fc.json");
    Run r =
        run(
            with(
                SMALL_SHAPE,
                "--strategies",
                "precise",
                "--flow-control",
                "on",
                "--flow-max-inflight",
                "4",
                "--flow-fairness",
                "vtc",
                "--class",
                "high:share=1,priority=100,tenant=a,ttft=5s",
                "--class",
                "low:share=3,priority=-100,tenant=b",
                "--json",
                json.toString()));
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out()).contains("flow control on").contains("per class");
    JsonNode s = new ObjectMapper().readTree(Files.readString(json)).get("strategies").get(0);
    JsonNode classes = s.get("classes");
    assertThat(classes).hasSize(2);
    int offered = 0;
    for (JsonNode c : classes) {
      offered += c.get("offered").asInt();
      assertThat(c.get("name").asText()).isIn("high", "low");
    }
    assertThat(offered).isEqualTo(60);
    assertThat(s.get("fairness").isNumber() || s.get("fairness").isNull()).isTrue();
    assertThat(run(with(SMALL_SHAPE, "--flow-control", "maybe")).err())
        .contains("--flow-control must be on or off");
    assertThat(run(with(SMALL_SHAPE, "--class", "x:colour=red")).err())
        .contains("--class")
        .contains("unknown key");
    assertThat(run(with(SMALL_SHAPE, "--flow-control", "on", "--flow-fairness", "lottery")).code())
        .isEqualTo(2);
  }
}
