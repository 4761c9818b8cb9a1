package io.kvroute.edge.internal;

import io.netty.buffer.ByteBuf;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/** HTTP/1.1 bytes: status lines, headers, chunk framing. Stateless; thread-safe. */
final class Wire {
  private Wire() {}

  static final byte[] CRLF = {'\r', '\n'};
  static final byte[] CONTINUE = ascii("HTTP/1.1 100 Continue\r\n\r\n");
  static final byte[] LAST_CHUNK = ascii("0\r\n\r\n");
  static final byte[] CONNECTION_CLOSE = ascii("Connection: close\r\n");
  static final byte[] CONNECTION_KEEP_ALIVE = ascii("Connection: keep-alive\r\n");
  static final byte[] CONTENT_LENGTH = ascii("Content-Length: ");
  static final byte[] CONTENT_TYPE = ascii("Content-Type: ");
  static final byte[] CHUNKED = ascii("Transfer-Encoding: chunked\r\n");
  private static final byte[][] STATUS_LINES = new byte[600][];
  private static final DateTimeFormatter DATE =
      DateTimeFormatter.RFC_1123_DATE_TIME.withZone(ZoneOffset.UTC);
  private static final byte[] HEX = ascii("0123456789abcdef");

  static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.ISO_8859_1);
  }

  static String reason(int status) {
    switch (status) {
      case 100:
        return "Continue";
      case 200:
        return "OK";
      case 201:
        return "Created";
      case 202:
        return "Accepted";
      case 204:
        return "No Content";
      case 301:
        return "Moved Permanently";
      case 302:
        return "Found";
      case 304:
        return "Not Modified";
      case 400:
        return "Bad Request";
      case 401:
        return "Unauthorized";
      case 403:
        return "Forbidden";
      case 404:
        return "Not Found";
      case 405:
        return "Method Not Allowed";
      case 408:
        return "Request Timeout";
      case 409:
        return "Conflict";
      case 411:
        return "Length Required";
      case 413:
        return "Content Too Large";
      case 414:
        return "URI Too Long";
      case 415:
        return "Unsupported Media Type";
      case 417:
        return "Expectation Failed";
      case 422:
        return "Unprocessable Content";
      case 429:
        return "Too Many Requests";
      case 431:
        return "Request Header Fields Too Large";
      case 499:
        return "Client Closed Request";
      case 500:
        return "Internal Server Error";
      case 501:
        return "Not Implemented";
      case 502:
        return "Bad Gateway";
      case 503:
        return "Service Unavailable";
      case 504:
        return "Gateway Timeout";
      case 505:
        return "HTTP Version Not Supported";
      default:
        return "Status " + status;
    }
  }

  static byte[] statusLine(int status) {
    byte[] b = STATUS_LINES[status];
    if (b == null) {
      b = ascii("HTTP/1.1 " + status + " " + reason(status) + "\r\n");
      STATUS_LINES[status] = b; // benign race: equal arrays
    }
    return b;
  }

  static byte[] dateLine(long epochSecond) {
    return ascii("Date: " + DATE.format(Instant.ofEpochSecond(epochSecond)) + "\r\n");
  }

  static void writeDecimal(ByteBuf out, long v) {
    if (v < 10) {
      out.writeByte((int) ('0' + v));
      return;
    }
    byte[] tmp = new byte[20];
    int i = tmp.length;
    while (v > 0) {
      tmp[--i] = (byte) ('0' + v % 10);
      v /= 10;
    }
    out.writeBytes(tmp, i, tmp.length - i);
  }

  static void writeHex(ByteBuf out, int v) {
    int shift = 28;
    while (shift > 0 && (v >>> shift & 0xf) == 0) {
      shift -= 4;
    }
    for (; shift >= 0; shift -= 4) {
      out.writeByte(HEX[v >>> shift & 0xf]);
    }
  }

  static void writeLatin1(ByteBuf out, String s) {
    out.writeCharSequence(s, StandardCharsets.ISO_8859_1);
  }

  private static final boolean[] TOKEN = new boolean[256];

  static {
    for (int c = '!'; c < 0x7f; c++) {
      TOKEN[c] = "()<>@,;:\\\"/[]?={}".indexOf(c) < 0;
    }
  }

  /** Whether {@code c} may appear in a method or header name (RFC 9110 tchar). */
  static boolean isTokenChar(byte c) {
    return TOKEN[c & 0xff];
  }

  private static final java.util.Set<String> MANAGED_HEADERS =
      java.util.Set.of("content-length", "transfer-encoding", "connection", "date", "content-type");

  /**
   * A buffer holding a response's status line, {@code Date}, {@code Content-Type} and the given
   * headers (those the edge manages itself skipped), with room for {@code bodyBytes} more.
   *
   * @param headers name, value, name, value...
   */
  static ByteBuf responseHead(
      io.netty.buffer.ByteBufAllocator alloc,
      int status,
      byte[] dateLine,
      String contentType,
      java.util.List<String> headers,
      int bodyBytes) {
    ByteBuf out = alloc.buffer(256 + bodyBytes);
    out.writeBytes(statusLine(status));
    out.writeBytes(dateLine);
    if (contentType != null) {
      out.writeBytes(CONTENT_TYPE);
      writeLatin1(out, contentType);
      out.writeBytes(CRLF);
    }
    for (int i = 0; i < headers.size(); i += 2) {
      String name = headers.get(i);
      if (MANAGED_HEADERS.contains(name.toLowerCase(java.util.Locale.ROOT))) {
        continue;
      }
      writeLatin1(out, name);
      out.writeByte(':').writeByte(' ');
      writeLatin1(out, headers.get(i + 1));
      out.writeBytes(CRLF);
    }
    return out;
  }
}
