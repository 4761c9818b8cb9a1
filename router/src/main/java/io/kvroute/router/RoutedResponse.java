package io.kvroute.router;

import io.kvroute.connector.EngineUsage;
import io.kvroute.connector.StreamingResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Flow;
import java.util.function.BiConsumer;

/**
 * The decode stream of a routed request together with its {@link RouteDecision} and what the
 * prefill engine reported ({@link #prefillUsage()}). Subscribe to it (one subscriber) or cancel it;
 * the router's accounting ends when the stream does (completed, failed or cancelled), and the
 * decode engine's usage, read from the end of the stream, goes to the {@link RouteListener}.
 *
 * <p>Thread-safe; the body is a {@link StreamingResponse#tap} of the decode stream.
 */
public final class RoutedResponse implements StreamingResponse {
  private final RouteDecision decision;
  private final StreamingResponse body;

  /**
   * @param onEnd called once when the stream ends, with the failure (null on completion) and, on
   *     completion, the usage block of the body (null when it had none)
   */
  RoutedResponse(
      StreamingResponse delegate,
      RouteDecision decision,
      BiConsumer<Throwable, EngineUsage> onEnd) {
    this(
        delegate,
        decision,
        io.kvroute.connector.InferenceRequest.Api.CHAT_COMPLETIONS,
        null,
        onEnd);
  }

  /**
   * @param api the API of the response (whose usage block it reads)
   * @param latency told of the stream's head, chunks and end (null: nobody)
   * @param onEnd as above
   */
  RoutedResponse(
      StreamingResponse delegate,
      RouteDecision decision,
      io.kvroute.connector.InferenceRequest.Api api,
      LatencyFeed latency,
      BiConsumer<Throwable, EngineUsage> onEnd) {
    this.decision = decision;
    UsageScanner scanner = new UsageScanner(api);
    if (latency == null) {
      this.body =
          StreamingResponse.tap(
              delegate,
              scanner::keep,
              t -> onEnd.accept(t, t == null ? scanner.finish().usage() : null));
      return;
    }
    latency.head(delegate.headers());
    this.body =
        StreamingResponse.tap(
            delegate,
            chunk -> {
              scanner.keep(chunk);
              latency.chunk(chunk);
            },
            t -> {
              latency.ended(t);
              onEnd.accept(t, t == null ? scanner.finish().usage() : null);
            });
  }

  /** The routing decision, with the endpoints that actually served the request. */
  public RouteDecision decision() {
    return decision;
  }

  @Override
  public int status() {
    return body.status();
  }

  @Override
  public Map<String, List<String>> headers() {
    return body.headers();
  }

  @Override
  public void cancel() {
    body.cancel();
  }

  /**
   * The prefill engine's usage block, when the request was disaggregated and its connector read one
   * from the prefill answer.
   */
  @Override
  public Optional<EngineUsage> prefillUsage() {
    return body.prefillUsage();
  }

  @Override
  public void subscribe(Flow.Subscriber<? super ByteBuffer> subscriber) {
    body.subscribe(subscriber);
  }
}
