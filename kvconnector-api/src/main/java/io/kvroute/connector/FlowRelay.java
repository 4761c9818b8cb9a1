package io.kvroute.connector;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;
import java.util.Objects;
import java.util.Queue;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Flow;
import java.util.function.Consumer;

/**
 * The demand and cancellation plumbing of a single-subscriber {@link Flow.Publisher}, written once
 * and verified with the Reactive Streams TCK. Every publisher kvroute returns ({@link
 * StreamingResponse}s from transports, connectors, the orchestrator and the router) relays its
 * items through one; {@link HttpTransport} implementations outside kvroute can use it too.
 *
 * <p>A relay sits between an upstream and one downstream subscriber:
 *
 * <ul>
 *   <li>The upstream is a {@link Flow.Subscription} given to {@link #onSubscribe} (a real
 *       publisher's, or a source such as a socket reader that emits through {@link #onNext} within
 *       the demand it was asked for), plus items already in hand, added with {@link #buffered}:
 *       they are delivered first and pay for the downstream's first requests, so the upstream is
 *       asked only for the rest. {@link #of} is a relay of items in hand that then completes.
 *   <li>The downstream gets the Reactive Streams guarantees: {@code onSubscribe} first, signals in
 *       sequence (never concurrently, no unbounded recursion when it requests from {@code onNext}),
 *       no more {@code onNext} than requested, one terminal signal, {@code request(n <= 0)} failing
 *       with {@link IllegalArgumentException} (rule 3.9), demand accumulating up to {@code
 *       Long.MAX_VALUE}, and no reference to the subscriber kept after it cancelled. A second
 *       subscriber is refused with {@code onError(IllegalStateException)}.
 *   <li>Requests are forwarded upstream as they come (minus what buffered items pay for); requests
 *       made before the upstream subscription arrives are kept and forwarded when it does.
 *   <li>Items queued when the upstream fails are delivered before the error (if the subscriber asks
 *       for them); cancellation drops them.
 * </ul>
 *
 * <p>The {@code onEnd} callback runs once when the stream ends for any reason: with {@code null}
 * after {@code onComplete} reached the subscriber, the error after {@code onError}, or a {@link
 * CancellationException} when it was cancelled first.
 *
 * <p>Thread-safe: upstream signals may come from any thread (serially, as Reactive Streams
 * requires), downstream calls from another. Signals reach the subscriber on whichever thread
 * delivered the item or the demand that released it.
 *
 * @param <T> the item type
 */
public final class FlowRelay<T> implements Flow.Processor<T, T> {
  private static final Flow.Subscription REFUSED =
      new Flow.Subscription() {
        @Override
        public void request(long n) {}

        @Override
        public void cancel() {}
      };

  // The counters and flags below are fields updated through VarHandles, not Atomic* objects: a
  // request's answer passes through several relays, and each Atomic* was an object of its own.
  private static final VarHandle END_REPORTED;
  private static final VarHandle WIP;
  private static final VarHandle DEMAND;
  private static final VarHandle CREDIT;
  private static final VarHandle PENDING_UPSTREAM;
  private static final VarHandle UPSTREAM;
  private static final VarHandle SUBSCRIBED;

  static {
    try {
      MethodHandles.Lookup l = MethodHandles.lookup();
      END_REPORTED = l.findVarHandle(FlowRelay.class, "endReported", boolean.class);
      WIP = l.findVarHandle(FlowRelay.class, "wip", int.class);
      DEMAND = l.findVarHandle(FlowRelay.class, "demand", long.class);
      CREDIT = l.findVarHandle(FlowRelay.class, "credit", long.class);
      PENDING_UPSTREAM = l.findVarHandle(FlowRelay.class, "pendingUpstream", long.class);
      UPSTREAM = l.findVarHandle(FlowRelay.class, "upstream", Flow.Subscription.class);
      SUBSCRIBED = l.findVarHandle(FlowRelay.class, "subscribed", boolean.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final Consumer<? super Throwable> onEnd;
  private final Queue<T> queue = new ConcurrentLinkedQueue<>();
  private final Downstream subscription = new Downstream();
  private volatile boolean endReported;
  private volatile int wip;
  private volatile long demand;
  private volatile long credit;
  private volatile long pendingUpstream;
  private volatile Flow.Subscription upstream;
  private volatile boolean subscribed;

  private volatile Flow.Subscriber<? super T> downstream;
  private volatile boolean done;
  private volatile Throwable error;
  private volatile Throwable badRequest;
  private volatile boolean cancelled;
  // Touched only inside drain(), which one thread runs at a time.
  private boolean started;
  private boolean terminated;

  private FlowRelay(Consumer<? super Throwable> onEnd) {
    this.onEnd = onEnd;
  }

  /** A relay with no end callback. */
  public static <T> FlowRelay<T> create() {
    return new FlowRelay<>(t -> {});
  }

  /** A relay that calls {@code onEnd} once when the stream ends (see the class description). */
  public static <T> FlowRelay<T> create(Consumer<? super Throwable> onEnd) {
    return new FlowRelay<>(Objects.requireNonNull(onEnd, "onEnd"));
  }

  /** A publisher of {@code items}, in order, then completion. */
  public static <T> FlowRelay<T> of(List<? extends T> items) {
    FlowRelay<T> r = create();
    items.forEach(r::buffered);
    r.onComplete();
    return r;
  }

  /**
   * Adds an item already in hand (for example a chunk read ahead to decide something): it is
   * delivered after the items buffered before it and before anything the upstream sends, and pays
   * for one unit of the subscriber's demand instead of a request upstream. Call it before the
   * upstream is asked for anything (before the subscriber can request).
   */
  public FlowRelay<T> buffered(T item) {
    queue.offer(Objects.requireNonNull(item, "item"));
    CREDIT.getAndAdd(this, 1L);
    drain();
    return this;
  }

  /** True once the subscriber (or {@link #cancel()}) cancelled. */
  public boolean isCancelled() {
    return cancelled;
  }

  /**
   * Cancels: the upstream subscription is cancelled, queued items are dropped, and the subscriber
   * gets no further signal. Idempotent.
   */
  public void cancel() {
    if (cancelled) {
      return;
    }
    cancelled = true;
    Flow.Subscription s = upstream;
    try {
      if (s != null) {
        s.cancel();
      }
    } catch (RuntimeException e) {
      // An upstream whose cancel throws breaks rule 3.15; the end is still reported (the
      // accounting of whoever waits for it must not leak) and cancel returns normally.
    } finally {
      reportEnd(new CancellationException("stream cancelled"));
      drain();
    }
  }

  // ---------------------------------------------------------------- downstream

  @Override
  public void subscribe(Flow.Subscriber<? super T> subscriber) {
    Objects.requireNonNull(subscriber, "subscriber");
    if (!SUBSCRIBED.compareAndSet(this, false, true)) {
      subscriber.onSubscribe(REFUSED);
      subscriber.onError(new IllegalStateException("this stream accepts one subscriber"));
      return;
    }
    downstream = subscriber;
    drain();
  }

  private final class Downstream implements Flow.Subscription {
    @Override
    public void request(long n) {
      if (n <= 0) {
        if (badRequest == null) {
          badRequest = new IllegalArgumentException("request(n) needs n > 0 (rule 3.9), was " + n);
        }
        Flow.Subscription s = upstream;
        if (s != null) {
          s.cancel();
        }
        drain();
        return;
      }
      addCapped(DEMAND, FlowRelay.this, n);
      long forward = n;
      while (true) {
        long c = credit;
        if (c == 0) {
          break;
        }
        long use = Math.min(c, forward);
        if (CREDIT.compareAndSet(FlowRelay.this, c, c - use)) {
          forward -= use;
          break;
        }
      }
      if (forward > 0) {
        requestUpstream(forward);
      }
      drain();
    }

    @Override
    public void cancel() {
      FlowRelay.this.cancel();
    }
  }

  private void requestUpstream(long n) {
    Flow.Subscription s = upstream;
    if (s != null) {
      s.request(n);
      return;
    }
    addCapped(PENDING_UPSTREAM, this, n);
    s = upstream;
    if (s != null) {
      long p = (long) PENDING_UPSTREAM.getAndSet(this, 0L);
      if (p > 0) {
        s.request(p);
      }
    }
  }

  // ---------------------------------------------------------------- upstream

  /**
   * The upstream subscription; requests made so far are forwarded to it. A second subscription is
   * cancelled (rule 2.5), and so is one that arrives after cancellation.
   */
  @Override
  public void onSubscribe(Flow.Subscription s) {
    Objects.requireNonNull(s, "subscription");
    if (!UPSTREAM.compareAndSet(this, (Flow.Subscription) null, s)) {
      s.cancel();
      return;
    }
    if (cancelled || badRequest != null) {
      s.cancel();
      return;
    }
    long p = (long) PENDING_UPSTREAM.getAndSet(this, 0L);
    if (p > 0) {
      s.request(p);
    }
  }

  /** An item from upstream, within the demand it was asked for. */
  @Override
  public void onNext(T item) {
    Objects.requireNonNull(item, "item");
    if (done || cancelled) {
      return;
    }
    queue.offer(item);
    drain();
  }

  /** The upstream failed; the subscriber gets the error after any queued items. */
  @Override
  public void onError(Throwable t) {
    Objects.requireNonNull(t, "throwable");
    if (done) {
      return;
    }
    error = t;
    done = true;
    drain();
  }

  /** The upstream completed; the subscriber completes after any queued items. */
  @Override
  public void onComplete() {
    if (done) {
      return;
    }
    done = true;
    drain();
  }

  // ---------------------------------------------------------------- delivery

  private void drain() {
    if ((int) WIP.getAndAdd(this, 1) != 0) {
      return;
    }
    int missed = 1;
    while (true) {
      Flow.Subscriber<? super T> s = downstream;
      if (s != null && !terminated) {
        if (!started) {
          started = true;
          s.onSubscribe(subscription);
        }
        emit(s);
      }
      missed = (int) WIP.getAndAdd(this, -missed) - missed;
      if (missed == 0) {
        return;
      }
    }
  }

  private void emit(Flow.Subscriber<? super T> s) {
    if (cancelled) {
      terminated = true;
      downstream = null;
      queue.clear();
      return;
    }
    Throwable bad = badRequest;
    if (bad != null) {
      finish(s, bad);
      return;
    }
    long requested = demand;
    long emitted = 0;
    while (emitted != requested && !cancelled && badRequest == null) {
      T item = queue.poll();
      if (item == null) {
        break;
      }
      s.onNext(item);
      emitted++;
    }
    if (emitted != 0 && requested != Long.MAX_VALUE) {
      DEMAND.getAndAdd(this, -emitted);
    }
    if (cancelled || badRequest != null) {
      return; // the next pass of the drain loop handles it
    }
    if (done && queue.isEmpty()) {
      finish(s, error);
    }
  }

  private void finish(Flow.Subscriber<? super T> s, Throwable failure) {
    terminated = true;
    downstream = null;
    queue.clear();
    reportEnd(failure);
    if (failure == null) {
      s.onComplete();
    } else {
      s.onError(failure);
    }
  }

  private void reportEnd(Throwable failure) {
    if (END_REPORTED.compareAndSet(this, false, true)) {
      onEnd.accept(failure);
    }
  }

  private static void addCapped(VarHandle counter, FlowRelay<?> relay, long n) {
    while (true) {
      long current = (long) counter.getVolatile(relay);
      if (current == Long.MAX_VALUE) {
        return;
      }
      long next = current + n;
      if (next < 0) {
        next = Long.MAX_VALUE;
      }
      if (counter.compareAndSet(relay, current, next)) {
        return;
      }
    }
  }
}
