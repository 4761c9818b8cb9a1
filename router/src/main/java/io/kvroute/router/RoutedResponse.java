package io.kvroute.router;

import io.kvroute.connector.FlowRelay;
import io.kvroute.connector.StreamingResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Flow;
import java.util.function.BiConsumer;

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

  /**
   * @param onEnd called once when the stream ends, with the failure (null on completion) and, on
   *     completion, the scan of the body's usage block
   */
  RoutedResponse(
      StreamingResponse delegate,
      RouteDecision decision,
      BiConsumer<Throwable, UsageScanner> onEnd) {
    this.delegate = delegate;
    this.decision = decision;
    UsageScanner scanner = new UsageScanner();
    this.relay = FlowRelay.create(t -> onEnd.accept(t, t == null ? scanner : null));
    delegate.subscribe(new Tap(relay, scanner));
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

  /** Scans each chunk for the usage block on its way to the relay (serial signals). */
  private static final class Tap implements Flow.Subscriber<ByteBuffer> {
    private final FlowRelay<ByteBuffer> relay;
    private final UsageScanner scanner;

    Tap(FlowRelay<ByteBuffer> relay, UsageScanner scanner) {
      this.relay = relay;
      this.scanner = scanner;
    }

    @Override
    public void onSubscribe(Flow.Subscription s) {
      relay.onSubscribe(s);
    }

    @Override
    public void onNext(ByteBuffer item) {
      scanner.scan(item);
      relay.onNext(item);
    }

    @Override
    public void onError(Throwable t) {
      relay.onError(t);
    }

    @Override
    public void onComplete() {
      relay.onComplete();
    }
  }
}
