package io.kvroute.edge.internal;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Relays a streamed answer from a {@link Flow.Publisher} to the client with back-pressure: at most
 * {@link #PREFETCH} items are requested ahead; each written item is re-requested only while the
 * channel is writable (below its high-water mark), the rest when it becomes writable again. Items
 * are copied (chunk-framed) on the publisher's thread and written on the event loop, where every
 * call to the subscription is made (so calls to it are serial). When the client goes away the
 * subscription is cancelled.
 *
 * <p>Signals from the publisher may come from any thread; the rest is confined to the loop.
 */
final class StreamRelay implements Flow.Subscriber<ByteBuffer> {
  private static final Logger log = LoggerFactory.getLogger(StreamRelay.class);
  static final int PREFETCH = 16;
  private static final Object SUBSCRIBED = new Object();
  private static final Object COMPLETE = new Object();
  private static final Object EMPTY_ITEM = new Object();

  private record Failure(Throwable cause) {}

  private final Http1Connection conn;
  private final ChannelHandlerContext ctx;
  private final ExchangeImpl exchange;
  private final boolean chunked;
  private final boolean close;
  private final Function<Throwable, byte[]> tail;
  private final boolean discard;
  private final ConcurrentLinkedQueue<Object> inbox = new ConcurrentLinkedQueue<>();
  private final AtomicBoolean scheduled = new AtomicBoolean();
  private volatile Flow.Subscription subscription;
  private volatile boolean cancelled;
  private boolean done;
  private int owed;
  // The response head was written, not flushed: the first drain flushes it, with whatever items
  // arrived by then (a short answer leaves in one write).
  private boolean headPending = true;

  StreamRelay(
      Http1Connection conn,
      ExchangeImpl exchange,
      boolean chunked,
      boolean close,
      Function<Throwable, byte[]> tail,
      boolean discard) {
    this.conn = conn;
    this.ctx = conn.ctx();
    this.exchange = exchange;
    this.chunked = chunked;
    this.close = close;
    this.tail = tail;
    this.discard = discard;
  }

  @Override
  public void onSubscribe(Flow.Subscription s) {
    if (subscription != null) {
      s.cancel();
      return;
    }
    subscription = s;
    post(SUBSCRIBED);
  }

  @Override
  public void onNext(ByteBuffer item) {
    int n = item.remaining();
    if (n == 0 || cancelled || discard) {
      post(EMPTY_ITEM);
      return;
    }
    ByteBuf b = ctx.alloc().buffer(n + (chunked ? 12 : 0));
    if (chunked) {
      Wire.writeHex(b, n);
      b.writeBytes(Wire.CRLF);
    }
    b.writeBytes(item);
    if (chunked) {
      b.writeBytes(Wire.CRLF);
    }
    post(b);
  }

  @Override
  public void onError(Throwable t) {
    post(new Failure(t));
  }

  @Override
  public void onComplete() {
    post(COMPLETE);
  }

  private void post(Object o) {
    inbox.add(o);
    if (scheduled.compareAndSet(false, true)) {
      try {
        ctx.executor().execute(this::drain);
      } catch (java.util.concurrent.RejectedExecutionException e) {
        // the server is closed: nobody will write this stream
        cancelled = true;
        Flow.Subscription s = subscription;
        if (s != null) {
          s.cancel();
        }
        Object x;
        while ((x = inbox.poll()) != null) {
          if (x instanceof ByteBuf) {
            ((ByteBuf) x).release();
          }
        }
      }
    }
  }

  private void drain() {
    scheduled.set(false);
    int wrote = 0;
    boolean flush = headPending;
    headPending = false;
    Object o;
    while ((o = inbox.poll()) != null) {
      if (o instanceof ByteBuf) {
        ByteBuf b = (ByteBuf) o;
        if (done || cancelled) {
          b.release();
          continue;
        }
        ctx.write(b, ctx.voidPromise());
        wrote++;
        flush = true;
      } else if (o == EMPTY_ITEM) {
        wrote++;
      } else if (o == SUBSCRIBED) {
        if (cancelled) {
          subscription.cancel();
        } else if (discard) {
          // HEAD: the headers are out; nobody reads the body
          subscription.cancel();
          done = true;
          conn.finishStream(exchange, close);
        } else {
          subscription.request(PREFETCH);
        }
      } else if (o == COMPLETE) {
        if (!done && !cancelled) {
          done = true;
          if (chunked) {
            ctx.write(ctx.alloc().buffer(5).writeBytes(Wire.LAST_CHUNK), ctx.voidPromise());
          }
          ctx.flush();
          flush = false;
          conn.finishStream(exchange, close);
        }
      } else if (o instanceof Failure) {
        if (!done && !cancelled) {
          done = true;
          fail(((Failure) o).cause());
          flush = false;
        }
      }
    }
    if (flush) {
      ctx.flush();
    }
    if (wrote > 0 && !done && !cancelled) {
      if (ctx.channel().isWritable()) {
        subscription.request(wrote + owed);
        owed = 0;
      } else {
        owed += wrote;
      }
    }
  }

  private void fail(Throwable cause) {
    byte[] last = null;
    try {
      last = tail.apply(cause);
    } catch (RuntimeException e) {
      log.warn("stream error tail failed", e);
    }
    if (last == null) {
      log.debug("stream failed after the answer started; breaking the connection", cause);
      ctx.flush();
      conn.abortStream(exchange);
      return;
    }
    ByteBuf b = ctx.alloc().buffer(last.length + 17);
    if (chunked) {
      if (last.length > 0) {
        Wire.writeHex(b, last.length);
        b.writeBytes(Wire.CRLF);
        b.writeBytes(last);
        b.writeBytes(Wire.CRLF);
      }
      b.writeBytes(Wire.LAST_CHUNK);
    } else {
      b.writeBytes(last);
    }
    ctx.writeAndFlush(b, ctx.voidPromise());
    conn.finishStream(exchange, close);
  }

  /** The channel is writable again: request what was held back (on the loop). */
  void onWritable() {
    if (owed > 0 && !done && !cancelled && subscription != null) {
      int n = owed;
      owed = 0;
      subscription.request(n);
    }
  }

  /** The client is gone: cancel the publisher and drop what it sent (on the loop). */
  void cancel() {
    if (cancelled) {
      return;
    }
    cancelled = true;
    Flow.Subscription s = subscription;
    if (s != null && !done) {
      s.cancel();
    }
    Object o;
    while ((o = inbox.poll()) != null) {
      if (o instanceof ByteBuf) {
        ((ByteBuf) o).release();
      }
    }
  }
}
