package io.kvroute.connector;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * A response whose body is a {@link FlowRelay}: the implementation of {@link StreamingResponse#of},
 * {@link StreamingResponse#relayed} and {@link StreamingResponse#tap}. The status and headers are
 * read from the head once (a head that has arrived does not change). Cancelling it cancels the
 * relay (which reports the end) and then the head.
 *
 * <p>Thread-safe: the relay serialises the body's signals; the head is subscribed at most once.
 */
final class RelayedResponse implements StreamingResponse {
  private final int status;
  private final Map<String, List<String>> headers;
  private final StreamingResponse head;
  private final FlowRelay<ByteBuffer> body;
  private final AtomicReference<Flow.Subscriber<ByteBuffer>> source;

  /**
   * @param head cancelled with this response, or null when there is none
   * @param source subscribed to {@code head} when the first subscriber arrives (it feeds {@code
   *     body}), or null when {@code body} is fed already
   */
  private RelayedResponse(
      int status,
      Map<String, List<String>> headers,
      StreamingResponse head,
      FlowRelay<ByteBuffer> body,
      Flow.Subscriber<ByteBuffer> source) {
    this.status = status;
    this.headers = headers;
    this.head = head;
    this.body = body;
    this.source = new AtomicReference<>(source);
  }

  static StreamingResponse of(
      int status, Map<String, List<String>> headers, FlowRelay<ByteBuffer> body) {
    return new RelayedResponse(status, Map.copyOf(headers), null, body, null);
  }

  static StreamingResponse relayed(StreamingResponse head, FlowRelay<ByteBuffer> body) {
    return relayed(head, body, null);
  }

  static StreamingResponse tap(
      StreamingResponse response,
      Consumer<? super ByteBuffer> onChunk,
      Consumer<? super Throwable> onEnd) {
    Objects.requireNonNull(onChunk, "onChunk");
    FlowRelay<ByteBuffer> body = FlowRelay.create(onEnd);
    return relayed(response, body, new Tap(body, onChunk));
  }

  private static StreamingResponse relayed(
      StreamingResponse head, FlowRelay<ByteBuffer> body, Flow.Subscriber<ByteBuffer> source) {
    Objects.requireNonNull(head, "head");
    Objects.requireNonNull(body, "body");
    return new RelayedResponse(head.status(), head.headers(), head, body, source);
  }

  @Override
  public int status() {
    return status;
  }

  @Override
  public Map<String, List<String>> headers() {
    return headers;
  }

  @Override
  public java.util.Optional<EngineUsage> prefillUsage() {
    return head == null ? java.util.Optional.empty() : head.prefillUsage();
  }

  @Override
  public void subscribe(Flow.Subscriber<? super ByteBuffer> subscriber) {
    body.subscribe(subscriber);
    // A relay cancelled already would cancel the head's subscription at once: do not start it.
    Flow.Subscriber<ByteBuffer> s = body.isCancelled() ? null : source.getAndSet(null);
    if (s != null) {
      head.subscribe(s);
    }
  }

  @Override
  public void cancel() {
    body.cancel();
    if (head != null) {
      head.cancel();
    }
  }

  /** Shows each chunk to {@code onChunk} on its way into the relay (signals are serial). */
  private static final class Tap implements Flow.Subscriber<ByteBuffer> {
    private final FlowRelay<ByteBuffer> relay;
    private final Consumer<? super ByteBuffer> onChunk;

    Tap(FlowRelay<ByteBuffer> relay, Consumer<? super ByteBuffer> onChunk) {
      this.relay = relay;
      this.onChunk = onChunk;
    }

    @Override
    public void onSubscribe(Flow.Subscription s) {
      relay.onSubscribe(s);
    }

    @Override
    public void onNext(ByteBuffer item) {
      onChunk.accept(item);
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
