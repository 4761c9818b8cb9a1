package io.kvroute.replay;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.replay.internal.Html;
import io.kvroute.scoring.ReuseSplit;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * The result of a {@link Replay}: one {@link StrategyResult} per strategy, as a terminal table
 * ({@link #toTable()}), JSON ({@link #toJson()}) or a self-contained HTML page with TTFT CDFs and
 * hit ratio over time ({@link #toHtml()}).
 *
 * <p>Immutable and thread-safe.
 *
 * @param pods engines in the fleet
 * @param requests requests in the workload
 * @param wallSeconds wall-clock seconds the whole replay took
 * @param strategies per strategy, in run order
 * @param description the workload, speed, fleet, profile, SLO and seed
 */
public record ReplayReport(
    int pods,
    int requests,
    double wallSeconds,
    List<StrategyResult> strategies,
    String description) {
  private static final ObjectMapper JSON =
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  /** Copies the list. */
  public ReplayReport {
    strategies = List.copyOf(strategies);
    Objects.requireNonNull(description, "description");
  }

  /** The result of strategy {@code name}, if it ran. */
  public java.util.Optional<StrategyResult> strategy(String name) {
    return strategies.stream().filter(s -> s.name().equals(name)).findFirst();
  }

  /**
   * The report as JSON: {@code {"pods","requests","wallSeconds","strategies":[{"name","requests",
   * "hitRatio","ttftMs":{"p50","p90","p99"},"tpotMs":{"p50","p90"},"goodputRps","sloAttainment",
   * "imbalance","reuse":{"available","captured","delivered"},"dropped":{reason:count},
   * "ttftPredictionError","fairness","classes":[{"name","offered","requests","dropped",
   * "ttftMs":{"p50","p90","p99"},"goodputRps","sloAttainment","outputTokensPerSecond"}]}]}} (token
   * counts for reuse; a value with no sample is {@code null}; {@code classes} is empty for a
   * workload without classes).
   */
  public String toJson() {
    ObjectNode root = JSON.createObjectNode();
    root.put("pods", pods);
    root.put("requests", requests);
    root.put("wallSeconds", round(wallSeconds, 3));
    ArrayNode arr = root.putArray("strategies");
    for (StrategyResult s : strategies) {
      ObjectNode o = arr.addObject();
      o.put("name", s.name());
      o.put("requests", s.requests());
      num(o, "hitRatio", s.hitRatio(), 6);
      ObjectNode t = o.putObject("ttftMs");
      num(t, "p50", s.ttftMs().p50(), 3);
      num(t, "p90", s.ttftMs().p90(), 3);
      num(t, "p99", s.ttftMs().p99(), 3);
      ObjectNode p = o.putObject("tpotMs");
      num(p, "p50", s.tpotMs().p50(), 3);
      num(p, "p90", s.tpotMs().p90(), 3);
      num(o, "goodputRps", s.goodputRps(), 6);
      num(o, "sloAttainment", s.sloAttainment(), 6);
      num(o, "imbalance", s.imbalance(), 6);
      ObjectNode r = o.putObject("reuse");
      r.put("available", s.reuse().available());
      r.put("captured", s.reuse().captured());
      r.put("delivered", s.reuse().delivered());
      ObjectNode d = o.putObject("dropped");
      s.dropped().forEach(d::put);
      num(o, "ttftPredictionError", s.ttftPredictionError(), 6);
      num(o, "fairness", s.fairness(), 6);
      ArrayNode cs = o.putArray("classes");
      for (StrategyResult.ClassResult c : s.classes()) {
        ObjectNode co = cs.addObject();
        co.put("name", c.name());
        co.put("offered", c.offered());
        co.put("requests", c.requests());
        ObjectNode cd = co.putObject("dropped");
        c.dropped().forEach(cd::put);
        ObjectNode ct = co.putObject("ttftMs");
        num(ct, "p50", c.ttftMs().p50(), 3);
        num(ct, "p90", c.ttftMs().p90(), 3);
        num(ct, "p99", c.ttftMs().p99(), 3);
        num(co, "goodputRps", c.goodputRps(), 6);
        num(co, "sloAttainment", c.sloAttainment(), 6);
        num(co, "outputTokensPerSecond", c.outputTokensPerSecond(), 3);
      }
    }
    try {
      return JSON.writeValueAsString(root) + "\n";
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  private static void num(ObjectNode o, String field, double v, int digits) {
    if (Double.isNaN(v) || Double.isInfinite(v)) {
      o.putNull(field);
    } else {
      o.put(field, round(v, digits));
    }
  }

  private static double round(double v, int digits) {
    return new java.math.BigDecimal(v)
        .setScale(digits, java.math.RoundingMode.HALF_EVEN)
        .doubleValue();
  }

  /** A terminal table: one row per strategy, then the reuse split as shares of prompt tokens. */
  public String toTable() {
    StringBuilder sb = new StringBuilder();
    sb.append(description).append('\n');
    sb.append(
        String.format(
            Locale.ROOT,
            "%-15s %8s %6s %9s %9s %9s %8s %8s %10s %9s %6s %6s %6s%n",
            "strategy",
            "requests",
            "hit%",
            "TTFT p50",
            "TTFT p90",
            "TTFT p99",
            "TPOT p50",
            "TPOT p90",
            "out tok/s",
            "goodput",
            "SLO%",
            "imbal",
            "preempt"));
    for (StrategyResult s : strategies) {
      sb.append(
          String.format(
              Locale.ROOT,
              "%-15s %8d %6.1f %9s %9s %9s %8s %8s %10.0f %9.3f %6.1f %6.2f %6d%n",
              s.name(),
              s.requests(),
              100 * s.hitRatio(),
              ms(s.ttftMs().p50()),
              ms(s.ttftMs().p90()),
              ms(s.ttftMs().p99()),
              ms(s.tpotMs().p50()),
              ms(s.tpotMs().p90()),
              s.outputTokensPerSecond(),
              s.goodputRps(),
              100 * s.sloAttainment(),
              s.imbalance(),
              s.preemptions()));
    }
    sb.append(
        String.format(
            Locale.ROOT,
            "%nreuse (share of prompt tokens): available = some engine held the prefix; captured ="
                + " the chosen one did; delivered = the engine reused it%n%-15s %10s %10s %10s"
                + " %12s %10s%n",
            "strategy",
            "available",
            "captured",
            "delivered",
            "lost:routing",
            "lost:queue"));
    for (StrategyResult s : strategies) {
      double p = Math.max(1, s.promptTokens());
      ReuseSplit r = s.reuse();
      sb.append(
          String.format(
              Locale.ROOT,
              "%-15s %9.1f%% %9.1f%% %9.1f%% %11.1f%% %9.1f%%%n",
              s.name(),
              100 * r.available() / p,
              100 * r.captured() / p,
              100 * r.delivered() / p,
              100 * r.loadMissTokens() / p,
              100 * r.staleMissTokens() / p));
    }
    sb.append(
        String.format(
            Locale.ROOT, "%n%-15s %8s %10s %9s%n", "strategy", "dropped", "TTFT pred", "fairness"));
    for (StrategyResult s : strategies) {
      sb.append(
          String.format(
              Locale.ROOT,
              "%-15s %8d %9.1f%% %9s %s%n",
              s.name(),
              s.droppedTotal(),
              100 * s.ttftPredictionError(),
              Double.isNaN(s.fairness()) ? "-" : String.format(Locale.ROOT, "%.3f", s.fairness()),
              s.dropped().isEmpty() ? "" : s.dropped().toString()));
    }
    boolean classes = strategies.stream().anyMatch(s -> !s.classes().isEmpty());
    if (classes) {
      sb.append(
          String.format(
              Locale.ROOT,
              "%nper class%n%-15s %-10s %8s %8s %8s %9s %9s %9s %9s %6s %10s%n",
              "strategy",
              "class",
              "offered",
              "done",
              "dropped",
              "TTFT p50",
              "TTFT p90",
              "TTFT p99",
              "goodput",
              "SLO%",
              "out tok/s"));
      for (StrategyResult s : strategies) {
        for (StrategyResult.ClassResult c : s.classes()) {
          sb.append(
              String.format(
                  Locale.ROOT,
                  "%-15s %-10s %8d %8d %8d %9s %9s %9s %9.3f %6.1f %10.0f%n",
                  s.name(),
                  c.name(),
                  c.offered(),
                  c.requests(),
                  c.dropped().values().stream().mapToInt(Integer::intValue).sum(),
                  ms(c.ttftMs().p50()),
                  ms(c.ttftMs().p90()),
                  ms(c.ttftMs().p99()),
                  c.goodputRps(),
                  100 * c.sloAttainment(),
                  c.outputTokensPerSecond()));
        }
      }
    }
    sb.append(
        String.format(
            Locale.ROOT,
            "%nreplayed in %.1f s wall (%s)%n",
            wallSeconds,
            strategies.stream()
                .map(s -> String.format(Locale.ROOT, "%s %.1f s", s.name(), s.wallSeconds()))
                .reduce((a, b) -> a + ", " + b)
                .orElse("")));
    return sb.toString();
  }

  private static String ms(double v) {
    if (Double.isNaN(v)) {
      return "-";
    }
    return v >= 10_000
        ? String.format(Locale.ROOT, "%.1fs", v / 1000)
        : String.format(Locale.ROOT, "%.0fms", v);
  }

  /** A self-contained HTML page: the table, TTFT CDFs and hit ratio over time (inline SVG). */
  public String toHtml() {
    return Html.render(this);
  }
}
