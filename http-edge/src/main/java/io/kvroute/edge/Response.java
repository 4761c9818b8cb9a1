package io.kvroute.edge;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.Flow;
import java.util.function.Function;

/**
 * An answer: a status, headers, and either a whole body or a streamed one. Immutable; built with
 * {@link #status(int)}.
 *
 * <p>A whole body is sent with {@code Content-Length}. A streamed body is read from a {@link
 * Flow.Publisher} of byte buffers with back-pressure (the server requests more only while the
 * client's connection can take it) and sent chunked (close-delimited to HTTP/1.0 clients); when the
 * client goes away the subscription is cancelled. If the publisher fails, {@link
 * #streamErrorTail()} decides what the client sees: the bytes it returns are sent and the body is
 * ended normally; when it returns {@code null} (the default) the connection is closed without
 * ending the body, so the client sees a broken answer rather than a short one that looks complete.
 *
 * <p>The server adds {@code Date}, {@code Content-Length} or {@code Transfer-Encoding}, and {@code
 * Connection} as needed; such headers given here are ignored.
 */
public final class Response {
  private final int status;
  private final String contentType;
  private final List<String> headers;
  private final byte[] body;
  private final Flow.Publisher<ByteBuffer> stream;
  private final Function<Throwable, byte[]> streamErrorTail;

  private Response(Builder b) {
    this.status = b.status;
    this.contentType = b.contentType;
    this.headers = List.copyOf(b.headers);
    this.body = b.body;
    this.stream = b.stream;
    this.streamErrorTail = b.streamErrorTail;
  }

  /**
   * Starts an answer with {@code status}.
   *
   * @param status 200 to 599 (1xx answers are the server's business)
   * @return a builder
   */
  public static Builder status(int status) {
    return new Builder(status);
  }

  /** The status code. */
  public int statusCode() {
    return status;
  }

  /** The {@code Content-Type}, or {@code null}. */
  public String contentType() {
    return contentType;
  }

  /** Extra headers as name, value, name, value… */
  public List<String> headers() {
    return headers;
  }

  /** The whole body, or {@code null} for a streamed answer. */
  public byte[] body() {
    return body;
  }

  /** The streamed body, or {@code null} for a whole one. */
  public Flow.Publisher<ByteBuffer> stream() {
    return stream;
  }

  /** What to send when the stream fails; {@code null} result: break the connection. */
  public Function<Throwable, byte[]> streamErrorTail() {
    return streamErrorTail;
  }

  /** Builds a {@link Response}. */
  public static final class Builder {
    private final int status;
    private String contentType;
    private final List<String> headers = new ArrayList<>(4);
    private byte[] body;
    private Flow.Publisher<ByteBuffer> stream;
    private Function<Throwable, byte[]> streamErrorTail = t -> null;

    private Builder(int status) {
      if (status < 200 || status > 599) {
        throw new IllegalArgumentException("status must be between 200 and 599, was " + status);
      }
      this.status = status;
    }

    /**
     * Sets the {@code Content-Type}.
     *
     * @param type e.g. {@code application/json}
     * @return this builder
     */
    public Builder contentType(String type) {
      checkValue("Content-Type", type);
      this.contentType = type;
      return this;
    }

    /**
     * Adds a header.
     *
     * @param name a token (letters, digits, {@code -} …)
     * @param value text without CR, LF or other control characters
     * @return this builder
     * @throws IllegalArgumentException if the name or value could split the response
     */
    public Builder header(String name, String value) {
      Objects.requireNonNull(name, "name");
      if (name.isEmpty()) {
        throw new IllegalArgumentException("empty header name");
      }
      for (int i = 0; i < name.length(); i++) {
        char c = name.charAt(i);
        if (c <= ' ' || c >= 0x7f || "()<>@,;:\\\"/[]?={}".indexOf(c) >= 0) {
          throw new IllegalArgumentException("invalid header name: " + name);
        }
      }
      checkValue(name, value);
      headers.add(name);
      headers.add(value);
      return this;
    }

    private static void checkValue(String name, String value) {
      Objects.requireNonNull(value, name);
      for (int i = 0; i < value.length(); i++) {
        char c = value.charAt(i);
        if ((c < ' ' && c != '\t') || c == 0x7f || c > 0xff) {
          throw new IllegalArgumentException("invalid character in the value of header " + name);
        }
      }
    }

    /**
     * A whole body.
     *
     * @param body the bytes (not copied: do not change them afterwards)
     * @return this builder
     */
    public Builder body(byte[] body) {
      this.body = Objects.requireNonNull(body, "body");
      this.stream = null;
      return this;
    }

    /**
     * A whole body of UTF-8 text.
     *
     * @param text the text
     * @return this builder
     */
    public Builder body(String text) {
      return body(text.getBytes(StandardCharsets.UTF_8));
    }

    /**
     * A streamed body.
     *
     * @param publisher subscribed once, when the answer is sent
     * @return this builder
     */
    public Builder stream(Flow.Publisher<ByteBuffer> publisher) {
      this.stream = Objects.requireNonNull(publisher, "publisher");
      this.body = null;
      return this;
    }

    /**
     * What to send when the stream fails after the answer started (e.g. an SSE error event); the
     * body then ends normally. Returning {@code null} breaks the connection instead.
     *
     * @param tail the failure to the last bytes, or {@code null}
     * @return this builder
     */
    public Builder streamErrorTail(Function<Throwable, byte[]> tail) {
      this.streamErrorTail = Objects.requireNonNull(tail, "tail");
      return this;
    }

    /** Builds the answer (an empty whole body unless one was set). */
    public Response build() {
      if (body == null && stream == null) {
        body = new byte[0];
      }
      return new Response(this);
    }
  }
}
