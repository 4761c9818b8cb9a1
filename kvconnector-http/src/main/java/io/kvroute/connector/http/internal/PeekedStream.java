package io.kvroute.connector.http.internal;

import io.kvroute.connector.StreamingResponse;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Predicate;

/**
 * Reads the start of a streamed response before deciding what to do with it: {@link #peek}
 * subscribes, collects chunks until a predicate accepts the bytes so far (or the body ends, or a
 * size cap is reached), and completes with a response that replays those bytes as its first chunk
 * and then forwards the rest of the upstream body with the subscriber's demand.
 *
 * <p>Thread-safe for the single-subscriber use of {@link StreamingResponse}; upstream signals are
 * forwarded on the upstream's thread.
 */
public final class PeekedStream implements StreamingResponse {
  private final StreamingResponse upstream;
  private final CompletableFuture<PeekedStream> ready = new CompletableFuture<>();
  private final Predicate<byte[]> enough;
  private final int maxPeekBytes;
  private final AtomicBoolean subscribed = new AtomicBoolean();
  private final Object lock = new Object();
  private final ByteArrayOutputStream head = new ByteArrayOutputStream();
  private byte[] prefix;
  private Flow.Subscription upstreamSubscription;
  private Flow.Subscriber<? super ByteBuffer> downstream;
  private boolean prefixDelivered;
  private boolean upstreamDone;
  private Throwable upstreamError;
  private boolean ended;
  private boolean lazy; // prepend(): no read before the subscriber's demand
  private long earlyDemand;

  private PeekedStream(StreamingResponse upstream, Predicate<byte[]> enough, int maxPeekBytes) {
    this.upstream = upstream;
    this.enough = enough;
    this.maxPeekBytes = maxPeekBytes;
  }

  /**
   * Starts reading {@code upstream}. The future completes once {@code enough} accepts the bytes
   * read so far, {@code maxPeekBytes} are held, or the body ended; it fails if the body fails
   * first. Cancelling the future cancels the upstream call.
   */
  public static CompletableFuture<PeekedStream> peek(
      StreamingResponse upstream, Predicate<byte[]> enough, int maxPeekBytes) {
    PeekedStream s = new PeekedStream(upstream, enough, maxPeekBytes);
    s.ready.whenComplete(
        (r, t) -> {
          if (s.ready.isCancelled()) {
            upstream.cancel();
          }
        });
    upstream.subscribe(s.new UpstreamSubscriber());
    return s.ready;
  }

  /**
   * A response that sends {@code prefix} first and then {@code upstream}'s body (for a synthetic
   * first chunk); {@code upstream} is read only as the subscriber asks for more.
   */
  public static PeekedStream prepend(byte[] prefix, StreamingResponse upstream) {
    PeekedStream s = new PeekedStream(upstream, b -> true, Integer.MAX_VALUE);
    s.prefix = prefix.clone();
    s.lazy = true;
    s.ready.complete(s);
    upstream.subscribe(s.new UpstreamSubscriber());
    return s;
  }

  /** The bytes read before deciding (what the first chunk will replay). */
  public byte[] prefix() {
    synchronized (lock) {
      return prefix == null ? head.toByteArray() : prefix;
    }
  }

  /** True when the whole body is in {@link #prefix()}. */
  public boolean complete() {
    synchronized (lock) {
      return upstreamDone && upstreamError == null;
    }
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
    Flow.Subscription s;
    synchronized (lock) {
      ended = true;
      s = upstreamSubscription;
    }
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
              cancel();
              subscriber.onError(new IllegalArgumentException("request(n) needs n > 0, was " + n));
              return;
            }
            onDemand(n);
          }

          @Override
          public void cancel() {
            PeekedStream.this.cancel();
          }
        });
  }

  private void onDemand(long n) {
    byte[] first = null;
    boolean finish = false;
    Throwable error = null;
    long forward;
    Flow.Subscriber<? super ByteBuffer> d;
    synchronized (lock) {
      if (ended) {
        return;
      }
      d = downstream;
      long remaining = n;
      if (!prefixDelivered) {
        prefixDelivered = true;
        if (prefix.length > 0) {
          first = prefix;
          remaining--;
        }
      }
      if (upstreamDone) {
        ended = true;
        finish = true;
        error = upstreamError;
        forward = 0;
      } else {
        forward = remaining;
      }
    }
    if (first != null) {
      d.onNext(ByteBuffer.wrap(first).asReadOnlyBuffer());
    }
    if (finish) {
      if (error == null) {
        d.onComplete();
      } else {
        d.onError(error);
      }
      return;
    }
    if (forward > 0) {
      Flow.Subscription s;
      synchronized (lock) {
        s = upstreamSubscription;
        if (s == null) { // prepend(): the upstream has not called onSubscribe yet
          earlyDemand = Math.min(Long.MAX_VALUE / 2, earlyDemand + forward);
          return;
        }
      }
      s.request(forward);
    }
  }

  private final class UpstreamSubscriber implements Flow.Subscriber<ByteBuffer> {
    @Override
    public void onSubscribe(Flow.Subscription subscription) {
      long read;
      synchronized (lock) {
        upstreamSubscription = subscription;
        read = lazy ? earlyDemand : 1;
        earlyDemand = 0;
      }
      if (read > 0) {
        subscription.request(read);
      }
    }

    @Override
    public void onNext(ByteBuffer item) {
      if (!ready.isDone()) {
        boolean decided;
        synchronized (lock) {
          byte[] b = new byte[item.remaining()];
          item.get(b);
          head.write(b, 0, b.length);
          byte[] soFar = head.toByteArray();
          decided = head.size() >= maxPeekBytes || enough.test(soFar);
          if (decided) {
            prefix = soFar;
          }
        }
        if (decided) {
          ready.complete(PeekedStream.this);
        } else {
          upstreamSubscription.request(1);
        }
        return;
      }
      Flow.Subscriber<? super ByteBuffer> d;
      synchronized (lock) {
        if (ended) {
          return;
        }
        d = downstream;
      }
      d.onNext(item);
    }

    @Override
    public void onError(Throwable t) {
      Flow.Subscriber<? super ByteBuffer> d = null;
      synchronized (lock) {
        upstreamDone = true;
        upstreamError = t;
        if (ready.isDone() && !ended && prefixDelivered && downstream != null) {
          ended = true;
          d = downstream;
        }
      }
      if (!ready.isDone()) {
        ready.completeExceptionally(t);
      } else if (d != null) {
        d.onError(t);
      }
    }

    @Override
    public void onComplete() {
      Flow.Subscriber<? super ByteBuffer> d = null;
      boolean completeReady;
      synchronized (lock) {
        upstreamDone = true;
        completeReady = !ready.isDone();
        if (completeReady) {
          prefix = head.toByteArray();
        } else if (!ended && prefixDelivered && downstream != null) {
          ended = true;
          d = downstream;
        }
      }
      if (completeReady) {
        ready.complete(PeekedStream.this);
      } else if (d != null) {
        d.onComplete();
      }
    }
  }
}
