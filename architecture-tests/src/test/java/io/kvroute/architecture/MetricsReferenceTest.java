package io.kvroute.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * {@code docs/metrics.md} against the code: every meter name in the main sources is documented,
 * every documented name exists, and every name follows the scheme {@code kvroute.<area>.<name>}
 * (lower case, dotted; Prometheus renders it {@code kvroute_<area>_<name>}).
 *
 * <p>Meter names are found as string literals {@code "kvroute.…"} in {@code src/main/java}, plus
 * the http-edge meters, which join the server's prefix ({@code kvroute.edge} by default) and a
 * suffix literal {@code prefix + ".…"}.
 */
class MetricsReferenceTest {
  private static final Path ROOT =
      Paths.get(System.getProperty("basedir", System.getProperty("user.dir")))
          .toAbsolutePath()
          .getParent();

  /** A complete dotted kvroute name as a Java string literal. */
  private static final Pattern LITERAL = Pattern.compile("\"(kvroute(?:\\.[a-z0-9]+)+)\"");

  /** A suffix joined to a meter prefix, as the edge does. */
  private static final Pattern SUFFIX = Pattern.compile("prefix \\+ \"(\\.[a-z0-9.]+)\"");

  /** The first column of the reference's tables. */
  private static final Pattern DOCUMENTED = Pattern.compile("(?m)^\\| `(kvroute[a-z0-9.]*)` \\|");

  /** Literals of that shape that are not meters. */
  private static final Set<String> NOT_METERS = Set.of("kvroute.edge");

  private static final Pattern SCHEME = Pattern.compile("kvroute\\.[a-z][a-z0-9]*(\\.[a-z0-9]+)*");

  @Test
  void everyMeterIsDocumentedAndEveryDocumentedMeterExists() throws IOException {
    Set<String> inCode = metersInCode();
    Set<String> documented = new TreeSet<>();
    Matcher m = DOCUMENTED.matcher(read(ROOT.resolve("docs/metrics.md")));
    while (m.find()) {
      documented.add(m.group(1));
    }
    assertThat(inCode).as("meter names found in the main sources").hasSizeGreaterThan(80);
    Set<String> undocumented = new TreeSet<>(inCode);
    undocumented.removeAll(documented);
    Set<String> stale = new TreeSet<>(documented);
    stale.removeAll(inCode);
    assertThat(undocumented).as("meters missing from docs/metrics.md").isEmpty();
    assertThat(stale).as("docs/metrics.md lists meters no code registers").isEmpty();
  }

  @Test
  void everyMeterFollowsTheNamingScheme() throws IOException {
    assertThat(metersInCode()).allMatch(n -> SCHEME.matcher(n).matches());
  }

  private static Set<String> metersInCode() throws IOException {
    Set<String> names = new TreeSet<>();
    try (Stream<Path> files = Files.walk(ROOT)) {
      files
          .filter(p -> p.toString().endsWith(".java"))
          .filter(p -> p.toString().contains("/src/main/java/"))
          .filter(p -> !p.toString().contains("/target/"))
          // Its "kvroute.*" literals are span names and attribute keys; it registers no meter.
          .filter(p -> !p.toString().contains("/kvroute-opentelemetry/"))
          .forEach(
              p -> {
                String text = read(p);
                Matcher m = LITERAL.matcher(text);
                while (m.find()) {
                  if (!NOT_METERS.contains(m.group(1))) {
                    names.add(m.group(1));
                  }
                }
                if (p.toString().contains("/http-edge/")) {
                  Matcher s = SUFFIX.matcher(text);
                  while (s.find()) {
                    names.add("kvroute.edge" + s.group(1));
                  }
                }
              });
    }
    return names;
  }

  private static String read(Path p) {
    try {
      return Files.readString(p, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
