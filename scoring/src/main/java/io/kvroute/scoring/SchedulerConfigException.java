package io.kvroute.scoring;

import io.kvroute.config.ConfigException;

/**
 * A scheduler configuration document is invalid. The message names the field's path and the
 * problem, for example {@code plugins[1].parameters.threshold: must be >= 1, was 0} or {@code
 * plugins[2].type: unknown plugin "foo"; known: ...} (with the file name in front when the document
 * was read from a file).
 */
public final class SchedulerConfigException extends ConfigException {
  private static final long serialVersionUID = 1L;

  /** An exception about the whole document. */
  public SchedulerConfigException(String message) {
    super("", message);
  }

  /** An exception about the whole document, with a cause. */
  public SchedulerConfigException(String message, Throwable cause) {
    super("", message, cause);
  }

  /**
   * An exception naming the field.
   *
   * @param source the file the document was read from, or empty
   * @param path the field's path, e.g. {@code plugins[1].parameters.threshold}
   * @param problem what is wrong
   * @param cause the underlying exception, or null
   */
  public SchedulerConfigException(String source, String path, String problem, Throwable cause) {
    super(source, path, problem, cause);
  }

  @Override
  public SchedulerConfigException under(String prefix) {
    return new SchedulerConfigException(source(), join(prefix, path()), problem(), this);
  }

  @Override
  public SchedulerConfigException inSource(String newSource) {
    return new SchedulerConfigException(newSource, path(), problem(), this);
  }
}
