package io.kvroute.config.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads the configuration reference, {@code docs/configuration.md}, so that each module's tests
 * check its section against the records it binds: every key documented must exist, every key of the
 * records must be documented. Shipped in kvroute-config's test-jar.
 *
 * <p>A section's keys are the first cells of the table rows between its heading and the next
 * heading (a subsection has keys of its own), written in backticks ({@code | `listen.port` |
 * integer | 8080 | ... |}).
 */
public final class ConfigReference {
  private static final Pattern HEADING = Pattern.compile("^(#{1,6})\\s+(.*?)\\s*$");
  private static final Pattern KEY_CELL = Pattern.compile("^\\|\\s*`([^`]+)`\\s*\\|");

  private final List<String> lines;

  private ConfigReference(List<String> lines) {
    this.lines = lines;
  }

  /**
   * The reference of the repository this module belongs to: {@code docs/configuration.md} in the
   * working directory (the module) or its parent (the repository root).
   */
  public static ConfigReference load() {
    Path here = Path.of("").toAbsolutePath();
    for (Path dir : new Path[] {here, here.getParent()}) {
      Path doc = dir == null ? null : dir.resolve("docs").resolve("configuration.md");
      if (doc != null && Files.isRegularFile(doc)) {
        return load(doc);
      }
    }
    throw new AssertionError("docs/configuration.md not found from " + here);
  }

  /** A reference read from {@code file}. */
  public static ConfigReference load(Path file) {
    try {
      return new ConfigReference(Files.readAllLines(file, StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Whether a heading with exactly this text exists. */
  public boolean hasSection(String heading) {
    return lines.stream()
        .map(HEADING::matcher)
        .anyMatch(m -> m.matches() && m.group(2).equals(heading));
  }

  /**
   * The keys documented in the section whose heading is {@code heading} (without the {@code #}s),
   * in order, up to the next heading.
   *
   * @throws AssertionError when there is no such section
   */
  public Set<String> keys(String heading) {
    Set<String> keys = new LinkedHashSet<>();
    int level = -1;
    for (String line : lines) {
      Matcher h = HEADING.matcher(line);
      if (h.matches()) {
        if (level < 0 && h.group(2).equals(heading)) {
          level = h.group(1).length();
          continue;
        }
        if (level >= 0) {
          break; // the next heading: a subsection has keys of its own
        }
      }
      if (level >= 0) {
        Matcher k = KEY_CELL.matcher(line);
        if (k.find()) {
          keys.add(k.group(1));
        }
      }
    }
    if (level < 0) {
      throw new AssertionError("docs/configuration.md has no section \"" + heading + "\"");
    }
    return keys;
  }

  /**
   * The headings one level below {@code heading}, in order (for example the plugin types of the
   * scheduler's plugin section).
   *
   * @throws AssertionError when there is no such section
   */
  public List<String> subsections(String heading) {
    List<String> out = new java.util.ArrayList<>();
    int level = -1;
    for (String line : lines) {
      Matcher h = HEADING.matcher(line);
      if (!h.matches()) {
        continue;
      }
      int l = h.group(1).length();
      if (level < 0) {
        if (h.group(2).equals(heading)) {
          level = l;
        }
      } else if (l <= level) {
        break;
      } else if (l == level + 1) {
        out.add(h.group(2));
      }
    }
    if (level < 0) {
      throw new AssertionError("docs/configuration.md has no section \"" + heading + "\"");
    }
    return out;
  }

  /**
   * Asserts that the section documents exactly {@code expected}.
   *
   * @throws AssertionError listing the undocumented keys and the documented keys that do not exist
   */
  public void assertSectionDocuments(String heading, Collection<String> expected) {
    Set<String> documented = keys(heading);
    Set<String> missing = new TreeSet<>(expected);
    missing.removeAll(documented);
    Set<String> unknown = new TreeSet<>(documented);
    unknown.removeAll(expected);
    if (!missing.isEmpty() || !unknown.isEmpty()) {
      throw new AssertionError(
          "docs/configuration.md section \""
              + heading
              + "\" is out of date:"
              + (missing.isEmpty() ? "" : "\n  not documented: " + missing)
              + (unknown.isEmpty()
                  ? ""
                  : "\n  documented but not in the configuration: " + unknown));
    }
  }
}
