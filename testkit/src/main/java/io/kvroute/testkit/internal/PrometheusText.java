package io.kvroute.testkit.internal;

/**
 * Builds a Prometheus text exposition (format 0.0.4) the way vLLM's {@code prometheus_client}
 * writes it: {@code # HELP} and {@code # TYPE} lines, counters with a {@code _total} suffix and
 * every sample value printed as a Java {@code double}.
 *
 * <p>Not thread-safe: build one exposition on one thread.
 */
public final class PrometheusText {
  private final StringBuilder sb = new StringBuilder(4096);

  /** An empty exposition. */
  public PrometheusText() {}

  /**
   * A label set, {@code {name="value",...}}, values escaped.
   *
   * @param namesAndValues label names and values, alternating
   */
  public static String labels(String... namesAndValues) {
    StringBuilder l = new StringBuilder("{");
    for (int i = 0; i < namesAndValues.length; i += 2) {
      if (i > 0) {
        l.append(',');
      }
      l.append(namesAndValues[i]).append("=\"").append(escape(namesAndValues[i + 1])).append('"');
    }
    return l.append('}').toString();
  }

  private static String escape(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
  }

  private void header(String name, String help, String type) {
    sb.append("# HELP ").append(name).append(' ').append(help).append('\n');
    sb.append("# TYPE ").append(name).append(' ').append(type).append('\n');
  }

  /**
   * Appends a gauge.
   *
   * @param labels a label set from {@link #labels}
   * @return this
   */
  public PrometheusText gauge(String name, String help, String labels, double value) {
    return sample("gauge", name, help, labels, value);
  }

  /**
   * Appends a counter; {@code name} is without the {@code _total} suffix.
   *
   * @param labels a label set from {@link #labels}
   * @return this
   */
  public PrometheusText counter(String name, String help, String labels, double value) {
    return sample("counter", name + "_total", help, labels, value);
  }

  private PrometheusText sample(String type, String name, String help, String labels, double v) {
    header(name, help, type);
    sb.append(name).append(labels).append(' ').append(v).append('\n');
    return this;
  }

  /**
   * Appends a histogram.
   *
   * @param labels a label set from {@link #labels}
   * @param bounds the upper bounds of the finite buckets
   * @param buckets the cumulative count of each finite bucket
   * @param count the number of observations (the {@code +Inf} bucket)
   * @param sum the sum of the observations
   * @return this
   */
  public PrometheusText histogram(
      String name,
      String help,
      String labels,
      double[] bounds,
      long[] buckets,
      long count,
      double sum) {
    header(name, help, "histogram");
    String inner = labels.substring(1, labels.length() - 1);
    for (int i = 0; i < bounds.length; i++) {
      sb.append(name).append("_bucket{").append(inner).append(",le=\"").append(bounds[i]);
      sb.append("\"} ").append((double) buckets[i]).append('\n');
    }
    sb.append(name).append("_bucket{").append(inner).append(",le=\"+Inf\"} ");
    sb.append((double) count).append('\n');
    sb.append(name).append("_count").append(labels).append(' ').append((double) count);
    sb.append('\n');
    sb.append(name).append("_sum").append(labels).append(' ').append(sum).append('\n');
    return this;
  }

  /** The exposition so far. */
  @Override
  public String toString() {
    return sb.toString();
  }
}
