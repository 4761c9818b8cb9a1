package io.kvroute.kvindex.redis;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

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
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real {@code redis-server} (the Debian package) started by a test on a free loopback port, in a
 * temporary directory, without persistence. Tests skip with a clear message if the binary is not
 * installed ({@code apt-get install -y redis-server}; CI's {@code .ci/run} installs it).
 */
public final class RedisServer implements AutoCloseable {
  private static final List<String> CANDIDATES =
      List.of("/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server");

  private final Path binary;
  private final Path dir;
  private final int port;
  private Process process;
  private boolean paused;

  private RedisServer(Path binary, Path dir, int port) {
    this.binary = binary;
    this.dir = dir;
    this.port = port;
  }

  /** The redis-server binary, if installed. */
  public static Optional<Path> binary() {
    String path = System.getenv("PATH");
    Stream<Path> fromPath =
        path == null
            ? Stream.empty()
            : Stream.of(path.split(":")).map(p -> Paths.get(p, "redis-server"));
    return Stream.concat(fromPath, CANDIDATES.stream().map(Paths::get))
        .filter(Files::isExecutable)
        .findFirst();
  }

  /** Starts a server, or skips the calling test if redis-server is not installed. */
  public static RedisServer start() {
    for (int attempt = 1; ; attempt++) {
      try {
        return start(freePort());
      } catch (PortTakenException e) {
        // another process (a concurrent build's server) took the free port first: pick another
        if (attempt == 5) {
          throw e;
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  /** The port answered PING, but from a server this object did not start. */
  static final class PortTakenException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    PortTakenException(String message) {
      super(message);
    }
  }

  /** Starts a server on {@code port} (skips the test if redis-server is not installed). */
  public static RedisServer start(int port) {
    Optional<Path> bin = binary();
    assumeTrue(
        bin.isPresent(),
        "redis-server is not installed (apt-get install -y redis-server): Redis backend tests"
            + " skipped");
    try {
      RedisServer s = new RedisServer(bin.get(), Files.createTempDirectory("kvroute-redis-"), port);
      s.launch();
      return s;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** A loopback port nothing listens on (for "unreachable" tests). */
  public static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  /** {@code redis://127.0.0.1:PORT}. */
  public String url() {
    return "redis://127.0.0.1:" + port;
  }

  /** The port. */
  public int port() {
    return port;
  }

  /**
   * The command line of a server listening on loopback {@code port}, working in {@code dir},
   * without persistence, in the foreground; {@code extra} arguments (such as {@code --maxmemory
   * 2gb}) are appended. The benchmarks start their servers with it too.
   */
  public static List<String> commandLine(Path binary, int port, Path dir, String... extra) {
    List<String> cmd = new java.util.ArrayList<>();
    cmd.addAll(
        List.of(
            binary.toString(),
            "--port",
            Integer.toString(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            dir.toString(),
            "--daemonize",
            "no"));
    cmd.addAll(List.of(extra));
    return cmd;
  }

  private void launch() throws IOException {
    process =
        new ProcessBuilder(commandLine(binary, port, dir))
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("redis.log").toFile())
            .start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!ping()) {
      if (!process.isAlive()) {
        throw new IllegalStateException(
            "redis-server exited: " + Files.readString(dir.resolve("redis.log")));
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("redis-server did not answer PING within 60 s");
      }
      try {
        Thread.sleep(20); // polling interval while waiting for a condition, not synchronisation
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
    // A PONG proves that someone listens, not that it is ours: under parallel builds another
    // test's redis-server can hold the port (ours then fails to bind and exits). Tests sharing a
    // server by accident see each other's keys, so check the answering process is ours.
    long answering = processId();
    if (answering != process.pid()) {
      stop();
      throw new PortTakenException(
          "port " + port + " is served by another redis-server (pid " + answering + ")");
    }
  }

  /** The {@code process_id} the server on the port reports (-1 if it cannot be read). */
  private long processId() {
    try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
      s.setSoTimeout(10_000);
      OutputStream out = s.getOutputStream();
      out.write("INFO server\r\n".getBytes(StandardCharsets.US_ASCII));
      out.flush();
      InputStream in = s.getInputStream();
      StringBuilder text = new StringBuilder();
      byte[] buf = new byte[4096];
      int n;
      while ((n = in.read(buf)) > 0) {
        text.append(new String(buf, 0, n, StandardCharsets.US_ASCII));
        int at = text.indexOf("process_id:");
        if (at >= 0) {
          int end = text.indexOf("\r\n", at);
          if (end > 0) {
            return Long.parseLong(text.substring(at + "process_id:".length(), end).trim());
          }
        }
      }
      return -1;
    } catch (IOException | NumberFormatException e) {
      return -1;
    }
  }

  /** Whether the server answers PING. */
  public boolean ping() {
    try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
      s.setSoTimeout(2000);
      OutputStream out = s.getOutputStream();
      out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
      out.flush();
      InputStream in = s.getInputStream();
      byte[] b = new byte[7];
      int n = in.readNBytes(b, 0, 7);
      return n == 7 && new String(b, StandardCharsets.US_ASCII).equals("+PONG\r\n");
    } catch (IOException e) {
      return false;
    }
  }

  /** The server's process id. */
  public long pid() {
    return process.pid();
  }

  /**
   * Freezes the server (SIGSTOP): it keeps its connections open and answers nothing, as a server
   * stuck in a long command or a stalled host would, until {@link #resume()}.
   */
  public void pause() {
    signal("-STOP");
    paused = true;
  }

  /** Lets a {@link #pause() paused} server run again (SIGCONT). */
  public void resume() {
    signal("-CONT");
    paused = false;
  }

  private void signal(String sig) {
    try {
      Process k = new ProcessBuilder("kill", sig, Long.toString(process.pid())).start();
      if (!k.waitFor(30, TimeUnit.SECONDS) || k.exitValue() != 0) {
        throw new IllegalStateException("kill " + sig + " " + process.pid() + " failed");
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** Stops the server (its data is lost: no persistence). */
  public void stop() {
    if (process != null && paused) {
      resume();
    }
    if (process != null) {
      process.destroy();
      try {
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
          process.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      process = null;
    }
  }

  /** Starts the server again on the same port (empty). */
  public void restart() {
    stop();
    try {
      launch();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public void close() {
    stop();
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // temp dir left behind
    }
  }
}
