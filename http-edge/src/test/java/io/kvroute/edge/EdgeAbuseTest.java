package io.kvroute.edge;

import static io.kvroute.edge.testing.Raw.await;
import static io.kvroute.edge.testing.Raw.read;
import static io.kvroute.edge.testing.Raw.send;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.kvroute.edge.testing.Raw;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What one client (or a few) must not be able to do to the edge: hold it with slow heads
 * (slowloris), or exhaust its memory with stalled uploads. Time is the injected clock's.
 */
class EdgeAbuseTest {
  private static final long SECOND = 1_000_000_000L;
  private static final int SLOW_CLIENTS = 1_500;
  private final AtomicLong now = new AtomicLong(1_000 * SECOND);
  private final List<SocketChannel> channels = new ArrayList<>();
  private EdgeServer server;

  @AfterEach
  void stop() throws IOException {
    for (SocketChannel c : channels) {
      c.close();
    }
    if (server != null) {
      server.close();
    }
  }

  private static long freeFileDescriptors() {
    var os = ManagementFactory.getOperatingSystemMXBean();
    if (os instanceof com.sun.management.UnixOperatingSystemMXBean) {
      var unix = (com.sun.management.UnixOperatingSystemMXBean) os;
      return unix.getMaxFileDescriptorCount() - unix.getOpenFileDescriptorCount();
    }
    return Long.MAX_VALUE;
  }

  private SocketChannel open() throws IOException {
    SocketChannel c = SocketChannel.open(new InetSocketAddress("127.0.0.1", server.port()));
    channels.add(c);
    return c;
  }

  private static void write(SocketChannel c, String s) throws IOException {
    ByteBuffer b = ByteBuffer.wrap(s.getBytes(StandardCharsets.ISO_8859_1));
    while (b.hasRemaining()) {
      c.write(b);
    }
  }

  @Test
  void slowlorisCannotHoldTheServer() throws IOException {
    long needed = 2L * SLOW_CLIENTS + 512;
    long free = freeFileDescriptors();
    assumeTrue(
        free >= needed,
        "skipped: the slowloris test needs "
            + needed
            + " free file descriptors (client and server ends of "
            + SLOW_CLIENTS
            + " connections) but the open-files limit leaves "
            + free
            + "; raise it with ulimit -n (.ci/run does)");
    server =
        EdgeServer.builder()
            .limits(EdgeLimits.builder().headerTimeout(Duration.ofSeconds(10)).build())
            .nanoClock(now::get)
            .timeoutTick(Duration.ofMillis(20))
            .route("GET", "/ok", ex -> ex.respond(200, "text/plain", "ok".getBytes()))
            .build()
            .start();
    for (int i = 0; i < SLOW_CLIENTS; i++) {
      write(open(), "GET /ok HTTP/1.1\r\n");
    }
    await("every slow client is reading", () -> server.stats().reading() == SLOW_CLIENTS);
    for (SocketChannel c : channels) {
      write(c, "Host: a\r\n"); // one more header line each: a real slowloris keeps dripping
    }
    advance(5 * SECOND);
    // a normal client is served while they hold their connections
    try (Socket ok = Raw.connect(server.port())) {
      send(ok, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n");
      assertThat(read(ok).body()).isEqualTo("ok");
    }
    assertThat(server.stats().connections()).isGreaterThanOrEqualTo(SLOW_CLIENTS);
    // at the header timeout every slow client is answered 408 and closed
    advance(6 * SECOND);
    await("every slow client is refused", () -> server.stats().reading() == 0);
    advance(3 * SECOND); // past the linger after the refusal
    await("every slow client is closed", () -> server.stats().connections() == 0);
    for (int i = 0; i < channels.size(); i += 97) {
      Socket s = channels.get(i).socket();
      s.setSoTimeout(30_000);
      Raw.Response r = read(s);
      assertThat(r.status()).isEqualTo(408);
    }
  }

  private void advance(long nanos) {
    now.addAndGet(nanos);
  }

  @Test
  void stalledUploadsCannotExhaustMemory() throws Exception {
    long budget = 64L << 20;
    int uploads = 60;
    int declared = (15 << 20) + 1;
    server =
        EdgeServer.builder()
            .limits(
                EdgeLimits.builder()
                    .maxBodyBytes(16 << 20)
                    .maxBufferedBodyBytes(budget)
                    .bodyTimeout(Duration.ofSeconds(30))
                    .build())
            .nanoClock(now::get)
            .timeoutTick(Duration.ofMillis(20))
            .route(
                "*",
                "/*",
                ex -> ex.respond(200, "text/plain", ("got " + ex.bodyLength()).getBytes()))
            .build()
            .start();
    for (int i = 0; i < uploads; i++) {
      SocketChannel c = open();
      write(
          c,
          "POST /up HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: "
              + declared
              + "\r\n\r\n");
      c.configureBlocking(false);
    }
    // Every upload sends all of its body but the last byte, as fast as the server takes it.
    AtomicBoolean stop = new AtomicBoolean();
    Thread writer =
        new Thread(
            () -> {
              ByteBuffer chunk = ByteBuffer.allocate(64 << 10);
              long[] sent = new long[uploads];
              try {
                while (!stop.get()) {
                  boolean progress = false;
                  for (int i = 0; i < uploads; i++) {
                    long left = declared - 1 - sent[i];
                    if (left <= 0) {
                      continue;
                    }
                    chunk.clear().limit((int) Math.min(chunk.capacity(), left));
                    int n = channels.get(i).write(chunk);
                    sent[i] += n;
                    progress |= n > 0;
                  }
                  if (!progress) {
                    Thread.sleep(5);
                  }
                }
              } catch (IOException | InterruptedException e) {
                // closed by the server or the test
              }
            },
            "uploads");
    writer.setDaemon(true);
    writer.start();
    try {
      await("the budget is exhausted and uploads wait", () -> server.stats().pausedForMemory() > 0);
      EdgeStats s = server.stats();
      assertThat(s.bufferedBodyBytes()).isLessThanOrEqualTo(budget);
      assertThat(s.peakBufferedBodyBytes()).isLessThanOrEqualTo(budget);
      // small requests are still served: large bodies may use only three quarters of the budget
      try (Socket ok = Raw.connect(server.port())) {
        send(ok, "POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
        assertThat(read(ok).body()).isEqualTo("got 5");
      }
      // at the body timeout every stalled upload is refused and its memory freed
      // (time keeps passing while we wait: under load a paused upload may resume reading, and
      // start its body deadline, only after the first step)
      advance(31 * SECOND);
      await(
          "every upload is refused",
          () -> {
            advance(SECOND);
            return server.stats().reading() == 0;
          });
      advance(3 * SECOND); // past the linger after the refusal
      await("every upload is closed", () -> server.stats().connections() == 0);
      await("all body memory is released", () -> server.stats().bufferedBodyBytes() == 0);
      assertThat(server.stats().peakBufferedBodyBytes()).isLessThanOrEqualTo(budget);
      assertThat(server.stats().pausedForMemory()).isZero();
    } finally {
      stop.set(true);
      writer.join(30_000);
    }
  }
}
