package io.kvroute.edge;

import static io.kvroute.edge.testing.Raw.await;
import static io.kvroute.edge.testing.Raw.read;
import static io.kvroute.edge.testing.Raw.send;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.edge.testing.Raw;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntFunction;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Streamed answers: chunked relay, back-pressure, cancellation, failures, HEAD and HTTP/1.0. */
class EdgeStreamingTest {
  private final ExecutorService producer = Executors.newSingleThreadExecutor();
  private EdgeServer server;

  @AfterEach
  void stop() {
    if (server != null) {
      server.close();
    }
    producer.shutdownNow();
  }

  /** Emits {@code count} items (or forever when negative) on demand, from its own thread. */
  final class Source implements Flow.Publisher<ByteBuffer> {
    final long count;
    final IntFunction<byte[]> item;
    final Throwable failAtEnd;
    final AtomicLong requested = new AtomicLong();
    final AtomicLong emitted = new AtomicLong();
    final AtomicBoolean cancelled = new AtomicBoolean();

    Source(long count, IntFunction<byte[]> item, Throwable failAtEnd) {
      this.count = count;
      this.item = item;
      this.failAtEnd = failAtEnd;
    }

    @Override
    public void subscribe(Flow.Subscriber<? super ByteBuffer> s) {
      AtomicLong demand = new AtomicLong();
      AtomicBoolean ended = new AtomicBoolean();
      AtomicBoolean stopped = new AtomicBoolean();
      s.onSubscribe(
          new Flow.Subscription() {
            @Override
            public void request(long n) {
              requested.addAndGet(n);
              demand.addAndGet(n);
              producer.execute(this::emit);
            }

            private void emit() {
              while (demand.get() > 0 && !stopped.get() && !ended.get()) {
                if (count >= 0 && emitted.get() == count) {
                  ended.set(true);
                  if (failAtEnd != null) {
                    s.onError(failAtEnd);
                  } else {
                    s.onComplete();
                  }
                  return;
                }
                demand.decrementAndGet();
                s.onNext(ByteBuffer.wrap(item.apply((int) emitted.getAndIncrement())));
              }
              if (count >= 0 && emitted.get() == count && !ended.get() && !stopped.get()) {
                ended.set(true);
                if (failAtEnd != null) {
                  s.onError(failAtEnd);
                } else {
                  s.onComplete();
                }
              }
            }

            @Override
            public void cancel() {
              stopped.set(true);
              cancelled.set(true);
            }
          });
    }
  }

  private static byte[] sse(int i) {
    return ("data: {\"i\":" + i + "}\n\n").getBytes(StandardCharsets.UTF_8);
  }

  private void serve(
      Flow.Publisher<ByteBuffer> source, java.util.function.Consumer<Response.Builder> extra) {
    server =
        EdgeServer.builder()
            .route(
                "*",
                "/stream",
                ex -> {
                  Response.Builder b =
                      Response.status(200).contentType("text/event-stream").stream(source);
                  extra.accept(b);
                  ex.respond(b.build());
                })
            .build()
            .start();
  }

  @Test
  void aStreamIsRelayedChunkedAndTheConnectionIsReused() throws IOException {
    Source source = new Source(64, EdgeStreamingTest::sse, null);
    serve(source, b -> {});
    try (Socket s = Raw.connect(server.port())) {
      send(s, "POST /stream HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}");
      Raw.Response r = read(s);
      assertThat(r.status()).isEqualTo(200);
      assertThat(r.header("Transfer-Encoding")).isEqualTo("chunked");
      assertThat(r.header("Content-Type")).isEqualTo("text/event-stream");
      StringBuilder expected = new StringBuilder();
      for (int i = 0; i < 64; i++) {
        expected.append(new String(sse(i), StandardCharsets.UTF_8));
      }
      assertThat(r.body()).isEqualTo(expected.toString());
    }
  }

  @Test
  void aClientThatDoesNotReadStopsTheDemandAndReadingResumesIt() throws Exception {
    int itemSize = 16 << 10;
    byte[] payload = new byte[itemSize];
    java.util.Arrays.fill(payload, (byte) 'x');
    Source source = new Source(-1, i -> payload, null);
    serve(source, b -> {});
    try (Socket s = new Socket()) {
      s.setReceiveBufferSize(8 << 10);
      s.connect(new java.net.InetSocketAddress("127.0.0.1", server.port()));
      s.setSoTimeout(30_000);
      send(s, "GET /stream HTTP/1.1\r\nHost: a\r\n\r\n");
      await("the client's socket is full", () -> server.stats().stalledWrites() == 1);
      // demand stops: what was requested stays within what the buffers on the way can hold
      long[] last = {-1};
      int[] stable = {0};
      await(
          "demand is stable",
          () -> {
            long r = source.requested.get();
            stable[0] = r == last[0] ? stable[0] + 1 : 0;
            last[0] = r;
            return stable[0] >= 25;
          });
      long stalledAt = source.requested.get();
      assertThat(stalledAt * itemSize).isLessThan(32L << 20);
      // the client reads: demand resumes
      InputStream in = s.getInputStream();
      long target = stalledAt * itemSize + (8L << 20);
      byte[] buf = new byte[64 << 10];
      long read = 0;
      while (read < target) {
        int n = in.read(buf);
        assertThat(n).isPositive();
        read += n;
      }
      assertThat(source.requested.get()).isGreaterThan(stalledAt);
    }
    // and the client leaving cancels the publisher
    await("the publisher is cancelled", source.cancelled::get);
  }

  @Test
  void aClientLeavingCancelsTheStreamAndRunsItsGoneActions() throws Exception {
    Source source = new Source(-1, EdgeStreamingTest::sse, null);
    AtomicBoolean gone = new AtomicBoolean();
    server =
        EdgeServer.builder()
            .route(
                "GET",
                "/stream",
                ex ->
                    ex.respond(
                        Response.status(200).contentType("text/event-stream").stream(source)
                            .build()))
            .route("GET", "/never", ex -> ex.onClientGone(() -> gone.set(true)))
            .build()
            .start();
    Socket s = Raw.connect(server.port());
    send(s, "GET /stream HTTP/1.1\r\nHost: a\r\n\r\n");
    assertThat(Raw.readLine(s.getInputStream())).isEqualTo("HTTP/1.1 200 OK");
    await("items flow", () -> source.emitted.get() > 10);
    s.close();
    await("the publisher is cancelled", source.cancelled::get);

    Socket t = Raw.connect(server.port());
    send(t, "GET /never HTTP/1.1\r\nHost: a\r\n\r\n");
    await("the handler has the request", () -> server.stats().handling() == 1);
    Raw.reset(t); // (a plain close is only a FIN, which may be a half-close: EdgeHalfCloseTest)
    await("the gone action runs", gone::get);
    await("the connection is forgotten", () -> server.stats().connections() == 0);
  }

  @Test
  void aFailingStreamEndsWithItsTailOrBreaksTheConnection() throws IOException {
    Source withTail =
        new Source(2, EdgeStreamingTest::sse, new IllegalStateException("upstream reset"));
    serve(
        withTail,
        b ->
            b.streamErrorTail(
                t ->
                    ("data: {\"error\":\"" + t.getMessage() + "\"}\n\n")
                        .getBytes(StandardCharsets.UTF_8)));
    try (Socket s = Raw.connect(server.port())) {
      send(s, "GET /stream HTTP/1.1\r\nHost: a\r\n\r\n");
      Raw.Response r = read(s);
      assertThat(r.body())
          .isEqualTo(
              "data: {\"i\":0}\n\ndata: {\"i\":1}\n\ndata: {\"error\":\"upstream reset\"}\n\n");
    }
    server.close();
    Source noTail = new Source(2, EdgeStreamingTest::sse, new IllegalStateException("reset"));
    serve(noTail, b -> {});
    try (Socket s = Raw.connect(server.port())) {
      send(s, "GET /stream HTTP/1.1\r\nHost: a\r\n\r\n");
      // the body never ends properly: the client sees a broken answer, not a short complete one
      assertThatThrownBy(() -> read(s)).isInstanceOf(IOException.class);
    }
  }

  @Test
  void headAndHttp10() throws IOException {
    Source source = new Source(3, EdgeStreamingTest::sse, null);
    serve(source, b -> {});
    try (Socket s = Raw.connect(server.port())) {
      send(s, "HEAD /stream HTTP/1.1\r\nHost: a\r\n\r\n");
      Raw.Response r = read(s, true);
      assertThat(r.status()).isEqualTo(200);
      assertThat(r.header("Transfer-Encoding")).isNull();
      await("nobody reads the body of a HEAD: the publisher is cancelled", source.cancelled::get);
      // the connection serves the next request (the publisher is spent: the answer is empty)
      send(s, "GET /stream HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
      assertThat(read(s).status()).isEqualTo(200);
    }
    Source old = new Source(3, EdgeStreamingTest::sse, null);
    server.close();
    serve(old, b -> {});
    try (Socket s = Raw.connect(server.port())) {
      send(s, "GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
      Raw.Response r = read(s);
      assertThat(r.header("Connection")).isEqualTo("close");
      assertThat(r.header("Transfer-Encoding")).isNull();
      assertThat(r.body()).isEqualTo("data: {\"i\":0}\n\ndata: {\"i\":1}\n\ndata: {\"i\":2}\n\n");
    }
  }
}
