package io.kvroute.connector;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * Sends one HTTP request to an endpoint and streams the response back. Connectors run both legs
 * through it; {@code kvconnector-http} provides the OkHttp implementation, and tests may supply
 * their own.
 *
 * <p>Implementations are thread-safe. The returned future completes on a transport thread when the
 * response head has arrived, or exceptionally with {@link UpstreamException} (connection failure,
 * timeout). Any status completes the future normally: classifying statuses is the caller's job.
 * Cancelling the future cancels the call.
 */
public interface HttpTransport extends AutoCloseable {

  /** Sends {@code request}. */
  CompletableFuture<StreamingResponse> send(Outbound request);

  /**
   * Sends {@code GET path} to {@code endpoint} and completes with the status code (the body is
   * discarded), or fails with {@link UpstreamException} when no answer came within {@code timeout}.
   * Used for health checks.
   */
  default CompletableFuture<Integer> probe(Endpoint endpoint, String path, Duration timeout) {
    return CompletableFuture.failedFuture(
        new UnsupportedOperationException(getClass().getName() + " does not support probe()"));
  }

  /** Releases connections and threads. */
  @Override
  void close();

  /**
   * One request to an upstream.
   *
   * @param leg the leg, for errors and metrics
   * @param endpoint where to send it
   * @param path the path, e.g. {@code /v1/completions}
   * @param headers headers to send (hop-by-hop headers are dropped by the transport)
   * @param body the JSON body
   * @param timeout for the whole call when {@code streaming} is false; for the response head and
   *     for each gap between body chunks when true
   * @param streaming whether the body is consumed as a stream
   */
  record Outbound(
      Leg leg,
      Endpoint endpoint,
      String path,
      Map<String, List<String>> headers,
      byte[] body,
      Duration timeout,
      boolean streaming) {

    /** Validates and copies. */
    public Outbound {
      Objects.requireNonNull(leg, "leg");
      Objects.requireNonNull(endpoint, "endpoint");
      Objects.requireNonNull(path, "path");
      Objects.requireNonNull(body, "body");
      Objects.requireNonNull(timeout, "timeout");
      headers = headers == null ? Map.of() : Map.copyOf(headers);
    }
  }
}
