package io.kvroute.edge.internal;

/**
 * A request the edge refuses: status, the part at fault, a message for the client and a reason tag
 * for the counter. Control flow on the request path: no stack trace.
 */
final class Refusal extends Exception {
  private static final long serialVersionUID = 1L;

  final int status;
  final String param;
  final String reason;

  Refusal(int status, String param, String reason, String message) {
    super(message, null, false, false);
    this.status = status;
    this.param = param;
    this.reason = reason;
  }
}
