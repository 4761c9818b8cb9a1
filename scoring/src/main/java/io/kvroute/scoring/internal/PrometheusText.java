package io.kvroute.scoring.internal;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A small, forgiving parser of the Prometheus text exposition format (0.0.4, and the OpenMetrics
 * subset engines emit): {@code name{label="value",...} value [timestamp]}. Comment and blank lines
 * are skipped; a malformed line is skipped and counted, never fatal.
 *
 * <p>Stateless and thread-safe.
 */
public final class PrometheusText {

  /** Receives samples. */
  @FunctionalInterface
  public interface SampleConsumer {
    /** One sample; {@code labels} is unmodifiable and empty when the sample has none. */
    void accept(String name, Map<String, String> labels, double value);
  }

  /** Decides from the metric name whether a sample's labels are worth parsing. */
  @FunctionalInterface
  public interface NameFilter {
    /** True to deliver samples of this metric. */
    boolean wanted(String name);
  }

  private PrometheusText() {}

  /**
   * Parses {@code text}, delivering the samples whose names {@code filter} wants.
   *
   * @return the number of malformed lines skipped
   */
  public static int parse(CharSequence text, NameFilter filter, SampleConsumer consumer) {
    int bad = 0;
    int len = text.length();
    int pos = 0;
    while (pos < len) {
      int end = pos;
      while (end < len && text.charAt(end) != '\n') {
        end++;
      }
      int lineEnd = end > pos && text.charAt(end - 1) == '\r' ? end - 1 : end;
      if (!parseLine(text, pos, lineEnd, filter, consumer)) {
        bad++;
      }
      pos = end + 1;
    }
    return bad;
  }

  /** Parses one line; returns false when it is malformed. */
  private static boolean parseLine(
      CharSequence s, int from, int to, NameFilter filter, SampleConsumer consumer) {
    int i = skipSpaces(s, from, to);
    if (i >= to || s.charAt(i) == '#') {
      return true;
    }
    int nameStart = i;
    while (i < to && isNameChar(s.charAt(i))) {
      i++;
    }
    if (i == nameStart) {
      return false;
    }
    String name = s.subSequence(nameStart, i).toString();
    boolean wanted = filter.wanted(name);
    Map<String, String> labels = Map.of();
    if (i < to && s.charAt(i) == '{') {
      LinkedHashMap<String, String> m = wanted ? new LinkedHashMap<>() : null;
      i++;
      while (true) {
        i = skipSpaces(s, i, to);
        if (i >= to) {
          return false;
        }
        if (s.charAt(i) == '}') {
          i++;
          break;
        }
        int ks = i;
        while (i < to && isNameChar(s.charAt(i))) {
          i++;
        }
        if (i == ks) {
          return false;
        }
        String key = s.subSequence(ks, i).toString();
        i = skipSpaces(s, i, to);
        if (i >= to || s.charAt(i) != '=') {
          return false;
        }
        i = skipSpaces(s, i + 1, to);
        if (i >= to || s.charAt(i) != '"') {
          return false;
        }
        i++;
        StringBuilder v = new StringBuilder();
        boolean closed = false;
        while (i < to) {
          char c = s.charAt(i++);
          if (c == '\\' && i < to) {
            char e = s.charAt(i++);
            v.append(e == 'n' ? '\n' : e);
          } else if (c == '"') {
            closed = true;
            break;
          } else {
            v.append(c);
          }
        }
        if (!closed) {
          return false;
        }
        if (m != null) {
          m.put(key, v.toString());
        }
        i = skipSpaces(s, i, to);
        if (i < to && s.charAt(i) == ',') {
          i++;
        }
      }
      if (m != null) {
        labels = Collections.unmodifiableMap(m);
      }
    }
    int vs = skipSpaces(s, i, to);
    if (vs == i && vs < to) {
      return false; // no separator between name/labels and value
    }
    int ve = vs;
    while (ve < to && s.charAt(ve) != ' ' && s.charAt(ve) != '\t') {
      ve++;
    }
    if (ve == vs) {
      return false;
    }
    double value;
    try {
      value = parseValue(s.subSequence(vs, ve).toString());
    } catch (NumberFormatException e) {
      return false;
    }
    if (wanted) {
      consumer.accept(name, labels, value);
    }
    return true;
  }

  private static double parseValue(String v) {
    switch (v) {
      case "+Inf":
      case "Inf":
        return Double.POSITIVE_INFINITY;
      case "-Inf":
        return Double.NEGATIVE_INFINITY;
      case "NaN":
        return Double.NaN;
      default:
        return Double.parseDouble(v);
    }
  }

  private static int skipSpaces(CharSequence s, int i, int to) {
    while (i < to && (s.charAt(i) == ' ' || s.charAt(i) == '\t')) {
      i++;
    }
    return i;
  }

  private static boolean isNameChar(char c) {
    return (c >= 'a' && c <= 'z')
        || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9')
        || c == '_'
        || c == ':';
  }
}
