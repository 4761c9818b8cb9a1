package io.kvroute.spring.gateway;

import com.fasterxml.jackson.annotation.JsonUnwrapped;
import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.UnaryOperator;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.boot.origin.OriginTrackedValue;
import org.springframework.core.env.Environment;
import org.springframework.core.env.PropertySource;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.env.SystemEnvironmentPropertySource;

/**
 * Binds the {@code kvroute.*} properties onto {@link KvRouteProperties} with kvroute's one
 * configuration binder ({@link ConfigBinder}), as the CLI binds its file: Spring's property names
 * (kebab case, any source: YAML, properties, environment variables, command line) become the
 * record's tree, led by the record's types (a record's keys in any of Spring's forms, a map's keys
 * as written, list indexes); placeholders ({@code ${PREFILL_URL:http://127.0.0.1:8001}}) are
 * resolved as Spring resolves them; text values are read as numbers or booleans where the record
 * expects them (a properties file has only text). Errors name the full property in Spring's form
 * ({@code kvroute.endpoints[1].kv-events.publisher}).
 *
 * <p>Environment variables and system properties are read leniently: one whose name starts with
 * {@code KVROUTE_} (or {@code kvroute.}) but names no key (the CLI's {@code KVROUTE_ADMIN_TOKEN})
 * is ignored rather than refused.
 *
 * <p>Inside a {@code kv-connector} section (kvroute's own keys, not typed here) a text value that
 * is an integer or {@code true}/{@code false} is read as one. Stateless.
 */
final class KvRouteBinding {
  private static final ConfigBinder BINDER = ConfigBinder.create();
  private static final Pattern SEGMENT =
      Pattern.compile("\\.?([A-Za-z_][A-Za-z0-9_-]*)|\\[\"((?:[^\"\\\\]|\\\\.)*)\"]|\\[(\\d+)]");
  private static final Pattern INTEGER = Pattern.compile("-?\\d{1,18}");

  private KvRouteBinding() {}

  /**
   * The {@code kvroute.*} properties of {@code environment}.
   *
   * @throws ConfigException naming the property ({@code kvroute.index.block-size: ...})
   */
  static KvRouteProperties bind(Environment environment) {
    return bind(
        ConfigurationPropertySources.get(environment),
        v -> v instanceof String s ? environment.resolvePlaceholders(s) : v);
  }

  /**
   * The properties found in {@code sources}, the first source winning for each name, each value
   * passed through {@code placeholders} ({@code ${NAME:default}} resolved, as Spring's own binder
   * resolves them).
   */
  static KvRouteProperties bind(
      Iterable<ConfigurationPropertySource> sources, UnaryOperator<Object> placeholders) {
    Map<String, Object> tree = new LinkedHashMap<>();
    ConfigurationPropertyName root = ConfigurationPropertyName.of(KvRouteProperties.PREFIX);
    for (ConfigurationPropertySource source : sources) {
      if (!(source instanceof IterableConfigurationPropertySource names)) {
        continue;
      }
      // Environment variables and system properties are shared with other programs and libraries
      // (KVROUTE_ADMIN_TOKEN is the CLI's): theirs that name no kvroute key are left alone; the
      // application's files and arguments are read strictly.
      boolean lenient =
          source.getUnderlyingSource() instanceof SystemEnvironmentPropertySource
              || (source.getUnderlyingSource() instanceof PropertySource<?> ps
                  && ps.getName()
                      .equals(StandardEnvironment.SYSTEM_PROPERTIES_PROPERTY_SOURCE_NAME));
      names.stream()
          .filter(root::isAncestorOf)
          .forEach(
              name -> {
                ConfigurationProperty p = source.getConfigurationProperty(name);
                if (p != null && p.getValue() != null) {
                  Object value = placeholders.apply(unwrap(p.getValue()));
                  insert(tree, KvRouteProperties.class, name, 1, value, lenient);
                }
              });
    }
    try {
      return BINDER.convert(lists(tree), KvRouteProperties.class, "");
    } catch (ConfigException e) {
      throw named(e);
    }
  }

  /**
   * {@code e} with its path (relative to {@link KvRouteProperties}) as the full property name in
   * Spring's form: {@code models.llama.kvConnector.type} is {@code
   * kvroute.models[llama].kv-connector.type}.
   */
  static ConfigException named(ConfigException e) {
    String name = KvRouteProperties.PREFIX + springPath(e.path());
    return e.source().isEmpty()
        ? new ConfigException(name, e.problem(), e)
        : new ConfigException(e.source(), name, e.problem(), e);
  }

  /** A binder path, led by the record's types, in Spring's form (with a leading dot). */
  static String springPath(String path) {
    StringBuilder out = new StringBuilder();
    Type type = KvRouteProperties.class;
    Matcher m = SEGMENT.matcher(path == null ? "" : path);
    int at = 0;
    while (at < path.length() && m.find(at) && m.start() == at) {
      at = m.end();
      String key = m.group(1) != null ? m.group(1) : m.group(2);
      if (m.group(3) != null) {
        out.append('[').append(m.group(3)).append(']');
        type = elementType(type);
        continue;
      }
      Class<?> raw = raw(type);
      if (raw != null && raw.isRecord()) {
        RecordComponent c = components(raw).get(key);
        out.append('.').append(kebab(key));
        type = c == null ? Object.class : c.getGenericType();
      } else if (raw != null && Map.class.isAssignableFrom(raw) && isTyped(type)) {
        out.append('[').append(key).append(']');
        type = ((ParameterizedType) type).getActualTypeArguments()[1];
      } else {
        out.append('.').append(key);
        type = Object.class;
      }
    }
    if (at < path.length()) {
      out.append('.').append(path.substring(at));
    }
    return out.toString();
  }

  // ---------------------------------------------------------------- building the tree

  @SuppressWarnings("unchecked")
  private static void insert(
      Map<String, Object> node,
      Type type,
      ConfigurationPropertyName name,
      int i,
      Object value,
      boolean lenient) {
    boolean last = i == name.getNumberOfElements() - 1;
    String element = name.getElement(i, ConfigurationPropertyName.Form.ORIGINAL);
    Object key;
    Type next;
    Class<?> raw = raw(type);
    if (name.isNumericIndex(i) && (raw == null || !raw.isRecord())) {
      key = Integer.valueOf(name.getElement(i, ConfigurationPropertyName.Form.UNIFORM));
      next = elementType(type);
    } else if (raw != null && raw.isRecord()) {
      String uniform = name.getElement(i, ConfigurationPropertyName.Form.UNIFORM);
      Map.Entry<String, RecordComponent> c = component(raw, uniform);
      if (c == null && lenient) {
        return;
      }
      key = c == null ? camel(element) : c.getKey();
      next = c == null ? Object.class : c.getValue().getGenericType();
    } else {
      key = element;
      next =
          raw != null && Map.class.isAssignableFrom(raw) && isTyped(type)
              ? ((ParameterizedType) type).getActualTypeArguments()[1]
              : Object.class;
    }
    String k = String.valueOf(key);
    if (key instanceof Integer) {
      k = "\u0000" + key; // a list index, turned into a list by lists()
    }
    if (last) {
      node.putIfAbsent(k, coerce(unwrap(value), next));
      return;
    }
    Object child = node.get(k);
    if (child == null) {
      child = new LinkedHashMap<String, Object>();
      node.put(k, child);
    }
    if (child instanceof Map<?, ?> map) {
      insert((Map<String, Object>) map, next, name, i + 1, value, lenient);
    }
  }

  /** Maps whose keys are all list indexes become lists, in index order. */
  @SuppressWarnings("unchecked")
  private static Object lists(Object node) {
    if (!(node instanceof Map<?, ?> map)) {
      return node;
    }
    boolean indexes = !map.isEmpty();
    for (Object k : map.keySet()) {
      indexes &= String.valueOf(k).startsWith("\u0000");
    }
    if (indexes) {
      TreeMap<Integer, Object> byIndex = new TreeMap<>();
      map.forEach((k, v) -> byIndex.put(Integer.valueOf(((String) k).substring(1)), lists(v)));
      return new ArrayList<>(byIndex.values());
    }
    Map<String, Object> out = new LinkedHashMap<>();
    ((Map<String, Object>) map)
        .forEach((k, v) -> out.put(k.startsWith("\u0000") ? k.substring(1) : k, lists(v)));
    return out;
  }

  private static Object unwrap(Object value) {
    return value instanceof OriginTrackedValue o ? o.getValue() : value;
  }

  /** Text read as the number or boolean the record expects there (a properties file has text). */
  private static Object coerce(Object value, Type type) {
    if (!(value instanceof CharSequence cs)) {
      return value;
    }
    String s = cs.toString().trim();
    Class<?> raw = raw(type);
    if (raw == Integer.class || raw == int.class) {
      return INTEGER.matcher(s).matches() ? parseInt(s, cs) : cs.toString();
    }
    if (raw == Long.class || raw == long.class) {
      return INTEGER.matcher(s).matches() ? (Object) Long.valueOf(s) : cs.toString();
    }
    if (raw == Boolean.class || raw == boolean.class) {
      return bool(s, cs.toString());
    }
    if (raw == Double.class || raw == double.class) {
      try {
        return Double.valueOf(s);
      } catch (NumberFormatException e) {
        return cs.toString();
      }
    }
    if (raw == Object.class) {
      return INTEGER.matcher(s).matches() ? (Object) Long.valueOf(s) : bool(s, cs.toString());
    }
    return cs.toString();
  }

  private static Object parseInt(String s, CharSequence original) {
    long v = Long.parseLong(s);
    return v >= Integer.MIN_VALUE && v <= Integer.MAX_VALUE
        ? (Object) (int) v
        : original.toString();
  }

  private static Object bool(String s, String original) {
    if (s.equalsIgnoreCase("true")) {
      return Boolean.TRUE;
    }
    if (s.equalsIgnoreCase("false")) {
      return Boolean.FALSE;
    }
    return original;
  }

  // ---------------------------------------------------------------- types

  private static Class<?> raw(Type t) {
    if (t instanceof Class<?> c) {
      return c;
    }
    if (t instanceof ParameterizedType p && p.getRawType() instanceof Class<?> c) {
      return c;
    }
    return null;
  }

  private static boolean isTyped(Type t) {
    return t instanceof ParameterizedType p && raw(p.getActualTypeArguments()[1]) != Object.class;
  }

  private static Type elementType(Type t) {
    if (t instanceof ParameterizedType p && raw(p) != null && List.class.isAssignableFrom(raw(p))) {
      return p.getActualTypeArguments()[0];
    }
    return Object.class;
  }

  /** A record's keys, unwrapped records' keys at its own level (as the binder sees them). */
  private static Map<String, RecordComponent> components(Class<?> record) {
    Map<String, RecordComponent> out = new LinkedHashMap<>();
    for (RecordComponent rc : record.getRecordComponents()) {
      if (rc.getAccessor().isAnnotationPresent(JsonUnwrapped.class) && rc.getType().isRecord()) {
        out.putAll(components(rc.getType()));
      } else {
        out.put(rc.getName(), rc);
      }
    }
    return out;
  }

  /** The component whose name is {@code uniform} in Spring's uniform form (no dashes, lower). */
  private static Map.Entry<String, RecordComponent> component(Class<?> record, String uniform) {
    for (Map.Entry<String, RecordComponent> e : components(record).entrySet()) {
      if (e.getKey().toLowerCase(Locale.ROOT).equals(uniform)) {
        return e;
      }
    }
    return null;
  }

  /** {@code kv-connector} as a record key: {@code kvConnector}. */
  static String camel(String kebab) {
    StringBuilder b = new StringBuilder();
    boolean up = false;
    for (char c : kebab.toCharArray()) {
      if (c == '-' || c == '_') {
        up = b.length() > 0;
      } else {
        b.append(up ? Character.toUpperCase(c) : c);
        up = false;
      }
    }
    return b.toString();
  }

  /** {@code kvConnector} as a property: {@code kv-connector}. */
  static String kebab(String camel) {
    StringBuilder b = new StringBuilder();
    for (char c : camel.toCharArray()) {
      if (Character.isUpperCase(c)) {
        b.append('-').append(Character.toLowerCase(c));
      } else {
        b.append(c);
      }
    }
    return b.toString();
  }
}
