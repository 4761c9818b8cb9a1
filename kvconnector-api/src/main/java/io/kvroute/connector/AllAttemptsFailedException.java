package io.kvroute.connector;

import java.util.List;

/**
 * Every prefill/decode pair that was tried failed (or the retry budget ran out). {@link
 * #attempts()} lists each attempt and its cause, in order.
 */
public final class AllAttemptsFailedException extends ConnectorException {
  private static final long serialVersionUID = 1L;

  /** One failed attempt. */
  public record Attempt(int number, String prefillId, String decodeId, ConnectorException cause) {}

  private final transient List<Attempt> attempts;

  /** Builds the message from the attempts; the status is the last attempt's. */
  public AllAttemptsFailedException(String reason, List<Attempt> attempts) {
    super(
        message(reason, attempts),
        attempts.isEmpty() ? 503 : attempts.get(attempts.size() - 1).cause().httpStatus(),
        attempts.isEmpty() ? null : attempts.get(attempts.size() - 1).cause());
    this.attempts = List.copyOf(attempts);
  }

  private static String message(String reason, List<Attempt> attempts) {
    StringBuilder sb = new StringBuilder(reason);
    for (Attempt a : attempts) {
      sb.append("\n  attempt ")
          .append(a.number())
          .append(" (prefill=")
          .append(a.prefillId() == null ? "-" : a.prefillId())
          .append(", decode=")
          .append(a.decodeId())
          .append("): ")
          .append(a.cause().getMessage());
    }
    return sb.toString();
  }

  /** The attempts, oldest first. */
  public List<Attempt> attempts() {
    return attempts;
  }
}
