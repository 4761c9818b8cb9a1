package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.internal.Py.Undefined;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * jinja2's built-in filters ({@code x | name(args)}) on template values, with transformers' {@code
 * tojson} ({@code json.dumps(x, ensure_ascii=False)}).
 *
 * <p>Stateless and thread-safe.
 */
final class JinjaFilters {
  private JinjaFilters() {}

  /** The names jinja2's {@code filter} test knows. */
  static final Set<String> NAMES =
      Set.of(
          "abs",
          "attr",
          "capitalize",
          "count",
          "d",
          "default",
          "dictsort",
          "e",
          "escape",
          "first",
          "float",
          "indent",
          "int",
          "items",
          "join",
          "last",
          "length",
          "list",
          "lower",
          "map",
          "max",
          "min",
          "reject",
          "rejectattr",
          "replace",
          "reverse",
          "round",
          "safe",
          "select",
          "selectattr",
          "sort",
          "string",
          "sum",
          "title",
          "tojson",
          "trim",
          "unique",
          "upper",
          "wordcount");

  /**
   * Applies the filter {@code name} to {@code v} with evaluated arguments.
   *
   * @throws ChatTemplateException if there is no such filter or it fails
   */
  static Object filter(String name, Object v, List<Object> args, Map<String, Object> kw) {
    switch (name) {
      case "length", "count":
        return (long) Py.len(v);
      case "tojson":
        {
          Object indent = Py.arg(args, kw, 0, "indent", null);
          Object seps = kw.get("separators");
          String is = null;
          String ks = null;
          if (seps instanceof List<?> l && l.size() == 2) {
            is = Py.str(l.get(0));
            ks = Py.str(l.get(1));
          }
          boolean sort = Py.truthy(kw.getOrDefault("sort_keys", false));
          return PyJson.toJson(v, indent == null ? null : (int) Py.toLong(indent), is, ks, sort);
        }
      case "trim":
        return PyStrings.strip(Py.str(v), PyMethods.charsArg(args), true, true);
      case "upper":
        return Py.str(v).toUpperCase(Locale.ROOT);
      case "lower":
        return Py.str(v).toLowerCase(Locale.ROOT);
      case "title":
        return PyStrings.title(Py.str(v));
      case "capitalize":
        return PyStrings.capitalize(Py.str(v));
      case "string":
        return Py.str(v);
      case "safe", "e", "escape", "forceescape":
        return name.equals("safe") ? v : escape(Py.str(v));
      case "first":
        {
          List<Object> l = Py.iterate(v);
          return l.isEmpty() ? new Undefined("first") : l.get(0);
        }
      case "last":
        {
          List<Object> l = Py.iterate(v);
          return l.isEmpty() ? new Undefined("last") : l.get(l.size() - 1);
        }
      case "list":
        return Py.iterate(v);
      case "reverse":
        {
          if (v instanceof String s) {
            return new StringBuilder(s).reverse().toString();
          }
          List<Object> l = Py.iterate(v);
          Collections.reverse(l);
          return l;
        }
      case "join":
        {
          String sep = Py.str(Py.arg(args, kw, 0, "d", ""));
          Object attr = Py.arg(args, kw, 1, "attribute", null);
          StringBuilder sb = new StringBuilder();
          boolean first = true;
          for (Object o : Py.iterate(v)) {
            if (!first) {
              sb.append(sep);
            }
            first = false;
            sb.append(Py.str(attr == null ? o : attribute(o, Py.str(attr))));
          }
          return sb.toString();
        }
      case "default", "d":
        {
          Object dflt = Py.arg(args, kw, 0, "default_value", "");
          boolean bool = Py.truthy(Py.arg(args, kw, 1, "boolean", false));
          if (v instanceof Undefined || (bool && !Py.truthy(v))) {
            return dflt;
          }
          return v;
        }
      case "int":
        {
          Object dflt = Py.arg(args, kw, 0, "default", 0L);
          if (Py.isNumber(v)) {
            return (long) Py.toDouble(v);
          }
          try {
            return Long.parseLong(Py.str(v).strip());
          } catch (NumberFormatException ex) {
            try {
              return (long) Double.parseDouble(Py.str(v).strip());
            } catch (NumberFormatException ex2) {
              return dflt;
            }
          }
        }
      case "float":
        {
          Object dflt = Py.arg(args, kw, 0, "default", 0.0);
          if (Py.isNumber(v)) {
            return Py.toDouble(v);
          }
          try {
            return Double.parseDouble(Py.str(v).strip());
          } catch (NumberFormatException ex) {
            return dflt;
          }
        }
      case "abs":
        return Py.isInt(v) ? (Object) Math.abs(Py.toLong(v)) : Math.abs(Py.toDouble(v));
      case "round":
        {
          long precision = Py.toLong(Py.arg(args, kw, 0, "precision", 0L));
          String method = Py.str(Py.arg(args, kw, 1, "method", "common"));
          double f = Math.pow(10, precision);
          double x = Py.toDouble(v) * f;
          double r =
              switch (method) {
                case "ceil" -> Math.ceil(x);
                case "floor" -> Math.floor(x);
                default -> Math.signum(x) * Math.floor(Math.abs(x) + 0.5);
              };
          return r / f;
        }
      case "replace":
        {
          long count = args.size() > 2 ? Py.toLong(args.get(2)) : -1;
          return PyStrings.replace(Py.str(v), Py.str(args.get(0)), Py.str(args.get(1)), count);
        }
      case "items":
        {
          if (v instanceof Undefined) {
            return new ArrayList<>();
          }
          if (!(v instanceof Map<?, ?> m)) {
            throw Py.typeError("can only get item pairs from a mapping");
          }
          List<Object> out = new ArrayList<>();
          m.forEach((k, val) -> out.add(Arrays.asList(k, val)));
          return out;
        }
      case "dictsort":
        {
          Map<?, ?> m = (Map<?, ?>) v;
          boolean byValue = "value".equals(Py.str(Py.arg(args, kw, 1, "by", "key")));
          boolean reverse = Py.truthy(Py.arg(args, kw, 2, "reverse", false));
          List<Object> out = new ArrayList<>();
          m.forEach((k, val) -> out.add(Arrays.asList(k, val)));
          int part = byValue ? 1 : 0;
          out.sort((x, y) -> sortOrder(((List<?>) x).get(part), ((List<?>) y).get(part)));
          if (reverse) {
            Collections.reverse(out);
          }
          return out;
        }
      case "unique":
        {
          List<Object> out = new ArrayList<>();
          for (Object o : Py.iterate(v)) {
            boolean seen = false;
            for (Object p : out) {
              if (Py.eq(p, o)) {
                seen = true;
                break;
              }
            }
            if (!seen) {
              out.add(o);
            }
          }
          return out;
        }
      case "sort":
        {
          boolean reverse = Py.truthy(Py.arg(args, kw, 0, "reverse", false));
          Object attr = Py.arg(args, kw, 2, "attribute", null);
          List<Object> l = Py.iterate(v);
          l.sort(
              (x, y) ->
                  sortOrder(
                      attr == null ? x : attribute(x, Py.str(attr)),
                      attr == null ? y : attribute(y, Py.str(attr))));
          if (reverse) {
            Collections.reverse(l);
          }
          return l;
        }
      case "sum":
        {
          Object attr = Py.arg(args, kw, 0, "attribute", null);
          Object total = Py.arg(args, kw, 1, "start", 0L);
          for (Object o : Py.iterate(v)) {
            total = Py.add(total, attr == null ? o : attribute(o, Py.str(attr)));
          }
          return total;
        }
      case "min", "max":
        {
          List<Object> l = Py.iterate(v);
          if (l.isEmpty()) {
            return new Undefined(name);
          }
          Object best = l.get(0);
          for (Object o : l) {
            int c = Py.compare(o, best);
            if (name.equals("min") ? c < 0 : c > 0) {
              best = o;
            }
          }
          return best;
        }
      case "map":
        {
          List<Object> out = new ArrayList<>();
          if (kw.containsKey("attribute")) {
            String attr = Py.str(kw.get("attribute"));
            for (Object o : Py.iterate(v)) {
              Object r = attribute(o, attr);
              if (r instanceof Undefined && kw.containsKey("default")) {
                r = kw.get("default");
              }
              out.add(r);
            }
            return out;
          }
          String f = Py.str(args.get(0));
          List<Object> rest = new ArrayList<>(args.subList(1, args.size()));
          for (Object o : Py.iterate(v)) {
            out.add(filter(f, o, rest, kw));
          }
          return out;
        }
      case "select", "reject":
        {
          List<Object> out = new ArrayList<>();
          for (Object o : Py.iterate(v)) {
            boolean r =
                args.isEmpty()
                    ? Py.truthy(o)
                    : JinjaTests.test(Py.str(args.get(0)), o, args.subList(1, args.size()));
            if (r == name.equals("select")) {
              out.add(o);
            }
          }
          return out;
        }
      case "selectattr", "rejectattr":
        {
          List<Object> out = new ArrayList<>();
          String attr = Py.str(args.get(0));
          for (Object o : Py.iterate(v)) {
            Object a = attribute(o, attr);
            boolean r =
                args.size() < 2
                    ? Py.truthy(a)
                    : JinjaTests.test(Py.str(args.get(1)), a, args.subList(2, args.size()));
            if (r == name.equals("selectattr")) {
              out.add(o);
            }
          }
          return out;
        }
      case "attr":
        return JinjaEval.getattr(v, Py.str(args.get(0)));
      case "indent":
        {
          Object w = Py.arg(args, kw, 0, "width", 4L);
          String pad = w instanceof String s ? s : " ".repeat((int) Py.toLong(w));
          boolean first = Py.truthy(Py.arg(args, kw, 1, "first", false));
          boolean blank = Py.truthy(Py.arg(args, kw, 2, "blank", false));
          String s = Py.str(v);
          String[] lines = s.split("\n", -1);
          StringBuilder sb = new StringBuilder();
          for (int k = 0; k < lines.length; k++) {
            if (k > 0) {
              sb.append('\n');
            }
            String line = lines[k];
            boolean indentIt = k == 0 ? first : (blank || !line.isBlank());
            if (indentIt && !(k == lines.length - 1 && line.isEmpty() && k > 0 && !blank)) {
              sb.append(pad);
            }
            sb.append(line);
          }
          return sb.toString();
        }
      case "wordcount":
        return (long) PyStrings.split(Py.str(v), null, -1).size();
      case "batch":
        {
          long size = Py.toLong(args.get(0));
          List<Object> out = new ArrayList<>();
          List<Object> cur = new ArrayList<>();
          for (Object o : Py.iterate(v)) {
            cur.add(o);
            if (cur.size() == size) {
              out.add(cur);
              cur = new ArrayList<>();
            }
          }
          if (!cur.isEmpty()) {
            if (args.size() > 1) {
              while (cur.size() < size) {
                cur.add(args.get(1));
              }
            }
            out.add(cur);
          }
          return out;
        }
      case "center":
        {
          String s = Py.str(v);
          int width = (int) Py.toLong(Py.arg(args, kw, 0, "width", 80L));
          int padTotal = Math.max(0, width - Py.len(s));
          int left = padTotal / 2 + (padTotal & width & 1);
          return " ".repeat(left) + s + " ".repeat(padTotal - left);
        }
      default:
        throw new ChatTemplateException("chat template error: no filter named '" + name + "'");
    }
  }

  /** {@code o}'s attribute {@code path} as filters read it: dotted, numbers as indexes. */
  private static Object attribute(Object o, String path) {
    Object cur = o;
    for (String part : path.split("\\.")) {
      if (cur instanceof Undefined) {
        return cur;
      }
      if (!part.isEmpty() && part.chars().allMatch(Character::isDigit)) {
        cur = JinjaEval.getitem(cur, Long.parseLong(part));
      } else {
        cur = JinjaEval.getitem(cur, part);
      }
    }
    return cur;
  }

  /** The order of {@code sort} and {@code dictsort}: strings ignore case (jinja2's default). */
  private static int sortOrder(Object a, Object b) {
    if (a instanceof String sa && b instanceof String sb) {
      return sa.toLowerCase(Locale.ROOT).compareTo(sb.toLowerCase(Locale.ROOT));
    }
    return Py.compare(a, b);
  }

  /** HTML escaping as markupsafe does it ({@code escape} filter). */
  private static String escape(String s) {
    // '&' first: the later replacements write '&' that must stay as it is
    return s.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\"", "&#34;")
        .replace("'", "&#39;");
  }
}
