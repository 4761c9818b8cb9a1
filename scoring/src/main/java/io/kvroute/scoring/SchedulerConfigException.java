package io.kvroute.scoring;

/**
 * A scheduler configuration document is invalid. The message names the plugin (name and type) or
 * profile and the field, for example {@code plugin "my-load" (load-aware-scorer):
 * parameters.threshold must be >= 1, was 0}.
 */
public final class SchedulerConfigException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  /** An exception with a message. */
  public SchedulerConfigException(String message) {
    super(message);
  }

  /** An exception with a message and a cause. */
  public SchedulerConfigException(String message, Throwable cause) {
    super(message, cause);
  }
}
