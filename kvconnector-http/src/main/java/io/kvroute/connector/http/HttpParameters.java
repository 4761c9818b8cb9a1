package io.kvroute.connector.http;

import io.kvroute.config.Checks;

/**
 * The parameters every HTTP connector takes, and all that the {@code http} and {@code
 * mooncake-store} connectors take. Connectors with parameters of their own declare this key in
 * their own record too (the {@code config:} block is flat) and pass it on with {@link
 * #of(Integer)}. The client body's size is not a connector parameter: it is bounded where the body
 * is read (the edge's {@code maxBodyBytes}, the Spring starter's {@code max-request-size}, the
 * Envoy picker's {@code maxRequestBytes}), before a connector sees it.
 *
 * @param maxPrefillResponseBytes the largest prefill answer (or other non-streamed leg answer)
 *     read, in bytes; a larger one fails the leg (default 4 MiB, at least 1)
 */
public record HttpParameters(Integer maxPrefillResponseBytes) {
  /** The default of {@code maxPrefillResponseBytes}: 4 MiB. */
  public static final int DEFAULT_MAX_PREFILL_RESPONSE_BYTES = 4 * 1024 * 1024;

  /** The defaults. */
  public static final HttpParameters DEFAULTS = new HttpParameters(null);

  /** Fills in the default and checks the value. */
  public HttpParameters {
    maxPrefillResponseBytes =
        maxPrefillResponseBytes == null
            ? DEFAULT_MAX_PREFILL_RESPONSE_BYTES
            : maxPrefillResponseBytes;
    Checks.range("maxPrefillResponseBytes", maxPrefillResponseBytes, 1, Integer.MAX_VALUE);
  }

  /** The common parameters of a connector's own record (null: the default). */
  public static HttpParameters of(Integer maxPrefillResponseBytes) {
    return new HttpParameters(maxPrefillResponseBytes);
  }
}
