package io.kvroute.edge.internal;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A parsed request line and header block. Parsing is strict (RFC 9112): one space between the
 * request-line parts, token methods and header names, no control characters, no folded header
 * lines, CRLF line ends (bare LF is refused before this runs), one {@code Host} on HTTP/1.1, no
 * {@code Content-Length} with {@code Transfer-Encoding}, no conflicting lengths, only {@code
 * chunked} as a transfer coding. Headers stay in the copied head bytes; values are made into
 * strings when asked for.
 *
 * <p>Immutable after {@link #parse}; safe to read from any thread once published.
 */
final class RequestHead {
  private static final String[] METHODS = {"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS"};

  final byte[] b;
  String method;
  String path;
  String query;
  boolean http10;
  boolean keepAlive;
  boolean expectContinue;
  boolean chunked;
  long contentLength = -1;
  boolean isHead;
  private int[] headers;
  private int count;

  private RequestHead(byte[] b) {
    this.b = b;
  }

  /**
   * Parses {@code b}, which holds exactly the head (ending with the empty line).
   *
   * @throws Refusal if the head is malformed or asks for something unsupported
   */
  static RequestHead parse(byte[] b, int maxHeaders, boolean requireHost) throws Refusal {
    RequestHead h = new RequestHead(b);
    h.parse(maxHeaders, requireHost);
    return h;
  }

  private static Refusal bad(String reason, String param, String message) {
    return new Refusal(400, param, reason, message);
  }

  private void parse(int maxHeaders, boolean requireHost) throws Refusal {
    int end = b.length;
    int lineEnd = indexOf(0, end, (byte) '\n');
    int le = lineEnd - 1; // CR, checked by the caller's scan
    int sp1 = indexOf(0, le, (byte) ' ');
    if (sp1 <= 0) {
      throw bad("malformed", "request_line", "malformed request line");
    }
    int sp2 = indexOf(sp1 + 1, le, (byte) ' ');
    if (sp2 < 0 || sp2 == sp1 + 1 || indexOf(sp2 + 1, le, (byte) ' ') >= 0) {
      throw bad("malformed", "request_line", "malformed request line");
    }
    for (int i = 0; i < sp1; i++) {
      if (!Wire.isTokenChar(b[i])) {
        throw bad("malformed", "method", "malformed request method");
      }
    }
    method = methodString(sp1);
    isHead = method.equals("HEAD");
    if (le - sp2 - 1 == 8 && startsWith(sp2 + 1, "HTTP/1.")) {
      byte minor = b[sp2 + 8];
      if (minor == '1') {
        http10 = false;
      } else if (minor == '0') {
        http10 = true;
      } else {
        throw new Refusal(505, "version", "version", "HTTP version not supported; use HTTP/1.1");
      }
    } else if (startsWith(sp2 + 1, "HTTP/")) {
      throw new Refusal(505, "version", "version", "HTTP version not supported; use HTTP/1.1");
    } else {
      throw bad("malformed", "request_line", "malformed request line");
    }
    int ts = sp1 + 1;
    for (int i = ts; i < sp2; i++) {
      if (b[i] <= ' ' || b[i] >= 0x7f) {
        throw bad("malformed", "target", "malformed request target");
      }
    }
    if (b[ts] != '/') {
      int scheme = startsWith(ts, "http://") ? ts + 7 : startsWith(ts, "https://") ? ts + 8 : -1;
      if (scheme < 0) {
        throw bad("malformed", "target", "malformed request target; send an absolute path");
      }
      int slash = indexOf(scheme, sp2, (byte) '/');
      int qm = indexOf(scheme, sp2, (byte) '?');
      ts = slash < 0 || (qm >= 0 && qm < slash) ? -1 : slash;
      if (ts < 0) {
        path = "/";
        query = qm < 0 ? null : latin1(qm + 1, sp2);
      }
    }
    if (ts >= 0) {
      int q = indexOf(ts, sp2, (byte) '?');
      int pe = q < 0 ? sp2 : q;
      path = latin1(ts, pe);
      query = q < 0 ? null : latin1(q + 1, sp2);
    }
    // headers
    headers = new int[Math.min(maxHeaders, 16) * 4];
    keepAlive = !http10;
    boolean haveLength = false;
    boolean haveEncoding = false;
    int hosts = 0;
    int i = lineEnd + 1;
    while (i < end) {
      int nl = indexOf(i, end, (byte) '\n');
      int e = nl - 1;
      if (e == i) {
        break; // the empty line
      }
      if (b[i] == ' ' || b[i] == '\t') {
        throw bad("folded_header", "headers", "folded header lines are not accepted");
      }
      int colon = indexOf(i, e, (byte) ':');
      if (colon <= i) {
        throw bad("malformed", "headers", "malformed header line");
      }
      for (int k = i; k < colon; k++) {
        if (!Wire.isTokenChar(b[k])) {
          throw bad("malformed", "headers", "malformed header name");
        }
      }
      int vs = colon + 1;
      while (vs < e && (b[vs] == ' ' || b[vs] == '\t')) {
        vs++;
      }
      int ve = e;
      while (ve > vs && (b[ve - 1] == ' ' || b[ve - 1] == '\t')) {
        ve--;
      }
      for (int k = vs; k < ve; k++) {
        if ((b[k] < ' ' && b[k] != '\t') || b[k] == 0x7f) {
          throw bad("malformed", "headers", "control character in a header value");
        }
      }
      if (count == maxHeaders) {
        throw new Refusal(
            431, "headers", "too_many_headers", "more than " + maxHeaders + " request headers");
      }
      if (count * 4 == headers.length) {
        headers = java.util.Arrays.copyOf(headers, headers.length * 2);
      }
      int h = count++ * 4;
      headers[h] = i;
      headers[h + 1] = colon;
      headers[h + 2] = vs;
      headers[h + 3] = ve;
      int nameLen = colon - i;
      if (nameLen == 14 && equalsIgnoreCase(i, "content-length")) {
        long v = parseLength(vs, ve);
        if (haveLength && v != contentLength) {
          throw bad("smuggling", "Content-Length", "conflicting Content-Length headers");
        }
        haveLength = true;
        contentLength = v;
      } else if (nameLen == 17 && equalsIgnoreCase(i, "transfer-encoding")) {
        if (haveEncoding || ve - vs != 7 || !equalsIgnoreCase(vs, "chunked")) {
          throw new Refusal(
              501,
              "Transfer-Encoding",
              "transfer_encoding",
              "only Transfer-Encoding: chunked is supported");
        }
        haveEncoding = true;
        chunked = true;
      } else if (nameLen == 4 && equalsIgnoreCase(i, "host")) {
        hosts++;
      } else if (nameLen == 10 && equalsIgnoreCase(i, "connection")) {
        if (containsToken(vs, ve, "close")) {
          keepAlive = false;
        } else if (http10 && containsToken(vs, ve, "keep-alive")) {
          keepAlive = true;
        }
      } else if (nameLen == 6 && equalsIgnoreCase(i, "expect")) {
        if (ve - vs == 12 && equalsIgnoreCase(vs, "100-continue")) {
          expectContinue = !http10;
        } else {
          throw new Refusal(417, "Expect", "expectation", "only Expect: 100-continue is supported");
        }
      }
      i = nl + 1;
    }
    if (chunked && (haveLength || http10)) {
      throw bad(
          "smuggling",
          "Transfer-Encoding",
          http10
              ? "Transfer-Encoding is not allowed in HTTP/1.0"
              : "both Content-Length and Transfer-Encoding were sent");
    }
    if (hosts > 1) {
      throw bad("host", "Host", "more than one Host header");
    }
    if (hosts == 0 && !http10 && requireHost) {
      throw bad("host", "Host", "HTTP/1.1 requests need a Host header");
    }
  }

  private long parseLength(int s, int e) throws Refusal {
    if (e == s || e - s > 18) {
      throw bad("malformed", "Content-Length", "invalid Content-Length");
    }
    long v = 0;
    for (int k = s; k < e; k++) {
      int d = b[k] - '0';
      if (d < 0 || d > 9) {
        throw bad("malformed", "Content-Length", "invalid Content-Length");
      }
      v = v * 10 + d;
    }
    return v;
  }

  String header(String name) {
    for (int h = 0; h < count * 4; h += 4) {
      if (nameEquals(h, name)) {
        return latin1(headers[h + 2], headers[h + 3]);
      }
    }
    return null;
  }

  List<String> headers(String name) {
    List<String> out = new ArrayList<>(1);
    for (int h = 0; h < count * 4; h += 4) {
      if (nameEquals(h, name)) {
        out.add(latin1(headers[h + 2], headers[h + 3]));
      }
    }
    return out;
  }

  Map<String, List<String>> headerMap() {
    Map<String, List<String>> out = new LinkedHashMap<>();
    for (int h = 0; h < count * 4; h += 4) {
      out.computeIfAbsent(latin1(headers[h], headers[h + 1]), k -> new ArrayList<>(1))
          .add(latin1(headers[h + 2], headers[h + 3]));
    }
    return out;
  }

  private boolean nameEquals(int h, String name) {
    int s = headers[h];
    int len = headers[h + 1] - s;
    if (len != name.length()) {
      return false;
    }
    for (int k = 0; k < len; k++) {
      int c = b[s + k];
      int d = name.charAt(k);
      if (c != d && (c | 0x20) != (d | 0x20)) {
        return false;
      }
      if (c != d && ((c | 0x20) < 'a' || (c | 0x20) > 'z')) {
        return false;
      }
    }
    return true;
  }

  private String latin1(int s, int e) {
    return new String(b, s, e - s, StandardCharsets.ISO_8859_1);
  }

  private int indexOf(int from, int to, byte c) {
    for (int i = from; i < to; i++) {
      if (b[i] == c) {
        return i;
      }
    }
    return -1;
  }

  private boolean startsWith(int at, String s) {
    if (at + s.length() > b.length) {
      return false;
    }
    for (int i = 0; i < s.length(); i++) {
      if (b[at + i] != s.charAt(i)) {
        return false;
      }
    }
    return true;
  }

  /** Compares with a lower-case ASCII word. */
  private boolean equalsIgnoreCase(int at, String lower) {
    if (at + lower.length() > b.length) {
      return false;
    }
    for (int i = 0; i < lower.length(); i++) {
      int c = b[at + i];
      if (c >= 'A' && c <= 'Z') {
        c += 32;
      }
      if (c != lower.charAt(i)) {
        return false;
      }
    }
    return true;
  }

  private boolean containsToken(int s, int e, String token) {
    int i = s;
    while (i < e) {
      while (i < e && (b[i] == ' ' || b[i] == '\t' || b[i] == ',')) {
        i++;
      }
      int t = i;
      while (i < e && b[i] != ',') {
        i++;
      }
      int te = i;
      while (te > t && (b[te - 1] == ' ' || b[te - 1] == '\t')) {
        te--;
      }
      if (te - t == token.length() && equalsIgnoreCase(t, token)) {
        return true;
      }
    }
    return false;
  }

  private String methodString(int e) {
    for (String m : METHODS) {
      if (m.length() == e && startsWith(0, m)) {
        return m;
      }
    }
    return latin1(0, e);
  }

  /**
   * Finds the end of a head (CRLF CRLF) or a bare LF, byte by byte across reads: the last three
   * bytes seen are kept.
   */
  static final class Scanner implements io.netty.util.ByteProcessor {
    int last3;
    boolean bareLf;

    @Override
    public boolean process(byte b) {
      if (b == '\n') {
        if ((last3 & 0xff) != '\r') {
          bareLf = true;
          return false;
        }
        if ((last3 & 0xffffff) == ('\r' << 16 | '\n' << 8 | '\r')) {
          return false;
        }
      }
      last3 = last3 << 8 | (b & 0xff);
      return true;
    }
  }
}
