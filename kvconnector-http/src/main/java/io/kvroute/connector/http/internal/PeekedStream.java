package io.kvroute.connector.http.internal;

import io.kvroute.connector.FlowRelay;
import io.kvroute.connector.ReadAhead;
import io.kvroute.connector.StreamingResponse;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import java.util.function.Predicate;

/**
 * Reads the start of a streamed response before deciding what to do with it: {@link #peek}
 * subscribes, collects chunks until a predicate accepts the bytes so far (or the body ends, or a
 * size cap is reached), and completes with a response that replays those bytes as its first chunk
 * and then relays the rest of the upstream body with the subscriber's demand.
 *
 * <p>Thread-safe; the demand and cancellation plumbing is a {@link FlowRelay}.
 */
public final class PeekedStream implements StreamingResponse {
  private final StreamingResponse upstream;
  private final FlowRelay<ByteBuffer> relay = FlowRelay.create();
  private final Predicate<byte[]> enough;
  private final int maxPeekBytes;
  private final ByteArrayOutputStream head = new ByteArrayOutputStream();
  private volatile byte[] prefix;
  private volatile boolean complete;

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
    return s.new Peeking().start(upstream);
  }

  /**
   * A response that sends {@code prefix} first and then {@code upstream}'s body (for a synthetic
   * first chunk); {@code upstream} is read only as the subscriber asks for more.
   */
  public static PeekedStream prepend(byte[] prefix, StreamingResponse upstream) {
    PeekedStream s = new PeekedStream(upstream, b -> true, Integer.MAX_VALUE);
    s.prefix = prefix.clone();
    if (prefix.length > 0) {
      s.relay.buffered(ByteBuffer.wrap(s.prefix).asReadOnlyBuffer());
    }
    upstream.subscribe(s.relay);
    return s;
  }

  /** The bytes read before deciding (what the first chunk will replay). */
  public byte[] prefix() {
    return prefix.clone();
  }

  /** True when the whole body is in {@link #prefix()}. */
  public boolean complete() {
    return complete;
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
    relay.cancel();
    upstream.cancel();
  }

  @Override
  public void subscribe(Flow.Subscriber<? super ByteBuffer> subscriber) {
    relay.subscribe(subscriber);
  }

  /** Collects chunks until the predicate decides, then hands the upstream over to the relay. */
  private final class Peeking extends ReadAhead<PeekedStream> {
    Peeking() {
      super(relay);
    }

    @Override
    protected void ahead(ByteBuffer item) {
      byte[] b = new byte[item.remaining()];
      item.get(b);
      head.write(b, 0, b.length);
      byte[] soFar = head.toByteArray();
      if (head.size() >= maxPeekBytes || enough.test(soFar)) {
        decided(soFar);
      } else {
        next();
      }
    }

    @Override
    protected void endedAhead() {
      complete = true;
      decided(head.toByteArray());
      relay.onComplete();
    }

    private void decided(byte[] bytes) {
      prefix = bytes;
      handOver(
          bytes.length > 0 ? ByteBuffer.wrap(bytes).asReadOnlyBuffer() : null, PeekedStream.this);
    }
  }
}
