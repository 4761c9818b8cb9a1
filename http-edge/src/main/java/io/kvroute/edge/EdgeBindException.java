package io.kvroute.edge;

/**
 * A listener could not be opened: the port is in use, the address is not local, or the host does
 * not resolve. The message is one line naming the address, e.g. {@code cannot listen on
 * 127.0.0.1:8080: Address already in use}.
 */
public final class EdgeBindException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * A bind failure.
   *
   * @param message the address and the reason
   * @param cause the underlying failure
   */
  public EdgeBindException(String message, Throwable cause) {
    super(message, cause);
  }
}
