package io.kvroute.config;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonUnwrapped;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import io.kvroute.config.internal.Errors;
import io.kvroute.config.internal.Mappers;
import java.io.IOException;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.function.Predicate;

/**
 * Binds YAML or JSON configuration into immutable records, strictly: an unknown key, a duplicate
 * key, a value of the wrong type ({@code "80"} for a port, {@code 1.5} for an integer, {@code 8}
 * for a host name), a second document or an empty one is a {@link ConfigException} naming the
 * field's path ({@code endpoints[1].url}) and the problem. {@link java.time.Duration}s are read as
 * Go/Kubernetes durations ({@link Durations}) and {@link Quantity}s as Kubernetes quantities.
 *
 * <p>A record component annotated {@link JsonUnwrapped} whose type is a record contributes that
 * record's keys at its own level (the gateway's file is its listener sections and, beside them, the
 * keys of the composition root's settings record).
 *
 * <p>Records validate themselves in their compact constructors, throwing {@link ConfigException}
 * with a path relative to the record (or {@link IllegalArgumentException}, which is reported at the
 * record's path); a missing key arrives as {@code null}, so a record with defaults declares boxed
 * components and fills them in.
 *
 * <pre>{@code
 * record Listen(String host, Integer port) {
 *   Listen {
 *     host = host == null ? "127.0.0.1" : host;
 *     port = port == null ? 8080 : port;
 *     if (port < 0 || port > 65535) throw new ConfigException("port", "must be in [0, 65535], was " + port);
 *   }
 * }
 * Listen l = ConfigBinder.create().readYaml("port: 9000", Listen.class);
 * }</pre>
 *
 * <p>Immutable and thread-safe.
 */
public final class ConfigBinder {
  private final boolean snakeCase;
  private final ObjectMapper yaml;
  private final ObjectMapper json;

  private ConfigBinder(boolean snakeCase) {
    this.snakeCase = snakeCase;
    this.yaml = Mappers.create(true, snakeCase);
    this.json = Mappers.create(false, snakeCase);
  }

  /** A binder whose keys are the record components' names ({@code maxBodyBytes}). */
  public static ConfigBinder create() {
    return new ConfigBinder(false);
  }

  /** A binder whose keys are the components' names in snake case ({@code max_body_bytes}). */
  public static ConfigBinder snakeCase() {
    return new ConfigBinder(true);
  }

  /**
   * Reads a file: JSON when its name ends in {@code .json}, YAML otherwise. Errors name the file as
   * their {@link ConfigException#source() source}.
   *
   * @throws ConfigException when the file cannot be read or is invalid
   */
  public <T> T read(Path file, Class<T> type) {
    String text;
    try {
      text = Files.readString(file, StandardCharsets.UTF_8);
    } catch (IOException | RuntimeException e) {
      throw new ConfigException(file.toString(), "", "cannot read the file: " + describe(e), e);
    }
    try {
      return bind(isJson(file) ? json : yaml, text, type);
    } catch (ConfigException e) {
      throw e.inSource(file.toString());
    }
  }

  /**
   * Reads a YAML document (JSON is YAML too).
   *
   * @throws ConfigException naming the invalid field
   */
  public <T> T readYaml(String document, Class<T> type) {
    return bind(yaml, document, type);
  }

  /**
   * Reads a JSON document.
   *
   * @throws ConfigException naming the invalid field
   */
  public <T> T readJson(String document, Class<T> type) {
    return bind(json, document, type);
  }

  /**
   * Binds a tree already read (maps, lists and scalars, as {@code readYaml(doc, Map.class)} gives
   * them) into {@code type}; {@code null} binds like an empty mapping. Errors are reported under
   * {@code path}, for example {@code plugins[2].parameters}.
   *
   * @throws ConfigException naming the invalid field
   */
  public <T> T convert(Object tree, Class<T> type, String path) {
    Objects.requireNonNull(type, "type");
    JsonNode node;
    try {
      node = yaml.valueToTree(tree == null ? Map.of() : tree);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(path, "cannot be read: " + e.getMessage(), e);
    }
    return bindTree(yaml, node, type, path);
  }

  /**
   * Reads command-line {@code KEY=VALUE} options as the tree a document would hold for the record
   * {@code type}, ready for {@link #convert}: a value whose key is a component of {@code type} is
   * read as that component's type ({@code 8998} as a number for an {@code Integer}, {@code true} as
   * a boolean, {@code nixl,http} as a list for a {@code List}); text that does not parse as that
   * type stays text, so that {@link #convert} reports it ({@code must be an integer, was "x"}).
   * Other keys are read as YAML reads a plain scalar (an integer, a decimal, {@code true}/{@code
   * false}, else text), so that {@link #convert} can name them as unknown.
   *
   * <pre>{@code
   * Map<String, Object> tree = binder.fromText(Map.of("bootstrapPort", "8998"), Params.class);
   * Params p = binder.convert(tree, Params.class, "--param");
   * }</pre>
   */
  public Map<String, Object> fromText(Map<String, String> options, Class<?> type) {
    Objects.requireNonNull(options, "options");
    Map<String, Type> components = new java.util.HashMap<>();
    if (type.isRecord()) {
      for (RecordComponent c : type.getRecordComponents()) {
        components.put(name(c), c.getGenericType());
      }
    }
    Map<String, Object> out = new java.util.LinkedHashMap<>();
    options.forEach((k, v) -> out.put(k, v == null ? null : textAs(v, components.get(k))));
    return out;
  }

  /** {@code text} as a value of {@code t} when it reads as one, else as a plain YAML scalar. */
  private static Object textAs(String text, Type t) {
    if (t instanceof ParameterizedType p
        && p.getRawType() instanceof Class<?> raw
        && Collection.class.isAssignableFrom(raw)) {
      List<Object> items = new ArrayList<>();
      for (String part : text.split(",", -1)) {
        items.add(textAs(part.trim(), p.getActualTypeArguments()[0]));
      }
      return items;
    }
    if (t == Integer.class || t == int.class) {
      return integer(text, Integer.MIN_VALUE, Integer.MAX_VALUE, text);
    }
    if (t == Long.class || t == long.class) {
      return integer(text, Long.MIN_VALUE, Long.MAX_VALUE, text);
    }
    if (t == Double.class || t == double.class || t == Float.class || t == float.class) {
      try {
        return new java.math.BigDecimal(text.trim());
      } catch (NumberFormatException e) {
        return text;
      }
    }
    if (t == Boolean.class || t == boolean.class) {
      String b = text.trim().toLowerCase(Locale.ROOT);
      return b.equals("true") ? Boolean.TRUE : b.equals("false") ? Boolean.FALSE : text;
    }
    if (t != null) {
      return text; // strings, enums, durations, quantities: the binder reads them from text
    }
    if (text.equals("true") || text.equals("false")) {
      return Boolean.valueOf(text);
    }
    Object n = integer(text, Long.MIN_VALUE, Long.MAX_VALUE, null);
    if (n != null) {
      return ((Long) n) == ((Long) n).intValue() ? (Object) ((Long) n).intValue() : n;
    }
    if (text.matches("-?[0-9]+\\.[0-9]+")) {
      return new java.math.BigDecimal(text);
    }
    return text;
  }

  private static Object integer(String text, long min, long max, Object otherwise) {
    String s = text.trim();
    if (!s.matches("-?[0-9]{1,19}")) {
      return otherwise;
    }
    try {
      long v = Long.parseLong(s);
      if (v < min || v > max) {
        return otherwise;
      }
      return max == Integer.MAX_VALUE ? (Object) (int) v : (Object) v;
    } catch (NumberFormatException e) {
      return otherwise;
    }
  }

  /**
   * Every key a record type accepts, as paths: nested records are followed ({@code listen.host}),
   * list elements are written {@code []} ({@code endpoints[].url}) and mapping keys {@code *}
   * ({@code models.*.kvConnector}). Used to check a configuration reference against the records.
   */
  public List<String> keys(Class<?> type) {
    return keys(type, t -> false);
  }

  /**
   * As {@link #keys(Class)}, but records for which {@code documentedApart} holds are listed as one
   * key and not followed (they have a section of their own in the reference).
   */
  public List<String> keys(Class<?> type, Predicate<Class<?>> documentedApart) {
    if (!type.isRecord()) {
      throw new IllegalArgumentException(type.getName() + " is not a record");
    }
    List<String> out = new ArrayList<>();
    collect(type, "", documentedApart, out);
    return out;
  }

  private void collect(Class<?> type, String prefix, Predicate<Class<?>> apart, List<String> out) {
    for (RecordComponent c : components(type).values()) {
      String key = prefix + name(c);
      walk(c.getGenericType(), key, apart, out);
    }
  }

  /**
   * A record's keys and their components, in order: a component marked {@link JsonUnwrapped} whose
   * type is a record brings its own keys to this level instead of a key of its own (a command's
   * file shares its top level with the settings record of the composition root, say).
   */
  private Map<String, RecordComponent> components(Class<?> record) {
    Map<String, RecordComponent> out = new java.util.LinkedHashMap<>();
    for (RecordComponent rc : record.getRecordComponents()) {
      if (rc.getAccessor().isAnnotationPresent(JsonUnwrapped.class) && rc.getType().isRecord()) {
        components(rc.getType()).forEach((k, v) -> put(out, record, k, v));
      } else {
        put(out, record, name(rc), rc);
      }
    }
    return out;
  }

  private void walk(Type t, String key, Predicate<Class<?>> apart, List<String> out) {
    if (t instanceof ParameterizedType p && p.getRawType() instanceof Class<?> raw) {
      if (Collection.class.isAssignableFrom(raw)) {
        Type element = p.getActualTypeArguments()[0];
        if (element instanceof Class<?> e && e.isRecord() && !apart.test(e)) {
          collect(e, key + "[].", apart, out);
          return;
        }
      } else if (Map.class.isAssignableFrom(raw)) {
        Type value = p.getActualTypeArguments()[1];
        if (value instanceof Class<?> v && v.isRecord() && !apart.test(v)) {
          collect(v, key + ".*.", apart, out);
          return;
        }
      }
      out.add(key);
      return;
    }
    if (t instanceof Class<?> c && c.isRecord() && !apart.test(c) && c != Quantity.class) {
      collect(c, key + ".", apart, out);
      return;
    }
    out.add(key);
  }

  private String name(RecordComponent c) {
    JsonProperty p = c.getAccessor().getAnnotation(JsonProperty.class);
    if (p != null && !p.value().isEmpty()) {
      return p.value();
    }
    return snakeCase
        ? new PropertyNamingStrategies.SnakeCaseStrategy().translate(c.getName())
        : c.getName();
  }

  private static void put(
      Map<String, RecordComponent> out, Class<?> record, String key, RecordComponent rc) {
    if (out.putIfAbsent(key, rc) != null) {
      throw new IllegalArgumentException(
          record.getName() + " has the key \"" + key + "\" twice (an unwrapped record repeats it)");
    }
  }

  /**
   * Reads the document as a tree first (syntax errors and duplicate keys are found there, with
   * their line), then binds the tree.
   */
  private <T> T bind(ObjectMapper mapper, String document, Class<T> type) {
    Objects.requireNonNull(document, "document");
    Objects.requireNonNull(type, "type");
    JsonNode tree;
    try {
      tree = parse(mapper, mapper.createParser(document), JsonNode.class, "", null);
    } catch (IOException e) {
      throw new ConfigException("", "cannot read the document: " + e.getMessage(), e);
    }
    if (tree == null || tree.isMissingNode() || tree.isNull()) {
      throw new ConfigException("", "the document is empty");
    }
    return bindTree(mapper, tree, type, "");
  }

  /**
   * Binds a tree. Unknown keys are looked for first: Jackson builds a record before it reports the
   * unknown keys of its mapping, so a misspelt key would otherwise surface as the "is required" of
   * the key it was meant to be.
   */
  private <T> T bindTree(ObjectMapper mapper, JsonNode tree, Class<T> type, String path) {
    checkKeys(tree, type, path);
    return parse(mapper, mapper.treeAsTokens(tree), type, path, tree);
  }

  /**
   * Binds from {@code p} and translates errors while the parser still shows the bad value ({@code
   * tree}, when the parser reads one, names the value where the parser cannot: inside an unwrapped
   * record, which Jackson reads from a buffer).
   */
  private static <T> T parse(
      ObjectMapper mapper, JsonParser p, Class<T> type, String path, JsonNode tree) {
    try {
      try {
        return mapper.readValue(p, type);
      } catch (JsonProcessingException e) {
        throw Errors.translate(e, path, tree);
      } finally {
        p.close();
      }
    } catch (IOException e) {
      throw new ConfigException(path, "cannot read the document: " + e.getMessage(), e);
    }
  }

  /** Reports the first key of {@code node} that the record types under {@code t} do not have. */
  private void checkKeys(JsonNode node, Type t, String path) {
    if (t instanceof Class<?> c && c.isRecord() && node.isObject()) {
      Map<String, RecordComponent> components = components(c);
      for (Map.Entry<String, JsonNode> e : node.properties()) {
        RecordComponent rc = components.get(e.getKey());
        String at = Errors.child(path, e.getKey());
        if (rc == null) {
          throw new ConfigException(at, Errors.unknownKey(e.getKey(), components.keySet()));
        }
        checkKeys(e.getValue(), rc.getGenericType(), at);
      }
    } else if (t instanceof ParameterizedType p && p.getRawType() instanceof Class<?> raw) {
      if (Collection.class.isAssignableFrom(raw) && node.isArray()) {
        for (int i = 0; i < node.size(); i++) {
          checkElement(node.get(i), p.getActualTypeArguments()[0], path + "[" + i + "]");
        }
      } else if (Map.class.isAssignableFrom(raw) && node.isObject()) {
        for (Map.Entry<String, JsonNode> e : node.properties()) {
          checkElement(e.getValue(), p.getActualTypeArguments()[1], Errors.child(path, e.getKey()));
        }
      }
    } else if (t instanceof Class<?> c && c.isArray() && node.isArray()) {
      for (int i = 0; i < node.size(); i++) {
        checkElement(node.get(i), c.getComponentType(), path + "[" + i + "]");
      }
    }
  }

  /** An element of a list or a value of a mapping: a record there is never left out. */
  private void checkElement(JsonNode node, Type t, String path) {
    if (node.isNull() && t instanceof Class<?> c && c.isRecord()) {
      throw new ConfigException(path, "must be a mapping, was null");
    }
    checkKeys(node, t, path);
  }

  private static boolean isJson(Path file) {
    Path name = file.getFileName();
    return name != null && name.toString().toLowerCase(Locale.ROOT).endsWith(".json");
  }

  private static String describe(Exception e) {
    if (e instanceof java.nio.file.NoSuchFileException) {
      return "no such file";
    }
    if (e instanceof java.nio.file.AccessDeniedException) {
      return "permission denied";
    }
    if (e instanceof java.nio.charset.MalformedInputException) {
      return "not UTF-8 text";
    }
    return String.valueOf(e.getMessage());
  }
}
