package io.kvroute.connector;

/**
 * A connector configuration is invalid. The message names the field, e.g. {@code
 * kvConnector.retry.maxAttempts must be >= 1, was 0}.
 */
public final class ConnectorConfigException extends ConnectorException {
  private static final long serialVersionUID = 1L;

  private final String field;

  /** An error about {@code field}. */
  public ConnectorConfigException(String field, String problem) {
    super(field + " " + problem, 500, null);
    this.field = field;
  }

  /** The dotted path of the offending field. */
  public String field() {
    return field;
  }
}
