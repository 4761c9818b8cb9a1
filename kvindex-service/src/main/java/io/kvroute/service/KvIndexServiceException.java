package io.kvroute.service;

import java.util.Optional;

/**
 * An error answered by the KV-cache manager service ({@link KvIndexClient}), or a transport failure
 * talking to it (status 0).
 */
public final class KvIndexServiceException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;
  private final String field;

  /**
   * An exception.
   *
   * @param status the HTTP status (0 for transport failures)
   * @param message the service's error message
   * @param field the request field the error names, or {@code null}
   * @param cause the underlying failure, or {@code null}
   */
  public KvIndexServiceException(int status, String message, String field, Throwable cause) {
    super((status == 0 ? "" : "HTTP " + status + ": ") + message, cause, false, cause != null);
    this.status = status;
    this.field = field;
  }

  /** The HTTP status, or 0 if the request never got an answer. */
  public int status() {
    return status;
  }

  /** The request field the service named (for 400 answers), if any. */
  public Optional<String> field() {
    return Optional.ofNullable(field);
  }
}
