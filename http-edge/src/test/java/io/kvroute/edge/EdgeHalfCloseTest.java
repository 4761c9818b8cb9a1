package io.kvroute.edge;

import static io.kvroute.edge.testing.Raw.await;
import static io.kvroute.edge.testing.Raw.closedByServer;
import static io.kvroute.edge.testing.Raw.halfClose;
import static io.kvroute.edge.testing.Raw.read;
import static io.kvroute.edge.testing.Raw.reset;
import static io.kvroute.edge.testing.Raw.send;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.edge.testing.Raw;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.SubmissionPublisher;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Clients that shut their sending side down (a TCP half-close, {@code shutdown(SHUT_WR)}) after, or
 * in the middle of, their requests (issue 34): what they sent in full is answered, in order, then
 * the connection is closed; what they left incomplete is a 400; and a client that is really gone (a
 * reset) is told apart from one that only half-closed.
 */
class EdgeHalfCloseTest {
  private static final long SECOND = 1_000_000_000L;
  private final AtomicLong now = new AtomicLong(1_000 * SECOND);
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final Raw.Sockets sockets = new Raw.Sockets();
  private final BlockingQueue<Held> held = new LinkedBlockingQueue<>();
  private EdgeServer server;

  /** A request the handler holds until the test answers it, and whether its client went away. */
  record Held(Exchange exchange, AtomicBoolean gone) {
    void answer(String text) {
      exchange.respond(200, "text/plain", text.getBytes(StandardCharsets.UTF_8));
    }
  }

  private void start(EdgeServer.Transport transport) {
    server =
        EdgeServer.builder()
            .limits(
                EdgeLimits.builder()
                    .headerTimeout(Duration.ofSeconds(10))
                    .bodyTimeout(Duration.ofSeconds(30))
                    .writeTimeout(Duration.ofSeconds(60))
                    .build())
            .nanoClock(now::get)
            .timeoutTick(Duration.ofMillis(2))
            .ioThreads(1)
            .transport(transport)
            .meterRegistry(registry)
            .route("*", "/*", EdgeHalfCloseTest::echo)
            .route("*", "/held", this::hold)
            .route(
                "GET",
                "/big",
                ex -> {
                  byte[] big = new byte[16 << 20];
                  for (int i = 0; i < big.length; i++) {
                    big[i] = (byte) ('a' + i % 26);
                  }
                  ex.respond(200, "application/octet-stream", big);
                })
            .build()
            .start();
  }

  private void start() {
    start(EdgeServer.Transport.AUTO);
  }

  private static void echo(Exchange ex) {
    ex.respond(
        200,
        "text/plain",
        (ex.method() + " " + ex.path() + " " + new String(ex.body(), StandardCharsets.ISO_8859_1))
            .getBytes(StandardCharsets.ISO_8859_1));
  }

  private void hold(Exchange ex) {
    AtomicBoolean gone = new AtomicBoolean();
    ex.onClientGone(() -> gone.set(true));
    held.add(new Held(ex, gone));
  }

  private Held nextHeld() throws InterruptedException {
    Held h = held.poll(30, TimeUnit.SECONDS);
    assertThat(h).as("a request reached the holding handler").isNotNull();
    return h;
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

  private double refused(String reason) {
    return registry.find("kvroute.edge.refused").tag("reason", reason).counters().stream()
        .mapToDouble(c -> c.count())
        .sum();
  }

  private double clientGone() {
    var c = registry.find("kvroute.edge.client.gone").counter();
    return c == null ? 0 : c.count();
  }

  @Test
  void aCompleteRequestThenAHalfCloseIsAnsweredThenTheConnectionCloses() throws IOException {
    start();
    Socket s = connect();
    send(s, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
    halfClose(s);
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.body()).isEqualTo("POST /x hello");
    assertThat(closedByServer(s)).isTrue();
    await("the connection is forgotten", () -> server.stats().connections() == 0);
    assertThat(clientGone()).isZero();
    assertThat(registry.find("kvroute.edge.refused").counters()).isEmpty();
  }

  @Test
  void anAnswerGivenLaterReachesTheHalfClosedClientAndNothingIsCancelled() throws Exception {
    start();
    Socket s = connect();
    send(s, "POST /held HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}");
    Held h = nextHeld();
    halfClose(s);
    await("the server sees the half-close", () -> server.stats().halfClosed() == 1);
    assertThat(server.stats().handling()).isEqualTo(1);
    assertThat(h.gone()).isFalse();
    h.answer("later");
    Raw.Response r = read(s);
    assertThat(r.body()).isEqualTo("later");
    assertThat(r.header("Connection")).isEqualTo("close");
    assertThat(closedByServer(s)).isTrue();
    assertThat(h.gone()).isFalse();
    assertThat(clientGone()).isZero();
  }

  @Test
  void pipelinedRequestsThenAHalfCloseAreAllAnsweredInOrder() throws Exception {
    start();
    Socket s = connect();
    send(
        s,
        "GET /a HTTP/1.1\r\nHost: a\r\n\r\n"
            + "POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi"
            + "POST /held HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "3\r\nabc\r\n0\r\n\r\n"
            + "GET /c HTTP/1.1\r\nHost: a\r\n\r\n\r\n");
    halfClose(s);
    assertThat(read(s).body()).isEqualTo("GET /a ");
    assertThat(read(s).body()).isEqualTo("POST /b hi");
    Held h = nextHeld();
    assertThat(new String(h.exchange().body(), StandardCharsets.UTF_8)).isEqualTo("abc");
    await("the server sees the half-close", () -> server.stats().halfClosed() == 1);
    h.answer("held abc");
    Raw.Response third = read(s);
    assertThat(third.body()).isEqualTo("held abc");
    assertThat(third.header("Connection")).as("another request follows").isNull();
    Raw.Response last = read(s);
    assertThat(last.body()).isEqualTo("GET /c ");
    assertThat(last.header("Connection")).isEqualTo("close");
    assertThat(closedByServer(s)).isTrue();
    assertThat(h.gone()).isFalse();
  }

  @Test
  void aHalfCloseInTheMiddleOfABodyIs400WithAJsonError() throws IOException {
    start();
    Socket s = connect();
    send(s, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc");
    halfClose(s);
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.header("Content-Type")).isEqualTo("application/json");
    assertThat(r.header("Connection")).isEqualTo("close");
    assertThat(r.body())
        .contains("\"type\":\"invalid_request_error\"")
        .contains("\"param\":\"body\"")
        .contains("after 3 of 100 body bytes");
    assertThat(closedByServer(s)).isTrue();
    assertThat(refused("incomplete_body")).isEqualTo(1.0);

    Socket chunked = connect();
    send(
        chunked,
        "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nab");
    halfClose(chunked);
    Raw.Response c = read(chunked);
    assertThat(c.status()).isEqualTo(400);
    assertThat(c.body()).contains("before the last chunk");
    assertThat(closedByServer(chunked)).isTrue();
    assertThat(refused("incomplete_body")).isEqualTo(2.0);
  }

  @Test
  void aHalfCloseInTheMiddleOfTheHeadIs400AndOneAfterAnAnswerIsACleanClose() throws IOException {
    start();
    Socket s = connect();
    send(s, "GET /first HTTP/1.1\r\nHost: a\r\n\r\nPOST /x HTTP/1.1\r\nHost: a\r\nContent-Le");
    halfClose(s);
    assertThat(read(s).body()).isEqualTo("GET /first ");
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.body()).contains("\"param\":\"headers\"").contains("invalid_request_error");
    assertThat(closedByServer(s)).isTrue();
    assertThat(refused("incomplete_head")).isEqualTo(1.0);

    // a connection that sends nothing (or only empty lines) and half-closes is simply closed
    Socket quiet = connect();
    send(quiet, "\r\n");
    halfClose(quiet);
    assertThat(quiet.getInputStream().read()).isEqualTo(-1);
    assertThat(refused("incomplete_head")).isEqualTo(1.0);
  }

  @Test
  void aBodyTimeoutBeforeTheHalfCloseIs408() throws IOException {
    start();
    Socket s = connect();
    send(s, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc");
    await("the server reads the body", () -> server.stats().reading() == 1);
    now.addAndGet(31 * SECOND);
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(408);
    assertThat(r.body()).contains("invalid_request_error");
    halfClose(s);
    assertThat(closedByServer(s)).isTrue();
    assertThat(refused("incomplete_body")).isZero();
  }

  @Test
  void theLastAnswerToAHalfClosedClientIsNotCutShortForASlowReader() throws IOException {
    start();
    Socket s = connect();
    send(s, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n");
    halfClose(s);
    await("the answer fills the client's buffers", () -> server.stats().stalledWrites() == 1);
    // well past the 2 s a refusal lingers, well within the 60 s write timeout: a connection that
    // only waits for the slow reader is checked (the quiet one's header timeout says a sweep ran)
    Socket quiet = connect();
    await("the server sees the quiet connection", () -> server.stats().connections() == 2);
    now.addAndGet(11 * SECOND);
    assertThat(closedByServer(quiet)).isTrue();
    Raw.Response r = read(s);
    assertThat(r.body()).hasSize(16 << 20);
    for (int i = 0; i < r.body().length(); i += 4099) {
      assertThat(r.body().charAt(i)).isEqualTo((char) ('a' + i % 26));
    }
    assertThat(closedByServer(s)).isTrue();
  }

  @Test
  void aResetIsAClientGoneAtOnceAndAHalfCloseIsNot() throws Exception {
    start(EdgeServer.Transport.EPOLL);
    Socket halfClosed = connect();
    send(halfClosed, "GET /held HTTP/1.1\r\nHost: a\r\n\r\n");
    Held waiting = nextHeld();
    halfClose(halfClosed);
    await("the server sees the half-close", () -> server.stats().halfClosed() == 1);
    Socket resetting = connect();
    send(resetting, "GET /held HTTP/1.1\r\nHost: a\r\n\r\n");
    Held reset = nextHeld();
    reset(resetting);
    await("the reset client's gone actions run", reset.gone()::get);
    assertThat(waiting.gone()).isFalse();
    assertThat(server.stats().handling()).isEqualTo(1);
    assertThat(server.stats().halfClosed()).isEqualTo(1);

    // a client that half-closed and then resets is gone too: on epoll the kernel says so before
    // anything is written
    reset(halfClosed);
    await("the half-closed client's reset is noticed", waiting.gone()::get);
    await("both connections are forgotten", () -> server.stats().connections() == 0);
    assertThat(clientGone()).isEqualTo(2.0);
  }

  @Test
  void onNioAHalfClosedClientThatResetsIsGoneAtTheFirstFailedWrite() throws Exception {
    start(EdgeServer.Transport.NIO);
    Socket s = connect();
    send(s, "GET /held HTTP/1.1\r\nHost: a\r\n\r\n");
    Held h = nextHeld();
    halfClose(s);
    await("the server sees the half-close", () -> server.stats().halfClosed() == 1);
    reset(s);
    SubmissionPublisher<ByteBuffer> stream = new SubmissionPublisher<>();
    h.exchange()
        .respond(Response.status(200).contentType("text/event-stream").stream(stream).build());
    // the answer's writes fail on the reset connection: the stream is cancelled, the exchange gone
    await(
        "the stream is cancelled",
        () -> {
          if (stream.isClosed() || stream.getNumberOfSubscribers() > 0) {
            stream.offer(
                ByteBuffer.wrap("data: {}\n\n".getBytes(StandardCharsets.UTF_8)),
                (sub, item) -> false);
          }
          return h.gone().get();
        });
    await("the connection is forgotten", () -> server.stats().connections() == 0);
    stream.close();
  }
}
