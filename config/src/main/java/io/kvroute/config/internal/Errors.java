package io.kvroute.config.internal;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonStreamContext;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.exc.InputCoercionException;
import com.fasterxml.jackson.core.exc.StreamReadException;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.exc.InvalidFormatException;
import com.fasterxml.jackson.databind.exc.MismatchedInputException;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.databind.exc.ValueInstantiationException;
import io.kvroute.config.ConfigException;
import io.kvroute.config.Durations;
import io.kvroute.config.Quantity;
import java.lang.reflect.InvocationTargetException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Turns Jackson's exceptions into one-line {@link ConfigException}s: the path of the field in the
 * document and the problem in the user's terms ({@code listen.port: must be an integer, was "80"}),
 * never a Java class name.
 */
public final class Errors {
  private static final Pattern DUPLICATE = Pattern.compile("Duplicate field '(.*)'");
  private static final Pattern PLAIN_KEY = Pattern.compile("[A-Za-z_][A-Za-z0-9_-]*");
  private static final int MAX_SHOWN = 60;
  private static final String QUOTE_HINT = " (quote it if you mean the text)";

  private Errors() {}

  /** The {@link ConfigException} for a failure while binding at {@code prefix}. */
  public static ConfigException translate(JsonProcessingException e, String prefix) {
    return translate(e, prefix, null);
  }

  /**
   * The {@link ConfigException} for a failure while binding {@code tree} (null when the parser
   * reads text) at {@code prefix}.
   */
  public static ConfigException translate(
      JsonProcessingException e, String prefix, com.fasterxml.jackson.databind.JsonNode tree) {
    String path = prefix;
    if (e instanceof JsonMappingException m) {
      path = ConfigException.join(prefix, path(m.getPath()));
    }
    Throwable cause = e.getCause();
    if (e instanceof ValueInstantiationException) {
      Throwable c = cause instanceof InvocationTargetException ite ? ite.getCause() : cause;
      if (c instanceof ConfigException ce) {
        return new ConfigException(ConfigException.join(path, ce.path()), ce.problem(), ce);
      }
      if (c != null && c.getMessage() != null) {
        return new ConfigException(path, c.getMessage(), c);
      }
    }
    if (e instanceof Mappers.Problem) {
      return new ConfigException(path, e.getOriginalMessage(), e);
    }
    if (e instanceof UnrecognizedPropertyException u) {
      return new ConfigException(path, unknownKey(u.getPropertyName(), u.getKnownPropertyIds()), e);
    }
    JsonProcessingException parse = e;
    if (!(e instanceof JsonMappingException) || cause instanceof JsonProcessingException) {
      parse = cause instanceof JsonProcessingException jp ? jp : e;
    }
    String message = String.valueOf(parse.getOriginalMessage());
    Matcher dup = DUPLICATE.matcher(message);
    if (dup.find()) {
      if (!(e instanceof JsonMappingException)) {
        path = ConfigException.join(prefix, contextPath(parse, false));
      }
      return new ConfigException(
          ConfigException.join(path, key(dup.group(1))),
          "duplicate key" + line(parse.getLocation()),
          e);
    }
    if (parse instanceof InputCoercionException ic) {
      return new ConfigException(
          path,
          "must be "
              + expected(ic.getTargetType())
              + range(ic.getTargetType())
              + ", was "
              + shown(ic),
          e);
    }
    if (e instanceof InvalidFormatException f) {
      Object v = f.getValue();
      String hint =
          f.getTargetType() == String.class && (v instanceof Number || v instanceof Boolean)
              ? QUOTE_HINT
              : "";
      return new ConfigException(
          path, "must be " + expected(f.getTargetType()) + ", was " + value(v) + hint, e);
    }
    if (e instanceof MismatchedInputException mi) {
      if (message.startsWith("No content to map")) {
        return new ConfigException(path, "the document is empty", e);
      }
      if (message.startsWith("Trailing token")) {
        return new ConfigException(
            path, "only one document is allowed; found more after it" + line(e.getLocation()), e);
      }
      String actual =
          mi.getProcessor() instanceof JsonParser p ? describe(p) : "a value of another type";
      if (actual.equals("a value of another type") && tree != null) {
        actual = describe(nodeAt(tree, mi.getPath()), actual);
      }
      Class<?> target = mi.getTargetType();
      String hint =
          target == String.class && !actual.startsWith("\"") && !actual.startsWith("a ")
              ? QUOTE_HINT
              : "";
      return new ConfigException(path, "must be " + expected(target) + ", was " + actual + hint, e);
    }
    if (parse instanceof StreamReadException) {
      // A syntax error: the parser knows where it was.
      path = ConfigException.join(prefix, contextPath(parse, true));
      return new ConfigException(
          path, "invalid syntax" + line(e.getLocation()) + ": " + clean(message), e);
    }
    return new ConfigException(path, clean(message), e);
  }

  /** The user's words for the value under the parser: a quoted string, a number, "a list", ... */
  public static String describe(JsonParser p) {
    JsonToken t = p.currentToken();
    if (t == null) {
      return "nothing";
    }
    try {
      return switch (t) {
        case START_OBJECT, FIELD_NAME -> "a mapping";
        case START_ARRAY -> "a list";
        case VALUE_STRING -> value(p.getText());
        case VALUE_NULL -> "null";
        case VALUE_TRUE -> "true";
        case VALUE_FALSE -> "false";
        case VALUE_NUMBER_INT, VALUE_NUMBER_FLOAT -> p.getText();
        default -> "a value of another type";
      };
    } catch (java.io.IOException e) {
      return "a value of another type";
    }
  }

  /** The node of {@code tree} that {@code refs} leads to, or null. */
  private static com.fasterxml.jackson.databind.JsonNode nodeAt(
      com.fasterxml.jackson.databind.JsonNode tree, List<JsonMappingException.Reference> refs) {
    com.fasterxml.jackson.databind.JsonNode n = tree;
    for (JsonMappingException.Reference r : refs) {
      if (n == null) {
        return null;
      }
      n = r.getFieldName() != null ? n.get(r.getFieldName()) : n.get(r.getIndex());
    }
    return n;
  }

  /** The user's words for a node of the tree, as {@link #describe(JsonParser)} for a parser. */
  private static String describe(com.fasterxml.jackson.databind.JsonNode n, String otherwise) {
    if (n == null) {
      return otherwise;
    }
    if (n.isObject()) {
      return "a mapping";
    }
    if (n.isArray()) {
      return "a list";
    }
    if (n.isTextual()) {
      return value(n.asText());
    }
    if (n.isNull()) {
      return "null";
    }
    if (n.isBoolean() || n.isNumber()) {
      return n.asText();
    }
    return otherwise;
  }

  /** The path of Jackson's reference chain, in the document's terms. */
  static String path(List<JsonMappingException.Reference> refs) {
    StringBuilder b = new StringBuilder();
    for (JsonMappingException.Reference r : refs) {
      if (r.getFieldName() != null) {
        b.append(b.length() == 0 ? key(r.getFieldName()) : keySegment(r.getFieldName()));
      } else if (r.getIndex() >= 0) {
        b.append('[').append(r.getIndex()).append(']');
      }
    }
    return b.toString();
  }

  /** {@code path.key}, or {@code path["odd/key"]} for a key that is not a plain identifier. */
  public static String child(String path, String key) {
    return path.isEmpty() ? key(key) : path + keySegment(key);
  }

  /** Unknown key message, with a suggestion when a known key is close. */
  public static String unknownKey(String key, Collection<?> known) {
    List<String> names = known == null ? List.of() : known.stream().map(String::valueOf).toList();
    return "unknown key" + (names.isEmpty() ? "; this mapping takes no keys" : suggest(key, names));
  }

  /**
   * {@code "; did you mean "x"? known: a, b"} (the suggestion only when a known name is close;
   * known names sorted), or {@code "; known: none"}.
   */
  public static String suggest(String name, Collection<String> known) {
    TreeSet<String> names = new TreeSet<>(known);
    if (names.isEmpty()) {
      return "; known: none";
    }
    String near = closest(name, names);
    return (near == null ? "; known: " : "; did you mean \"" + near + "\"? known: ")
        + String.join(", ", names);
  }

  /**
   * The known name closest to {@code key}, if close enough to be a typo: case, {@code -} and {@code
   * _} ignored, at most one edit per six characters, or a prefix within two characters.
   */
  private static String closest(String key, Collection<String> names) {
    String k = normal(key);
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    for (String n : names) {
      String m = normal(n);
      int d = distance(k, m);
      boolean prefix =
          (m.startsWith(k) || k.startsWith(m)) && Math.abs(m.length() - k.length()) <= 2;
      int allowed = Math.max(1, Math.min(k.length(), m.length()) / 6);
      if ((d <= allowed || prefix) && d < bestDistance) {
        best = n;
        bestDistance = d;
      }
    }
    return best;
  }

  private static String normal(String s) {
    return s.toLowerCase(java.util.Locale.ROOT).replace("-", "").replace("_", "");
  }

  /** Edit distance counting a transposition of neighbours as one edit ("prot" -> "port"). */
  private static int distance(String a, String b) {
    int[][] d = new int[a.length() + 1][b.length() + 1];
    for (int i = 0; i <= a.length(); i++) {
      d[i][0] = i;
    }
    for (int j = 0; j <= b.length(); j++) {
      d[0][j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        d[i][j] = Math.min(Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + cost);
        if (i > 1
            && j > 1
            && a.charAt(i - 1) == b.charAt(j - 2)
            && a.charAt(i - 2) == b.charAt(j - 1)) {
          d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.length()][b.length()];
  }

  private static String contextPath(JsonProcessingException e, boolean withCurrentKey) {
    if (!(e.getProcessor() instanceof JsonParser p)) {
      return "";
    }
    java.util.ArrayDeque<String> parts = new java.util.ArrayDeque<>();
    for (JsonStreamContext c = p.getParsingContext(); c != null; c = c.getParent()) {
      if (c.inArray() && c.getCurrentIndex() >= 0 && p.currentToken() != null) {
        parts.push("[" + c.getCurrentIndex() + "]");
      } else if (c.inObject()
          && c.getCurrentName() != null
          && (withCurrentKey || c != p.getParsingContext())) {
        parts.push(keySegment(c.getCurrentName()));
      }
    }
    String joined = String.join("", parts);
    return joined.startsWith(".") ? joined.substring(1) : joined;
  }

  private static String key(String name) {
    return PLAIN_KEY.matcher(name).matches() ? name : "[\"" + name + "\"]";
  }

  private static String keySegment(String name) {
    return PLAIN_KEY.matcher(name).matches() ? "." + name : "[\"" + name + "\"]";
  }

  private static String line(JsonLocation l) {
    return l == null || l.getLineNr() < 1 ? "" : " (line " + l.getLineNr() + ")";
  }

  private static String range(Class<?> t) {
    if (t == int.class || t == Integer.class) {
      return " from " + Integer.MIN_VALUE + " to " + Integer.MAX_VALUE;
    }
    if (t == long.class || t == Long.class) {
      return " from " + Long.MIN_VALUE + " to " + Long.MAX_VALUE;
    }
    return " in range";
  }

  private static String shown(InputCoercionException e) {
    try {
      JsonParser p = e.getProcessor();
      return p == null ? "a number out of range" : p.getText();
    } catch (java.io.IOException x) {
      return "a number out of range";
    }
  }

  private static String expected(Class<?> t) {
    if (t == null || t == Object.class) {
      return "a value";
    }
    if (t == int.class || t == Integer.class) {
      return "an integer";
    }
    if (t == long.class
        || t == Long.class
        || t == short.class
        || t == Short.class
        || t == byte.class
        || t == Byte.class
        || t == BigInteger.class) {
      return "an integer";
    }
    if (t == double.class
        || t == Double.class
        || t == float.class
        || t == Float.class
        || t == BigDecimal.class
        || t == Number.class) {
      return "a number";
    }
    if (t == boolean.class || t == Boolean.class) {
      return "true or false";
    }
    if (t == String.class || t == CharSequence.class) {
      return "a string";
    }
    if (t == Duration.class) {
      return Durations.EXPECTED;
    }
    if (t == Quantity.class) {
      return Quantity.EXPECTED;
    }
    if (t.isArray() || Collection.class.isAssignableFrom(t)) {
      return "a list";
    }
    if (t.isEnum()) {
      Object[] values = t.getEnumConstants();
      TreeSet<String> names = new TreeSet<>();
      for (Object v : values) {
        names.add(String.valueOf(v));
      }
      return "one of " + String.join(", ", names);
    }
    if (Map.class.isAssignableFrom(t) || t.isRecord()) {
      return "a mapping";
    }
    return "a mapping";
  }

  private static String value(Object v) {
    if (v == null) {
      return "null";
    }
    if (v instanceof String s) {
      String shown = s.length() > MAX_SHOWN ? s.substring(0, MAX_SHOWN) + "..." : s;
      return "\"" + shown.replace("\n", "\\n") + "\"";
    }
    return String.valueOf(v);
  }

  /** Jackson/SnakeYAML messages without source snippets, carets and "(through reference chain". */
  private static String clean(String message) {
    StringBuilder b = new StringBuilder();
    for (String line : message.split("\n")) {
      String l = line.strip();
      if (l.isEmpty() || l.startsWith("in '") || l.startsWith("^") || line.startsWith("    ")) {
        continue;
      }
      int at = l.indexOf(" at [Source");
      if (at >= 0) {
        l = l.substring(0, at);
      }
      if (!l.isEmpty()) {
        if (b.length() > 0) {
          b.append("; ");
        }
        b.append(l);
      }
    }
    return b.length() == 0 ? "invalid document" : b.toString();
  }
}
