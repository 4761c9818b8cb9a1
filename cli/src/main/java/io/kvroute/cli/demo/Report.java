package io.kvroute.cli.demo;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/** Results of one routing strategy in the demo, and the side-by-side rendering of all of them. */
public final class Report {

  /** What one strategy achieved. */
  public record Result(
      String strategy,
      String description,
      int requests,
      int errors,
      long promptTokens,
      long cachedTokens,
      double[] ttftMillis,
      double seconds,
      List<String> perPod,
      Prediction prediction,
      Parity parity,
      Reuse reuse) {

    /** Cached prompt tokens / prompt tokens, in [0, 1]. */
    public double hitRatio() {
      return promptTokens == 0 ? 0 : (double) cachedTokens / promptTokens;
    }

    /** The p-th percentile of TTFT in ms (nearest rank). */
    public double ttft(double p) {
      if (ttftMillis.length == 0) {
        return Double.NaN;
      }
      double[] sorted = ttftMillis.clone();
      Arrays.sort(sorted);
      int rank = (int) Math.ceil(p / 100.0 * sorted.length);
      return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }

    /** Completed requests per second. */
    public double throughput() {
      return seconds <= 0 ? 0 : (requests - errors) / seconds;
    }
  }

  /**
   * Routing accuracy of one strategy, from the routers' {@code kvroute.routing.*} meters: the
   * requests measured, the mean cached tokens the index predicted and the engines reported, the
   * mean |predicted − actual| / prompt, and how many predictions were exact, over or under.
   */
  public record Prediction(
      long measured,
      double predictedMean,
      double actualMean,
      double errorMean,
      long exact,
      long over,
      long under) {

    /** Nothing measured. */
    public static final Prediction NONE = new Prediction(0, 0, 0, 0, 0, 0, 0);

    /** One line for the report. */
    public String line() {
      if (measured == 0) {
        return "index vs engines: nothing measured (no usage reported)";
      }
      return String.format(
          Locale.ROOT,
          "index vs engines: predicted %.0f cached tokens per request, engines reported %.0f"
              + " (%d requests; mean error %.1f%% of the prompt; exact %d, over %d, under %d)",
          predictedMean,
          actualMean,
          measured,
          100 * errorMean,
          exact,
          over,
          under);
    }
  }

  /**
   * The routers' KV-cache parity check for one strategy (precise only): samples checked against the
   * engines' KV events, the predicted block hashes the engines published and did not, and whether a
   * model was degraded to approximate scoring.
   */
  public record Parity(long samples, long matched, long missing, boolean degraded) {

    /** Not checked (the strategy does not score precisely). */
    public static final Parity NONE = new Parity(0, 0, 0, false);

    /** Matched over predicted block hashes, NaN when nothing was checked. */
    public double ratio() {
      long predicted = matched + missing;
      return predicted == 0 ? Double.NaN : (double) matched / predicted;
    }

    /** One line for the report, or null when not checked. */
    public String line() {
      if (this == NONE) {
        return null;
      }
      if (matched + missing == 0) {
        return "parity check: no sample judged (no KV events in time)";
      }
      return String.format(
          Locale.ROOT,
          "parity check: %.4f (%d of %d predicted block hashes published by the engines, %d"
              + " samples)%s",
          ratio(),
          matched,
          matched + missing,
          samples,
          degraded ? "; DEGRADED to approximate scoring" : "");
    }
  }

  /**
   * The reuse split of one strategy, from the routers' own accounting ({@code
   * kvroute.routing.reuse.*}, summed over the replicas): for the requests whose computing engine
   * reported its cached tokens ({@code measured}), the prompt tokens, the tokens some eligible pod
   * held ({@code available}), the chosen pod held ({@code captured}) and the engine reused ({@code
   * delivered}), and the misses by cause. {@code indexed}: the strategy keeps a prefix index (a
   * router without one sees nothing available, whatever the engines deliver).
   */
  public record Reuse(
      boolean indexed,
      long measured,
      long unmeasured,
      long prompt,
      long available,
      long captured,
      long delivered,
      long loadMisses,
      long staleMisses,
      long noneAvailable) {

    /** {@code tokens / prompt} in percent, 0 with no prompt. */
    public double percent(long tokens) {
      return prompt == 0 ? 0 : 100.0 * tokens / prompt;
    }

    /** One line for the report. */
    public String line() {
      if (measured == 0) {
        return "reuse split: nothing measured (no usage reported, " + unmeasured + " requests)";
      }
      return String.format(
          Locale.ROOT,
          "reuse split: available %.1f%%, captured %.1f%%, delivered %.1f%% of %d prompt tokens"
              + " (%d requests); misses: load %d, stale index %d, none available %d%s",
          percent(available),
          percent(captured),
          percent(delivered),
          prompt,
          measured,
          loadMisses,
          staleMisses,
          noneAvailable,
          indexed ? "" : " (no prefix index: this router cannot see what is available)");
    }
  }

  private Report() {}

  /** Prints the comparison table and a bar chart of TTFT p50 and cache hits. */
  public static void print(List<Result> results, PrintWriter out) {
    out.println();
    out.printf(
        Locale.ROOT,
        "%-12s %9s %7s %11s %10s %10s %11s%n",
        "strategy",
        "requests",
        "errors",
        "cache hits",
        "TTFT p50",
        "TTFT p90",
        "throughput");
    out.println("-".repeat(76));
    for (Result r : results) {
      out.printf(
          Locale.ROOT,
          "%-12s %9d %7d %10.1f%% %8.1fms %8.1fms %8.1f/s%n",
          r.strategy(),
          r.requests(),
          r.errors(),
          100 * r.hitRatio(),
          r.ttft(50),
          r.ttft(90),
          r.throughput());
    }
    out.println();
    out.printf(
        Locale.ROOT,
        "%-12s %9s %10s %9s %10s   %s%n",
        "reuse split",
        "measured",
        "available",
        "captured",
        "delivered",
        "misses: load / stale index / none available");
    out.println("-".repeat(96));
    for (Result r : results) {
      Reuse u = r.reuse();
      out.printf(
          Locale.ROOT,
          "%-12s %9d %9.1f%% %8.1f%% %9.1f%%   %d / %d / %d%s%n",
          r.strategy(),
          u.measured(),
          u.percent(u.available()),
          u.percent(u.captured()),
          u.percent(u.delivered()),
          u.loadMisses(),
          u.staleMisses(),
          u.noneAvailable(),
          u.indexed() ? "" : "  (no index)");
    }
    out.println();
    double maxTtft =
        results.stream().mapToDouble(r -> r.ttft(50)).filter(d -> !Double.isNaN(d)).max().orElse(1);
    out.println(
        String.format(
            Locale.ROOT,
            "%-12s %-28s  %s",
            "",
            "TTFT p50 (shorter is better)",
            "cache hit ratio (longer is better)"));
    for (Result r : results) {
      int a = (int) Math.round(28 * (Double.isNaN(r.ttft(50)) ? 0 : r.ttft(50) / maxTtft));
      int b = (int) Math.round(28 * r.hitRatio());
      out.printf(Locale.ROOT, "%-12s %-28s  %-28s%n", r.strategy(), "#".repeat(a), "=".repeat(b));
    }
    out.println();
    out.println(
        "cache hits: share of the clients' prompt tokens no pod had to compute (prefix-cache hits"
            + " and KV transfers); TTFT: measured by the clients through the gateway.");
    out.println(
        "index vs engines: cached prompt tokens the router's index predicted on the pod that"
            + " computed the prompt, against what that pod reported (usage.cached_tokens).");
    out.println(
        "reuse split: the routers' own accounting (kvroute.routing.reuse.*), in shares of the"
            + " prompt tokens of requests whose engine reported usage: available = the longest"
            + " prefix any eligible pod held, captured = what the chosen pod held, delivered = what"
            + " it reused. Misses: load (captured < available), stale index (delivered <"
            + " captured), none available.");
    out.println();
    for (Result r : results) {
      out.println(r.strategy() + ": " + r.description());
      out.println("    " + r.prediction().line());
      out.println("    " + r.reuse().line());
      if (r.parity().line() != null) {
        out.println("    " + r.parity().line());
      }
      for (String line : r.perPod()) {
        out.println("    " + line);
      }
    }
    out.flush();
  }

  /** A self-contained HTML page with the same table and bars. */
  public static String html(List<Result> results) {
    StringBuilder sb = new StringBuilder();
    sb.append("<!doctype html><html><head><meta charset=\"utf-8\"><title>kvroute demo</title>")
        .append(
            "<style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 10px;text-align:right}")
        .append(
            "th{background:#eee}.bar{height:12px;background:#4a7}.ttft{background:#c64}</style>")
        .append("</head><body><h1>kvroute demo: routing strategies side by side</h1><table>")
        .append("<tr><th>strategy</th><th>requests</th><th>errors</th><th>cache hits</th>")
        .append(
            "<th>TTFT p50 (ms)</th><th>TTFT p90 (ms)</th><th>throughput (req/s)</th><th></th></tr>");
    double maxTtft =
        results.stream().mapToDouble(r -> r.ttft(50)).filter(d -> !Double.isNaN(d)).max().orElse(1);
    for (Result r : results) {
      sb.append(
          String.format(
              Locale.ROOT,
              "<tr><td style=\"text-align:left\">%s</td><td>%d</td><td>%d</td><td>%.1f%%</td>"
                  + "<td>%.1f</td><td>%.1f</td><td>%.1f</td><td style=\"width:300px;text-align:left\">"
                  + "<div class=\"bar\" style=\"width:%dpx\"></div>"
                  + "<div class=\"bar ttft\" style=\"width:%dpx\"></div></td></tr>",
              escape(r.strategy()),
              r.requests(),
              r.errors(),
              100 * r.hitRatio(),
              r.ttft(50),
              r.ttft(90),
              r.throughput(),
              (int) (280 * r.hitRatio()),
              (int) (280 * (Double.isNaN(r.ttft(50)) ? 0 : r.ttft(50) / maxTtft))));
    }
    sb.append("</table><p>Green: cache hit ratio. Red: TTFT p50 relative to the slowest.</p>");
    sb.append("<h2>Reuse split</h2><table id=\"reuse\">")
        .append("<tr><th>strategy</th><th>measured requests</th><th>available</th>")
        .append("<th>captured</th><th>delivered</th><th>load misses</th>")
        .append("<th>stale-index misses</th><th>none available</th></tr>");
    for (Result r : results) {
      Reuse u = r.reuse();
      sb.append(
          String.format(
              Locale.ROOT,
              "<tr data-strategy=\"%s\"><td style=\"text-align:left\">%s%s</td><td>%d</td>"
                  + "<td>%.1f%%</td><td>%.1f%%</td><td>%.1f%%</td><td>%d</td><td>%d</td>"
                  + "<td>%d</td></tr>",
              escape(r.strategy()),
              escape(r.strategy()),
              u.indexed() ? "" : " (no index)",
              u.measured(),
              u.percent(u.available()),
              u.percent(u.captured()),
              u.percent(u.delivered()),
              u.loadMisses(),
              u.staleMisses(),
              u.noneAvailable()));
    }
    sb.append(
        "</table><p>The routers' own accounting (kvroute.routing.reuse.*): shares of the prompt"
            + " tokens of requests whose engine reported its cached tokens. Available: the longest"
            + " prefix any eligible pod held; captured: what the chosen pod held; delivered: what"
            + " the pod reused. A miss is load (captured &lt; available), a stale index (delivered"
            + " &lt; captured) or none available.</p>");
    for (Result r : results) {
      sb.append("<h3>")
          .append(escape(r.strategy()))
          .append("</h3><p>")
          .append(escape(r.description()))
          .append("</p><pre>")
          .append(escape(r.prediction().line()))
          .append('\n')
          .append(escape(r.reuse().line()))
          .append('\n');
      if (r.parity().line() != null) {
        sb.append(escape(r.parity().line())).append('\n');
      }
      for (String line : r.perPod()) {
        sb.append(escape(line)).append('\n');
      }
      sb.append("</pre>");
    }
    return sb.append("</body></html>").toString();
  }

  private static String escape(String s) {
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
  }

  /** Percentiles helper for per-pod lines. */
  static double percentile(List<Double> values, double p) {
    if (values.isEmpty()) {
      return Double.NaN;
    }
    List<Double> sorted = new ArrayList<>(values);
    sorted.sort(Double::compare);
    int rank = (int) Math.ceil(p / 100.0 * sorted.size());
    return sorted.get(Math.max(0, Math.min(sorted.size() - 1, rank - 1)));
  }
}
