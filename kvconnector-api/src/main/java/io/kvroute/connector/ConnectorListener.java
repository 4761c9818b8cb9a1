package io.kvroute.connector;

/**
 * Observes connector activity: legs, retries, errors, circuit breakers. Every method has a no-op
 * default; override what you need. {@link #NONE} does nothing; {@code
 * io.kvroute.pd.MicrometerConnectorListener} records the documented metrics.
 *
 * <p>Methods are called on transport and scheduler threads, concurrently for different requests;
 * implementations must be thread-safe, fast and must not throw.
 */
public interface ConnectorListener {

  /** A listener that ignores everything. */
  ConnectorListener NONE = new ConnectorListener() {};

  /**
   * A prefill leg ended.
   *
   * @param connectorType e.g. {@code nixl}
   * @param endpointId the prefill endpoint
   * @param outcome {@code ok}, or the failure: {@code status_4xx}, {@code status_5xx}, {@code
   *     timeout}, {@code io}, {@code protocol}, {@code cancelled}
   * @param nanos duration of the leg
   */
  default void prefillEnded(String connectorType, String endpointId, String outcome, long nanos) {}

  /**
   * The decode leg's response head arrived ({@code outcome} as for prefill), after {@code nanos}.
   */
  default void decodeHead(String connectorType, String endpointId, String outcome, long nanos) {}

  /**
   * The first byte of the decode body reached the caller, {@code nanos} after the request began.
   */
  default void decodeFirstByte(String connectorType, String endpointId, long nanos) {}

  /** A decode chunk arrived {@code nanosSincePrevious} after the previous one. */
  default void decodeChunk(String connectorType, long nanosSincePrevious) {}

  /** The decode stream ended ({@code outcome} as for prefill) after {@code nanos} in total. */
  default void decodeEnded(String connectorType, String endpointId, String outcome, long nanos) {}

  /** A request is retried on another pair after {@code cause}; {@code attempt} is the next one. */
  default void retry(String connectorType, int attempt, ConnectorException cause) {}

  /** A request failed for good with {@code cause}. */
  default void failed(String connectorType, ConnectorException cause) {}

  /**
   * A connector-specific event, e.g. {@code prefill_without_kv_transfer_params}, {@code
   * ssrf_blocked}, {@code fallback}.
   */
  default void connectorEvent(String connectorType, String event) {}

  /** An endpoint's circuit breaker opened ({@code open} true) or closed again. */
  default void circuitStateChanged(String endpointId, boolean open) {}

  /** A retry was refused because the retry budget was exhausted. */
  default void retryBudgetExhausted(String connectorType) {}

  /** The outcome tag for a failure, as used by the listener methods. */
  static String outcome(Throwable failure) {
    if (failure == null) {
      return "ok";
    }
    Throwable t = failure;
    while ((t instanceof java.util.concurrent.CompletionException
            || t instanceof java.util.concurrent.ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    if (t instanceof UpstreamException u) {
      switch (u.kind()) {
        case STATUS:
          return "status_" + (u.upstreamStatus() / 100) + "xx";
        default:
          return u.kind().name().toLowerCase(java.util.Locale.ROOT);
      }
    }
    if (t instanceof java.util.concurrent.CancellationException) {
      return "cancelled";
    }
    if (t instanceof ConnectorException.InvalidRequestException) {
      return "invalid_request";
    }
    return "error";
  }
}
