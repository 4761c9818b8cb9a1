package io.kvroute.edge.internal;

import io.kvroute.edge.Response;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.epoll.EpollTcpInfo;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;
import io.netty.channel.socket.DuplexChannel;
import io.netty.handler.codec.ByteToMessageDecoder;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Arrays;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One HTTP/1.1 connection: reads and strictly parses requests, buffers bodies within the limits
 * (and the server-wide budget), enforces the header, body, idle and write timeouts, dispatches to
 * the route's handler one request at a time (pipelined requests wait in the input buffer, and
 * reading pauses when that buffer grows), writes answers in order, and refuses bad input with a
 * status line, a JSON body and a counter, then lingers so the client reads the refusal.
 *
 * <p>A client that shuts its sending side down (a TCP half-close) has said it sends no more
 * requests, not that it is gone: what it sent in full is served, in order, and the connection is
 * closed once the last answer is written; a request it left incomplete is refused (400). A client
 * that is gone (a reset, a failed write, or on epoll a connection the kernel reports closed while a
 * half-closed client's request is handled) closes the connection and runs the exchange's
 * client-gone actions at once.
 *
 * <p>Confined to the channel's event loop, except {@link #resumeAfterMemory()} (any thread).
 */
final class Http1Connection extends ChannelInboundHandlerAdapter {
  private static final Logger log = LoggerFactory.getLogger(Http1Connection.class);

  static final int IDLE = 0;
  static final int HEAD = 1;
  static final int BODY = 2;
  static final int HANDLING = 3;
  static final int LINGER = 4;
  static final int CLOSED = 5;

  /** The last answer is being written; the connection closes once it is flushed. */
  static final int CLOSING = 6;

  /** {@code tcp_info.tcpi_state} of a socket the peer reset (Linux {@code TCP_CLOSE}). */
  private static final int TCP_CLOSE = 7;

  private static final long LINGER_NANOS = 2_000_000_000L;
  private static final long LINGER_MAX_BYTES = 4L << 20;
  private static final byte[] EMPTY = new byte[0];

  final Listener listener;
  final LoopTimers timers;
  int timerIndex = -1;
  private ChannelHandlerContext ctx;
  private ByteBuf cum;
  private int state = IDLE;
  private boolean fresh = true;
  private long deadline;
  private int scanned;
  private RequestHead head;
  private byte[] body = EMPTY;
  private int bodyLen;
  private long reserved;
  private ChunkedBody chunks;
  private ExchangeImpl exchange;
  private StreamRelay relay;
  private boolean processing;
  private boolean inRead;
  private boolean needFlush;
  private boolean pausedPipeline;
  private boolean pausedMemory;
  private long unwritableSince = -1;
  private long lingerBytes;
  private boolean inputShut;
  private long closingPending = -1;
  private final RequestHead.Scanner scanner = new RequestHead.Scanner();

  Http1Connection(Listener listener, LoopTimers timers) {
    this.listener = listener;
    this.timers = timers;
  }

  ChannelHandlerContext ctx() {
    return ctx;
  }

  boolean inLoop() {
    return ctx.executor().inEventLoop();
  }

  boolean closed() {
    return state == CLOSED;
  }

  // ------------------------------------------------------------------ netty events

  @Override
  public void channelActive(ChannelHandlerContext ctx) {
    this.ctx = ctx;
    timers.add(this);
    deadline = timers.now() + listener.headerTimeoutNanos;
    ctx.fireChannelActive();
  }

  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    ByteBuf in = (ByteBuf) msg;
    if (state == LINGER || state == CLOSED || state == CLOSING) {
      lingerBytes += in.readableBytes();
      in.release();
      if (lingerBytes > LINGER_MAX_BYTES) {
        ctx.close();
      }
      return;
    }
    cum = cum == null ? in : ByteToMessageDecoder.MERGE_CUMULATOR.cumulate(ctx.alloc(), cum, in);
    inRead = true;
    try {
      process();
    } finally {
      inRead = false;
    }
  }

  @Override
  public void channelReadComplete(ChannelHandlerContext ctx) {
    if (needFlush) {
      needFlush = false;
      ctx.flush();
    }
    ctx.fireChannelReadComplete();
  }

  @Override
  public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
    if (evt instanceof ChannelInputShutdownEvent) {
      inputShut = true;
      if (needFlush) {
        needFlush = false;
        ctx.flush();
      }
      afterInput();
    } else if (!(evt instanceof ChannelInputShutdownReadComplete)) {
      ctx.fireUserEventTriggered(evt);
    }
  }

  /**
   * On a half-closed connection, once what was read is processed (not while a body waits for
   * memory: its bytes are read but not yet taken): serve what the client sent in full, refuse what
   * it left incomplete, close when nothing is left. Run on the event and whenever an exchange ends
   * or memory frees up.
   */
  private void afterInput() {
    if (inputShut && !processing && !pausedMemory) {
      inputEnded();
    }
  }

  private void inputEnded() {
    switch (state) {
      case IDLE:
        // nothing (or only empty lines) was sent after the last answer: close once it is written
        closeAfterWrites();
        break;
      case HEAD:
        refuse(
            new Refusal(
                400,
                "headers",
                "incomplete_head",
                "the client ended its input before the request headers were complete"));
        break;
      case BODY:
        refuse(
            new Refusal(
                400,
                "body",
                "incomplete_body",
                head.chunked
                    ? "the client ended its input after "
                        + bodyLen
                        + " body bytes, before the last chunk"
                    : "the client ended its input after "
                        + bodyLen
                        + " of "
                        + head.contentLength
                        + " body bytes"));
        break;
      case LINGER:
        // the refusal was written (or is being written); the client has read what it wanted
        closeAfterWrites();
        break;
      default:
        // HANDLING: finishExchange comes back here; CLOSING and CLOSED: closing already
        break;
    }
  }

  /** Flushes what is written and closes the connection once that is done. */
  private void closeAfterWrites() {
    closing();
    releaseCum();
    needFlush = false;
    ctx.writeAndFlush(Unpooled.EMPTY_BUFFER).addListener(ChannelFutureListener.CLOSE);
  }

  /**
   * Enters {@link #CLOSING}: the write under way closes the connection when it is done, and a write
   * that makes no progress for the write timeout closes it anyway (a client that stops reading
   * while the rest of the answer is below the high-water mark would never be noticed otherwise).
   */
  private void closing() {
    state = CLOSING;
    closingPending = -1;
    deadline = timers.now() + listener.writeTimeoutNanos;
  }

  /** True if the input holds bytes of a further request (not just empty lines). */
  private boolean requestBytesPending() {
    if (cum == null) {
      return false;
    }
    for (int i = cum.readerIndex(); i < cum.writerIndex(); i++) {
      byte c = cum.getByte(i);
      if (c != '\r' && c != '\n') {
        return true;
      }
    }
    return false;
  }

  @Override
  public void channelWritabilityChanged(ChannelHandlerContext ctx) {
    if (ctx.channel().isWritable()) {
      unwritableSince = -1;
      if (relay != null) {
        relay.onWritable();
      }
    } else if (unwritableSince < 0) {
      unwritableSince = timers.now();
    }
    ctx.fireChannelWritabilityChanged();
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    state = CLOSED;
    timers.remove(this);
    releaseCum();
    if (pausedMemory) {
      pausedMemory = false;
      listener.edge.budget.pausedDelta(-1);
    }
    ExchangeImpl ex = exchange;
    if (ex != null) {
      exchange = null;
      listener.edge.exchangeEnded();
      listener.metrics.clientGone.increment();
      StreamRelay r = relay;
      relay = null;
      if (r != null) {
        r.cancel();
      }
      ex.clientGone();
    }
    releaseBody();
    ctx.fireChannelInactive();
  }

  @Override
  public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
    if (cause instanceof IOException
        || (cause instanceof io.netty.handler.codec.DecoderException
            && cause.getCause() instanceof javax.net.ssl.SSLException)) {
      log.debug("connection error from {}: {}", ctx.channel().remoteAddress(), cause.toString());
    } else {
      log.warn("connection error from {}", ctx.channel().remoteAddress(), cause);
    }
    ctx.close();
  }

  // ------------------------------------------------------------------ reading

  private void process() {
    if (processing) {
      return;
    }
    processing = true;
    try {
      while (true) {
        if (state == IDLE || state == HEAD) {
          if (!readHead()) {
            break;
          }
        } else if (state == BODY) {
          if (!readBody()) {
            break;
          }
          dispatch();
        } else if (state == HANDLING) {
          if (cum != null
              && !pausedPipeline
              && cum.readableBytes() > listener.limits.maxHeaderBytes() + (64 << 10)) {
            pausedPipeline = true;
            ctx.channel().config().setAutoRead(false);
          }
          break;
        } else {
          break;
        }
      }
    } catch (Refusal r) {
      refuse(r);
    } finally {
      processing = false;
      if (cum != null) {
        if (!cum.isReadable()) {
          releaseCum();
        } else if (cum.readerIndex() > 8192) {
          cum.discardSomeReadBytes();
        }
      }
    }
  }

  /** Reads the head if it is complete; false if more bytes are needed. */
  private boolean readHead() throws Refusal {
    if (cum == null) {
      return false;
    }
    if (scanned == 0) {
      // empty lines before a request line are tolerated (RFC 9112, section 2.2)
      while (cum.isReadable()) {
        byte c = cum.getByte(cum.readerIndex());
        if (c != '\r' && c != '\n') {
          break;
        }
        cum.skipBytes(1);
      }
    }
    if (!cum.isReadable()) {
      return false;
    }
    if (state == IDLE) {
      state = HEAD;
      if (!fresh) {
        deadline = timers.now() + listener.headerTimeoutNanos;
      }
    }
    int max = listener.limits.maxHeaderBytes();
    int ri = cum.readerIndex();
    int n = cum.readableBytes();
    int limit = Math.min(n, max);
    int headEnd = -1;
    if (scanned == 0) {
      scanner.last3 = 0;
    }
    if (scanned < limit) {
      scanner.bareLf = false;
      int at = cum.forEachByte(ri + scanned, limit - scanned, scanner);
      if (at >= 0) {
        if (scanner.bareLf) {
          throw new Refusal(400, "headers", "bare_lf", "line ends must be CRLF, not a bare LF");
        }
        headEnd = at - ri + 1;
      }
    }
    if (headEnd < 0) {
      scanned = limit;
      if (n >= max) {
        throw new Refusal(
            431,
            "headers",
            "header_too_large",
            "request line and headers exceed " + max + " bytes");
      }
      return false;
    }
    byte[] hb = new byte[headEnd];
    cum.readBytes(hb);
    scanned = 0;
    head = RequestHead.parse(hb, listener.limits.maxHeaderCount(), true);
    if (listener.tokenDigest != null && !authorized(head.header("Authorization"))) {
      throw new Refusal(
          401,
          "Authorization",
          "unauthorized",
          "admin requests need Authorization: Bearer <token>");
    }
    if (head.contentLength > listener.limits.maxBodyBytes()) {
      throw new Refusal(
          413,
          "body",
          "body_too_large",
          "request body of "
              + head.contentLength
              + " bytes exceeds "
              + listener.limits.maxBodyBytes()
              + " bytes");
    }
    state = BODY;
    deadline = timers.now() + listener.bodyTimeoutNanos;
    body = EMPTY;
    bodyLen = 0;
    if (head.chunked) {
      chunks = new ChunkedBody(listener.limits.maxBodyBytes(), listener.limits.maxHeaderBytes());
    }
    if (head.expectContinue && (head.chunked || head.contentLength > 0)) {
      ctx.writeAndFlush(Unpooled.wrappedBuffer(Wire.CONTINUE));
    }
    return true;
  }

  private boolean authorized(String value) {
    if (value == null || value.length() < 7 || !value.regionMatches(true, 0, "Bearer ", 0, 7)) {
      return false;
    }
    byte[] given = NettyEdge.sha256(value.substring(7).trim().getBytes(StandardCharsets.UTF_8));
    return MessageDigest.isEqual(given, listener.tokenDigest);
  }

  /** Reads body bytes; true when the body is complete. */
  private boolean readBody() throws Refusal {
    if (!head.chunked) {
      long cl = Math.max(0, head.contentLength);
      int want = (int) (cl - bodyLen);
      if (want > 0 && cum != null) {
        int n = Math.min(want, cum.readableBytes());
        if (n > 0) {
          if (!ensure(bodyLen + n)) {
            return false;
          }
          cum.readBytes(body, bodyLen, n);
          bodyLen += n;
        }
      }
      return bodyLen == cl;
    }
    while (cum != null && cum.isReadable()) {
      long r = chunks.advance(cum, bodyLen);
      if (r == ChunkedBody.COMPLETE) {
        return true;
      }
      if (r == ChunkedBody.MORE) {
        return false;
      }
      int n = (int) r;
      if (!ensure(bodyLen + n)) {
        return false;
      }
      cum.readBytes(body, bodyLen, n);
      bodyLen += n;
      chunks.consumed(n);
    }
    return false;
  }

  /** Makes room for {@code needed} body bytes; false if paused for memory. */
  private boolean ensure(int needed) {
    if (needed <= body.length) {
      return true;
    }
    long cl = head.contentLength;
    int max = listener.limits.maxBodyBytes();
    int newLen;
    long total;
    if (!head.chunked && cl <= BodyBudget.SMALL) {
      newLen = (int) cl;
      total = cl;
    } else if (!head.chunked) {
      newLen = (int) Math.min(cl, Math.max(needed, Math.max(body.length * 2L, 16 << 10)));
      total = cl;
    } else {
      newLen = (int) Math.min(max, Math.max(needed, Math.max(body.length * 2L, 1024)));
      total = newLen;
    }
    BodyBudget budget = listener.edge.budget;
    long seen = budget.epoch();
    long grow = newLen - body.length;
    if (!budget.tryReserve(grow, total)) {
      pausedMemory = true;
      budget.pausedDelta(1);
      ctx.channel().config().setAutoRead(false);
      budget.await(this, seen);
      return false;
    }
    reserved += grow;
    body = Arrays.copyOf(body, newLen);
    return true;
  }

  /** Called from any thread when body memory was released. */
  void resumeAfterMemory() {
    ctx.executor()
        .execute(
            () -> {
              if (!pausedMemory) {
                return;
              }
              pausedMemory = false;
              listener.edge.budget.pausedDelta(-1);
              if (state == CLOSED) {
                return;
              }
              if (!pausedPipeline) {
                ctx.channel().config().setAutoRead(true);
              }
              if (state == BODY) {
                process();
              }
              afterInput();
            });
  }

  // ------------------------------------------------------------------ dispatching

  private void dispatch() {
    state = HANDLING;
    ExchangeImpl ex = new ExchangeImpl(this, head, body, bodyLen);
    exchange = ex;
    listener.edge.exchangeStarted();
    Routes.Match m = listener.routes.find(head.method, head.path);
    if (m.handler() == null) {
      if (m.allowed().isEmpty()) {
        listener.metrics.refused(404, "no_route");
        ex.respondInternal(errorResponse(404, "path", "no route for " + head.path, null).build());
      } else {
        listener.metrics.refused(405, "method");
        ex.respondInternal(
            errorResponse(
                    405,
                    "method",
                    "use " + String.join(" or ", m.allowed()) + " for " + head.path,
                    null)
                .header("Allow", String.join(", ", m.allowed()))
                .build());
      }
      return;
    }
    try {
      m.handler().handle(ex);
    } catch (Throwable t) {
      if (t instanceof VirtualMachineError && !(t instanceof StackOverflowError)) {
        ctx.close();
        throw (VirtualMachineError) t;
      }
      log.warn("handler failed on {} {}", head.method, head.path, t);
      if (!ex.answered()) {
        listener.metrics.refused(500, "handler_failed");
        ex.respondInternal(
            errorResponse(500, null, "internal error: " + t.getClass().getSimpleName(), null)
                .build());
      } else if (exchange == ex) {
        ctx.close();
      }
    }
  }

  Response.Builder errorResponse(int status, String param, String message, String type) {
    byte[] json =
        listener.errors.render(
            status, type == null ? Listener.errorType(status) : type, param, message);
    return Response.status(status).contentType("application/json").body(json);
  }

  // ------------------------------------------------------------------ writing

  /** Writes an answer (on the loop); ignored if the client is gone. */
  void writeResponse(ExchangeImpl ex, Response r) {
    if (exchange != ex || state != HANDLING) {
      return;
    }
    boolean close =
        ex.closeAfter
            || !head.keepAlive
            || listener.edge.draining()
            || (inputShut && !requestBytesPending());
    int status = r.statusCode();
    byte[] b = r.body();
    boolean noBody = head.isHead || status == 204 || status == 304;
    ByteBuf out =
        Wire.responseHead(
            ctx.alloc(),
            status,
            timers.dateLine(),
            r.contentType(),
            r.headers(),
            b != null && !noBody ? b.length : 0);
    if (b != null) {
      if (status != 204 && status != 304) {
        out.writeBytes(Wire.CONTENT_LENGTH);
        Wire.writeDecimal(out, b.length);
        out.writeBytes(Wire.CRLF);
      }
      connectionHeader(out, close);
      out.writeBytes(Wire.CRLF);
      if (!noBody) {
        out.writeBytes(b);
      }
      write(out, close);
      finishExchange(ex, close);
      return;
    }
    boolean chunked = !head.http10;
    if (!chunked) {
      close = true;
    }
    if (chunked && !noBody) {
      out.writeBytes(Wire.CHUNKED);
    }
    connectionHeader(out, close);
    out.writeBytes(Wire.CRLF);
    ctx.write(out, ctx.voidPromise()); // flushed by the relay's first drain, with what came by then
    StreamRelay sr = new StreamRelay(this, ex, chunked, close, r.streamErrorTail(), noBody);
    relay = sr;
    try {
      r.stream().subscribe(sr);
    } catch (RuntimeException e) {
      log.warn("stream publisher failed on subscribe for {} {}", head.method, head.path, e);
      ctx.close();
    }
  }

  private void connectionHeader(ByteBuf out, boolean close) {
    if (close) {
      out.writeBytes(Wire.CONNECTION_CLOSE);
    } else if (head.http10) {
      out.writeBytes(Wire.CONNECTION_KEEP_ALIVE);
    }
  }

  private void write(ByteBuf out, boolean close) {
    if (close) {
      ctx.writeAndFlush(out).addListener(ChannelFutureListener.CLOSE);
    } else if (inRead) {
      ctx.write(out, ctx.voidPromise());
      needFlush = true;
    } else {
      ctx.writeAndFlush(out, ctx.voidPromise());
    }
  }

  /** The stream of {@code ex} ended (written); on the loop. */
  void finishStream(ExchangeImpl ex, boolean close) {
    if (exchange != ex) {
      return;
    }
    relay = null;
    if (close) {
      ctx.flush();
      ctx.writeAndFlush(Unpooled.EMPTY_BUFFER).addListener(ChannelFutureListener.CLOSE);
    }
    finishExchange(ex, close);
  }

  /** The stream failed and nothing sensible can be sent: break the connection. */
  void abortStream(ExchangeImpl ex) {
    if (exchange == ex) {
      ctx.close();
    }
  }

  private void finishExchange(ExchangeImpl ex, boolean close) {
    exchange = null;
    relay = null;
    listener.edge.exchangeEnded();
    releaseBody();
    head = null;
    if (close) {
      // the answer's write closes the connection when done: a slow reader gets all of it
      closing();
      releaseCum();
      return;
    }
    state = IDLE;
    fresh = false;
    deadline = timers.now() + listener.idleTimeoutNanos;
    if (pausedPipeline) {
      pausedPipeline = false;
      if (!pausedMemory) {
        ctx.channel().config().setAutoRead(true);
      }
    }
    if (!processing && cum != null) {
      boolean wasInRead = inRead;
      process();
      if (!wasInRead && needFlush) {
        needFlush = false;
        ctx.flush();
      }
    }
    afterInput();
  }

  // ------------------------------------------------------------------ refusing and timeouts

  private void refuse(Refusal r) {
    listener.metrics.refused(r.status, r.reason);
    Response.Builder rb = errorResponse(r.status, r.param, r.getMessage(), null);
    if (r.status == 401) {
      rb.header("WWW-Authenticate", "Bearer");
    }
    Response resp = rb.build();
    byte[] json = resp.body();
    ByteBuf out = ctx.alloc().buffer(256 + json.length);
    out.writeBytes(Wire.statusLine(r.status));
    out.writeBytes(timers.dateLine());
    out.writeBytes(Wire.CONTENT_TYPE);
    Wire.writeLatin1(out, "application/json");
    out.writeBytes(Wire.CRLF);
    if (r.status == 401) {
      Wire.writeLatin1(out, "WWW-Authenticate: Bearer\r\n");
    }
    out.writeBytes(Wire.CONTENT_LENGTH);
    Wire.writeDecimal(out, json.length);
    out.writeBytes(Wire.CRLF);
    out.writeBytes(Wire.CONNECTION_CLOSE);
    out.writeBytes(Wire.CRLF);
    out.writeBytes(json);
    releaseBody();
    releaseCum();
    head = null;
    state = LINGER;
    deadline = timers.now() + LINGER_NANOS;
    if (pausedMemory || pausedPipeline) {
      pausedPipeline = false;
      ctx.channel().config().setAutoRead(true);
    }
    if (inputShut || listener.tls || !(ctx.channel() instanceof DuplexChannel)) {
      // (a client that ended its input sends nothing more: there is nothing to linger for)
      if (inputShut) {
        closing();
      }
      ctx.writeAndFlush(out).addListener(ChannelFutureListener.CLOSE);
      return;
    }
    // Half-close and keep reading (and discarding) for a while, so that a client still sending
    // its body reads the refusal instead of a reset.
    ctx.writeAndFlush(out)
        .addListener(
            f -> {
              if (f.isSuccess() && ctx.channel().isActive()) {
                ((DuplexChannel) ctx.channel())
                    .shutdownOutput()
                    .addListener(
                        g -> {
                          if (!g.isSuccess()) {
                            ctx.close();
                          }
                        });
              } else {
                ctx.close();
              }
            });
  }

  /** Checks the deadline of the current state; run by the loop's sweep. */
  void check(long now) {
    if (unwritableSince >= 0
        && now - unwritableSince >= listener.writeTimeoutNanos
        && state != CLOSED) {
      listener.metrics.timeout("write");
      state = CLOSED;
      ctx.close();
      return;
    }
    if (inputShut && state == HANDLING && resetWhileHalfClosed()) {
      ctx.close(); // the client is gone: channelInactive runs its exchange's client-gone actions
      return;
    }
    switch (state) {
      case IDLE:
        if (now - deadline >= 0) {
          listener.metrics.timeout(fresh ? "header" : "idle");
          state = CLOSED;
          ctx.close();
        }
        break;
      case HEAD:
        if (now - deadline >= 0) {
          listener.metrics.timeout("header");
          refuse(
              new Refusal(
                  408,
                  "headers",
                  "header_timeout",
                  "request headers not received within "
                      + listener.limits.headerTimeout().toMillis()
                      + " ms"));
        }
        break;
      case BODY:
        if (now - deadline >= 0) {
          listener.metrics.timeout("body");
          refuse(
              new Refusal(
                  408,
                  "body",
                  "body_timeout",
                  "request body not received within "
                      + listener.limits.bodyTimeout().toMillis()
                      + " ms"));
        }
        break;
      case LINGER:
        if (now - deadline >= 0) {
          ctx.close();
        }
        break;
      case CLOSING:
        {
          // the write timeout counts from the last progress of the last answer's write
          ChannelOutboundBuffer ob = ctx.channel().unsafe().outboundBuffer();
          long pending = ob == null ? 0 : ob.totalPendingWriteBytes();
          if (pending != closingPending) {
            closingPending = pending;
            deadline = now + listener.writeTimeoutNanos;
          } else if (now - deadline >= 0) {
            listener.metrics.timeout("write");
            state = CLOSED;
            ctx.close();
          }
          break;
        }
      default:
        break;
    }
  }

  /**
   * True if the kernel reports that the peer of a half-closed connection reset it. Reads no longer
   * report anything once the input is shut down, so without this a client that half-closed and then
   * reset would be noticed only by the first failed write of its answer. Epoll only (one {@code
   * getsockopt(TCP_INFO)}); on NIO the failed write is what tells.
   */
  private boolean resetWhileHalfClosed() {
    if (!(ctx.channel() instanceof EpollSocketChannel ch) || !ch.isActive()) {
      return false;
    }
    try {
      EpollTcpInfo info = timers.tcpInfo();
      return ch.tcpInfo(info).state() == TCP_CLOSE;
    } catch (RuntimeException e) {
      return false; // the socket is closing already
    }
  }

  /**
   * Adds this connection to reading, handling, waiting, stalled, half-closed (traffic listener
   * only).
   */
  void count(int[] counts) {
    if (!listener.name.equals("traffic")) {
      return;
    }
    if (state == HEAD || state == BODY) {
      counts[0]++;
    } else if (state == HANDLING) {
      counts[1]++;
    } else if (state == IDLE) {
      counts[2]++;
    }
    if (unwritableSince >= 0) {
      counts[3]++;
    }
    if (inputShut && state != CLOSED) {
      counts[4]++;
    }
  }

  /** Closes the connection if it is between requests (server shutdown). */
  void closeIfIdle() {
    if (state == IDLE) {
      ctx.close();
    }
  }

  private void releaseCum() {
    if (cum != null) {
      cum.release();
      cum = null;
    }
    scanned = 0;
  }

  private void releaseBody() {
    if (reserved > 0) {
      long r = reserved;
      reserved = 0;
      listener.edge.budget.release(r);
    }
    body = EMPTY;
    bodyLen = 0;
  }
}
