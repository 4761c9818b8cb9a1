package io.kvroute.config;

import io.kvroute.config.internal.Errors;
import java.util.Collection;
import java.util.Objects;

/**
 * A configuration document is invalid. The message is one line a user can act on: the source (a
 * file name, when known), the path of the offending field and the problem, for example {@code
 * gateway.yaml: endpoints[1].url: not an http(s) URL: "http//x"}.
 *
 * <p>Paths use dots for mapping keys and {@code [i]} for list elements ({@code
 * scheduler.plugins[2].parameters.threshold}); a key that is not a plain identifier is quoted
 * ({@code labels["llm-d.ai/role"]}). The path is empty for a problem with the whole document.
 *
 * <p>Record constructors of bound configuration throw it with a path relative to the record (for
 * example {@code new ConfigException("url", "not an http(s) URL: \"x\"")}); {@link ConfigBinder}
 * puts the record's own path in front. Immutable.
 */
public class ConfigException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  private final String source;
  private final String path;
  private final String problem;

  /**
   * An exception at {@code path} (relative to whatever is being bound; empty for the document).
   *
   * @param path the field path, e.g. {@code endpoints[1].url}
   * @param problem what is wrong and, where possible, what is expected
   */
  public ConfigException(String path, String problem) {
    this("", path, problem, null);
  }

  /** An exception at {@code path} with a cause. */
  public ConfigException(String path, String problem, Throwable cause) {
    this("", path, problem, cause);
  }

  /**
   * An exception naming its source too.
   *
   * @param source the file (or other origin) of the document; empty when unknown
   * @param path the field path; empty for the whole document
   * @param problem what is wrong
   * @param cause the underlying exception, or null
   */
  public ConfigException(String source, String path, String problem, Throwable cause) {
    super(format(source, path, problem), cause);
    this.source = Objects.requireNonNull(source, "source");
    this.path = Objects.requireNonNull(path, "path");
    this.problem = Objects.requireNonNull(problem, "problem");
  }

  /** The document's source (a file name), or empty. */
  public String source() {
    return source;
  }

  /** The path of the offending field; empty when the problem concerns the whole document. */
  public String path() {
    return path;
  }

  /** The problem, without source and path. */
  public String problem() {
    return problem;
  }

  /**
   * The same problem one level down: {@code new ConfigException("url", p).under("endpoints[1]")} is
   * at {@code endpoints[1].url}.
   */
  public ConfigException under(String prefix) {
    return new ConfigException(source, join(prefix, path), problem, this);
  }

  /** The same problem, naming the document's source (for example the file it was read from). */
  public ConfigException inSource(String newSource) {
    return new ConfigException(newSource, path, problem, this);
  }

  /**
   * An unknown name among known ones, with a suggestion when one is close: {@code unknown("type",
   * "plugin", "load-awere-scorer", known)} says {@code type: unknown plugin "load-awere-scorer";
   * did you mean "load-aware-scorer"? known: ...}.
   *
   * @param path the field's path
   * @param what what the name is the name of ("plugin", "connector type", "parameter")
   * @param name the unknown name
   * @param known the names that exist
   */
  public static ConfigException unknown(
      String path, String what, String name, Collection<String> known) {
    return new ConfigException(
        path, "unknown " + what + " \"" + name + "\"" + Errors.suggest(name, known));
  }

  /**
   * Joins two paths: {@code join("a", "b")} is {@code a.b}, {@code join("a", "[1].b")} is {@code
   * a[1].b}, and an empty side leaves the other.
   */
  public static String join(String prefix, String path) {
    if (prefix == null || prefix.isEmpty()) {
      return path == null ? "" : path;
    }
    if (path == null || path.isEmpty()) {
      return prefix;
    }
    return path.startsWith("[") ? prefix + path : prefix + "." + path;
  }

  private static String format(String source, String path, String problem) {
    StringBuilder b = new StringBuilder();
    if (source != null && !source.isEmpty()) {
      b.append(source).append(": ");
    }
    if (path != null && !path.isEmpty()) {
      b.append(path).append(": ");
    }
    return b.append(problem).toString();
  }
}
