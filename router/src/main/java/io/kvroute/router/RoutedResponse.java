package io.kvroute.router;

import io.kvroute.connector.FlowRelay;
import io.kvroute.connector.StreamingResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Flow;

/**
 * The decode stream of a routed request together with its {@link RouteDecision}. Subscribe to it
 * (one subscriber) or cancel it; the router's accounting ends when the stream does (completed,
 * failed or cancelled).
 *
 * <p>Thread-safe; the demand and cancellation plumbing is a {@link FlowRelay}.
 */
public final class RoutedResponse implements StreamingResponse {
  private final StreamingResponse delegate;
  private final RouteDecision decision;
  private final FlowRelay<ByteBuffer> relay;

  RoutedResponse(StreamingResponse delegate, RouteDecision decision, Runnable onEnd) {
    this.delegate = delegate;
    this.decision = decision;
    this.relay = FlowRelay.create(t -> onEnd.run());
    delegate.subscribe(relay);
  }

  /** The routing decision, with the endpoints that actually served the request. */
  public RouteDecision decision() {
    return decision;
  }

  @Override
  public int status() {
    return delegate.status();
  }

  @Override
  public Map<String, List<String>> headers() {
    return delegate.headers();
  }

  @Override
  public void cancel() {
    relay.cancel();
    delegate.cancel();
  }

  @Override
  public void subscribe(Flow.Subscriber<? super ByteBuffer> subscriber) {
    relay.subscribe(subscriber);
  }
}
