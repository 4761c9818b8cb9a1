package io.kvroute.pd;

import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongSupplier;

/**
 * Wraps a decode response: subscribes at once, waits for the first body chunk (so a failure before
 * any byte can still be retried on another pair), then hands out a response that replays that chunk
 * and forwards the rest, reporting chunk timing to the listener.
 *
 * <p>Thread-safe for the usual single-subscriber use; signals are forwarded on the upstream's
 * thread.
 */
final class ObservedStream implements StreamingResponse {
  private final StreamingResponse upstream;
  private final String connectorType;
  private final String endpointId;
  private final ConnectorListener listener;
  private final LongSupplier nanoClock;
  private final long startNanos;
  private final CompletableFuture<StreamingResponse> ready = new CompletableFuture<>();
  private final AtomicBoolean subscribed = new AtomicBoolean();

  private final Object lock = new Object();
  private Flow.Subscription upstreamSubscription;
  private Flow.Subscriber<? super ByteBuffer> downstream;
  private ByteBuffer firstChunk;
  private boolean firstDelivered;
  private boolean upstreamDone;
  private Throwable upstreamError;
  private long pendingDemand;
  private long lastChunkNanos;
  private boolean ended;
  private final java.util.function.Consumer<Throwable> onEnd;
  private final AtomicBoolean endReported = new AtomicBoolean();

  private ObservedStream(
      StreamingResponse upstream,
      String connectorType,
      String endpointId,
      ConnectorListener listener,
      LongSupplier nanoClock,
      long startNanos,
      java.util.function.Consumer<Throwable> onEnd) {
    this.onEnd = onEnd;
    this.upstream = upstream;
    this.connectorType = connectorType;
    this.endpointId = endpointId;
    this.listener = listener;
    this.nanoClock = nanoClock;
    this.startNanos = startNanos;
  }

  /**
   * Starts reading {@code upstream}; the future completes once the first chunk (or the end of an
   * empty body) has arrived, or fails with a retryable {@link UpstreamException} if the stream
   * breaks before its first byte. {@code onEnd} runs once when a delivered stream ends: with null
   * on completion, the error, or a {@link java.util.concurrent.CancellationException}.
   */
  static CompletableFuture<StreamingResponse> prefetch(
      StreamingResponse upstream,
      String connectorType,
      String endpointId,
      ConnectorListener listener,
      LongSupplier nanoClock,
      long startNanos,
      java.util.function.Consumer<Throwable> onEnd) {
    ObservedStream s =
        new ObservedStream(
            upstream, connectorType, endpointId, listener, nanoClock, startNanos, onEnd);
    upstream.subscribe(s.new UpstreamSubscriber());
    s.ready.whenComplete(
        (r, t) -> {
          if (s.ready.isCancelled()) {
            upstream.cancel();
          }
        });
    return s.ready;
  }

  @Override
  public int status() {
    return upstream.status();
  }

  @Override
  public Map<String, List<String>> headers() {
    return upstream.headers();
  }

  @Override
  public void cancel() {
    synchronized (lock) {
      ended = true;
    }
    reportEnd(new java.util.concurrent.CancellationException("decode stream cancelled"));
    Flow.Subscription s = upstreamSubscription;
    if (s != null) {
      s.cancel();
    }
    upstream.cancel();
  }

  @Override
  public void subscribe(Flow.Subscriber<? super ByteBuffer> subscriber) {
    if (!subscribed.compareAndSet(false, true)) {
      subscriber.onSubscribe(
          new Flow.Subscription() {
            @Override
            public void request(long n) {}

            @Override
            public void cancel() {}
          });
      subscriber.onError(new IllegalStateException("a StreamingResponse has one subscriber"));
      return;
    }
    synchronized (lock) {
      downstream = subscriber;
    }
    subscriber.onSubscribe(
        new Flow.Subscription() {
          @Override
          public void request(long n) {
            if (n <= 0) {
              fail(new IllegalArgumentException("request(n) needs n > 0, was " + n));
              ObservedStream.this.cancel();
              return;
            }
            onDemand(n);
          }

          @Override
          public void cancel() {
            ObservedStream.this.cancel();
          }
        });
  }

  private void onDemand(long n) {
    ByteBuffer first = null;
    boolean complete = false;
    Throwable error = null;
    long forward = 0;
    Flow.Subscriber<? super ByteBuffer> d;
    synchronized (lock) {
      if (ended) {
        return;
      }
      d = downstream;
      long remaining = n;
      if (!firstDelivered) {
        firstDelivered = true;
        first = firstChunk;
        firstChunk = null;
        if (first != null) {
          remaining--;
        }
      }
      if (upstreamDone) {
        complete = upstreamError == null;
        error = upstreamError;
        ended = true;
      } else {
        pendingDemand = saturatingAdd(pendingDemand, remaining);
        forward = remaining;
      }
    }
    if (first != null) {
      d.onNext(first);
    }
    if (complete) {
      finish(d, null);
      return;
    }
    if (error != null) {
      finish(d, error);
      return;
    }
    if (forward > 0) {
      upstreamSubscription.request(forward);
    }
  }

  private void fail(Throwable t) {
    Flow.Subscriber<? super ByteBuffer> d;
    synchronized (lock) {
      if (ended) {
        return;
      }
      ended = true;
      d = downstream;
    }
    if (d != null) {
      finish(d, t);
    }
  }

  private void reportEnd(Throwable error) {
    if (endReported.compareAndSet(false, true)) {
      listener.decodeEnded(
          connectorType,
          endpointId,
          ConnectorListener.outcome(error),
          nanoClock.getAsLong() - startNanos);
      onEnd.accept(error);
    }
  }

  private void finish(Flow.Subscriber<? super ByteBuffer> d, Throwable error) {
    reportEnd(error);
    if (error == null) {
      d.onComplete();
    } else {
      d.onError(error);
    }
  }

  private static long saturatingAdd(long a, long b) {
    long r = a + b;
    return r < 0 ? Long.MAX_VALUE : r;
  }

  private final class UpstreamSubscriber implements Flow.Subscriber<ByteBuffer> {
    @Override
    public void onSubscribe(Flow.Subscription subscription) {
      upstreamSubscription = subscription;
      subscription.request(1);
    }

    @Override
    public void onNext(ByteBuffer item) {
      long now = nanoClock.getAsLong();
      if (!ready.isDone()) {
        synchronized (lock) {
          firstChunk = item;
          lastChunkNanos = now;
        }
        listener.decodeFirstByte(connectorType, endpointId, now - startNanos);
        ready.complete(ObservedStream.this);
        return;
      }
      Flow.Subscriber<? super ByteBuffer> d;
      synchronized (lock) {
        if (ended) {
          return;
        }
        long gap = now - lastChunkNanos;
        lastChunkNanos = now;
        listener.decodeChunk(connectorType, gap);
        if (pendingDemand != Long.MAX_VALUE) {
          pendingDemand--;
        }
        d = downstream;
      }
      d.onNext(item);
    }

    @Override
    public void onError(Throwable throwable) {
      if (!ready.isDone()) {
        ready.completeExceptionally(
            new UpstreamException(
                Leg.DECODE,
                endpointId,
                UpstreamException.Kind.IO,
                0,
                null,
                null,
                "decode stream from " + endpointId + " failed before its first byte: " + throwable,
                throwable));
        return;
      }
      Flow.Subscriber<? super ByteBuffer> d;
      synchronized (lock) {
        upstreamDone = true;
        upstreamError = throwable;
        if (ended || !firstDelivered || downstream == null) {
          return;
        }
        ended = true;
        d = downstream;
      }
      finish(d, throwable);
    }

    @Override
    public void onComplete() {
      boolean readyNow = !ready.isDone();
      Flow.Subscriber<? super ByteBuffer> d;
      synchronized (lock) {
        upstreamDone = true;
        if (readyNow) {
          listener.decodeFirstByte(connectorType, endpointId, nanoClock.getAsLong() - startNanos);
        }
        if (ended || !firstDelivered || downstream == null) {
          d = null;
        } else {
          ended = true;
          d = downstream;
        }
      }
      if (readyNow) {
        ready.complete(ObservedStream.this);
      }
      if (d != null) {
        finish(d, null);
      }
    }
  }
}
