package io.kvroute.pd;

import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.FlowRelay;
import io.kvroute.connector.Leg;
import io.kvroute.connector.ReadAhead;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * Observes a decode response: subscribes at once, waits for the first body chunk (so a failure
 * before any byte can still be retried on another pair), then hands out a response that replays
 * that chunk and relays the rest with the subscriber's demand, reporting chunk timing to the
 * listener. An SSE stream that ends without {@code data: [DONE]} ends with an {@link
 * UpstreamException} instead of completing.
 *
 * <p>Thread-safe; the demand and cancellation plumbing is a {@link FlowRelay}.
 */
final class ObservedStream extends ReadAhead<StreamingResponse> {
  private final Timing timing;
  private final String endpointId;
  private final StreamingResponse response;
  private volatile long lastChunkNanos;

  /** Whether the body is an SSE stream, which must end with {@code data: [DONE]}. */
  private final boolean sse;

  /** The last bytes of the body so far (signals are serial, so no lock is needed). */
  private final byte[] tail = new byte[TAIL];

  private int tailLength;

  /** Whether the stream's first bytes are an {@code event:} line (Messages, Responses). */
  private boolean namedEvents;

  private boolean sawFirst;

  private static final int TAIL = 32;
  private static final byte[] DONE = "[DONE]".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

  /** The listener's view of one decode stream: what it reports, and when the stream started. */
  private record Timing(
      String connectorType,
      String endpointId,
      ConnectorListener listener,
      LongSupplier nanoClock,
      long startNanos) {

    long now() {
      return nanoClock.getAsLong();
    }

    void firstByte(long now) {
      listener.decodeFirstByte(connectorType, endpointId, now - startNanos);
    }

    void ended(Throwable error) {
      listener.decodeEnded(
          connectorType, endpointId, ConnectorListener.outcome(error), now() - startNanos);
    }
  }

  private ObservedStream(StreamingResponse upstream, Timing timing, FlowRelay<ByteBuffer> relay) {
    super(relay);
    this.timing = timing;
    this.endpointId = timing.endpointId();
    this.response = StreamingResponse.relayed(upstream, relay);
    this.sse = upstream.contentType().map(t -> t.startsWith("text/event-stream")).orElse(false);
  }

  /** Keeps the last {@value #TAIL} bytes of the body, without moving {@code item}'s position. */
  private void remember(ByteBuffer item) {
    int n = item.remaining();
    int from = item.position();
    if (!sawFirst && n > 0) {
      sawFirst = true;
      namedEvents = n >= 6 && item.get(from) == 'e' && item.get(from + 5) == ':';
    }
    if (n >= TAIL) {
      for (int i = 0; i < TAIL; i++) {
        tail[i] = item.get(from + n - TAIL + i);
      }
      tailLength = TAIL;
      return;
    }
    int keep = Math.min(tailLength, TAIL - n);
    System.arraycopy(tail, tailLength - keep, tail, 0, keep);
    for (int i = 0; i < n; i++) {
      tail[keep + i] = item.get(from + i);
    }
    tailLength = keep + n;
  }

  /**
   * Whether the body so far ends as a complete SSE stream: OpenAI's {@code data: [DONE]}; for the
   * streams of named events that end without one (Anthropic's Messages, ending with {@code
   * message_stop}; the Responses API, with {@code response.completed}), a last event that is whole:
   * a JSON object and the blank line after it. A named stream cut between two events passes this
   * weaker check; one cut inside an event does not.
   */
  private boolean endedComplete() {
    if (endedWithDone()) {
      return true;
    }
    if (!namedEvents) {
      return false;
    }
    int end = tailLength;
    if (end < 3 || tail[end - 1] != '\n' || tail[end - 2] != '\n') {
      return false;
    }
    end -= 2;
    while (end > 0 && (tail[end - 1] == '\r' || tail[end - 1] == ' ')) {
      end--;
    }
    return end > 0 && tail[end - 1] == '}';
  }

  /** Whether the body so far ends with an SSE {@code data: [DONE]} event. */
  private boolean endedWithDone() {
    int end = tailLength;
    while (end > 0 && (tail[end - 1] == '\n' || tail[end - 1] == '\r' || tail[end - 1] == ' ')) {
      end--;
    }
    int start = end - DONE.length;
    if (start < 0) {
      return false;
    }
    for (int i = 0; i < DONE.length; i++) {
      if (tail[start + i] != DONE[i]) {
        return false;
      }
    }
    int p = start;
    while (p > 0 && tail[p - 1] == ' ') {
      p--;
    }
    return p >= 5
        && tail[p - 1] == ':'
        && tail[p - 2] == 'a'
        && tail[p - 3] == 't'
        && tail[p - 4] == 'a'
        && tail[p - 5] == 'd';
  }

  /**
   * The end of a delivered stream: an SSE stream without its {@code data: [DONE]} was cut short
   * (the engine died or a proxy dropped it), which is an upstream failure, not a success.
   */
  @Override
  protected void ended() {
    if (sse && !endedComplete()) {
      relay()
          .onError(
              UpstreamException.protocol(
                  Leg.DECODE,
                  endpointId,
                  "decode stream from " + endpointId + " ended without data: [DONE]",
                  null));
      return;
    }
    relay().onComplete();
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
      Consumer<Throwable> onEnd) {
    Timing timing = new Timing(connectorType, endpointId, listener, nanoClock, startNanos);
    FlowRelay<ByteBuffer> relay =
        FlowRelay.create(
            error -> {
              timing.ended(error);
              onEnd.accept(error);
            });
    return new ObservedStream(upstream, timing, relay).start(upstream);
  }

  /** The first chunk: reported, kept for the subscriber, and the upstream handed over. */
  @Override
  protected void ahead(ByteBuffer item) {
    long now = timing.now();
    lastChunkNanos = now;
    timing.firstByte(now);
    remember(item);
    handOver(item, response);
  }

  /** A later chunk: its gap since the previous one is reported. */
  @Override
  protected void passed(ByteBuffer item) {
    long now = timing.now();
    timing.listener().decodeChunk(timing.connectorType(), now - lastChunkNanos);
    lastChunkNanos = now;
    remember(item);
  }

  @Override
  protected Throwable failedAhead(Throwable throwable) {
    return new UpstreamException(
        Leg.DECODE,
        endpointId,
        UpstreamException.Kind.IO,
        0,
        null,
        null,
        "decode stream from " + endpointId + " failed before its first byte: " + throwable,
        throwable);
  }

  /** An empty body: delivered as such, except an SSE stream, which must have had an event. */
  @Override
  protected void endedAhead() {
    if (sse) {
      onError(new java.io.EOFException("the SSE stream ended without an event"));
      return;
    }
    timing.firstByte(timing.now());
    handOver(null, response);
    relay().onComplete();
  }
}
