package io.kvroute.edge.internal;

import io.kvroute.connector.FlowRelay;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.HttpTransport.Outbound;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import java.net.ConnectException;
import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;

/**
 * One upstream call of {@link NettyClient}: takes or opens a connection on its loop, writes the
 * request, turns the response head into a {@link StreamingResponse} and relays the body chunks to
 * its subscriber as demand allows, then gives the connection back to the pool (or closes it).
 *
 * <p>Thread-safe where it must be: everything runs on the call's event loop, except {@link
 * #request}, {@link #cancel} and the future's cancellation, which hop to the loop when called
 * elsewhere.
 */
final class UpstreamCall implements Flow.Subscription {

  private enum State {
    CONNECTING,
    HEAD,
    BODY,
    DONE
  }

  private final NettyClient client;
  private final Outbound out;
  private final NettyClient.Target target;
  private final EventLoop loop;
  private final NettyClient.LoopPool pool;
  private final CompletableFuture<StreamingResponse> future;
  private final long timeoutNanos;

  // Loop-confined state.
  private State state = State.CONNECTING;
  private Channel channel;
  private Handler handler;
  private boolean reused;
  private boolean retried;
  private boolean readPending;
  private boolean keepAlive;
  private long lastActivity;
  private ScheduledFuture<?> timer;
  private FlowRelay<ByteBuffer> relay;

  // Written by the subscriber's thread, read on the loop.
  private final java.util.concurrent.atomic.AtomicLong demand =
      new java.util.concurrent.atomic.AtomicLong();

  UpstreamCall(
      NettyClient client,
      Outbound out,
      NettyClient.Target target,
      EventLoop loop,
      NettyClient.LoopPool pool,
      CompletableFuture<StreamingResponse> future) {
    this.client = client;
    this.out = out;
    this.target = target;
    this.loop = loop;
    this.pool = pool;
    this.future = future;
    this.timeoutNanos = out.timeout().toNanos();
    future.whenComplete(
        (r, t) -> {
          if (future.isCancelled()) {
            onLoop(this::abort);
          }
        });
  }

  private void onLoop(Runnable r) {
    if (loop.inEventLoop()) {
      r.run();
    } else {
      try {
        loop.execute(r);
      } catch (java.util.concurrent.RejectedExecutionException e) {
        // the loop is shutting down: its channels close with it
      }
    }
  }

  /** Starts the call on its loop. */
  void start() {
    if (future.isDone()) {
      return;
    }
    if (client.closed()) {
      fail(UpstreamException.Kind.IO, "failed: the client is closed", null);
      return;
    }
    lastActivity = System.nanoTime();
    timer = loop.schedule(this::onTimer, timeoutNanos, TimeUnit.NANOSECONDS);
    Channel c = pool.poll(target);
    if (c != null) {
      attach(c, true);
    } else {
      connect();
    }
  }

  private void connect() {
    Handler h = new Handler(pool, target);
    client
        .connect(loop, target, h)
        .addListener(
            f -> {
              Channel c = ((io.netty.channel.ChannelFuture) f).channel();
              if (state == State.DONE) {
                c.close();
                return;
              }
              if (!f.isSuccess()) {
                Throwable e = f.cause();
                boolean timedOut =
                    e instanceof io.netty.channel.ConnectTimeoutException
                        || (e != null && e.getClass().getSimpleName().contains("Timeout"));
                fail(
                    timedOut ? UpstreamException.Kind.TIMEOUT : UpstreamException.Kind.IO,
                    timedOut
                        ? "timed out connecting after "
                            + client.settings.connectTimeout().toMillis()
                            + " ms"
                        : "failed: " + connectMessage(e),
                    e);
                return;
              }
              attach(c, false);
            });
  }

  private static String connectMessage(Throwable e) {
    if (e instanceof ConnectException && e.getMessage() != null) {
      return "java.net.ConnectException: " + e.getMessage();
    }
    return String.valueOf(e);
  }

  private void attach(Channel c, boolean fromPool) {
    channel = c;
    reused = fromPool;
    handler = c.pipeline().get(Handler.class);
    handler.call = this;
    state = State.HEAD;
    c.writeAndFlush(request())
        .addListener(
            f -> {
              if (!f.isSuccess() && c == channel) {
                writeFailed(f.cause());
              }
            });
    read();
  }

  private void writeFailed(Throwable cause) {
    if (state != State.HEAD) {
      return;
    }
    detach(false);
    if (reused && !retried) {
      // A pooled connection closed by the upstream while idle: the request did not go out.
      retried = true;
      state = State.CONNECTING;
      connect();
      return;
    }
    fail(UpstreamException.Kind.IO, "failed: " + cause, cause);
  }

  private DefaultFullHttpRequest request() {
    boolean post = out.method() == HttpTransport.Method.POST;
    // the request's own bytes, read-only: not copied per call
    ByteBuf body = post ? Unpooled.wrappedBuffer(out.bodyBuffer()) : Unpooled.EMPTY_BUFFER;
    DefaultFullHttpRequest r =
        new DefaultFullHttpRequest(
            HttpVersion.HTTP_1_1,
            post ? HttpMethod.POST : HttpMethod.GET,
            target.basePath() + out.path(),
            body);
    HttpHeaders h = r.headers();
    h.set(HttpHeaderNames.HOST, target.hostHeader());
    out.forEachForwardedHeader(h::add);
    if (out.streaming()) {
      h.set(HttpHeaderNames.ACCEPT, "text/event-stream, application/json");
    }
    if (post) {
      h.set(HttpHeaderNames.CONTENT_TYPE, "application/json; charset=utf-8");
      h.setInt(HttpHeaderNames.CONTENT_LENGTH, body.readableBytes());
    }
    return r;
  }

  private void read() {
    if (!readPending && channel != null) {
      readPending = true;
      touch();
      channel.read();
    }
  }

  // ------------------------------------------------------------------ inbound, on the loop

  void onMessage(Object msg) {
    try {
      if (state == State.DONE) {
        return;
      }
      if (msg instanceof HttpResponse head) {
        if (head.decoderResult().isFailure()) {
          protocolError("sent an unreadable response head", head.decoderResult().cause());
          return;
        }
        if (head.status().code() == 100) {
          return;
        }
        onHead(head);
      }
      if (msg instanceof HttpContent content && state == State.BODY) {
        if (content.decoderResult().isFailure()) {
          protocolError("sent an unreadable body", content.decoderResult().cause());
          return;
        }
        ByteBuf b = content.content();
        int n = b.readableBytes();
        if (n > 0) {
          byte[] chunk = new byte[n];
          b.readBytes(chunk);
          touch();
          demand.decrementAndGet();
          relay.onNext(ByteBuffer.wrap(chunk).asReadOnlyBuffer());
        }
        if (content instanceof LastHttpContent && state == State.BODY) {
          complete();
        }
      }
    } finally {
      ReferenceCountUtil.release(msg);
    }
  }

  private void onHead(HttpResponse head) {
    Map<String, List<String>> h = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    Iterator<Map.Entry<CharSequence, CharSequence>> it = head.headers().iteratorCharSequence();
    while (it.hasNext()) {
      Map.Entry<CharSequence, CharSequence> e = it.next();
      // one immutable list per name as it comes (most names have one value)
      h.merge(e.getKey().toString(), List.of(e.getValue().toString()), UpstreamCall::concat);
    }
    keepAlive = HttpUtil.isKeepAlive(head);
    state = State.BODY;
    touch();
    relay = FlowRelay.create(this::ended);
    client.opened();
    Response r = new Response(head.status().code(), Collections.unmodifiableMap(h));
    relay.onSubscribe(this);
    if (!future.complete(r)) {
      relay.cancel();
    }
  }

  private static List<String> concat(List<String> a, List<String> b) {
    String[] all = new String[a.size() + b.size()];
    for (int i = 0; i < a.size(); i++) {
      all[i] = a.get(i);
    }
    for (int i = 0; i < b.size(); i++) {
      all[a.size() + i] = b.get(i);
    }
    return List.of(all);
  }

  void onReadComplete() {
    readPending = false;
    if (state == State.HEAD || (state == State.BODY && demand.get() > 0)) {
      read();
    }
  }

  void onInactive() {
    if (state == State.HEAD || state == State.BODY) {
      detach(false);
      fail(UpstreamException.Kind.IO, "failed: connection closed by the upstream", null);
    }
  }

  void onException(Throwable cause) {
    if (state == State.DONE) {
      return;
    }
    detach(false);
    fail(UpstreamException.Kind.IO, "failed: " + cause, cause);
  }

  private void protocolError(String what, Throwable cause) {
    detach(false);
    fail(
        UpstreamException.Kind.PROTOCOL,
        "failed: " + target.hostHeader() + " " + what + ": " + cause,
        cause);
  }

  private void complete() {
    state = State.DONE;
    cancelTimer();
    detach(keepAlive);
    relay.onComplete();
  }

  /** Leaves the connection: back to the pool when it can carry the next request, else closed. */
  private void detach(boolean reusable) {
    detach(reusable, false);
  }

  /**
   * Leaves the connection; {@code reset} closes it with a TCP reset ({@code SO_LINGER} 0) instead
   * of a FIN, so that an engine that serves half-closed clients (a FIN may be only that) stops
   * working for a caller that is gone.
   */
  private void detach(boolean reusable, boolean reset) {
    Channel c = channel;
    if (c == null) {
      return;
    }
    channel = null;
    handler.call = null;
    readPending = false;
    if (reusable) {
      pool.offer(target, c, handler);
    } else {
      if (reset && c.isActive()) {
        try {
          c.config().setOption(ChannelOption.SO_LINGER, 0);
        } catch (RuntimeException e) {
          // the socket is closing already: a FIN or nothing, either way the call is over
        }
      }
      c.close();
    }
  }

  private void fail(UpstreamException.Kind kind, String what, Throwable cause) {
    if (state == State.DONE) {
      return;
    }
    boolean hadHead = state == State.BODY;
    state = State.DONE;
    cancelTimer();
    detach(false, kind == UpstreamException.Kind.TIMEOUT);
    UpstreamException e = UpstreamException.transport(out, kind, what, cause);
    if (hadHead) {
      relay.onError(e);
    } else {
      future.completeExceptionally(e);
    }
  }

  /** The caller cancelled (the future or the body): reset the connection, nothing more. */
  private void abort() {
    if (state == State.DONE) {
      return;
    }
    state = State.DONE;
    cancelTimer();
    detach(false, true);
    future.completeExceptionally(
        UpstreamException.transport(
            out, UpstreamException.Kind.CANCELLED, "cancelled", new CancellationException()));
  }

  /** Notes activity, for the gap timeout of a streaming call (a whole call has one deadline). */
  private void touch() {
    if (out.streaming()) {
      lastActivity = System.nanoTime();
    }
  }

  private void cancelTimer() {
    if (timer != null) {
      timer.cancel(false);
      timer = null;
    }
  }

  private void onTimer() {
    timer = null;
    if (state == State.DONE) {
      return;
    }
    long now = System.nanoTime();
    if (out.streaming() && state == State.BODY) {
      long left = timeoutNanos - (now - lastActivity);
      if (demand.get() <= 0 || left > 0) {
        // Paused by the subscriber, or a chunk came recently: wait again.
        timer =
            loop.schedule(
                this::onTimer, demand.get() <= 0 ? timeoutNanos : left, TimeUnit.NANOSECONDS);
        return;
      }
    }
    fail(
        UpstreamException.Kind.TIMEOUT,
        "timed out after " + out.timeout().toMillis() + " ms",
        null);
  }

  private void ended(Throwable t) {
    client.released();
    if (t instanceof CancellationException) {
      onLoop(this::abort);
    }
  }

  // ------------------------------------------------------------------ Flow.Subscription (relay)

  @Override
  public void request(long n) {
    if (n <= 0) {
      return; // the relay validates before forwarding
    }
    long d;
    do {
      d = demand.get();
    } while (!demand.compareAndSet(d, d + n < 0 ? Long.MAX_VALUE : d + n));
    if (d <= 0) {
      onLoop(
          () -> {
            if (state == State.BODY) {
              read();
            }
          });
    }
  }

  @Override
  public void cancel() {
    onLoop(this::abort);
  }

  /** The response handed to the caller. */
  private final class Response implements StreamingResponse {
    private final int status;
    private final Map<String, List<String>> headers;

    Response(int status, Map<String, List<String>> headers) {
      this.status = status;
      this.headers = headers;
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
    public void cancel() {
      relay.cancel();
    }

    @Override
    public void subscribe(Flow.Subscriber<? super ByteBuffer> s) {
      relay.subscribe(s);
    }
  }

  /**
   * The last handler of an upstream connection: routes what the connection reads to the call that
   * holds it, and notices a pooled connection closing or talking out of turn. Loop-confined.
   */
  static final class Handler extends ChannelInboundHandlerAdapter {
    private final NettyClient.LoopPool pool;
    private final NettyClient.Target target;
    UpstreamCall call;
    long idleSince;

    Handler(NettyClient.LoopPool pool, NettyClient.Target target) {
      this.pool = pool;
      this.target = target;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      UpstreamCall c = call;
      if (c == null) {
        ReferenceCountUtil.release(msg);
        pool.remove(target, ctx.channel());
        ctx.close(); // bytes on an idle connection: it cannot be trusted for the next request
        return;
      }
      c.onMessage(msg);
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
      UpstreamCall c = call;
      if (c != null) {
        c.onReadComplete();
      }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      UpstreamCall c = call;
      if (c != null) {
        c.onInactive();
      } else {
        pool.remove(target, ctx.channel());
      }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      UpstreamCall c = call;
      if (c != null) {
        c.onException(cause);
      } else {
        pool.remove(target, ctx.channel());
      }
      ctx.close();
    }
  }
}
