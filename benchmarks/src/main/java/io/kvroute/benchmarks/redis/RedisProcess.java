package io.kvroute.benchmarks.redis;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.kvroute.kvindex.redis.RedisServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

/**
 * A {@code redis-server} (Debian package) started by a benchmark on a free loopback port, without
 * persistence; {@link #cpuSeconds()} reads its CPU time from {@code INFO cpu}.
 */
public final class RedisProcess implements AutoCloseable {
  private final Process process;
  private final int port;
  private final Path dir;

  private RedisProcess(Process process, int port, Path dir) {
    this.process = process;
    this.port = port;
    this.dir = dir;
  }

  /** Starts a server (extra arguments such as {@code --maxmemory 2gb} appended). */
  public static RedisProcess start(String... extra) {
    Path bin =
        RedisServer.binary()
            .orElseThrow(
                () ->
                    new IllegalStateException(
                        "redis-server is not installed: apt-get install -y redis-server"));
    try {
      int port;
      try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
        port = s.getLocalPort();
      }
      Path dir = Files.createTempDirectory("kvroute-bench-redis-");
      Process p =
          new ProcessBuilder(RedisServer.commandLine(bin, port, dir, extra))
              .redirectErrorStream(true)
              .redirectOutput(dir.resolve("redis.log").toFile())
              .start();
      RedisProcess r = new RedisProcess(p, port, dir);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (r.command("PING").indexOf("PONG") < 0) {
        if (System.nanoTime() > deadline || !p.isAlive()) {
          throw new IllegalStateException("redis-server did not start");
        }
        Thread.sleep(20);
      }
      return r;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** {@code redis://127.0.0.1:PORT}. */
  public String url() {
    return "redis://127.0.0.1:" + port;
  }

  /**
   * A Redis index on this server: {@code settings} completes a configuration whose URL is this
   * server's.
   */
  public RedisBlockIndex index(
      IndexConfig index, UnaryOperator<RedisIndexConfig.Builder> settings) {
    return RedisBlockIndex.create(
        index, settings.apply(RedisIndexConfig.builder().url(url())).build());
  }

  /** The server process id. */
  public long pid() {
    return process.pid();
  }

  /** One inline command's raw reply (small replies only), or "" on failure. */
  public String command(String inline) {
    try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
      s.setSoTimeout(5000);
      OutputStream out = s.getOutputStream();
      out.write((inline + "\r\n").getBytes(StandardCharsets.US_ASCII));
      out.flush();
      InputStream in = s.getInputStream();
      byte[] buf = new byte[65536];
      int n = in.read(buf);
      String head = n <= 0 ? "" : new String(buf, 0, n, StandardCharsets.US_ASCII);
      if (head.startsWith("$")) { // bulk string: read it whole
        int len = Integer.parseInt(head.substring(1, head.indexOf('\r')));
        int want = head.indexOf('\n') + 1 + len + 2;
        StringBuilder sb = new StringBuilder(head);
        while (sb.length() < want && (n = in.read(buf)) > 0) {
          sb.append(new String(buf, 0, n, StandardCharsets.US_ASCII));
        }
        return sb.toString();
      }
      return head;
    } catch (IOException e) {
      return "";
    }
  }

  /** A field of {@code INFO} (e.g. {@code used_memory}), or -1. */
  public double info(String section, String field) {
    for (String line : command("INFO " + section).split("\r\n")) {
      if (line.startsWith(field + ":")) {
        return Double.parseDouble(line.substring(field.length() + 1).trim());
      }
    }
    return -1;
  }

  /** CPU seconds the server used so far (user + system, all its threads). */
  public double cpuSeconds() {
    return info("cpu", "used_cpu_user") + info("cpu", "used_cpu_sys");
  }

  @Override
  public void close() {
    process.destroy();
    try {
      process.waitFor(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try (var files = Files.walk(dir)) {
      files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // left behind in the temp dir
    }
  }
}
