package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.internal.JinjaRuntime.Fn;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The Python methods a template may call on values: {@code str} ({@code strip}, {@code split},
 * {@code startswith}, {@code format}, ...), {@code list} ({@code index}, {@code count}, {@code
 * copy}) and {@code dict} ({@code items}, {@code keys}, {@code values}, {@code get}, {@code copy}).
 *
 * <p>Stateless and thread-safe.
 */
final class PyMethods {
  private PyMethods() {}

  /**
   * The bound method {@code name} of a {@code str}, {@code list} or {@code dict} value, or {@code
   * null} when it has none; the mutating methods of lists and dicts raise (immutable sandbox).
   */
  static Fn method(Object obj, String name) {
    if (obj instanceof String s) {
      return stringMethod(s, name);
    }
    if (obj instanceof Map<?, ?> m) {
      return switch (name) {
        case "items" ->
            (Fn)
                (a, k) -> {
                  List<Object> out = new ArrayList<>();
                  for (Map.Entry<?, ?> e : m.entrySet()) {
                    out.add(Arrays.asList(e.getKey(), e.getValue()));
                  }
                  return out;
                };
        case "keys" -> (Fn) (a, k) -> new ArrayList<Object>(m.keySet());
        case "values" -> (Fn) (a, k) -> new ArrayList<Object>(m.values());
        case "get" ->
            (Fn)
                (a, k) -> {
                  Object key = a.isEmpty() ? null : a.get(0);
                  Object dflt = a.size() > 1 ? a.get(1) : k.getOrDefault("default", null);
                  return m.containsKey(key) ? m.get(key) : dflt;
                };
        case "copy" -> (Fn) (a, k) -> new LinkedHashMap<Object, Object>(m);
        case "update", "pop", "setdefault", "clear", "popitem" -> immutable(name);
        default -> null;
      };
    }
    if (obj instanceof List<?> l) {
      return switch (name) {
        case "index" ->
            (Fn)
                (a, k) -> {
                  for (int x = 0; x < l.size(); x++) {
                    if (Py.eq(l.get(x), a.get(0))) {
                      return (long) x;
                    }
                  }
                  throw Py.typeError(Py.repr(a.get(0)) + " is not in list");
                };
        case "count" ->
            (Fn)
                (a, k) -> {
                  long c = 0;
                  for (Object o : l) {
                    if (Py.eq(o, a.get(0))) {
                      c++;
                    }
                  }
                  return c;
                };
        case "copy" -> (Fn) (a, k) -> new ArrayList<Object>(l);
        case "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse" ->
            immutable(name);
        default -> null;
      };
    }
    return null;
  }

  private static Fn immutable(String name) {
    return (a, k) -> {
      throw new ChatTemplateException(
          "chat template error: access to attribute '"
              + name
              + "' of a mutable value is unsafe (immutable sandbox)");
    };
  }

  private static Fn stringMethod(String s, String name) {
    return switch (name) {
      case "strip" -> (a, k) -> PyStrings.strip(s, charsArg(a), true, true);
      case "lstrip" -> (a, k) -> PyStrings.strip(s, charsArg(a), true, false);
      case "rstrip" -> (a, k) -> PyStrings.strip(s, charsArg(a), false, true);
      case "split" ->
          (a, k) ->
              PyStrings.split(
                  s,
                  (String) Py.arg(a, k, 0, "sep", null),
                  Py.toLong(Py.arg(a, k, 1, "maxsplit", -1L)));
      case "rsplit" ->
          (a, k) ->
              PyStrings.rsplit(
                  s,
                  (String) Py.arg(a, k, 0, "sep", null),
                  Py.toLong(Py.arg(a, k, 1, "maxsplit", -1L)));
      case "splitlines" ->
          (a, k) -> {
            List<Object> out = new ArrayList<>();
            for (String line : s.split("\r\n|\r|\n", -1)) {
              out.add(line);
            }
            if (!out.isEmpty() && ((String) out.get(out.size() - 1)).isEmpty()) {
              out.remove(out.size() - 1);
            }
            return out;
          };
      case "startswith" -> (a, k) -> affix(s, a.get(0), true);
      case "endswith" -> (a, k) -> affix(s, a.get(0), false);
      case "upper" -> (a, k) -> s.toUpperCase(Locale.ROOT);
      case "lower" -> (a, k) -> s.toLowerCase(Locale.ROOT);
      case "title" -> (a, k) -> PyStrings.title(s);
      case "capitalize" -> (a, k) -> PyStrings.capitalize(s);
      case "replace" ->
          (a, k) -> {
            String old = Py.str(a.get(0));
            String rep = Py.str(a.get(1));
            long count = a.size() > 2 ? Py.toLong(a.get(2)) : -1;
            return PyStrings.replace(s, old, rep, count);
          };
      case "find" -> (a, k) -> (long) cpIndex(s, s.indexOf(Py.str(a.get(0))));
      case "rfind" -> (a, k) -> (long) cpIndex(s, s.lastIndexOf(Py.str(a.get(0))));
      case "count" ->
          (a, k) -> {
            String sub = Py.str(a.get(0));
            if (sub.isEmpty()) {
              return (long) Py.len(s) + 1;
            }
            long c = 0;
            int from = 0;
            while ((from = s.indexOf(sub, from)) >= 0) {
              c++;
              from += sub.length();
            }
            return c;
          };
      case "join" ->
          (a, k) -> {
            StringBuilder sb = new StringBuilder();
            boolean first = true;
            for (Object o : Py.iterate(a.get(0))) {
              if (!first) {
                sb.append(s);
              }
              first = false;
              if (!(o instanceof String str)) {
                throw Py.typeError(
                    "sequence item: expected str instance, " + Py.typeName(o) + " found");
              }
              sb.append(str);
            }
            return sb.toString();
          };
      case "isdigit" -> (a, k) -> !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
      case "isalpha" -> (a, k) -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
      case "isspace" -> (a, k) -> !s.isEmpty() && s.chars().allMatch(PyStrings::isSpace);
      case "islower" ->
          (a, k) -> s.chars().anyMatch(Character::isLetter) && s.equals(s.toLowerCase(Locale.ROOT));
      case "isupper" ->
          (a, k) -> s.chars().anyMatch(Character::isLetter) && s.equals(s.toUpperCase(Locale.ROOT));
      case "format" -> (a, k) -> format(s, a, k);
      default -> null;
    };
  }

  private static int cpIndex(String s, int utf16) {
    return utf16 < 0 ? -1 : s.codePointCount(0, utf16);
  }

  private static String format(String fmt, List<Object> args, Map<String, Object> kw) {
    StringBuilder sb = new StringBuilder();
    int auto = 0;
    for (int k = 0; k < fmt.length(); k++) {
      char c = fmt.charAt(k);
      if (c == '{' && k + 1 < fmt.length() && fmt.charAt(k + 1) == '{') {
        sb.append('{');
        k++;
      } else if (c == '}' && k + 1 < fmt.length() && fmt.charAt(k + 1) == '}') {
        sb.append('}');
        k++;
      } else if (c == '{') {
        int end = fmt.indexOf('}', k);
        if (end < 0) {
          throw Py.typeError("Single '{' encountered in format string");
        }
        String field = fmt.substring(k + 1, end);
        Object v;
        if (field.isEmpty()) {
          v = args.get(auto++);
        } else if (field.chars().allMatch(Character::isDigit)) {
          v = args.get(Integer.parseInt(field));
        } else {
          v = kw.get(field);
        }
        sb.append(Py.str(v));
        k = end;
      } else {
        sb.append(c);
      }
    }
    return sb.toString();
  }

  /** The optional {@code chars} argument of {@code strip} and the {@code trim} filter. */
  static String charsArg(List<Object> a) {
    return a.isEmpty() || a.get(0) == null ? null : Py.str(a.get(0));
  }

  private static boolean affix(String s, Object arg, boolean prefix) {
    if (arg instanceof List<?> l) {
      for (Object o : l) {
        if (affix(s, o, prefix)) {
          return true;
        }
      }
      return false;
    }
    if (!(arg instanceof String a)) {
      throw Py.typeError(
          (prefix ? "startswith" : "endswith")
              + " first arg must be str or a tuple of str, not "
              + Py.typeName(arg));
    }
    return prefix ? s.startsWith(a) : s.endsWith(a);
  }
}
