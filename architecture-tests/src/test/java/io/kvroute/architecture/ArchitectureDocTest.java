package io.kvroute.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * {@code docs/architecture.md}, the map {@link ArchitectureTest} enforces, against the rules in
 * {@link Modules}: its "may use" table is {@link Modules#ALLOWED}, and its picture was rendered
 * from its committed text source.
 */
class ArchitectureDocTest {
  private static final Path ROOT =
      Paths.get(System.getProperty("basedir", System.getProperty("user.dir")))
          .toAbsolutePath()
          .getParent();

  private static final Pattern ROW =
      Pattern.compile("(?m)^\\| `([a-z0-9-]+)` \\| ([^|]+) \\|\\s*$");
  private static final Pattern NAME = Pattern.compile("`([a-z0-9-]+)`");

  private static String read(String path) throws IOException {
    return Files.readString(ROOT.resolve(path), StandardCharsets.UTF_8);
  }

  @Test
  void theMayUseTableIsTheRuleSet() throws IOException {
    String doc = read("docs/architecture.md");
    int start = doc.indexOf("## Which module may use which");
    assertThat(start).isNotNegative();
    String section = doc.substring(start, doc.indexOf("\n## ", start + 1));
    Map<String, Set<String>> documented = new TreeMap<>();
    Matcher m = ROW.matcher(section);
    while (m.find()) {
      Set<String> uses = new LinkedHashSet<>();
      String cell = m.group(2).trim();
      if (cell.startsWith("every library module")) {
        uses.addAll(Modules.LIBRARIES);
      }
      Matcher n = NAME.matcher(cell);
      while (n.find()) {
        uses.add(n.group(1));
      }
      documented.put(m.group(1), new TreeSet<>(uses));
    }
    Map<String, Set<String>> rules = new TreeMap<>();
    Modules.ALLOWED.forEach((k, v) -> rules.put(k, new TreeSet<>(v)));
    assertThat(documented)
        .as(
            "docs/architecture.md's \"may use\" table must be Modules.ALLOWED: change both"
                + " together")
        .isEqualTo(rules);
  }

  @Test
  void thePictureIsRenderedFromItsSource() throws IOException {
    String dot = read("docs/images/architecture.dot");
    String svg = unescape(read("docs/images/architecture.svg"));
    assertThat(read("docs/architecture.md")).contains("(images/architecture.svg)");
    assertThat(read("README.md")).contains("docs/images/architecture.svg");
    Matcher labels = Pattern.compile("label=\"([^\"]+)\"").matcher(dot);
    int count = 0;
    while (labels.find()) {
      for (String line : labels.group(1).split("\\\\n")) {
        assertThat(svg)
            .as(
                "architecture.svg has the label line \"%s\" of architecture.dot (re-render it)",
                line)
            .contains(">" + line + "<");
        count++;
      }
    }
    assertThat(count).isGreaterThan(20);
  }

  /** The SVG's text with its character references decoded (Graphviz writes "-" as "&#45;"). */
  private static String unescape(String svg) {
    Matcher m = Pattern.compile("&#(\\d+);").matcher(svg);
    StringBuilder b = new StringBuilder();
    while (m.find()) {
      m.appendReplacement(
          b, Matcher.quoteReplacement(String.valueOf((char) Integer.parseInt(m.group(1)))));
    }
    m.appendTail(b);
    return b.toString()
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
  }
}
