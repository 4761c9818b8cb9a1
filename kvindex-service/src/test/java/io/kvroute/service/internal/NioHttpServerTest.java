package io.kvroute.service.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** {@link NioHttpServer} over raw sockets: framing, limits, timeouts and bad input. */
class NioHttpServerTest {
  private NioHttpServer server;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final List<Socket> sockets = new ArrayList<>();
  private final AtomicReference<NioHttpServer.Exchange> lastExchange = new AtomicReference<>();

  /** Echoes the request: "METHOD PATH LENGTH BODY"; special paths misbehave on purpose. */
  private void echo(NioHttpServer.Exchange ex) {
    lastExchange.set(ex);
    String body =
        new String(ex.body(), ex.bodyOffset(), ex.bodyLength(), StandardCharsets.ISO_8859_1);
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
        String v = ex.header("X-Test");
        ex.respond(200, "text/plain", String.valueOf(v).getBytes(StandardCharsets.ISO_8859_1));
        return;
      default:
        ex.respond(
            200,
            "text/plain",
            (ex.method() + " " + ex.path() + " " + ex.bodyLength() + " " + body)
                .getBytes(StandardCharsets.ISO_8859_1));
    }
  }

  private void start(int maxConnections, Duration requestTimeout, Duration idleTimeout) {
    server =
        new NioHttpServer(
            new NioHttpServer.Options(
                "127.0.0.1",
                0,
                2,
                maxConnections,
                4096,
                64 << 10,
                requestTimeout,
                idleTimeout,
                "test-http-"),
            this::echo,
            registry);
    server.start();
  }

  private void start() {
    start(64, Duration.ofSeconds(10), Duration.ofSeconds(60));
  }

  @AfterEach
  void stop() throws IOException {
    for (Socket s : sockets) {
      s.close();
    }
    if (server != null) {
      server.close();
    }
  }

  private Socket connect() throws IOException {
    Socket s = new Socket("127.0.0.1", server.port());
    s.setSoTimeout(10_000);
    sockets.add(s);
    return s;
  }

  private static void send(Socket s, String text) throws IOException {
    OutputStream out = s.getOutputStream();
    out.write(text.getBytes(StandardCharsets.ISO_8859_1));
    out.flush();
  }

  /** A parsed response. */
  record Response(int status, List<String> headers, String body) {
    String header(String name) {
      for (String h : headers) {
        int c = h.indexOf(':');
        if (h.substring(0, c).equalsIgnoreCase(name)) {
          return h.substring(c + 1).trim();
        }
      }
      return null;
    }
  }

  /** Reads one response (Content-Length framed; none for HEAD). */
  private static Response read(Socket s, boolean head) throws IOException {
    InputStream in = s.getInputStream();
    ByteArrayOutputStream line = new ByteArrayOutputStream();
    List<String> lines = new ArrayList<>();
    while (true) {
      int c = in.read();
      if (c < 0) {
        throw new IOException("closed after " + lines + " " + line);
      }
      if (c == '\n') {
        String l = line.toString(StandardCharsets.ISO_8859_1);
        line.reset();
        if (l.endsWith("\r")) {
          l = l.substring(0, l.length() - 1);
        }
        if (l.isEmpty()) {
          break;
        }
        lines.add(l);
      } else {
        line.write(c);
      }
    }
    int status = Integer.parseInt(lines.get(0).substring(9, 12));
    Response r = new Response(status, lines.subList(1, lines.size()), "");
    if (status == 100 || head) {
      return r;
    }
    int len = Integer.parseInt(r.header("Content-Length"));
    byte[] body = in.readNBytes(len);
    assertThat(body).hasSize(len);
    return new Response(status, r.headers(), new String(body, StandardCharsets.ISO_8859_1));
  }

  private static Response read(Socket s) throws IOException {
    return read(s, false);
  }

  /** Polls {@code condition} until it holds, failing after 5 s. */
  private static void await(String what, java.util.function.BooleanSupplier condition) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting until " + what);
      }
      java.util.concurrent.locks.LockSupport.parkNanos(5_000_000);
    }
  }

  private static boolean closedByServer(Socket s) throws IOException {
    try {
      return s.getInputStream().read() < 0;
    } catch (SocketException e) {
      return true; // reset
    }
  }

  @Test
  void keepAliveServesManyRequestsOnOneConnection() throws IOException {
    start();
    Socket s = connect();
    for (int i = 0; i < 5; i++) {
      send(s, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
      Response r = read(s);
      assertThat(r.status()).isEqualTo(200);
      assertThat(r.body()).isEqualTo("POST /x 5 hello");
      assertThat(r.header("Content-Type")).isEqualTo("text/plain");
      assertThat(r.header("Date")).endsWith("GMT");
      assertThat(r.header("Connection")).isNull();
    }
    assertThat(server.connections()).isEqualTo(1);
    assertThat(registry.get("kvroute.service.http.connections").gauge().value()).isEqualTo(1.0);
  }

  @Test
  void pipelinedRequestsAreAnsweredInOrder() throws IOException {
    start();
    Socket s = connect();
    send(
        s,
        "GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
            + "POST /async HTTP/1.1\r\nContent-Length: 1\r\n\r\nz"
            + "GET /c?q=1 HTTP/1.1\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("GET /a 0 ");
    assertThat(read(s).body()).isEqualTo("POST /b 2 hi");
    assertThat(read(s).body()).isEqualTo("async z");
    assertThat(read(s).body()).isEqualTo("GET /c 0 ");
  }

  @Test
  void requestsSplitIntoSingleBytesAreReassembled() throws Exception {
    start();
    Socket s = connect();
    s.setTcpNoDelay(true);
    String req = "POST /split HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world";
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
        "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: yes\r\n\r\n"
            + "GET /after HTTP/1.1\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("POST /c 11 hello world");
    assertThat(read(s).body()).isEqualTo("GET /after 0 ");
    // a chunked body arriving in pieces, larger than the connection's first buffer
    StringBuilder expected = new StringBuilder();
    send(s, "POST /c2 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
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
    send(s, "POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    assertThat(read(s).status()).isEqualTo(100);
    send(s, "abc");
    assertThat(read(s).body()).isEqualTo("POST /e 3 abc");
  }

  @Test
  void oversizedBodyIs413AndTheClientReadsItWhileStillSending() throws IOException {
    start();
    Socket s = connect();
    send(s, "POST /big HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n");
    // keep sending part of the body: the server lingers instead of resetting
    try {
      send(s, "x".repeat(100_000));
    } catch (SocketException ignored) {
      // the server may have shut its side; the answer is still readable below
    }
    Response r = read(s);
    assertThat(r.status()).isEqualTo(413);
    assertThat(r.header("Connection")).isEqualTo("close");
    assertThat(r.body()).contains("exceeds 65536 bytes").contains("\"field\":\"body\"");
    assertThat(registry.get("kvroute.service.http.refused").tag("status", "413").counter().count())
        .isEqualTo(1.0);
  }

  @Test
  void chunkedBodyOverTheLimitIs413() throws IOException {
    start();
    Socket s = connect();
    send(s, "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n20000\r\n");
    Response r = read(s);
    assertThat(r.status()).isEqualTo(413);
    assertThat(closedByServer(s)).isTrue();
  }

  @Test
  void malformedAndSmugglingRequestsAreRefused() throws IOException {
    start();
    String[][] cases = {
      {"GARBAGE\r\n\r\n", "400"},
      {"GET  / HTTP/1.1\r\n\r\n", "400"},
      {"GET / HTTP/1.1 extra\r\n\r\n", "400"},
      {"G@T / HTTP/1.1\r\n\r\n", "400"},
      {"GET nopath HTTP/1.1\r\n\r\n", "400"},
      {"GET / HTTP/2.0\r\n\r\n", "505"},
      {"GET / FTP/1.1\r\n\r\n", "400"},
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "400"},
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "400"},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "400"},
      {"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", "400"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "501"},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nX-A: a\u0001b\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nExpect: something\r\n\r\n", "417"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "400"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc", "400"},
      {"GET / HTTP/1.1\r\nX: " + "a".repeat(5000) + "\r\n\r\n", "431"},
    };
    for (String[] c : cases) {
      Socket s = connect();
      send(s, c[0]);
      Response r = read(s);
      assertThat(r.status()).as(c[0]).isEqualTo(Integer.parseInt(c[1]));
      assertThat(r.header("Content-Type")).isEqualTo("application/json");
      assertThat(r.body()).startsWith("{\"error\":");
      assertThat(closedByServer(s)).as(c[0]).isTrue();
    }
    StringBuilder many = new StringBuilder("GET / HTTP/1.1\r\n");
    for (int i = 0; i < 101; i++) {
      many.append("X").append(i).append(": 1\r\n");
    }
    Socket s = connect();
    send(s, many + "\r\n");
    assertThat(read(s).status()).isEqualTo(431);
    // the server still serves
    Socket ok = connect();
    send(ok, "GET /fine HTTP/1.1\r\n\r\n");
    assertThat(read(ok).body()).isEqualTo("GET /fine 0 ");
  }

  @Test
  void targetsHeadersAndLeadingEmptyLines() throws IOException {
    start();
    Socket s = connect();
    send(s, "\r\n\r\nGET http://example.com/abs/path?x=1 HTTP/1.1\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("GET /abs/path 0 ");
    send(s, "GET http://example.com HTTP/1.1\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("GET / 0 ");
    send(s, "GET /header HTTP/1.1\r\nx-test:   spaced value \t\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("spaced value");
    send(s, "GET /header HTTP/1.1\n\n"); // bare LF line ends
    assertThat(read(s).body()).isEqualTo("null");
    assertThat(lastExchange.get().header("X-Test")).isNull(); // answered: no longer readable
  }

  @Test
  void headAnswersHeadersOnly() throws IOException {
    start();
    Socket s = connect();
    send(s, "HEAD /h HTTP/1.1\r\n\r\n");
    Response r = read(s, true);
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.header("Content-Length")).isEqualTo("10"); // "HEAD /h 0 "
    send(s, "GET /next HTTP/1.1\r\n\r\n");
    assertThat(read(s).body()).isEqualTo("GET /next 0 ");
  }

  @Test
  void http10ClosesUnlessKeepAliveIsAsked() throws IOException {
    start();
    Socket s = connect();
    send(s, "GET /old HTTP/1.0\r\n\r\n");
    Response r = read(s);
    assertThat(r.header("Connection")).isEqualTo("close");
    assertThat(closedByServer(s)).isTrue();

    Socket k = connect();
    send(k, "GET /old HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assertThat(read(k).header("Connection")).isEqualTo("keep-alive");
    send(k, "GET /again HTTP/1.1\r\nConnection: close\r\n\r\n");
    assertThat(read(k).header("Connection")).isEqualTo("close");
    assertThat(closedByServer(k)).isTrue();
  }

  @Test
  void slowRequestsGet408AndIdleConnectionsAreClosed() throws IOException {
    start(64, Duration.ofMillis(300), Duration.ofMillis(600));
    Socket slow = connect();
    send(slow, "POST /slow HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
    Socket idle = connect();
    send(idle, "GET /i HTTP/1.1\r\n\r\n");
    assertThat(read(idle).status()).isEqualTo(200);
    Response r = read(slow);
    assertThat(r.status()).isEqualTo(408);
    assertThat(r.body()).contains("not received within 300 ms");
    assertThat(closedByServer(slow)).isTrue();
    assertThat(closedByServer(idle)).isTrue();
  }

  @Test
  void connectionsBeyondTheLimitGet503() throws Exception {
    start(2, Duration.ofSeconds(10), Duration.ofSeconds(60));
    Socket a = connect();
    Socket b = connect();
    send(a, "GET /a HTTP/1.1\r\n\r\n");
    send(b, "GET /b HTTP/1.1\r\n\r\n");
    read(a);
    read(b);
    Socket c = connect();
    Response r = read(c);
    assertThat(r.status()).isEqualTo(503);
    assertThat(r.body()).contains("http.max_connections = 2");
    assertThat(registry.get("kvroute.service.http.connections.rejected").counter().count())
        .isEqualTo(1.0);
    a.close();
    await("the closed connection is forgotten", () -> server.connections() <= 1);
    Socket d = connect();
    send(d, "GET /d HTTP/1.1\r\n\r\n");
    assertThat(read(d).body()).isEqualTo("GET /d 0 ");
  }

  @Test
  void handlerFailuresBecome500AndTheConnectionLives() throws IOException {
    start();
    Socket s = connect();
    send(s, "GET /throw HTTP/1.1\r\n\r\n");
    Response r = read(s);
    assertThat(r.status()).isEqualTo(500);
    assertThat(r.body()).contains("IllegalStateException");
    send(s, "GET /ok HTTP/1.1\r\n\r\n");
    assertThat(read(s).status()).isEqualTo(200);
  }

  @Test
  void answeringTwiceIsAnError() throws Exception {
    CountDownLatch answered = new CountDownLatch(1);
    AtomicReference<Throwable> second = new AtomicReference<>();
    server =
        new NioHttpServer(
            new NioHttpServer.Options(
                "127.0.0.1",
                0,
                1,
                8,
                4096,
                4096,
                Duration.ofSeconds(5),
                Duration.ofSeconds(5),
                "test-http-"),
            ex -> {
              ex.respond(200, "text/plain", new byte[0]);
              try {
                ex.respond(200, "text/plain", new byte[0]);
              } catch (IllegalStateException e) {
                second.set(e);
              }
              answered.countDown();
            },
            registry);
    server.start();
    Socket s = connect();
    send(s, "GET / HTTP/1.1\r\n\r\n");
    assertThat(read(s).status()).isEqualTo(200);
    assertThat(answered.await(5, TimeUnit.SECONDS)).isTrue();
    assertThat(second.get()).hasMessageContaining("answered already");
  }

  @Test
  void largeAnswersReachSlowReaders() throws Exception {
    start();
    Socket s = connect();
    send(s, "GET /big HTTP/1.1\r\n\r\nGET /after HTTP/1.1\r\n\r\n");
    // 16 MiB exceeds the socket buffers: the server must finish the answer across partial writes
    Response r = read(s);
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
      send(s, "POST /x HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc");
      s.close();
    }
    Socket a = connect();
    send(a, "POST /async HTTP/1.1\r\nContent-Length: 1\r\n\r\nq");
    a.close(); // the asynchronous answer finds the connection gone
    await("every connection is forgotten", () -> server.connections() == 0);
    assertThat(server.connections()).isZero();
  }

  @Test
  void closeStopsServing() throws IOException {
    start();
    Socket s = connect();
    send(s, "GET / HTTP/1.1\r\n\r\n");
    read(s);
    int port = server.port();
    server.close();
    assertThat(closedByServer(s)).isTrue();
    // the selector thread closes the listening socket after close() returns
    await(
        "the listening socket is closed",
        () -> {
          try {
            new Socket("127.0.0.1", port).close();
            return false;
          } catch (IOException refused) {
            return true;
          }
        });
  }

  /** Random garbage and mutated requests never stop the server from serving the next client. */
  @Test
  void survivesHostileBytes() {
    start(64, Duration.ofMillis(500), Duration.ofSeconds(60));
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
                try (Socket s = new Socket("127.0.0.1", server.port())) {
                  s.setSoTimeout(5000);
                  s.getOutputStream().write(req);
                  for (int b : noise) {
                    s.getOutputStream().write(b);
                  }
                  s.shutdownOutput();
                  s.getInputStream().readAllBytes(); // whatever comes, until the server closes
                } catch (SocketException e) {
                  // a reset is acceptable for garbage
                }
                try (Socket ok = new Socket("127.0.0.1", server.port())) {
                  ok.setSoTimeout(5000);
                  send(ok, "GET /alive HTTP/1.1\r\n\r\n");
                  assertThat(read(ok).body().toLowerCase(Locale.ROOT)).isEqualTo("get /alive 0 ");
                }
              } catch (IOException e) {
                throw new AssertionError(e);
              }
            });
  }
}
