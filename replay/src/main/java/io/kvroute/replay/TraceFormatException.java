package io.kvroute.replay;

/**
 * A trace file that is not in the Mooncake format: the message names the file, the line and the
 * field ({@code trace.jsonl:12: "hash_ids" must be an array of integers}).
 */
public final class TraceFormatException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Creates the exception with a message naming the file, line and field. */
  public TraceFormatException(String message) {
    super(message);
  }

  /** Creates the exception with its cause (an I/O or JSON error). */
  public TraceFormatException(String message, Throwable cause) {
    super(message, cause);
  }
}
