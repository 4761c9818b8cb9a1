package io.kvroute.testkit.internal;

/**
 * A generation request the simulator refuses, with the HTTP status vLLM would answer. Carries no
 * stack trace.
 *
 * <p>Immutable; thread-safe.
 */
public final class BadRequest extends Exception {
  private static final long serialVersionUID = 1L;

  /** The HTTP status to answer with. */
  private final int status;

  /**
   * A refusal.
   *
   * @param status the HTTP status
   * @param message the error message returned to the client
   */
  public BadRequest(int status, String message) {
    super(message, null, false, false);
    this.status = status;
  }

  /** The HTTP status to answer with. */
  public int status() {
    return status;
  }
}
