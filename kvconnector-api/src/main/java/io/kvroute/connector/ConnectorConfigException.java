package io.kvroute.connector;

/**
 * A connector configuration is invalid. The message is the field's path and the problem, for
 * example {@code kvConnector.retry.maxAttempts: must be >= 1, was 0} or {@code
 * kvConnector.config.remoteHostRewrit: unknown nixl parameter "remoteHostRewrit"; did you mean
 * "remoteHostRewrite"? known: ...}.
 */
public final class ConnectorConfigException extends ConnectorException {
  private static final long serialVersionUID = 1L;

  private final String field;
  private final String problem;

  /** An error about {@code field}. */
  public ConnectorConfigException(String field, String problem) {
    super(field + ": " + problem, 500, null);
    this.field = field;
    this.problem = problem;
  }

  /** The dotted path of the offending field, e.g. {@code kvConnector.config.bootstrapPort}. */
  public String field() {
    return field;
  }

  /** The problem, without the field, e.g. {@code must be in 1..65535, was 0}. */
  public String problem() {
    return problem;
  }
}
