package io.kvroute.router;

import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.ConnectorException;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Delivers a routed response to a {@link KvRouter.ResponseSink}: the head, every chunk as it
 * arrives, then the end; or the failure. The handle it returns cancels the request (both legs).
 *
 * <p>Thread-safe; the sink is called on transport threads, one signal at a time.
 */
final class SinkDelivery {
  private SinkDelivery() {}

  /** See {@link KvRouter#route(io.kvroute.connector.InferenceRequest, KvRouter.ResponseSink)}. */
  static KvRouter.Cancellable deliver(
      CompletableFuture<RoutedResponse> f, KvRouter.ResponseSink sink) {
    AtomicBoolean cancelled = new AtomicBoolean();
    f.whenComplete(
        (resp, t) -> {
          if (t != null) {
            Throwable cause = CancellableFutures.unwrap(t);
            sink.onError(
                cause instanceof ConnectorException ce
                    ? ce
                    : new ConnectorException("routing failed: " + cause, 500, cause));
            return;
          }
          sink.onHead(resp.status(), resp.headers(), resp.decision().responseHeaders());
          resp.subscribe(
              new Flow.Subscriber<>() {
                @Override
                public void onSubscribe(Flow.Subscription s) {
                  if (cancelled.get()) {
                    s.cancel();
                  } else {
                    s.request(Long.MAX_VALUE);
                  }
                }

                @Override
                public void onNext(ByteBuffer item) {
                  sink.onChunk(item);
                }

                @Override
                public void onError(Throwable t2) {
                  sink.onError(
                      t2 instanceof ConnectorException ce
                          ? ce
                          : new ConnectorException("stream failed: " + t2, 502, t2));
                }

                @Override
                public void onComplete() {
                  sink.onComplete();
                }
              });
        });
    return () -> {
      if (cancelled.compareAndSet(false, true)) {
        f.cancel(true);
        f.thenAccept(RoutedResponse::cancel);
      }
    };
  }
}
