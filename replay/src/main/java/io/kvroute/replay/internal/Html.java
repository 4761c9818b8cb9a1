package io.kvroute.replay.internal;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.replay.ReplayReport;
import io.kvroute.replay.StrategyResult;
import java.util.Locale;

/**
 * The replay report as one self-contained HTML page: the figures table, and two charts drawn by a
 * small inline script into SVG from the embedded data: TTFT CDFs (log-scaled time) and the hit
 * ratio over the trace's time, one line per strategy. No external resources. Stateless.
 */
public final class Html {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String[] COLORS = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"
  };

  private Html() {}

  /** Renders {@code report}. */
  public static String render(ReplayReport report) {
    StringBuilder sb = new StringBuilder(32_768);
    sb.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
        .append("<title>kvroute replay</title>\n<style>\n")
        .append("body{font-family:system-ui,sans-serif;margin:24px;color:#222}")
        .append("table{border-collapse:collapse;margin:12px 0}")
        .append("th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}")
        .append("th:first-child,td:first-child{text-align:left}")
        .append(".chart{display:inline-block;margin:8px 24px 8px 0;vertical-align:top}")
        .append("svg text{font-size:11px}.legend span{margin-right:14px;white-space:nowrap}")
        .append("\n</style></head><body>\n<h1>kvroute replay</h1>\n<p id=\"description\">")
        .append(escape(report.description()))
        .append("</p>\n<table id=\"figures\"><thead><tr>")
        .append("<th>strategy</th><th>requests</th><th>hit ratio</th><th>TTFT p50</th>")
        .append("<th>TTFT p90</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p90</th>")
        .append("<th>output tok/s</th><th>goodput req/s</th><th>SLO attainment</th>")
        .append("<th>imbalance</th><th>available</th><th>captured</th><th>delivered</th>")
        .append("</tr></thead><tbody>\n");
    for (StrategyResult s : report.strategies()) {
      double p = Math.max(1, s.promptTokens());
      sb.append("<tr data-strategy=\"")
          .append(escape(s.name()))
          .append("\"><td>")
          .append(escape(s.name()))
          .append("</td>")
          .append(cell("%d", s.requests()))
          .append(cell("%.1f%%", 100 * s.hitRatio()))
          .append(cell("%.0f ms", s.ttftMs().p50()))
          .append(cell("%.0f ms", s.ttftMs().p90()))
          .append(cell("%.0f ms", s.ttftMs().p99()))
          .append(cell("%.1f ms", s.tpotMs().p50()))
          .append(cell("%.1f ms", s.tpotMs().p90()))
          .append(cell("%.0f", s.outputTokensPerSecond()))
          .append(cell("%.3f", s.goodputRps()))
          .append(cell("%.1f%%", 100 * s.sloAttainment()))
          .append(cell("%.2f", s.imbalance()))
          .append(cell("%.1f%%", 100 * s.reuse().available() / p))
          .append(cell("%.1f%%", 100 * s.reuse().captured() / p))
          .append(cell("%.1f%%", 100 * s.reuse().delivered() / p))
          .append("</tr>\n");
    }
    sb.append("</tbody></table>\n")
        .append("<p>available: some eligible engine held the prefix when the request was routed;")
        .append(" captured: the chosen engine held it; delivered: the engine reused it (vLLM's")
        .append(" num_cached_tokens). Shares of prompt tokens.</p>\n")
        .append("<div class=\"chart\"><h2>TTFT CDF</h2><svg id=\"ttft-cdf\" width=\"560\"")
        .append(" height=\"340\" role=\"img\" aria-label=\"TTFT CDF\"></svg></div>\n")
        .append("<div class=\"chart\"><h2>Hit ratio over time</h2><svg id=\"hit-ratio\"")
        .append(
            " width=\"560\" height=\"340\" role=\"img\" aria-label=\"hit ratio\"></svg></div>\n")
        .append("<div class=\"legend\" id=\"legend\"></div>\n")
        .append("<script type=\"application/json\" id=\"data\">")
        .append(data(report).replace("</", "<\\/"))
        .append("</script>\n<script>\n")
        .append(SCRIPT)
        .append("\n</script>\n</body></html>\n");
    return sb.toString();
  }

  private static String data(ReplayReport report) {
    ArrayNode arr = JSON.createArrayNode();
    int i = 0;
    for (StrategyResult s : report.strategies()) {
      ObjectNode o = arr.addObject();
      o.put("name", s.name());
      o.put("color", COLORS[i++ % COLORS.length]);
      ArrayNode cdf = o.putArray("ttftCdfMs");
      s.ttftCdfMs().forEach(v -> cdf.add(finite(v)));
      o.put("bucketSeconds", s.timelineBucketSeconds());
      ArrayNode hr = o.putArray("hitRatio");
      s.hitRatioOverTime().forEach(v -> hr.add(Double.isNaN(v) ? null : v));
    }
    return arr.toString();
  }

  private static double finite(double v) {
    return Double.isNaN(v) || Double.isInfinite(v) ? 0 : v;
  }

  private static String cell(String format, double v) {
    if (Double.isNaN(v)) {
      return "<td>-</td>";
    }
    return "<td>" + String.format(Locale.ROOT, format, v) + "</td>";
  }

  private static String cell(String format, int v) {
    return "<td>" + String.format(Locale.ROOT, format, v) + "</td>";
  }

  static String escape(String s) {
    StringBuilder sb = new StringBuilder(s.length());
    for (char c : s.toCharArray()) {
      switch (c) {
        case '<':
          sb.append("&lt;");
          break;
        case '>':
          sb.append("&gt;");
          break;
        case '&':
          sb.append("&amp;");
          break;
        case '"':
          sb.append("&quot;");
          break;
        default:
          sb.append(c);
      }
    }
    return sb.toString();
  }

  /** Draws both charts from the embedded data; sets window.replayRendered when done. */
  private static final String SCRIPT =
      String.join(
          "\n",
          "(function () {",
          "  const data = JSON.parse(document.getElementById('data').textContent);",
          "  const NS = 'http://www.w3.org/2000/svg';",
          "  const M = {l: 56, r: 12, t: 10, b: 40};",
          "  function el(tag, attrs, parent, text) {",
          "    const e = document.createElementNS(NS, tag);",
          "    for (const k in attrs) e.setAttribute(k, attrs[k]);",
          "    if (text !== undefined) e.textContent = text;",
          "    parent.appendChild(e); return e;",
          "  }",
          "  function chart(svg, xs, ys, xlabel, ylabel, xfmt, yfmt, series) {",
          "    const W = +svg.getAttribute('width'), H = +svg.getAttribute('height');",
          "    const w = W - M.l - M.r, h = H - M.t - M.b;",
          "    const X = v => M.l + (xs.f(v) - xs.f(xs.min)) / (xs.f(xs.max) - xs.f(xs.min) || 1) * w;",
          "    const Y = v => M.t + h - (v - ys.min) / (ys.max - ys.min || 1) * h;",
          "    el('rect', {x: M.l, y: M.t, width: w, height: h, fill: 'none', stroke: '#999'}, svg);",
          "    xs.ticks.forEach(v => { el('line', {x1: X(v), x2: X(v), y1: M.t, y2: M.t + h,",
          "      stroke: '#eee'}, svg); el('text', {x: X(v), y: M.t + h + 14,",
          "      'text-anchor': 'middle', class: 'xtick'}, svg, xfmt(v)); });",
          "    ys.ticks.forEach(v => { el('line', {x1: M.l, x2: M.l + w, y1: Y(v), y2: Y(v),",
          "      stroke: '#eee'}, svg); el('text', {x: M.l - 4, y: Y(v) + 4,",
          "      'text-anchor': 'end', class: 'ytick'}, svg, yfmt(v)); });",
          "    el('text', {x: M.l + w / 2, y: H - 6, 'text-anchor': 'middle', class: 'xlabel'},",
          "      svg, xlabel);",
          "    el('text', {x: 12, y: M.t + h / 2, 'text-anchor': 'middle', class: 'ylabel',",
          "      transform: 'rotate(-90 12 ' + (M.t + h / 2) + ')'}, svg, ylabel);",
          "    series.forEach(s => {",
          "      const pts = s.points.filter(p => p[1] !== null && isFinite(p[0]))",
          "        .map(p => X(Math.min(xs.max, Math.max(xs.min, p[0]))).toFixed(1) + ','",
          "          + Y(p[1]).toFixed(1));",
          "      el('polyline', {points: pts.join(' '), fill: 'none', stroke: s.color,",
          "        'stroke-width': 2, class: 'series', 'data-strategy': s.name}, svg);",
          "    });",
          "  }",
          "  let lo = Infinity, hi = 0;",
          "  data.forEach(s => s.ttftCdfMs.forEach(v => { if (v > 0) { lo = Math.min(lo, v);",
          "    hi = Math.max(hi, v); } }));",
          "  if (!isFinite(lo)) { lo = 1; hi = 10; }",
          "  lo = Math.pow(10, Math.floor(Math.log10(lo)));",
          "  hi = Math.pow(10, Math.ceil(Math.log10(Math.max(hi, lo * 10))));",
          "  const xt = []; for (let v = lo; v <= hi * 1.0001; v *= 10) xt.push(v);",
          "  const fmtMs = v => v >= 1000 ? (v / 1000) + ' s' : v + ' ms';",
          "  chart(document.getElementById('ttft-cdf'),",
          "    {min: lo, max: hi, f: Math.log10, ticks: xt},",
          "    {min: 0, max: 1, ticks: [0, 0.25, 0.5, 0.75, 1]},",
          "    'time to first token (log scale)', 'fraction of requests', fmtMs,",
          "    v => v.toFixed(2),",
          "    data.map(s => ({name: s.name, color: s.color,",
          "      points: s.ttftCdfMs.map((v, i) => [Math.max(v, lo),",
          "        i / Math.max(1, s.ttftCdfMs.length - 1)])})));",
          "  const buckets = Math.max(...data.map(s => s.hitRatio.length), 1);",
          "  const span = (data[0] ? data[0].bucketSeconds : 1) * buckets;",
          "  const tt = [0, 0.25, 0.5, 0.75, 1].map(f => f * span);",
          "  chart(document.getElementById('hit-ratio'),",
          "    {min: 0, max: span || 1, f: v => v, ticks: tt},",
          "    {min: 0, max: 1, ticks: [0, 0.25, 0.5, 0.75, 1]},",
          "    'arrival time (virtual seconds)', 'prefix-cache hit ratio (tokens)',",
          "    v => v.toFixed(0) + ' s', v => (v * 100).toFixed(0) + '%',",
          "    data.map(s => ({name: s.name, color: s.color,",
          "      points: s.hitRatio.map((v, i) => [(i + 0.5) * s.bucketSeconds, v])})));",
          "  const legend = document.getElementById('legend');",
          "  data.forEach(s => { const sp = document.createElement('span');",
          "    sp.innerHTML = '<b style=\"color:' + s.color + '\">&#9632;</b> ';",
          "    sp.appendChild(document.createTextNode(s.name)); legend.appendChild(sp); });",
          "  window.replayRendered = true;",
          "})();");
}
