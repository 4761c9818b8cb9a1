package io.kvroute.spring.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.kvroute.config.ConfigBinder;
import io.kvroute.config.testing.ConfigReference;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The IDE metadata of {@code kvroute.*} ({@code META-INF/spring-configuration-metadata.json}) is
 * generated from the properties record and the references that describe each key: the starter's own
 * keys from this module's README, the composition root's from {@code docs/configuration.md} (the
 * section of {@code kvroute gateway}, whose keys they are). The committed file must be what the
 * generator writes; regenerate it with
 *
 * <pre>{@code mvn -B verify -pl kvroute-spring-cloud-gateway -am -Dtest=ConfigurationMetadataTest \
 *     -Dsurefire.failIfNoSpecifiedTests=false -DupdateSpringMetadata=true}</pre>
 */
class ConfigurationMetadataTest {
  private static final Path FILE =
      Path.of("src/main/resources/META-INF/spring-configuration-metadata.json");
  private static final Path README = Path.of("README.md");
  private static final String STARTER_SECTION = "Properties of the starter";
  private static final Pattern ROW =
      Pattern.compile("^\\|\\s*`([^`]+)`\\s*\\|([^|]*)\\|([^|]*)\\|(.*)\\|\\s*$");
  private static final Set<String> STARTER_KEYS = Set.of("enabled", "mode", "maxRequestSize");

  @Test
  void theReadmeDocumentsTheStartersOwnKeys() {
    ConfigReference.load(README)
        .assertSectionDocuments(
            STARTER_SECTION,
            List.of("kvroute.enabled", "kvroute.mode", "kvroute.max-request-size"));
  }

  @Test
  void theIdeMetadataIsGeneratedFromTheRecordAndTheReferences() throws Exception {
    String generated = generate();
    if (Boolean.getBoolean("updateSpringMetadata")) {
      Files.createDirectories(FILE.getParent());
      Files.writeString(FILE, generated, StandardCharsets.UTF_8);
    }
    assertThat(Files.readString(FILE, StandardCharsets.UTF_8))
        .as("%s is out of date: regenerate it (see this test's javadoc)", FILE)
        .isEqualTo(generated);
  }

  /** The metadata file's text. */
  static String generate() throws Exception {
    Map<String, Row> docs = new LinkedHashMap<>(rows(configurationMd(), "`kvroute gateway`"));
    rows(README, STARTER_SECTION).forEach((k, v) -> docs.put(camelKey(k), v));
    List<Map<String, Object>> groups = new ArrayList<>();
    List<Map<String, Object>> properties = new ArrayList<>();
    groups.add(
        group("kvroute", KvRouteProperties.class, "kvroute's routing for Spring Cloud Gateway"));
    Set<String> containers = new LinkedHashSet<>();
    for (String key : ConfigBinder.create().keys(KvRouteProperties.class)) {
      int cut = container(key);
      if (cut < 0) {
        addGroups(key, groups);
        Row row = docs.get(key);
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("name", name(key));
        p.put("type", typeAt(key).getTypeName());
        p.put("description", row == null ? "" : text(row.description()));
        p.put("sourceType", owner(key).getName());
        Object dflt = row == null ? null : defaultValue(row.dflt());
        if (dflt != null) {
          p.put("defaultValue", dflt);
        }
        properties.add(p);
      } else if (containers.add(key.substring(0, cut))) {
        String c = key.substring(0, cut);
        List<String> children = new ArrayList<>();
        for (String k : docs.keySet()) {
          if (k.startsWith(c + "[].") || k.startsWith(c + ".*.")) {
            children.add(name(k.substring(k.indexOf('.', c.length()) + 1)).substring(8));
          }
        }
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("name", name(c));
        p.put("type", typeAt(c).getTypeName());
        p.put(
            "description",
            (key.charAt(cut) == '[' ? "A list; each entry has: " : "By name; each entry has: ")
                + String.join(", ", children)
                + " (docs/configuration.md).");
        p.put("sourceType", owner(c).getName());
        properties.add(p);
      }
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("groups", groups);
    out.put("properties", properties);
    out.put(
        "hints",
        List.of(
            hint("kvroute.mode", "relay", "route"),
            hint("kvroute.index.backend", "memory", "redis"),
            hint("kvroute.index.redis.ingest-mode", "leased", "all-replicas")));
    return new ObjectMapper()
            .enable(SerializationFeature.INDENT_OUTPUT)
            .writeValueAsString(out)
            .replace("\r\n", "\n")
        + "\n";
  }

  private record Row(String type, String dflt, String description) {}

  private static Path configurationMd() {
    return Path.of("..", "docs", "configuration.md");
  }

  /** The table rows of a section: key, type, default, description. */
  private static Map<String, Row> rows(Path file, String heading) throws Exception {
    Map<String, Row> out = new LinkedHashMap<>();
    boolean in = false;
    for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
      if (line.startsWith("#")) {
        if (in) {
          break;
        }
        in = line.replaceFirst("^#+\\s*", "").trim().equals(heading);
        continue;
      }
      Matcher m = ROW.matcher(line);
      if (in && m.matches()) {
        out.put(m.group(1), new Row(m.group(2).trim(), m.group(3).trim(), m.group(4).trim()));
      }
    }
    return out;
  }

  /** {@code kvroute.max-request-size} as a record key: {@code maxRequestSize}. */
  private static String camelKey(String property) {
    return KvRouteBinding.camel(property.substring(property.indexOf('.') + 1));
  }

  /** Where a key enters a list or a map, or -1. */
  private static int container(String key) {
    int list = key.indexOf("[]");
    int map = key.indexOf(".*");
    if (list < 0) {
      return map;
    }
    return map < 0 ? list : Math.min(list, map);
  }

  private static String name(String key) {
    StringBuilder b = new StringBuilder("kvroute");
    for (String part : key.split("\\.")) {
      b.append('.').append(KvRouteBinding.kebab(part));
    }
    return b.toString();
  }

  /** The record whose component {@code key}'s last part is. */
  private static Class<?> owner(String key) {
    Class<?> c = KvRouteProperties.class;
    String[] parts = key.split("\\.");
    for (int i = 0; i < parts.length - 1; i++) {
      c = raw(component(c, parts[i]).getGenericType());
    }
    return component(c, parts[parts.length - 1]).getDeclaringRecord();
  }

  private static Type typeAt(String key) {
    Class<?> c = KvRouteProperties.class;
    Type t = c;
    for (String part : key.split("\\.")) {
      t = component(c, part).getGenericType();
      c = raw(t);
    }
    return t;
  }

  private static RecordComponent component(Class<?> record, String name) {
    for (RecordComponent rc : record.getRecordComponents()) {
      if (rc.getName().equals(name)) {
        return rc;
      }
      if (rc.getType().isRecord()
          && rc.getAccessor()
              .isAnnotationPresent(com.fasterxml.jackson.annotation.JsonUnwrapped.class)) {
        RecordComponent inner = component(rc.getType(), name);
        if (inner != null) {
          return inner;
        }
      }
    }
    return null;
  }

  private static Class<?> raw(Type t) {
    return t instanceof ParameterizedType p ? (Class<?>) p.getRawType() : (Class<?>) t;
  }

  /** The groups of the nested records on {@code key}'s way ({@code kvroute.index}, ...). */
  private static void addGroups(String key, List<Map<String, Object>> groups) {
    String[] parts = key.split("\\.");
    StringBuilder path = new StringBuilder();
    for (int i = 0; i < parts.length - 1; i++) {
      path.append(i == 0 ? "" : ".").append(parts[i]);
      String name = name(path.toString());
      if (groups.stream().noneMatch(g -> g.get("name").equals(name))) {
        groups.add(group(name, raw(typeAt(path.toString())), null));
      }
    }
  }

  private static Map<String, Object> group(String name, Class<?> type, String description) {
    Map<String, Object> g = new LinkedHashMap<>();
    g.put("name", name);
    g.put("type", type.getName());
    if (description != null) {
      g.put("description", description);
    }
    g.put("sourceType", type.getName());
    return g;
  }

  private static Map<String, Object> hint(String name, String... values) {
    List<Map<String, Object>> vs = new ArrayList<>();
    for (String v : values) {
      vs.add(Map.of("value", v));
    }
    Map<String, Object> h = new LinkedHashMap<>();
    h.put("name", name);
    h.put("values", vs);
    return h;
  }

  /** Markdown cell text as plain text: links by their text, no backticks. */
  private static String text(String markdown) {
    return markdown.replaceAll("\\[([^\\]]*)]\\([^)]*\\)", "$1").replace("`", "").trim();
  }

  /** A default written as one literal ({@code `16`}, {@code `true`}), else none. */
  private static Object defaultValue(String cell) {
    Matcher m = Pattern.compile("^`([^`]+)`$").matcher(cell.trim());
    if (!m.matches()) {
      return null;
    }
    String v = m.group(1);
    if (v.equals("true") || v.equals("false")) {
      return Boolean.valueOf(v);
    }
    if (v.matches("-?\\d+")) {
      return Long.valueOf(v);
    }
    return v;
  }
}
