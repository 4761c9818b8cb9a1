package io.kvroute.service;

import io.kvroute.config.ConfigException;

/**
 * An invalid {@code kvroute serve} configuration; the message names the file (when known), the
 * offending field's path and the problem, for example {@code serve.json: pods[1].events: must be a
 * tcp:// or ipc:// endpoint such as "tcp://10.0.0.5:5557", was "x"}.
 */
public final class ServiceConfigException extends ConfigException {
  private static final long serialVersionUID = 1L;

  /** An exception whose message is the whole problem (no field path). */
  public ServiceConfigException(String message) {
    super("", message);
  }

  /**
   * An exception naming the field.
   *
   * @param source the configuration's file, or empty
   * @param path the field's path, e.g. {@code http.port}
   * @param problem what is wrong
   * @param cause the underlying exception, or null
   */
  public ServiceConfigException(String source, String path, String problem, Throwable cause) {
    super(source, path, problem, cause);
  }

  @Override
  public ServiceConfigException under(String prefix) {
    return new ServiceConfigException(source(), join(prefix, path()), problem(), this);
  }

  @Override
  public ServiceConfigException inSource(String newSource) {
    return new ServiceConfigException(newSource, path(), problem(), this);
  }
}
