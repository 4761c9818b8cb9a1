package io.kvroute.edge.internal;

import io.netty.buffer.ByteBuf;

/**
 * The framing of one chunked request body (RFC 9112, section 7.1), strictly: chunk-size lines end
 * with CRLF, at most 8 hex digits, extensions without control characters, data followed by CRLF,
 * trailers bounded like headers and never folded. It consumes framing bytes from the connection's
 * input and says how many data bytes the caller may copy next; the caller copies them (within its
 * memory budget) and reports them with {@link #consumed}.
 *
 * <p>Not thread-safe: one per request, on the connection's event loop.
 */
final class ChunkedBody {
  /** {@link #advance}: the body is complete (last chunk and trailers read). */
  static final long COMPLETE = -1;

  /** {@link #advance}: more input is needed. */
  static final long MORE = -2;

  private static final int SIZE = 0;
  private static final int DATA = 1;
  private static final int DATA_END = 2;
  private static final int TRAILER = 3;
  private static final int MAX_CHUNK_LINE = 1024;

  private final int maxBodyBytes;
  private final int maxTrailerBytes;
  private int state = SIZE;
  private long remaining;
  private int trailerBytes;

  ChunkedBody(int maxBodyBytes, int maxTrailerBytes) {
    this.maxBodyBytes = maxBodyBytes;
    this.maxTrailerBytes = maxTrailerBytes;
  }

  /**
   * Reads framing from {@code in} until data bytes are available, the body is complete, or more
   * input is needed.
   *
   * @param in the connection's input
   * @param bodySoFar data bytes of this body read so far (for the size limit)
   * @return how many data bytes can be copied from {@code in} now (at least 1), {@link #COMPLETE}
   *     or {@link #MORE}
   * @throws Refusal on malformed framing or a body over the limit
   */
  long advance(ByteBuf in, long bodySoFar) throws Refusal {
    while (in.isReadable()) {
      switch (state) {
        case SIZE:
          if (!readSizeLine(in, bodySoFar)) {
            return MORE;
          }
          break;
        case DATA:
          return Math.min(remaining, in.readableBytes());
        case DATA_END:
          {
            int ri = in.readerIndex();
            if (in.readableBytes() < 2) {
              if (in.getByte(ri) != '\r') {
                throw bad("chunk data must end with CRLF");
              }
              return MORE;
            }
            if (in.getByte(ri) != '\r' || in.getByte(ri + 1) != '\n') {
              throw bad("chunk data must end with CRLF");
            }
            in.skipBytes(2);
            state = SIZE;
            break;
          }
        default:
          {
            int line = readTrailerLine(in);
            if (line < 0) {
              return MORE;
            }
            if (line == 2) {
              return COMPLETE;
            }
          }
      }
    }
    return MORE;
  }

  /** The caller copied {@code n} data bytes out of the input. */
  void consumed(int n) {
    remaining -= n;
    if (remaining == 0) {
      state = DATA_END;
    }
  }

  private boolean readSizeLine(ByteBuf in, long bodySoFar) throws Refusal {
    int ri = in.readerIndex();
    int lf = in.indexOf(ri, ri + Math.min(in.readableBytes(), MAX_CHUNK_LINE), (byte) '\n');
    if (lf < 0) {
      if (in.readableBytes() >= MAX_CHUNK_LINE) {
        throw bad("chunk size line too long");
      }
      return false;
    }
    if (lf == ri || in.getByte(lf - 1) != '\r') {
      throw bad("chunk size line must end with CRLF");
    }
    long size = 0;
    int k = ri;
    int digits = 0;
    int end = lf - 1;
    while (k < end) {
      int d = Character.digit(in.getByte(k), 16);
      if (d < 0) {
        break;
      }
      if (++digits > 8) {
        throw new Refusal(413, "body", "body_too_large", "chunk size exceeds the body limit");
      }
      size = size << 4 | d;
      k++;
    }
    if (digits == 0) {
      throw bad("malformed chunk size");
    }
    while (k < end && (in.getByte(k) == ' ' || in.getByte(k) == '\t')) {
      k++;
    }
    if (k < end) {
      if (in.getByte(k) != ';') {
        throw bad("malformed chunk size");
      }
      for (int j = k; j < end; j++) {
        byte c = in.getByte(j);
        if ((c < ' ' && c != '\t') || c == 0x7f) {
          throw bad("control character in a chunk extension");
        }
      }
    }
    if (bodySoFar + size > maxBodyBytes) {
      throw new Refusal(
          413, "body", "body_too_large", "request body exceeds " + maxBodyBytes + " bytes");
    }
    in.readerIndex(lf + 1);
    if (size == 0) {
      state = TRAILER;
    } else {
      remaining = size;
      state = DATA;
    }
    return true;
  }

  /** Reads one trailer line; its length (2 for the empty line that ends the body), or -1. */
  private int readTrailerLine(ByteBuf in) throws Refusal {
    int ri = in.readerIndex();
    int lf = in.indexOf(ri, in.writerIndex(), (byte) '\n');
    if (lf < 0) {
      if (trailerBytes + in.readableBytes() > maxTrailerBytes) {
        throw new Refusal(431, "headers", "header_too_large", "chunked trailers are too large");
      }
      return -1;
    }
    if (lf == ri || in.getByte(lf - 1) != '\r') {
      throw bad("trailer lines must end with CRLF");
    }
    int len = lf + 1 - ri;
    trailerBytes += len;
    if (trailerBytes > maxTrailerBytes) {
      throw new Refusal(431, "headers", "header_too_large", "chunked trailers are too large");
    }
    byte first = in.getByte(ri);
    in.readerIndex(lf + 1);
    if (len != 2 && (first == ' ' || first == '\t')) {
      throw new Refusal(400, "headers", "folded_header", "folded trailer lines are not accepted");
    }
    return len;
  }

  private static Refusal bad(String message) {
    return new Refusal(400, "body", "bad_chunk", message);
  }
}
