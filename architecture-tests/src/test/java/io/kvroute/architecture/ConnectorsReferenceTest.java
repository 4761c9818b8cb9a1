package io.kvroute.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.config.Durations;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.connector.http.ConnectorParameters;
import java.io.IOException;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * {@code docs/connectors.md} against the code: every connector found with {@code ServiceLoader} has
 * a table of its parameters there, and each table lists exactly the components of the connector's
 * parameter record, in order, with the type and the default the record gives (derived here by
 * binding an empty {@code config:} block).
 */
class ConnectorsReferenceTest {
  private static final Path ROOT =
      Paths.get(System.getProperty("basedir", System.getProperty("user.dir")))
          .toAbsolutePath()
          .getParent();

  /** {@code ### `nixl`} under {@code ## Parameters of each connector}. */
  private static final Pattern SECTION = Pattern.compile("(?m)^### `([a-z0-9-]+)`\\s*$");

  /** A parameter row: name, type, default (its first code span), meaning. */
  private static final Pattern ROW =
      Pattern.compile("(?m)^\\| `([A-Za-z]+)` \\| ([^|]+) \\| ([^|]+) \\| ([^|]+) \\|\\s*$");

  /** One documented parameter. */
  record Row(String name, String type, String defaultValue) {}

  @Test
  void everyConnectorsParametersAreDocumentedAsTheCodeDeclaresThem() throws IOException {
    String doc = Files.readString(ROOT.resolve("docs/connectors.md"), StandardCharsets.UTF_8);
    int start = doc.indexOf("## Parameters of each connector");
    assertThat(start).as("docs/connectors.md has a parameters section").isNotNegative();
    int end = doc.indexOf("\n## ", start + 1);
    Map<String, List<Row>> documented = tables(doc.substring(start, end < 0 ? doc.length() : end));

    KVConnectors connectors = KVConnectors.discover(getClass().getClassLoader());
    assertThat(connectors.types())
        .contains("http", "shared-storage", "nixl", "fallback", "lmcache", "mooncake")
        .contains("mooncake-store", "sglang");
    assertThat(new TreeSet<>(documented.keySet()))
        .as("connectors documented in docs/connectors.md")
        .isEqualTo(new TreeSet<>(connectors.types()));

    for (String type : connectors.types()) {
      KVConnectorProvider p = connectors.provider(type);
      assertThat(p.parameters()).as("%s declares its parameters", type).isPresent();
      assertThat(documented.get(type))
          .as("docs/connectors.md's table of %s (name, type, default)", type)
          .containsExactlyElementsOf(rows(type, p.parameters().get()));
    }
  }

  /** The rows the code gives: component name, rendered type, rendered default. */
  static List<Row> rows(String type, Class<? extends Record> parameters) {
    Record defaults = ConnectorParameters.bind(ConnectorConfig.of(type), parameters);
    List<Row> out = new ArrayList<>();
    for (RecordComponent c : parameters.getRecordComponents()) {
      Object value;
      try {
        value = c.getAccessor().invoke(defaults);
      } catch (ReflectiveOperationException e) {
        throw new AssertionError(e);
      }
      out.add(new Row(c.getName(), typeName(c.getGenericType()), defaultText(value)));
    }
    return out;
  }

  static String typeName(Type t) {
    if (t instanceof ParameterizedType p && p.getRawType() == List.class) {
      return "list of " + typeName(p.getActualTypeArguments()[0]) + "s";
    }
    if (t == Integer.class || t == Long.class) {
      return "integer";
    }
    if (t == Double.class) {
      return "number";
    }
    if (t == Boolean.class) {
      return "boolean";
    }
    if (t == Duration.class) {
      return "duration";
    }
    if (t == String.class) {
      return "string";
    }
    if (t instanceof Class<?> c && c.isEnum()) {
      List<String> names =
          Arrays.stream(c.getEnumConstants()).map(v -> "`" + v + "`").collect(Collectors.toList());
      return String.join(", ", names.subList(0, names.size() - 1))
          + " or "
          + names.get(names.size() - 1);
    }
    throw new AssertionError("no documented rendering for parameter type " + t);
  }

  static String defaultText(Object v) {
    if (v == null) {
      return "none";
    }
    if (v instanceof Duration d) {
      return "`" + Durations.format(d) + "`";
    }
    if (v instanceof List<?> l) {
      return "`[" + l.stream().map(String::valueOf).collect(Collectors.joining(", ")) + "]`";
    }
    return "`" + v + "`";
  }

  /** The tables of a section, by connector type. */
  static Map<String, List<Row>> tables(String section) {
    Map<String, List<Row>> out = new LinkedHashMap<>();
    Matcher m = SECTION.matcher(section);
    List<String> names = new ArrayList<>();
    List<Integer> starts = new ArrayList<>();
    List<Integer> ends = new ArrayList<>();
    while (m.find()) {
      names.add(m.group(1));
      starts.add(m.start());
      ends.add(m.end());
    }
    for (int i = 0; i < names.size(); i++) {
      int to = i + 1 < names.size() ? starts.get(i + 1) : section.length();
      Matcher r = ROW.matcher(section.substring(ends.get(i), to));
      List<Row> rows = new ArrayList<>();
      while (r.find()) {
        String dflt = r.group(3).trim();
        // The default cell starts with the value (a code span, or "none"); words may follow.
        String value =
            dflt.startsWith("`")
                ? dflt.substring(0, dflt.indexOf('`', 1) + 1)
                : dflt.split("[ ,;(]")[0];
        rows.add(new Row(r.group(1), r.group(2).trim(), value));
      }
      out.put(names.get(i), rows);
    }
    return out;
  }
}
