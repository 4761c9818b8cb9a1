package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Python value semantics for the Jinja interpreter. Values are {@code null} (None), {@link
 * Undefined}, {@link Boolean}, {@link Long}, {@link Double}, {@link String}, {@link List} (lists
 * and tuples), {@link Map} (dicts, insertion-ordered), {@link JinjaRuntime.Namespace}, {@link
 * JinjaRuntime.Loop} and {@link JinjaRuntime.Fn} (callables). String methods are in {@link
 * PyStrings}, {@code json.dumps} in {@link PyJson}.
 *
 * <p>Stateless and thread-safe.
 */
final class Py {
  private Py() {}

  /** jinja2's default {@code Undefined}: empty when printed or iterated, an error when used. */
  static final class Undefined {
    final String name;

    Undefined(String name) {
      this.name = name;
    }

    ChatTemplateException error() {
      return new ChatTemplateException("chat template error: '" + name + "' is undefined");
    }

    @Override
    public String toString() {
      return "";
    }
  }

  // ------------------------------------------------------------------ type checks

  static boolean isInt(Object v) {
    return v instanceof Long || v instanceof Integer || v instanceof Boolean;
  }

  static boolean isNumber(Object v) {
    return isInt(v) || v instanceof Double || v instanceof Float;
  }

  static long toLong(Object v) {
    if (v instanceof Boolean b) {
      return b ? 1 : 0;
    }
    return ((Number) v).longValue();
  }

  static double toDouble(Object v) {
    if (v instanceof Boolean b) {
      return b ? 1 : 0;
    }
    return ((Number) v).doubleValue();
  }

  static String typeName(Object v) {
    if (v == null) {
      return "NoneType";
    }
    if (v instanceof Undefined) {
      return "Undefined";
    }
    if (v instanceof Boolean) {
      return "bool";
    }
    if (isInt(v)) {
      return "int";
    }
    if (v instanceof Double) {
      return "float";
    }
    if (v instanceof String) {
      return "str";
    }
    if (v instanceof List) {
      return "list";
    }
    if (v instanceof Map) {
      return "dict";
    }
    return v.getClass().getSimpleName();
  }

  static ChatTemplateException typeError(String message) {
    return new ChatTemplateException("chat template error: " + message);
  }

  // ------------------------------------------------------------------ truth, str, repr

  static boolean truthy(Object v) {
    if (v == null || v instanceof Undefined) {
      return false;
    }
    if (v instanceof Boolean b) {
      return b;
    }
    if (v instanceof String s) {
      return !s.isEmpty();
    }
    if (isInt(v)) {
      return toLong(v) != 0;
    }
    if (v instanceof Double d) {
      return d != 0.0;
    }
    if (v instanceof Collection<?> c) {
      return !c.isEmpty();
    }
    if (v instanceof Map<?, ?> m) {
      return !m.isEmpty();
    }
    return true;
  }

  /** Python's {@code str()} as jinja2 prints a value ({@code Undefined} prints as empty). */
  static String str(Object v) {
    if (v instanceof String s) {
      return s;
    }
    if (v instanceof Undefined) {
      return "";
    }
    if (v == null) {
      return "None";
    }
    if (v instanceof Boolean b) {
      return b ? "True" : "False";
    }
    if (isInt(v)) {
      return Long.toString(toLong(v));
    }
    if (v instanceof Double d) {
      return floatRepr(d);
    }
    return repr(v);
  }

  static String repr(Object v) {
    if (v instanceof String s) {
      return strRepr(s);
    }
    if (v instanceof List<?> l) {
      StringBuilder sb = new StringBuilder("[");
      for (int k = 0; k < l.size(); k++) {
        if (k > 0) {
          sb.append(", ");
        }
        sb.append(repr(l.get(k)));
      }
      return sb.append(']').toString();
    }
    if (v instanceof Map<?, ?> m) {
      StringBuilder sb = new StringBuilder("{");
      boolean first = true;
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (!first) {
          sb.append(", ");
        }
        first = false;
        sb.append(repr(e.getKey())).append(": ").append(repr(e.getValue()));
      }
      return sb.append('}').toString();
    }
    if (v instanceof Undefined) {
      return "Undefined";
    }
    return str(v);
  }

  static String strRepr(String s) {
    char q = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
    StringBuilder sb = new StringBuilder().append(q);
    s.codePoints()
        .forEach(
            c -> {
              if (c == q || c == '\\') {
                sb.append('\\').appendCodePoint(c);
              } else if (c == '\n') {
                sb.append("\\n");
              } else if (c == '\r') {
                sb.append("\\r");
              } else if (c == '\t') {
                sb.append("\\t");
              } else if (c < 0x20 || c == 0x7f) {
                sb.append(String.format("\\x%02x", c));
              } else {
                sb.appendCodePoint(c);
              }
            });
    return sb.append(q).toString();
  }

  static String floatRepr(double d) {
    if (Double.isNaN(d)) {
      return "nan";
    }
    if (Double.isInfinite(d)) {
      return d > 0 ? "inf" : "-inf";
    }
    if (d == 0) {
      return (1 / d < 0) ? "-0.0" : "0.0";
    }
    BigDecimal bd = new BigDecimal(Double.toString(d)).stripTrailingZeros();
    double abs = Math.abs(d);
    if (abs >= 1e16 || abs < 1e-4) {
      String digits = bd.unscaledValue().abs().toString();
      int exp = digits.length() - 1 - bd.scale();
      String mant = digits.length() > 1 ? digits.charAt(0) + "." + digits.substring(1) : digits;
      return (d < 0 ? "-" : "") + mant + "e" + (exp < 0 ? "-" : "+") + pad2(Math.abs(exp));
    }
    String plain = bd.toPlainString();
    return plain.contains(".") ? plain : plain + ".0";
  }

  private static String pad2(int e) {
    return e < 10 ? "0" + e : Integer.toString(e);
  }

  // ------------------------------------------------------------------ equality and order

  static boolean eq(Object a, Object b) {
    if (a instanceof Undefined || b instanceof Undefined) {
      return a instanceof Undefined && b instanceof Undefined;
    }
    if (a == null || b == null) {
      return a == b;
    }
    if (isNumber(a) && isNumber(b)) {
      if (isInt(a) && isInt(b)) {
        return toLong(a) == toLong(b);
      }
      return toDouble(a) == toDouble(b);
    }
    if (a instanceof List<?> la && b instanceof List<?> lb) {
      if (la.size() != lb.size()) {
        return false;
      }
      for (int k = 0; k < la.size(); k++) {
        if (!eq(la.get(k), lb.get(k))) {
          return false;
        }
      }
      return true;
    }
    if (a instanceof Map<?, ?> ma && b instanceof Map<?, ?> mb) {
      if (ma.size() != mb.size()) {
        return false;
      }
      for (Map.Entry<?, ?> e : ma.entrySet()) {
        if (!mb.containsKey(e.getKey()) || !eq(e.getValue(), mb.get(e.getKey()))) {
          return false;
        }
      }
      return true;
    }
    return a.equals(b);
  }

  static int compare(Object a, Object b) {
    if (isNumber(a) && isNumber(b)) {
      if (isInt(a) && isInt(b)) {
        return Long.compare(toLong(a), toLong(b));
      }
      return Double.compare(toDouble(a), toDouble(b));
    }
    if (a instanceof String sa && b instanceof String sb) {
      return compareCodePoints(sa, sb);
    }
    if (a instanceof List<?> la && b instanceof List<?> lb) {
      for (int k = 0; k < Math.min(la.size(), lb.size()); k++) {
        if (!eq(la.get(k), lb.get(k))) {
          return compare(la.get(k), lb.get(k));
        }
      }
      return Integer.compare(la.size(), lb.size());
    }
    throw typeError(
        "'<' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'");
  }

  static int compareCodePoints(String a, String b) {
    int i = 0;
    int j = 0;
    while (i < a.length() && j < b.length()) {
      int ca = a.codePointAt(i);
      int cb = b.codePointAt(j);
      if (ca != cb) {
        return Integer.compare(ca, cb);
      }
      i += Character.charCount(ca);
      j += Character.charCount(cb);
    }
    return Integer.compare(a.length() - i, b.length() - j);
  }

  static boolean contains(Object container, Object item) {
    if (container instanceof String s) {
      if (!(item instanceof String t)) {
        throw typeError("'in <string>' requires string as left operand, not " + typeName(item));
      }
      return s.contains(t);
    }
    if (container instanceof Map<?, ?> m) {
      for (Object k : m.keySet()) {
        if (eq(k, item)) {
          return true;
        }
      }
      return false;
    }
    if (container instanceof List<?> l) {
      for (Object o : l) {
        if (eq(o, item)) {
          return true;
        }
      }
      return false;
    }
    if (container instanceof Undefined u) {
      throw u.error();
    }
    throw typeError("argument of type '" + typeName(container) + "' is not iterable");
  }

  // ------------------------------------------------------------------ sequences

  static int len(Object v) {
    if (v instanceof String s) {
      return s.codePointCount(0, s.length());
    }
    if (v instanceof Collection<?> c) {
      return c.size();
    }
    if (v instanceof Map<?, ?> m) {
      return m.size();
    }
    if (v instanceof Undefined) {
      return 0;
    }
    throw typeError("object of type '" + typeName(v) + "' has no len()");
  }

  /** The items a {@code for} loop visits: list items, dict keys, string characters. */
  static List<Object> iterate(Object v) {
    if (v instanceof List<?> l) {
      return new ArrayList<>(l);
    }
    if (v instanceof Map<?, ?> m) {
      return new ArrayList<>(m.keySet());
    }
    if (v instanceof String s) {
      List<Object> out = new ArrayList<>();
      s.codePoints().forEach(c -> out.add(new String(Character.toChars(c))));
      return out;
    }
    if (v instanceof Undefined) {
      return new ArrayList<>();
    }
    if (v instanceof Collection<?> c) {
      return new ArrayList<>(c);
    }
    if (v instanceof Iterable<?> it) {
      List<Object> out = new ArrayList<>();
      Iterator<?> i = it.iterator();
      while (i.hasNext()) {
        out.add(i.next());
      }
      return out;
    }
    throw typeError("'" + typeName(v) + "' object is not iterable");
  }

  static int[] codePoints(String s) {
    return s.codePoints().toArray();
  }

  static Object index(Object seq, Object key) {
    if (seq instanceof List<?> l) {
      if (!isInt(key)) {
        throw typeError("list indices must be integers, not " + typeName(key));
      }
      long k = toLong(key);
      if (k < 0) {
        k += l.size();
      }
      if (k < 0 || k >= l.size()) {
        return new Undefined("list index " + toLong(key));
      }
      return l.get((int) k);
    }
    if (seq instanceof String s) {
      if (!isInt(key)) {
        throw typeError("string indices must be integers");
      }
      int[] cps = codePoints(s);
      long k = toLong(key);
      if (k < 0) {
        k += cps.length;
      }
      if (k < 0 || k >= cps.length) {
        return new Undefined("string index " + toLong(key));
      }
      return new String(Character.toChars(cps[(int) k]));
    }
    return null;
  }

  static Object slice(Object seq, Object start, Object stop, Object step) {
    long st = step == null ? 1 : toLong(step);
    if (st == 0) {
      throw typeError("slice step cannot be zero");
    }
    int n;
    int[] cps = null;
    List<?> list = null;
    if (seq instanceof String s) {
      cps = codePoints(s);
      n = cps.length;
    } else if (seq instanceof List<?> l) {
      list = l;
      n = l.size();
    } else if (seq instanceof Undefined u) {
      throw u.error();
    } else {
      throw typeError("'" + typeName(seq) + "' object is not subscriptable");
    }
    long lo;
    long hi;
    if (st > 0) {
      lo = start == null ? 0 : clampIndex(toLong(start), n, 0, n);
      hi = stop == null ? n : clampIndex(toLong(stop), n, 0, n);
    } else {
      lo = start == null ? n - 1 : clampIndex(toLong(start), n, -1, n - 1);
      hi = stop == null ? -1 : clampIndex(toLong(stop), n, -1, n - 1);
    }
    StringBuilder sb = cps != null ? new StringBuilder() : null;
    List<Object> out = cps == null ? new ArrayList<>() : null;
    for (long k = lo; st > 0 ? k < hi : k > hi; k += st) {
      if (cps != null) {
        sb.appendCodePoint(cps[(int) k]);
      } else {
        out.add(list.get((int) k));
      }
    }
    return cps != null ? sb.toString() : out;
  }

  private static long clampIndex(long k, int n, long min, long max) {
    if (k < 0) {
      k += n;
    }
    return Math.max(min, Math.min(max, k));
  }

  // ------------------------------------------------------------------ arithmetic

  static Object add(Object a, Object b) {
    if (a instanceof String sa && b instanceof String sb) {
      return sa + sb;
    }
    if (isNumber(a) && isNumber(b)) {
      return isInt(a) && isInt(b) ? (Object) (toLong(a) + toLong(b)) : toDouble(a) + toDouble(b);
    }
    if (a instanceof List<?> la && b instanceof List<?> lb) {
      List<Object> out = new ArrayList<>(la);
      out.addAll(lb);
      return out;
    }
    undefinedCheck(a, b);
    throw typeError(
        "unsupported operand type(s) for +: '" + typeName(a) + "' and '" + typeName(b) + "'");
  }

  static Object arith(String op, Object a, Object b) {
    if (op.equals("+")) {
      return add(a, b);
    }
    if (op.equals("*")) {
      if (a instanceof String s && isInt(b)) {
        return s.repeat((int) Math.max(0, toLong(b)));
      }
      if (a instanceof List<?> l && isInt(b)) {
        List<Object> out = new ArrayList<>();
        for (long k = 0; k < toLong(b); k++) {
          out.addAll(l);
        }
        return out;
      }
    }
    undefinedCheck(a, b);
    if (!isNumber(a) || !isNumber(b)) {
      throw typeError(
          "unsupported operand type(s) for "
              + op
              + ": '"
              + typeName(a)
              + "' and '"
              + typeName(b)
              + "'");
    }
    boolean ints = isInt(a) && isInt(b);
    switch (op) {
      case "-":
        return ints ? (Object) (toLong(a) - toLong(b)) : toDouble(a) - toDouble(b);
      case "*":
        return ints ? (Object) (toLong(a) * toLong(b)) : toDouble(a) * toDouble(b);
      case "/":
        if (toDouble(b) == 0) {
          throw typeError("division by zero");
        }
        return toDouble(a) / toDouble(b);
      case "//":
        if (toDouble(b) == 0) {
          throw typeError("integer division or modulo by zero");
        }
        return ints
            ? (Object) Math.floorDiv(toLong(a), toLong(b))
            : Math.floor(toDouble(a) / toDouble(b));
      case "%":
        if (toDouble(b) == 0) {
          throw typeError("integer division or modulo by zero");
        }
        if (ints) {
          return Math.floorMod(toLong(a), toLong(b));
        }
        double m = toDouble(a) % toDouble(b);
        if (m != 0 && (m < 0) != (toDouble(b) < 0)) {
          m += toDouble(b);
        }
        return m;
      case "**":
        if (ints && toLong(b) >= 0) {
          long r = 1;
          for (long k = 0; k < toLong(b); k++) {
            r *= toLong(a);
          }
          return r;
        }
        return Math.pow(toDouble(a), toDouble(b));
      default:
        throw typeError("unknown operator " + op);
    }
  }

  private static void undefinedCheck(Object a, Object b) {
    if (a instanceof Undefined u) {
      throw u.error();
    }
    if (b instanceof Undefined u) {
      throw u.error();
    }
  }

  // ------------------------------------------------------------------ calls and identity

  /**
   * Python's argument binding for one parameter: the positional argument {@code pos}, else the
   * keyword argument {@code name}, else {@code dflt}.
   */
  static Object arg(List<Object> args, Map<String, Object> kw, int pos, String name, Object dflt) {
    if (pos < args.size()) {
      return args.get(pos);
    }
    return kw.containsKey(name) ? kw.get(name) : dflt;
  }

  /** Python's {@code is} as jinja2's {@code sameas} test sees Java values. */
  static boolean same(Object a, Object b) {
    if (a == null || b == null || a instanceof Boolean || b instanceof Boolean) {
      return Objects.equals(a, b);
    }
    return a == b;
  }
}
