package io.kvroute.edge;

import static io.kvroute.edge.testing.Raw.await;
import static io.kvroute.edge.testing.Raw.closedByServer;
import static io.kvroute.edge.testing.Raw.read;
import static io.kvroute.edge.testing.Raw.send;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import io.kvroute.edge.testing.Raw;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@link EdgeServer} over raw sockets: framing, keep-alive, pipelining, limits, smuggling and bad
 * input (the cases of kvindex-service's NioHttpServerTest, ported, plus bare LF, missing Host and
 * 10,000 headers).
 */
class EdgeServerTest {
  private EdgeServer server;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final Raw.Sockets sockets = new Raw.Sockets();

  /** Echoes the request: "METHOD PATH LENGTH BODY"; special paths misbehave on purpose. */
  private static void echo(Exchange ex) {
    String body = new String(ex.body(), StandardCharsets.ISO_8859_1);
    switch (ex.path()) {
      case "/throw":
        throw new IllegalStateException("boom");
      case "/async":
        String answer = "async " + body;
        CompletableFuture.runAsync(
            () -> ex.respond(200, "text/plain", answer.getBytes(StandardCharsets.ISO_8859_1)),
            CompletableFuture.delayedExecutor(50, TimeUnit.MILLISECONDS));
        return;
      case "/big":
        byte[] big = new byte[16 << 20];
        for (int i = 0; i < big.length; i++) {
          big[i] = (byte) ('a' + i % 26);
        }
        ex.respond(200, "application/octet-stream", big);
        return;
      case "/header":
        ex.respond(
            200,
            "text/plain",
            String.valueOf(ex.header("X-Test")).getBytes(StandardCharsets.ISO_8859_1));
        return;
      case "/query":
        ex.respond(
            200, "text/plain", String.valueOf(ex.query()).getBytes(StandardCharsets.ISO_8859_1));
        return;
      default:
        ex.respond(
            200,
            "text/plain",
            (ex.method() + " " + ex.path() + " " + ex.bodyLength() + " " + body)
                .getBytes(StandardCharsets.ISO_8859_1));
    }
  }

  private void start(int maxConnections) {
    server =
        EdgeServer.builder()
            .limits(
                EdgeLimits.builder()
                    .maxConnections(maxConnections)
                    .maxHeaderBytes(4096)
                    .maxBodyBytes(64 << 10)
                    .build())
            .ioThreads(2)
            .meterRegistry(registry)
            .route("*", "/*", EdgeServerTest::echo)
            .route("GET", "/only-get", ex -> ex.respond(200, "text/plain", new byte[0]))
            .build()
            .start();
  }

  private void start() {
    start(64);
  }

  @AfterEach
  void stop() throws IOException {
    sockets.close();
    if (server != null) {
      server.close();
    }
  }

  private Socket connect() throws IOException {
    return sockets.connect(server.port());
  }

  private double refused(int status) {
    return registry
        .find("kvroute.edge.refused")
        .tag("status", Integer.toString(status))
        .counters()
        .stream()
        .mapToDouble(c -> c.count())
        .sum();
  }

  @Test
  void keepAliveServesManyRequestsOnOneConnection() throws IOException {
    start();
    Socket s = connect();
    for (int i = 0; i < 5; i++) {
      send(s, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
      Raw.Response r = read(s);
      assertThat(r.status()).isEqualTo(200);
      assertThat(r.body()).isEqualTo("POST /x 5 hello");
      assertThat(r.header("Content-Type")).isEqualTo("text/plain");
      assertThat(r.header("Date")).endsWith("GMT");
      assertThat(r.header("Connection")).isNull();
    }
    assertThat(server.stats().connections()).isEqualTo(1);
    assertThat(registry.get("kvroute.edge.connections").tag("listener", "traffic").gauge().value())
        .isEqualTo(1.0);
  }

  @Test
  void pipelinedRequestsAreAnsweredInOrder() throws IOException {
    start();
    Socket s = connect();
    send(
        s,
        "GET /a HTTP/1.1\r\nHost: a\r\n\r\nPOST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi"
            + "POST /async HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nz"
            + "GET /c?q=1 HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("GET /a 0 ");
    assertThat(read(s).body()).isEqualTo("POST /b 2 hi");
    assertThat(read(s).body()).isEqualTo("async z");
    assertThat(read(s).body()).isEqualTo("GET /c 0 ");
  }

  @Test
  void requestsSplitIntoSingleBytesAreReassembled() throws Exception {
    start();
    Socket s = connect();
    String req = "POST /split HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world";
    for (char c : req.toCharArray()) {
      send(s, String.valueOf(c));
    }
    assertThat(read(s).body()).isEqualTo("POST /split 11 hello world");
  }

  @Test
  void chunkedBodiesAreDecodedWithExtensionsAndTrailers() throws IOException {
    start();
    Socket s = connect();
    send(
        s,
        "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: yes\r\n\r\n"
            + "GET /after HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("POST /c 11 hello world");
    assertThat(read(s).body()).isEqualTo("GET /after 0 ");
    // a chunked body arriving in pieces, larger than the first buffer
    StringBuilder expected = new StringBuilder();
    send(s, "POST /c2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 40; i++) {
      String part = String.valueOf((char) ('a' + i % 26)).repeat(1000);
      expected.append(part);
      send(s, Integer.toHexString(part.length()) + "\r\n" + part + "\r\n");
    }
    send(s, "0\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("POST /c2 40000 " + expected);
  }

  @Test
  void expectContinueGetsAnInterimResponse() throws IOException {
    start();
    Socket s = connect();
    send(s, "POST /e HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    assertThat(read(s).status()).isEqualTo(100);
    send(s, "abc");
    assertThat(read(s).body()).isEqualTo("POST /e 3 abc");
    // too large: 413 at once, no 100
    send(
        s, "POST /e HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 999999\r\n\r\n");
    assertThat(read(s).status()).isEqualTo(413);
  }

  @Test
  void oversizedBodyIs413AtOnceAndTheClientReadsItWhileStillSending() throws IOException {
    start();
    Socket s = connect();
    send(s, "POST /big HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n");
    // keep sending part of the body: the server lingers instead of resetting
    try {
      send(s, "x".repeat(100_000));
    } catch (SocketException ignored) {
      // the server may have shut its side; the answer is still readable below
    }
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(413);
    assertThat(r.header("Connection")).isEqualTo("close");
    assertThat(r.body())
        .contains("exceeds 65536 bytes")
        .contains("\"param\":\"body\"")
        .contains("\"type\":\"invalid_request_error\"");
    assertThat(refused(413)).isEqualTo(1.0);
    assertThat(server.stats().peakBufferedBodyBytes()).isZero();
  }

  @Test
  void chunkedBodyOverTheLimitIs413() throws IOException {
    start();
    Socket s = connect();
    send(s, "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n20000\r\n");
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(413);
    assertThat(closedByServer(s)).isTrue();
    // the limit holds across chunks too
    Socket t = connect();
    send(t, "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    String chunk = "8000\r\n" + "y".repeat(0x8000) + "\r\n";
    send(t, chunk + chunk);
    send(t, "1\r\nz\r\n");
    assertThat(read(t).status()).isEqualTo(413);
  }

  @Test
  void malformedAndSmugglingRequestsAreRefused() throws IOException {
    start();
    String[][] cases = {
      {"GARBAGE\r\n\r\n", "400"},
      {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", "400"},
      {"GET / HTTP/1.1 extra\r\nHost: a\r\n\r\n", "400"},
      {"G@T / HTTP/1.1\r\nHost: a\r\n\r\n", "400"},
      {"GET nopath HTTP/1.1\r\nHost: a\r\n\r\n", "400"},
      {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", "505"},
      {"GET / FTP/1.1\r\nHost: a\r\n\r\n", "400"},
      // request smuggling: CL + TE, conflicting CL, TE on 1.0, codings other than chunked
      {
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        "400"
      },
      {
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        "400"
      },
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "400"},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 4\r\n\r\nabcd", "400"},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", "400"},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n", "400"},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "501"},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", "501"},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "400"},
      // header syntax: folding, bad names, no colon, control characters, bare LF
      {"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n folded\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\tfolded\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: a\r\nBad Name: 1\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: a\r\nName : 1\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: a\r\nX-A: a\u0001b\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n", "400"},
      {"GET / HTTP/1.1\nHost: a\n\n", "400"},
      {"GET / HTTP/1.1\r\nHost: a\nX: 1\r\n\r\n", "400"},
      // Host: required once on 1.1
      {"GET / HTTP/1.1\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: a\r\nExpect: something\r\n\r\n", "417"},
      // chunk framing
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "400"},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", "400"},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\n", "400"},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\nx\r\n", "400"},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc", "400"},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\n", "400"},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffff\r\n", "413"},
      {"GET / HTTP/1.1\r\nHost: a\r\nX: " + "a".repeat(5000) + "\r\n\r\n", "431"},
    };
    for (String[] c : cases) {
      Socket s = connect();
      send(s, c[0]);
      Raw.Response r = read(s);
      assertThat(r.status()).as(c[0]).isEqualTo(Integer.parseInt(c[1]));
      assertThat(r.header("Content-Type")).isEqualTo("application/json");
      assertThat(r.header("Connection")).isEqualTo("close");
      assertThat(r.body()).as(c[0]).startsWith("{\"error\":{\"message\":");
      assertThat(r.body()).as(c[0]).contains("\"type\":\"invalid_request_error\"");
      assertThat(closedByServer(s)).as(c[0]).isTrue();
    }
    // more headers than allowed: 101, and 10,000 (over the byte limit too)
    for (int n : new int[] {101, 10_000}) {
      StringBuilder many = new StringBuilder("GET / HTTP/1.1\r\nHost: a\r\n");
      for (int i = 0; i < n; i++) {
        many.append("X").append(i).append(": 1\r\n");
      }
      Socket s = connect();
      try {
        send(s, many + "\r\n");
      } catch (SocketException ignored) {
        // refused before everything was sent
      }
      assertThat(read(s).status()).as(n + " headers").isEqualTo(431);
    }
    assertThat(refused(400)).isGreaterThanOrEqualTo(20);
    // the server still serves
    Socket ok = connect();
    send(ok, "GET /fine HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(ok).body()).isEqualTo("GET /fine 0 ");
  }

  @Test
  void targetsHeadersAndLeadingEmptyLines() throws IOException {
    start();
    Socket s = connect();
    send(s, "\r\n\r\nGET http://example.com/abs/path?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("GET /abs/path 0 ");
    send(s, "GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("GET / 0 ");
    send(s, "GET /header HTTP/1.1\r\nHost: a\r\nx-test:   spaced value \t\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("spaced value");
    send(s, "GET /header HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("null");
    send(s, "GET /query?a=1&b=%20 HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("a=1&b=%20");
  }

  @Test
  void routesAnswer404And405WithAllow() throws IOException {
    start();
    Socket s = connect();
    send(s, "POST /only-get HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(405);
    assertThat(r.header("Allow")).isEqualTo("GET, HEAD");
    send(s, "HEAD /only-get HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s, true).status()).isEqualTo(200);
    EdgeServer other = EdgeServer.builder().meterRegistry(registry).build().start();
    try (Socket t = Raw.connect(other.port())) {
      send(t, "GET /nothing HTTP/1.1\r\nHost: a\r\n\r\n");
      Raw.Response nf = read(t);
      assertThat(nf.status()).isEqualTo(404);
      assertThat(nf.body()).contains("no route for /nothing");
    } finally {
      other.close();
    }
  }

  @Test
  void headAnswersHeadersOnly() throws IOException {
    start();
    Socket s = connect();
    send(s, "HEAD /h HTTP/1.1\r\nHost: a\r\n\r\n");
    Raw.Response r = read(s, true);
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.header("Content-Length")).isEqualTo("10"); // "HEAD /h 0 "
    send(s, "GET /next HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("GET /next 0 ");
  }

  @Test
  void http10ClosesUnlessKeepAliveIsAsked() throws IOException {
    start();
    Socket s = connect();
    send(s, "GET /old HTTP/1.0\r\n\r\n");
    Raw.Response r = read(s);
    assertThat(r.header("Connection")).isEqualTo("close");
    assertThat(closedByServer(s)).isTrue();

    Socket k = connect();
    send(k, "GET /old HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assertThat(read(k).header("Connection")).isEqualTo("keep-alive");
    send(k, "GET /again HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assertThat(read(k).header("Connection")).isEqualTo("close");
    assertThat(closedByServer(k)).isTrue();
  }

  @Test
  void connectionsBeyondTheLimitGet503() throws Exception {
    start(2);
    Socket a = connect();
    Socket b = connect();
    send(a, "GET /a HTTP/1.1\r\nHost: a\r\n\r\n");
    send(b, "GET /b HTTP/1.1\r\nHost: a\r\n\r\n");
    read(a);
    read(b);
    Socket c = connect();
    Raw.Response r = read(c);
    assertThat(r.status()).isEqualTo(503);
    assertThat(r.body()).contains("maxConnections = 2");
    assertThat(
            registry
                .get("kvroute.edge.connections.rejected")
                .tag("listener", "traffic")
                .counter()
                .count())
        .isEqualTo(1.0);
    a.close();
    await("the closed connection is forgotten", () -> server.stats().connections() <= 1);
    Socket d = connect();
    send(d, "GET /d HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(d).body()).isEqualTo("GET /d 0 ");
  }

  @Test
  void handlerFailuresBecome500AndTheConnectionLives() throws IOException {
    start();
    Socket s = connect();
    send(s, "GET /throw HTTP/1.1\r\nHost: a\r\n\r\n");
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(500);
    assertThat(r.body()).contains("IllegalStateException").contains("\"type\":\"server_error\"");
    send(s, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s).status()).isEqualTo(200);
  }

  @Test
  void answeringTwiceIsAnError() throws Exception {
    CountDownLatch answered = new CountDownLatch(1);
    AtomicReference<Throwable> second = new AtomicReference<>();
    server =
        EdgeServer.builder()
            .route(
                "GET",
                "/",
                ex -> {
                  ex.respond(200, "text/plain", new byte[0]);
                  try {
                    ex.respond(200, "text/plain", new byte[0]);
                  } catch (IllegalStateException e) {
                    second.set(e);
                  }
                  answered.countDown();
                })
            .build()
            .start();
    Socket s = connect();
    send(s, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(read(s).status()).isEqualTo(200);
    assertThat(answered.await(30, TimeUnit.SECONDS)).isTrue();
    assertThat(second.get()).hasMessageContaining("answered already");
  }

  @Test
  void largeAnswersReachSlowReaders() throws Exception {
    start();
    Socket s = connect();
    send(s, "GET /big HTTP/1.1\r\nHost: a\r\n\r\nGET /after HTTP/1.1\r\nHost: a\r\n\r\n");
    // 16 MiB exceeds the socket buffers: the server finishes the answer across partial writes
    Raw.Response r = read(s);
    assertThat(r.body()).hasSize(16 << 20);
    for (int i = 0; i < r.body().length(); i += 4099) {
      assertThat(r.body().charAt(i)).isEqualTo((char) ('a' + i % 26));
    }
    assertThat(read(s).body()).isEqualTo("GET /after 0 ");
  }

  @Test
  void clientsLeavingMidRequestAreForgotten() throws Exception {
    start();
    for (int i = 0; i < 5; i++) {
      Socket s = connect();
      send(s, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc");
      s.close();
    }
    Socket a = connect();
    send(a, "POST /async HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nq");
    a.close(); // the asynchronous answer finds the connection gone
    await("every connection is forgotten", () -> server.stats().connections() == 0);
    await("every body is released", () -> server.stats().bufferedBodyBytes() == 0);
  }

  @Test
  void closeStopsServing() throws IOException {
    start();
    Socket s = connect();
    send(s, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    read(s);
    server.close();
    assertThat(closedByServer(s)).isTrue();
    // (not asserted: that the port refuses connections; on a shared machine another process may
    // take the freed port at once)
    assertThatThrownBy(server::start).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void aPortInUseIsNamedInOneLine() {
    start();
    EdgeServer second = EdgeServer.builder().listen("127.0.0.1", server.port()).build();
    assertThatThrownBy(second::start)
        .isInstanceOf(EdgeBindException.class)
        .hasMessageStartingWith("cannot listen on 127.0.0.1:" + server.port() + ": ");
    EdgeServer unknown = EdgeServer.builder().listen("no-such-host.invalid", 0).build();
    assertThatThrownBy(unknown::start)
        .isInstanceOf(EdgeBindException.class)
        .hasMessageContaining("unknown host no-such-host.invalid");
  }

  @Test
  void gracefulShutdownLetsTheRequestInFlightFinish() throws Exception {
    CountDownLatch inHandler = new CountDownLatch(1);
    CompletableFuture<Exchange> held = new CompletableFuture<>();
    server =
        EdgeServer.builder()
            .route(
                "GET",
                "/slow",
                ex -> {
                  held.complete(ex);
                  inHandler.countDown();
                })
            .build()
            .start();
    Socket s = connect();
    send(s, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(inHandler.await(30, TimeUnit.SECONDS)).isTrue();
    CompletableFuture<Void> stopped =
        CompletableFuture.runAsync(() -> server.shutdown(Duration.ofSeconds(30)));
    int port = server.port();
    await(
        "the listener is closed",
        () -> {
          try {
            new Socket("127.0.0.1", port).close();
            return false;
          } catch (IOException e) {
            return true;
          }
        });
    held.get().respond(200, "text/plain", "done".getBytes(StandardCharsets.UTF_8));
    Raw.Response r = read(s);
    assertThat(r.body()).isEqualTo("done");
    assertThat(r.header("Connection")).isEqualTo("close");
    stopped.get(60, TimeUnit.SECONDS);
  }

  /** Pipelined requests cut at random places read the same as when sent at once. */
  @Test
  void requestsCutAnywhereReadTheSame() {
    start();
    String stream =
        "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
            + "POST /b HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n"
            + "\r\nGET /c HTTP/1.1\r\nHost: a\r\nX-Long: "
            + "v".repeat(300)
            + "\r\n\r\n";
    byte[] all = stream.getBytes(StandardCharsets.ISO_8859_1);
    qt().withExamples(40)
        .forAll(lists().of(integers().between(1, all.length - 1)).ofSizeBetween(1, 12))
        .checkAssert(
            cuts -> {
              try (Socket s = Raw.connect(server.port())) {
                int[] points =
                    cuts.stream().mapToInt(Integer::intValue).sorted().distinct().toArray();
                int from = 0;
                for (int p : points) {
                  s.getOutputStream().write(all, from, p - from);
                  s.getOutputStream().flush();
                  from = p;
                }
                s.getOutputStream().write(all, from, all.length - from);
                assertThat(read(s).body()).isEqualTo("POST /a 5 hello");
                assertThat(read(s).body()).isEqualTo("POST /b 5 abcde");
                assertThat(read(s).body()).isEqualTo("GET /c 0 ");
              } catch (IOException e) {
                throw new AssertionError(e);
              }
            });
  }

  /** Random garbage and mutated requests never stop the server from serving the next client. */
  @Test
  void survivesHostileBytes() {
    start();
    String valid =
        "POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n";
    qt().withExamples(60)
        .forAll(
            lists().of(integers().between(0, 255)).ofSizeBetween(0, 300),
            integers().between(0, 1000))
        .checkAssert(
            (noise, seed) -> {
              try {
                Random rnd = new Random(seed);
                byte[] req = valid.getBytes(StandardCharsets.ISO_8859_1);
                for (int i = 0; i < noise.size() && req.length > 0; i++) {
                  if (rnd.nextInt(4) == 0) {
                    req[rnd.nextInt(req.length)] = noise.get(i).byteValue();
                  }
                }
                try (Socket s = Raw.connect(server.port())) {
                  s.getOutputStream().write(req);
                  for (int b : noise) {
                    s.getOutputStream().write(b);
                  }
                  s.shutdownOutput();
                  s.getInputStream().readAllBytes(); // whatever comes, until the server closes
                } catch (SocketException e) {
                  // a reset is acceptable for garbage
                }
                try (Socket ok = Raw.connect(server.port())) {
                  send(ok, "GET /alive HTTP/1.1\r\nHost: a\r\n\r\n");
                  assertThat(read(ok).body().toLowerCase(Locale.ROOT)).isEqualTo("get /alive 0 ");
                }
              } catch (IOException e) {
                throw new AssertionError(e);
              }
            });
    await("every connection is closed", () -> server.stats().connections() == 0);
  }
}
