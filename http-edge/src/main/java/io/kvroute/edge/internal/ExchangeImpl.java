package io.kvroute.edge.internal;

import io.kvroute.edge.Exchange;
import io.kvroute.edge.Response;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One request on a {@link Http1Connection}. The request side is immutable; answering is a
 * compare-and-set, callable from any thread (the write happens on the connection's loop).
 * Client-gone actions are confined to the loop.
 */
final class ExchangeImpl implements Exchange {
  private static final Logger log = LoggerFactory.getLogger(ExchangeImpl.class);

  private final Http1Connection conn;
  private final RequestHead head;
  private final byte[] body;
  private final int bodyLength;
  private final AtomicBoolean answered = new AtomicBoolean();
  volatile boolean closeAfter;
  private byte[] exactBody;
  private List<Runnable> goneActions;
  private boolean gone;

  ExchangeImpl(Http1Connection conn, RequestHead head, byte[] body, int bodyLength) {
    this.conn = conn;
    this.head = head;
    this.body = body;
    this.bodyLength = bodyLength;
  }

  @Override
  public String method() {
    return head.method;
  }

  @Override
  public String path() {
    return head.path;
  }

  @Override
  public String query() {
    return head.query;
  }

  @Override
  public String protocol() {
    return head.http10 ? "HTTP/1.0" : "HTTP/1.1";
  }

  @Override
  public String header(String name) {
    return head.header(name);
  }

  @Override
  public List<String> headers(String name) {
    return head.headers(name);
  }

  @Override
  public Map<String, List<String>> headers() {
    return head.headerMap();
  }

  @Override
  public synchronized byte[] body() {
    if (body.length == bodyLength) {
      return body;
    }
    if (exactBody == null) {
      exactBody = Arrays.copyOf(body, bodyLength);
    }
    return exactBody;
  }

  @Override
  public int bodyLength() {
    return bodyLength;
  }

  @Override
  public ByteBuffer bodyBuffer() {
    return ByteBuffer.wrap(body, 0, bodyLength).asReadOnlyBuffer();
  }

  @Override
  public InetSocketAddress remoteAddress() {
    return (InetSocketAddress) conn.ctx().channel().remoteAddress();
  }

  @Override
  public boolean secure() {
    return conn.listener.tls;
  }

  @Override
  public Executor executor() {
    return conn.ctx().executor();
  }

  @Override
  public void respond(int status, String contentType, byte[] bytes) {
    byte[] b = conn.inLoop() ? bytes : bytes.clone();
    respond(Response.status(status).contentType(contentType).body(b).build());
  }

  @Override
  public void respond(Response response) {
    if (!answered.compareAndSet(false, true)) {
      throw new IllegalStateException("the request was answered already");
    }
    write(response);
  }

  /** Answers from the connection itself (404, 405, 500), which never answers twice. */
  void respondInternal(Response response) {
    if (answered.compareAndSet(false, true)) {
      write(response);
    }
  }

  private void write(Response response) {
    if (conn.inLoop()) {
      conn.writeResponse(this, response);
    } else {
      conn.ctx().executor().execute(() -> conn.writeResponse(this, response));
    }
  }

  @Override
  public void error(int status, String type, String param, String message) {
    if (status < 400 || status > 599) {
      throw new IllegalArgumentException("error status must be 400 to 599, was " + status);
    }
    conn.listener.metrics.refused(status, "handler");
    respond(conn.errorResponse(status, param, message, type).build());
  }

  @Override
  public void closeAfterResponse() {
    closeAfter = true;
  }

  @Override
  public void onClientGone(Runnable action) {
    if (conn.inLoop()) {
      addGoneAction(action);
    } else {
      conn.ctx().executor().execute(() -> addGoneAction(action));
    }
  }

  private void addGoneAction(Runnable action) {
    if (gone) {
      run(action);
      return;
    }
    if (goneActions == null) {
      goneActions = new ArrayList<>(2);
    }
    goneActions.add(action);
  }

  /** The client went away before the answer was complete (on the loop). */
  void clientGone() {
    if (gone) {
      return;
    }
    gone = true;
    if (goneActions != null) {
      for (Runnable r : goneActions) {
        run(r);
      }
      goneActions = null;
    }
  }

  private static void run(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      log.warn("client-gone action failed", e);
    }
  }

  @Override
  public boolean answered() {
    return answered.get();
  }
}
