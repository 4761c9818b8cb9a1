package io.kvroute.benchmarks.edge;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A closed-loop HTTP/1.1 load: {@code connections} keep-alive connections on threads named {@code
 * alloc-load-N}, each sending the same {@code POST} and reading the answer to its end
 * (Content-Length or chunked) before the next, until a batch's count of requests is done. Answers
 * other than 200 fail the batch. Built to stay out of the way of what it measures: one pre-built
 * request, one buffer per connection.
 *
 * <p>{@link #run} is called from one thread at a time; the connections stay open between batches.
 */
final class KeepAliveLoad implements AutoCloseable {
  private final byte[] request;
  private final List<Conn> conns = new ArrayList<>();

  KeepAliveLoad(int port, String path, byte[] body, int connections) throws IOException {
    this.request =
        ("POST "
                + path
                + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length: "
                + body.length
                + "\r\n\r\n")
            .getBytes(StandardCharsets.US_ASCII);
    byte[] full = new byte[request.length + body.length];
    System.arraycopy(request, 0, full, 0, request.length);
    System.arraycopy(body, 0, full, request.length, body.length);
    for (int i = 0; i < connections; i++) {
      conns.add(new Conn(port, full));
    }
  }

  /**
   * Sends {@code requests} requests over the connections (closed loop) and returns when all are
   * answered.
   *
   * @throws IOException the first failure of any connection (an answer other than 200 included)
   */
  void run(long requests) throws IOException, InterruptedException {
    AtomicLong left = new AtomicLong(requests);
    AtomicReference<IOException> failure = new AtomicReference<>();
    CountDownLatch done = new CountDownLatch(conns.size());
    int i = 0;
    for (Conn c : conns) {
      Thread t =
          new Thread(
              () -> {
                try {
                  while (left.getAndDecrement() > 0 && failure.get() == null) {
                    c.exchange();
                  }
                } catch (IOException e) {
                  failure.compareAndSet(null, e);
                } finally {
                  done.countDown();
                }
              },
              "alloc-load-" + i++);
      t.setDaemon(true);
      t.start();
    }
    done.await();
    if (failure.get() != null) {
      throw failure.get();
    }
  }

  @Override
  public void close() throws IOException {
    for (Conn c : conns) {
      c.socket.close();
    }
  }

  /** One connection: a request out, its answer read to the end. */
  private static final class Conn {
    final Socket socket;
    final OutputStream out;
    final InputStream in;
    final byte[] request;
    final byte[] buf = new byte[64 << 10];
    int pos;
    int lim;

    Conn(int port, byte[] request) throws IOException {
      this.socket = new Socket(InetAddress.getLoopbackAddress(), port);
      socket.setTcpNoDelay(true);
      this.out = socket.getOutputStream();
      this.in = socket.getInputStream();
      this.request = request;
    }

    void exchange() throws IOException {
      out.write(request);
      out.flush();
      // status line and headers
      String status = line();
      if (!status.startsWith("HTTP/1.1 200")) {
        throw new IOException("answer " + status);
      }
      long length = -1;
      boolean chunked = false;
      for (String h = line(); !h.isEmpty(); h = line()) {
        int colon = h.indexOf(':');
        String name = h.substring(0, colon).trim();
        String value = h.substring(colon + 1).trim();
        if (name.equalsIgnoreCase("Content-Length")) {
          length = Long.parseLong(value);
        } else if (name.equalsIgnoreCase("Transfer-Encoding")
            && value.equalsIgnoreCase("chunked")) {
          chunked = true;
        }
      }
      if (chunked) {
        while (true) {
          String size = line();
          int semi = size.indexOf(';');
          long n = Long.parseLong(semi < 0 ? size.trim() : size.substring(0, semi).trim(), 16);
          if (n == 0) {
            while (!line().isEmpty()) {
              // trailers
            }
            return;
          }
          skip(n);
          line();
        }
      } else if (length >= 0) {
        skip(length);
      } else {
        throw new IOException("an answer without Content-Length or chunked encoding");
      }
    }

    private String line() throws IOException {
      StringBuilder sb = new StringBuilder();
      while (true) {
        if (pos == lim) {
          fill();
        }
        byte b = buf[pos++];
        if (b == '\n') {
          int n = sb.length();
          if (n > 0 && sb.charAt(n - 1) == '\r') {
            sb.setLength(n - 1);
          }
          return sb.toString();
        }
        sb.append((char) (b & 0xff));
      }
    }

    private void skip(long n) throws IOException {
      while (n > 0) {
        if (pos == lim) {
          fill();
        }
        int k = (int) Math.min(n, lim - pos);
        pos += k;
        n -= k;
      }
    }

    private void fill() throws IOException {
      int r = in.read(buf, 0, buf.length);
      if (r < 0) {
        throw new EOFException("the server closed the connection");
      }
      pos = 0;
      lim = r;
    }
  }
}
