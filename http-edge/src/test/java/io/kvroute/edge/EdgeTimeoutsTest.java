package io.kvroute.edge;

import static io.kvroute.edge.testing.Raw.await;
import static io.kvroute.edge.testing.Raw.closedByServer;
import static io.kvroute.edge.testing.Raw.read;
import static io.kvroute.edge.testing.Raw.send;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.edge.testing.Raw;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.net.Socket;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Header, body, idle and write timeouts, driven by an injected clock: time only moves when the test
 * moves it, so a loaded machine cannot make a request late (and the test waits for nothing).
 */
class EdgeTimeoutsTest {
  private static final long SECOND = 1_000_000_000L;
  private final AtomicLong now = new AtomicLong(1_000 * SECOND);
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final Raw.Sockets sockets = new Raw.Sockets();
  private EdgeServer server;

  @BeforeEach
  void start() {
    server =
        EdgeServer.builder()
            .limits(
                EdgeLimits.builder()
                    .headerTimeout(Duration.ofSeconds(10))
                    .bodyTimeout(Duration.ofSeconds(30))
                    .idleTimeout(Duration.ofSeconds(60))
                    .writeTimeout(Duration.ofSeconds(60))
                    .build())
            .nanoClock(now::get)
            .timeoutTick(Duration.ofMillis(2))
            .meterRegistry(registry)
            .route("*", "/*", ex -> ex.respond(200, "text/plain", ex.path().getBytes()))
            .build()
            .start();
  }

  @AfterEach
  void stop() throws IOException {
    sockets.close();
    server.close();
  }

  private Socket connect() throws IOException {
    return sockets.connect(server.port());
  }

  private double timeouts(String phase) {
    var c = registry.find("kvroute.edge.timeouts").tag("phase", phase).counter();
    return c == null ? 0 : c.count();
  }

  private void advance(long nanos) {
    now.addAndGet(nanos);
  }

  @Test
  void silentConnectionsAreClosedAtTheHeaderTimeoutNotTheIdleTimeout() throws IOException {
    Socket silent = connect();
    await("the server sees the connection", () -> server.stats().connections() == 1);
    advance(9 * SECOND);
    Socket late = connect(); // its clock starts now
    await("the server sees both", () -> server.stats().connections() == 2);
    advance(2 * SECOND); // 11 s for the first, 2 s for the second
    assertThat(closedByServer(silent)).isTrue();
    await("the silent connection is forgotten", () -> server.stats().connections() == 1);
    assertThat(timeouts("header")).isEqualTo(1.0);
    send(late, "GET /late HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(late).body()).isEqualTo("/late");
  }

  @Test
  void aSlowHeadGets408FromItsFirstByteAndDrippingDoesNotExtendIt() throws IOException {
    Socket slow = connect();
    send(slow, "GET / HTTP/1.1\r\n");
    await("the server reads the head", () -> server.stats().reading() == 1);
    for (int i = 0; i < 9; i++) {
      send(slow, "X-Drip-" + i + ": 1\r\n");
      advance(SECOND);
    }
    send(slow, "Host: a\r\n");
    advance(2 * SECOND);
    Raw.Response r = read(slow);
    assertThat(r.status()).isEqualTo(408);
    assertThat(r.body()).contains("request headers not received within 10000 ms");
    assertThat(closedByServer(slow)).isTrue();
  }

  @Test
  void keepAliveConnectionsWaitTheIdleTimeoutThenTheHeaderTimeoutForTheNextRequest()
      throws IOException {
    Socket s = connect();
    send(s, "GET /one HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("/one");
    advance(59 * SECOND); // idle, under the idle timeout
    send(s, "GET /two HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("/two");
    advance(30 * SECOND);
    send(s, "GET /thr"); // a request starts: the header timeout runs from here
    advance(9 * SECOND);
    send(s, "ee HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("/three");
    advance(61 * SECOND);
    assertThat(closedByServer(s)).isTrue();
    assertThat(timeouts("idle")).isEqualTo(1.0);
  }

  @Test
  void aStalledBodyGets408AndReleasesItsMemory() throws IOException {
    Socket s = connect();
    send(s, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n" + "x".repeat(5000));
    await("the body is being buffered", () -> server.stats().bufferedBodyBytes() > 0);
    advance(29 * SECOND);
    send(s, "y".repeat(5000));
    advance(2 * SECOND);
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(408);
    assertThat(r.body()).contains("request body not received within 30000 ms");
    await("the body is released", () -> server.stats().bufferedBodyBytes() == 0);
    assertThat(timeouts("body")).isEqualTo(1.0);
  }

  @Test
  void aClientThatDoesNotReadIsClosedAtTheWriteTimeout() throws IOException {
    server.close();
    server =
        EdgeServer.builder()
            .limits(EdgeLimits.builder().writeTimeout(Duration.ofSeconds(60)).build())
            .nanoClock(now::get)
            .timeoutTick(Duration.ofMillis(2))
            .meterRegistry(registry)
            .route(
                "GET",
                "/big",
                ex -> ex.respond(200, "application/octet-stream", new byte[64 << 20]))
            .build()
            .start();
    Socket s = connect();
    s.setReceiveBufferSize(4096);
    send(s, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n");
    // nothing is read: the server's socket buffer fills and the channel stays unwritable
    await("the write stalls", () -> server.stats().stalledWrites() == 1);
    advance(30 * SECOND);
    assertThat(server.stats().connections()).isEqualTo(1);
    advance(31 * SECOND);
    await("the stalled connection is closed", () -> server.stats().connections() == 0);
    assertThat(timeouts("write")).isEqualTo(1.0);
  }
}
