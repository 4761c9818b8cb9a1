package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.internal.Py.Undefined;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Python's {@code json.dumps} for template values, as transformers' {@code tojson} filter calls it.
 *
 * <p>Stateless and thread-safe.
 */
final class PyJson {
  private PyJson() {}

  /**
   * {@code json.dumps(value, ensure_ascii=False, indent=indent, separators=separators,
   * sort_keys=sortKeys)}, as transformers' {@code tojson} filter calls it.
   */
  static String toJson(Object v, Integer indent, String itemSep, String keySep, boolean sortKeys) {
    String is = itemSep != null ? itemSep : (indent == null ? ", " : ",");
    String ks = keySep != null ? keySep : ": ";
    StringBuilder sb = new StringBuilder();
    json(sb, v, indent, is, ks, sortKeys, 0);
    return sb.toString();
  }

  private static void json(
      StringBuilder sb, Object v, Integer indent, String is, String ks, boolean sort, int depth) {
    if (v == null) {
      sb.append("null");
    } else if (v instanceof Boolean b) {
      sb.append(b ? "true" : "false");
    } else if (Py.isInt(v)) {
      sb.append(Py.toLong(v));
    } else if (v instanceof Double d) {
      sb.append(
          Double.isNaN(d)
              ? "NaN"
              : Double.isInfinite(d) ? (d > 0 ? "Infinity" : "-Infinity") : Py.floatRepr(d));
    } else if (v instanceof String s) {
      jsonString(sb, s);
    } else if (v instanceof List<?> l) {
      if (l.isEmpty()) {
        sb.append("[]");
        return;
      }
      sb.append('[');
      for (int k = 0; k < l.size(); k++) {
        if (k > 0) {
          sb.append(is);
        }
        newline(sb, indent, depth + 1);
        json(sb, l.get(k), indent, is, ks, sort, depth + 1);
      }
      newline(sb, indent, depth);
      sb.append(']');
    } else if (v instanceof Map<?, ?> || v instanceof JinjaRuntime.Namespace) {
      Map<?, ?> m = v instanceof Map<?, ?> mm ? mm : ((JinjaRuntime.Namespace) v).attrs;
      if (m.isEmpty()) {
        sb.append("{}");
        return;
      }
      List<Map.Entry<?, ?>> entries = new ArrayList<>(m.entrySet());
      if (sort) {
        entries.sort((x, y) -> Py.compare(jsonKey(x.getKey()), jsonKey(y.getKey())));
      }
      sb.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> e : entries) {
        if (!first) {
          sb.append(is);
        }
        first = false;
        newline(sb, indent, depth + 1);
        jsonString(sb, jsonKey(e.getKey()));
        sb.append(ks);
        json(sb, e.getValue(), indent, is, ks, sort, depth + 1);
      }
      newline(sb, indent, depth);
      sb.append('}');
    } else if (v instanceof Undefined u) {
      throw Py.typeError("Object of type Undefined is not JSON serializable ('" + u.name + "')");
    } else {
      throw Py.typeError("Object of type " + Py.typeName(v) + " is not JSON serializable");
    }
  }

  private static String jsonKey(Object k) {
    if (k instanceof String s) {
      return s;
    }
    if (k == null) {
      return "null";
    }
    if (k instanceof Boolean b) {
      return b ? "true" : "false";
    }
    return Py.str(k);
  }

  private static void newline(StringBuilder sb, Integer indent, int depth) {
    if (indent != null) {
      sb.append('\n');
      sb.append(" ".repeat(indent * depth));
    }
  }

  static void jsonString(StringBuilder sb, String s) {
    sb.append('"');
    for (int k = 0; k < s.length(); k++) {
      char c = s.charAt(k);
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\n' -> sb.append("\\n");
        case '\r' -> sb.append("\\r");
        case '\t' -> sb.append("\\t");
        case '\b' -> sb.append("\\b");
        case '\f' -> sb.append("\\f");
        default -> {
          if (c < 0x20) {
            sb.append(String.format("\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
        }
      }
    }
    sb.append('"');
  }
}
