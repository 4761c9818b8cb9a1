package io.kvroute.router;

import io.kvroute.connector.StreamingResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The decode stream of a routed request together with its {@link RouteDecision}. Subscribe to it
 * (one subscriber) or cancel it; the router's accounting ends when the stream does.
 *
 * <p>Thread-safe as {@link StreamingResponse} is.
 */
public final class RoutedResponse implements StreamingResponse {
  private final StreamingResponse delegate;
  private final RouteDecision decision;
  private final Runnable onEnd;
  private final AtomicBoolean ended = new AtomicBoolean();

  RoutedResponse(StreamingResponse delegate, RouteDecision decision, Runnable onEnd) {
    this.delegate = delegate;
    this.decision = decision;
    this.onEnd = onEnd;
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
    delegate.cancel();
    end();
  }

  private void end() {
    if (ended.compareAndSet(false, true)) {
      onEnd.run();
    }
  }

  @Override
  public void subscribe(Flow.Subscriber<? super ByteBuffer> subscriber) {
    delegate.subscribe(
        new Flow.Subscriber<ByteBuffer>() {
          @Override
          public void onSubscribe(Flow.Subscription s) {
            subscriber.onSubscribe(
                new Flow.Subscription() {
                  @Override
                  public void request(long n) {
                    s.request(n);
                  }

                  @Override
                  public void cancel() {
                    s.cancel();
                    end();
                  }
                });
          }

          @Override
          public void onNext(ByteBuffer item) {
            subscriber.onNext(item);
          }

          @Override
          public void onError(Throwable t) {
            end();
            subscriber.onError(t);
          }

          @Override
          public void onComplete() {
            end();
            subscriber.onComplete();
          }
        });
  }
}
