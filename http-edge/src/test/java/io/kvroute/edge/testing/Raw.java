package io.kvroute.edge.testing;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * Raw-socket HTTP/1.1 test client: sends bytes, reads one response (length or chunked), half-closes
 * and resets. Shipped in http-edge's test-jar, so that the commands on the edge ({@code kvroute
 * gateway}, {@code proxy}, {@code serve}) are probed the same way.
 */
public final class Raw {
  private Raw() {}

  /** A parsed response. */
  public record Response(int status, List<String> headers, String body) {
    /** The first value of header {@code name} (any case), or null. */
    public String header(String name) {
      for (String h : headers) {
        int c = h.indexOf(':');
        if (h.substring(0, c).equalsIgnoreCase(name)) {
          return h.substring(c + 1).trim();
        }
      }
      return null;
    }
  }

  public static Socket connect(int port) throws IOException {
    Socket s = new Socket("127.0.0.1", port);
    s.setSoTimeout(30_000);
    s.setTcpNoDelay(true);
    return s;
  }

  /** Sockets a test opened, closed after it. */
  public static final class Sockets implements AutoCloseable {
    private final List<Socket> open = new ArrayList<>();

    /** A socket to {@code port} on loopback, closed with the others. */
    public Socket connect(int port) throws IOException {
      Socket s = Raw.connect(port);
      open.add(s);
      return s;
    }

    @Override
    public void close() throws IOException {
      for (Socket s : open) {
        s.close();
      }
    }
  }

  public static void send(Socket s, String text) throws IOException {
    OutputStream out = s.getOutputStream();
    out.write(text.getBytes(StandardCharsets.ISO_8859_1));
    out.flush();
  }

  /** Shuts the client's sending side down (a TCP half-close): it sends no more, and still reads. */
  public static void halfClose(Socket s) throws IOException {
    s.shutdownOutput();
  }

  /** Closes with a TCP reset ({@code SO_LINGER} 0), as a client that is gone does. */
  public static void reset(Socket s) throws IOException {
    s.setSoLinger(true, 0);
    s.close();
  }

  public static String readLine(InputStream in) throws IOException {
    ByteArrayOutputStream line = new ByteArrayOutputStream();
    while (true) {
      int c = in.read();
      if (c < 0) {
        throw new IOException("closed after " + line.toString(StandardCharsets.ISO_8859_1));
      }
      if (c == '\n') {
        String l = line.toString(StandardCharsets.ISO_8859_1);
        return l.endsWith("\r") ? l.substring(0, l.length() - 1) : l;
      }
      line.write(c);
    }
  }

  /** Reads one response; no body for HEAD, 1xx, 204, 304; close-delimited if no framing. */
  public static Response read(Socket s, boolean head) throws IOException {
    InputStream in = s.getInputStream();
    List<String> lines = new ArrayList<>();
    while (true) {
      String l = readLine(in);
      if (l.isEmpty()) {
        break;
      }
      lines.add(l);
    }
    int status = Integer.parseInt(lines.get(0).substring(9, 12));
    Response r = new Response(status, lines.subList(1, lines.size()), "");
    if (status < 200 || head || status == 204 || status == 304) {
      return r;
    }
    String cl = r.header("Content-Length");
    byte[] body;
    if (cl != null) {
      int len = Integer.parseInt(cl);
      body = in.readNBytes(len);
      assertThat(body).hasSize(len);
    } else if ("chunked".equalsIgnoreCase(r.header("Transfer-Encoding"))) {
      ByteArrayOutputStream b = new ByteArrayOutputStream();
      while (true) {
        int size = Integer.parseInt(readLine(in), 16);
        if (size == 0) {
          assertThat(readLine(in)).isEmpty();
          break;
        }
        byte[] chunk = in.readNBytes(size);
        assertThat(chunk).hasSize(size);
        b.write(chunk);
        assertThat(readLine(in)).isEmpty();
      }
      body = b.toByteArray();
    } else {
      body = in.readAllBytes();
    }
    return new Response(status, r.headers(), new String(body, StandardCharsets.ISO_8859_1));
  }

  public static Response read(Socket s) throws IOException {
    return read(s, false);
  }

  /** True once the server closed (or reset) the connection; reads and drops what comes first. */
  public static boolean closedByServer(Socket s) throws IOException {
    try {
      InputStream in = s.getInputStream();
      while (true) {
        if (in.read() < 0) {
          return true;
        }
      }
    } catch (SocketException e) {
      return true; // reset
    }
  }

  /** Polls {@code condition} until it holds, failing after 30 s (the machine may be loaded). */
  public static void await(String what, BooleanSupplier condition) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError("timed out waiting until " + what);
      }
      java.util.concurrent.locks.LockSupport.parkNanos(2_000_000);
    }
  }
}
