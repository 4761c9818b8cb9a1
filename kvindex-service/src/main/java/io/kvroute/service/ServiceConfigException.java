package io.kvroute.service;

/**
 * An invalid {@code kvroute serve} configuration; the message starts with the offending field's
 * path (for example {@code pods[1].events must be a tcp:// or ipc:// endpoint, was "x"}).
 */
public final class ServiceConfigException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  /** An exception with a message naming the field. */
  public ServiceConfigException(String message) {
    super(message);
  }
}
