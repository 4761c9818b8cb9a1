package io.kvroute.connector;

import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;

/**
 * Reads the start of a response body before anyone subscribes to it, to decide what to do with the
 * response (wait for its first byte, look for a refusal in its first event), and then hands the
 * rest over to a {@link FlowRelay}. {@link #start} subscribes at once and asks for one chunk at a
 * time; each goes to {@link #ahead} until the subclass calls {@link #handOver}, which gives the
 * subscription to the relay (so the rest flows with the relay's subscriber's demand, after the
 * chunk kept, if any) and completes the future {@link #start} returned. From then on chunks, the
 * error and the end go to the relay ({@link #passed} and {@link #ended} see them first).
 *
 * <p>A failure before the hand-over fails the future instead ({@link #failedAhead} may translate
 * it); cancelling the future cancels the response. Signals are serial, as Reactive Streams
 * requires, so subclasses need no locks for state they touch only in these callbacks.
 *
 * @param <R> what the future completes with (the response to hand out)
 */
public abstract class ReadAhead<R> implements Flow.Subscriber<ByteBuffer> {
  private final FlowRelay<ByteBuffer> relay;
  private final CompletableFuture<R> decided = new CompletableFuture<>();
  private Flow.Subscription subscription;

  /** A reader that hands the body over to {@code relay}. */
  protected ReadAhead(FlowRelay<ByteBuffer> relay) {
    this.relay = Objects.requireNonNull(relay, "relay");
  }

  /**
   * Subscribes to {@code upstream}. The future completes with what {@link #handOver} is given, or
   * fails if the body fails first; cancelling it cancels {@code upstream}. Call it once.
   */
  public final CompletableFuture<R> start(StreamingResponse upstream) {
    decided.whenComplete(
        (r, t) -> {
          if (decided.isCancelled()) {
            upstream.cancel();
          }
        });
    upstream.subscribe(this);
    return decided;
  }

  /** A chunk read ahead: call {@link #next} for another, or {@link #handOver}. */
  protected abstract void ahead(ByteBuffer item);

  /** The body ended before the hand-over: call {@link #handOver}, or fail with {@link #onError}. */
  protected abstract void endedAhead();

  /** The failure {@link #start}'s future fails with when the body fails before the hand-over. */
  protected Throwable failedAhead(Throwable error) {
    return error;
  }

  /** Sees a chunk after the hand-over, before the relay gets it; must not move its position. */
  protected void passed(ByteBuffer item) {}

  /** The body ended after the hand-over; by default the relay completes. */
  protected void ended() {
    relay.onComplete();
  }

  /** The relay the body is handed over to. */
  protected final FlowRelay<ByteBuffer> relay() {
    return relay;
  }

  /** Asks the upstream for one more chunk to read ahead. */
  protected final void next() {
    subscription.request(1);
  }

  /**
   * Gives the subscription to the relay, after {@code first} (a chunk to deliver first, or null),
   * and completes {@link #start}'s future with {@code result}.
   */
  protected final void handOver(ByteBuffer first, R result) {
    if (first != null) {
      relay.buffered(first);
    }
    relay.onSubscribe(subscription);
    decided.complete(result);
  }

  /** Asks for the first chunk. */
  @Override
  public final void onSubscribe(Flow.Subscription s) {
    subscription = s;
    s.request(1);
  }

  /** To {@link #ahead} before the hand-over (or cancellation), to the relay after it. */
  @Override
  public final void onNext(ByteBuffer item) {
    if (!decided.isDone()) {
      ahead(item);
      return;
    }
    passed(item);
    relay.onNext(item);
  }

  /** Fails {@link #start}'s future before the hand-over, the relay after it. */
  @Override
  public final void onError(Throwable throwable) {
    if (!decided.isDone()) {
      decided.completeExceptionally(failedAhead(throwable));
      return;
    }
    relay.onError(throwable);
  }

  /** To {@link #endedAhead} before the hand-over, {@link #ended} after it. */
  @Override
  public final void onComplete() {
    if (!decided.isDone()) {
      endedAhead();
      return;
    }
    ended();
  }
}
