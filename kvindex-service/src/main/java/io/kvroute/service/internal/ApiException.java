package io.kvroute.service.internal;

/**
 * An error answer: HTTP status, message and (for 400) the request field it names. Carries no stack
 * trace (it is control flow on the request path).
 */
public final class ApiException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;
  private final String field;

  /** An error answer. */
  public ApiException(int status, String field, String message) {
    super(message, null, false, false);
    this.status = status;
    this.field = field;
  }

  static ApiException badRequest(String field, String message) {
    return new ApiException(400, field, message);
  }

  /** The HTTP status. */
  public int status() {
    return status;
  }

  /** The field named, or {@code null}. */
  public String field() {
    return field;
  }
}
