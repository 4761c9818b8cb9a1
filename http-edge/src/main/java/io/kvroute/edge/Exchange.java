package io.kvroute.edge;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executor;

/**
 * One request and the means to answer it, exactly once, from any thread.
 *
 * <p>The request is complete when the handler runs: the body has been received (within the server's
 * limits) and is held in memory. The request's accessors stay valid after the answer.
 */
public interface Exchange {
  /** The method, e.g. {@code POST}. */
  String method();

  /** The path, still percent-encoded, without the query; {@code /} at least. */
  String path();

  /** The raw query (after {@code ?}), or {@code null} if there is none. */
  String query();

  /** {@code HTTP/1.1} or {@code HTTP/1.0}. */
  String protocol();

  /**
   * The first value of a header.
   *
   * @param name case-insensitive
   * @return the value without surrounding whitespace, or {@code null}
   */
  String header(String name);

  /**
   * Every value of a header, in order.
   *
   * @param name case-insensitive
   * @return the values; empty if none
   */
  List<String> headers(String name);

  /** Every header, names as sent, in order; built on each call. */
  Map<String, List<String>> headers();

  /** The body, exactly {@link #bodyLength()} bytes; empty when there is none. */
  byte[] body();

  /** The body's length. */
  int bodyLength();

  /** The body as a read-only buffer, without copying. */
  ByteBuffer bodyBuffer();

  /** The client's address. */
  InetSocketAddress remoteAddress();

  /** Whether the request came over TLS. */
  boolean secure();

  /**
   * The connection's event loop, for work that must not block and is cheap (continuations that then
   * answer). Tasks run in order.
   */
  Executor executor();

  /**
   * Answers with a whole body.
   *
   * @param status 200 to 599
   * @param contentType the {@code Content-Type}
   * @param body the bytes (copied before this returns)
   * @throws IllegalStateException if the exchange was answered already
   */
  void respond(int status, String contentType, byte[] body);

  /**
   * Answers.
   *
   * @param response a whole or streamed answer
   * @throws IllegalStateException if the exchange was answered already
   */
  void respond(Response response);

  /**
   * Answers with a JSON error body rendered by the server's {@link ErrorRenderer}, and counts it.
   *
   * @param status 400 to 599
   * @param type e.g. {@link ErrorRenderer#INVALID_REQUEST}
   * @param param the request part at fault, or {@code null}
   * @param message for a person
   * @throws IllegalStateException if the exchange was answered already
   */
  void error(int status, String type, String param, String message);

  /** Closes the connection once the answer is sent. */
  void closeAfterResponse();

  /**
   * Runs {@code action} if the client goes away before the answer is complete (once, on the event
   * loop). Use it to cancel upstream work. Runs at once if the client is gone already.
   *
   * @param action what to cancel
   */
  void onClientGone(Runnable action);

  /** Whether {@code respond} or {@code error} was called. */
  boolean answered();
}
