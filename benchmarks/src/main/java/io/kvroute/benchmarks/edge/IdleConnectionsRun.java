package io.kvroute.benchmarks.edge;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Many idle keep-alive connections to a server: opens {@code connections} connections, makes one
 * request on each (so each is a served keep-alive connection, not a fresh one), keeps them open,
 * and meanwhile measures a normal request's latency on another connection. With a server PID it
 * reports the server's resident memory before and after (from {@code /proc/PID/status}).
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.kvroute.benchmarks.edge.IdleConnectionsRun \
 *     PORT [connections=10000] [server PID] [path=/x] [body]
 * </pre>
 *
 * Needs twice {@code connections} file descriptors if the server runs on the same machine ({@code
 * ulimit -n}).
 */
public final class IdleConnectionsRun {
  private IdleConnectionsRun() {}

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    int n = args.length > 1 ? Integer.parseInt(args[1]) : 10_000;
    long pid = args.length > 2 ? Long.parseLong(args[2]) : -1;
    String path = args.length > 3 ? args[3] : "/x";
    String body =
        args.length > 4 ? args[4] : "{\"model\":\"m\",\"prompt\":\"hello\",\"max_tokens\":16}";
    byte[] request =
        ("POST "
                + path
                + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "
                + body.getBytes(StandardCharsets.UTF_8).length
                + "\r\n\r\n"
                + body)
            .getBytes(StandardCharsets.UTF_8);
    Socket probe = open(port);
    double[] before = latencies(probe, request, 2000);
    long rssBefore = rss(pid);
    List<Socket> idle = new ArrayList<>(n);
    long t0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      Socket s = open(port);
      exchange(s, request);
      idle.add(s);
    }
    long opened = System.nanoTime() - t0;
    long rssAfter = rss(pid);
    double[] during = latencies(probe, request, 2000);
    System.out.printf(
        "connections=%d opened+served in %.1f s%n"
            + "server RSS before %.1f MB, with %d idle keep-alive connections %.1f MB"
            + " (+%.1f MB, %.1f KB per connection)%n"
            + "normal request before: p50 %.3f ms p99 %.3f ms; while they are open: p50 %.3f ms"
            + " p99 %.3f ms%n",
        n,
        opened / 1e9,
        rssBefore / 1e6,
        n,
        rssAfter / 1e6,
        (rssAfter - rssBefore) / 1e6,
        (rssAfter - rssBefore) / 1e3 / n,
        before[0],
        before[1],
        during[0],
        during[1]);
    int alive = 0;
    for (Socket s : idle) {
      try {
        exchange(s, request);
        alive++;
      } catch (IOException e) {
        // closed by the server (idle timeout)
      }
      s.close();
    }
    System.out.printf("still served afterwards: %d of %d%n", alive, n);
    probe.close();
  }

  private static Socket open(int port) throws IOException {
    Socket s = new Socket();
    s.setTcpNoDelay(true);
    s.setSoTimeout(30_000);
    s.connect(new InetSocketAddress("127.0.0.1", port));
    return s;
  }

  private static double[] latencies(Socket s, byte[] request, int count) throws IOException {
    for (int i = 0; i < 200; i++) {
      exchange(s, request);
    }
    double[] ms = new double[count];
    for (int i = 0; i < count; i++) {
      long t = System.nanoTime();
      exchange(s, request);
      ms[i] = (System.nanoTime() - t) / 1e6;
    }
    Arrays.sort(ms);
    return new double[] {ms[count / 2], ms[count * 99 / 100]};
  }

  /** One request and its answer, framed by Content-Length or chunked. */
  static void exchange(Socket s, byte[] request) throws IOException {
    s.getOutputStream().write(request);
    InputStream in = s.getInputStream();
    int length = -1;
    boolean chunked = false;
    while (true) {
      String l = line(in);
      if (l.isEmpty()) {
        break;
      }
      if (l.regionMatches(true, 0, "content-length:", 0, 15)) {
        length = Integer.parseInt(l.substring(15).trim());
      } else if (l.regionMatches(true, 0, "transfer-encoding:", 0, 18)) {
        chunked = l.substring(18).trim().equalsIgnoreCase("chunked");
      }
    }
    if (chunked) {
      while (true) {
        int size = Integer.parseInt(line(in), 16);
        in.readNBytes(size);
        line(in); // the CRLF after the chunk (or after the last, empty one)
        if (size == 0) {
          return;
        }
      }
    }
    if (length < 0) {
      throw new IOException("neither Content-Length nor chunked");
    }
    in.readNBytes(length);
  }

  private static String line(InputStream in) throws IOException {
    StringBuilder line = new StringBuilder();
    while (true) {
      int c = in.read();
      if (c < 0) {
        throw new IOException("closed");
      }
      if (c == '\n') {
        return line.toString().trim();
      }
      line.append((char) c);
    }
  }

  private static long rss(long pid) throws IOException {
    if (pid < 0) {
      return 0;
    }
    for (String l : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
      if (l.startsWith("VmRSS:")) {
        return Long.parseLong(l.replaceAll("[^0-9]", "")) * 1024;
      }
    }
    return 0;
  }
}
