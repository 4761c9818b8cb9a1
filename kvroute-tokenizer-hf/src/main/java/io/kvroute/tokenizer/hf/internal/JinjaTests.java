package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.internal.JinjaRuntime.Fn;
import io.kvroute.tokenizer.hf.internal.Py.Undefined;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * jinja2's built-in tests ({@code x is name(args)}, and the tests of {@code select} and {@code
 * selectattr}) on template values.
 *
 * <p>Stateless and thread-safe.
 */
final class JinjaTests {
  private JinjaTests() {}

  /**
   * Applies the test {@code name} to {@code v} ({@code v is name(args)}).
   *
   * @throws ChatTemplateException if there is no such test
   */
  static boolean test(String name, Object v, List<Object> args) {
    switch (name) {
      case "defined":
        return !(v instanceof Undefined);
      case "undefined":
        return v instanceof Undefined;
      case "none":
        return v == null;
      case "string":
        return v instanceof String;
      case "number":
        return Py.isNumber(v);
      case "integer":
        return Py.isInt(v) && !(v instanceof Boolean);
      case "float":
        return v instanceof Double;
      case "boolean":
        return v instanceof Boolean;
      case "true":
        return Boolean.TRUE.equals(v);
      case "false":
        return Boolean.FALSE.equals(v);
      case "mapping":
        return v instanceof Map;
      case "sequence":
        return v instanceof List || v instanceof String || v instanceof Map;
      case "iterable":
        return v instanceof List
            || v instanceof String
            || v instanceof Map
            || v instanceof Collection;
      case "callable":
        return v instanceof Fn;
      case "odd":
        return Py.toLong(v) % 2 != 0;
      case "even":
        return Py.toLong(v) % 2 == 0;
      case "divisibleby":
        return Py.toLong(v) % Py.toLong(args.get(0)) == 0;
      case "eq", "equalto", "==":
        return Py.eq(v, args.get(0));
      case "ne", "!=":
        return !Py.eq(v, args.get(0));
      case "lt", "lessthan", "<":
        return Py.compare(v, args.get(0)) < 0;
      case "le", "<=":
        return Py.compare(v, args.get(0)) <= 0;
      case "gt", "greaterthan", ">":
        return Py.compare(v, args.get(0)) > 0;
      case "ge", ">=":
        return Py.compare(v, args.get(0)) >= 0;
      case "in":
        return Py.contains(args.get(0), v);
      case "sameas":
        return Py.same(v, args.get(0));
      case "lower":
        return v instanceof String s && s.equals(s.toLowerCase(Locale.ROOT));
      case "upper":
        return v instanceof String s && s.equals(s.toUpperCase(Locale.ROOT));
      case "escaped":
        return false;
      case "filter":
        return JinjaFilters.NAMES.contains(Py.str(v));
      case "test":
        return NAMES.contains(Py.str(v));
      default:
        throw new ChatTemplateException("chat template error: no test named '" + name + "'");
    }
  }

  /** The names jinja2's {@code test} test knows. */
  static final Set<String> NAMES =
      Set.of(
          "defined",
          "undefined",
          "none",
          "string",
          "number",
          "integer",
          "float",
          "boolean",
          "true",
          "false",
          "mapping",
          "sequence",
          "iterable",
          "callable",
          "odd",
          "even",
          "divisibleby",
          "eq",
          "equalto",
          "ne",
          "lt",
          "le",
          "gt",
          "ge",
          "in",
          "sameas",
          "lower",
          "upper",
          "escaped");
}
