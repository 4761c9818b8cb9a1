package io.kvroute.edge;

/**
 * A server configuration that cannot work (an admin listener without a token, a missing TLS key, a
 * limit out of range). The message names the field and what to do.
 */
public final class EdgeConfigException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * A configuration error.
   *
   * @param message what is wrong and how to fix it
   */
  public EdgeConfigException(String message) {
    super(message);
  }

  /**
   * A configuration error with its cause.
   *
   * @param message what is wrong and how to fix it
   * @param cause the underlying failure
   */
  public EdgeConfigException(String message, Throwable cause) {
    super(message, cause);
  }
}
