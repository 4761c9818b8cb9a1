package io.kvroute.connector.http;

import io.kvroute.config.Checks;

/**
 * The parameters every HTTP connector takes, and all that the {@code http} and {@code
 * mooncake-store} connectors take. Connectors with parameters of their own declare these two keys
 * in their own record too (the {@code config:} block is flat) and pass them on with {@link
 * #of(Integer, Integer)}.
 *
 * @param maxRequestBytes the largest client body accepted, in bytes; a larger one is answered 413
 *     (default 16 MiB, at least 1)
 * @param maxPrefillResponseBytes the largest prefill answer (or other non-streamed leg answer)
 *     read, in bytes; a larger one fails the leg (default 4 MiB, at least 1)
 */
public record HttpParameters(Integer maxRequestBytes, Integer maxPrefillResponseBytes) {
  /** The default of {@code maxRequestBytes}: 16 MiB. */
  public static final int DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024;

  /** The default of {@code maxPrefillResponseBytes}: 4 MiB. */
  public static final int DEFAULT_MAX_PREFILL_RESPONSE_BYTES = 4 * 1024 * 1024;

  /** The defaults. */
  public static final HttpParameters DEFAULTS = new HttpParameters(null, null);

  /** Fills in the defaults and checks the values. */
  public HttpParameters {
    maxRequestBytes = maxRequestBytes == null ? DEFAULT_MAX_REQUEST_BYTES : maxRequestBytes;
    maxPrefillResponseBytes =
        maxPrefillResponseBytes == null
            ? DEFAULT_MAX_PREFILL_RESPONSE_BYTES
            : maxPrefillResponseBytes;
    Checks.range("maxRequestBytes", maxRequestBytes, 1, Integer.MAX_VALUE);
    Checks.range("maxPrefillResponseBytes", maxPrefillResponseBytes, 1, Integer.MAX_VALUE);
  }

  /** The common parameters of a connector's own record (either may be null: the default). */
  public static HttpParameters of(Integer maxRequestBytes, Integer maxPrefillResponseBytes) {
    return new HttpParameters(maxRequestBytes, maxPrefillResponseBytes);
  }
}
