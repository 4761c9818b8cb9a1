package io.kvroute.edge;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport.Outbound;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.edge.testing.Raw;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import okhttp3.tls.HeldCertificate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link EdgeClient} against real servers on loopback: our edge, and raw sockets that misbehave.
 */
class EdgeClientTest {
  private final List<AutoCloseable> closing = new ArrayList<>();
  private final EdgeClient client = EdgeClient.create();

  @AfterEach
  void close() throws Exception {
    client.close();
    for (AutoCloseable c : closing) {
      c.close();
    }
  }

  private EdgeServer upstream(EdgeServer.Builder b) {
    EdgeServer s = b.listen("127.0.0.1", 0).build().start();
    closing.add(s);
    return s;
  }

  /** An upstream with the one route. */
  private EdgeServer upstream(String method, String path, Handler handler) {
    return upstream(EdgeServer.builder().route(method, path, handler));
  }

  /** An upstream answering {@code POST /v1/completions} with {@code handler}. */
  private EdgeServer completions(Handler handler) {
    return upstream("POST", "/v1/completions", handler);
  }

  private static Endpoint at(int port) {
    return Endpoint.of("http://127.0.0.1:" + port, Endpoint.Role.DECODE);
  }

  private static Outbound.Builder post(int port, String body) {
    return Outbound.post(at(port), "/v1/completions", body.getBytes(StandardCharsets.UTF_8))
        .leg(Leg.DECODE)
        .timeout(Duration.ofSeconds(30));
  }

  private static String text(StreamingResponse r) throws Exception {
    return new String(r.readAll(1 << 20).get(30, TimeUnit.SECONDS), StandardCharsets.UTF_8);
  }

  private static UpstreamException failureOf(CompletableFuture<?> f) {
    try {
      f.get(30, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      assertThat(e.getCause()).isInstanceOf(UpstreamException.class);
      return (UpstreamException) e.getCause();
    } catch (Exception e) {
      throw new AssertionError(e);
    }
    throw new AssertionError("no failure");
  }

  @Test
  void sendsTheRequestAndRelaysStatusHeadersAndBody() throws Exception {
    AtomicReference<Exchange> seen = new AtomicReference<>();
    EdgeServer s =
        completions(
            ex -> {
              seen.set(ex);
              ex.respond(
                  Response.status(201)
                      .contentType("application/json")
                      .header("X-Answer", "42")
                      .body(ex.body())
                      .build());
            });
    StreamingResponse r =
        client
            .send(
                post(s.port(), "{\"prompt\":\"hi\"}")
                    .headers(
                        Map.of(
                            "X-Request-Id", List.of("r1"),
                            "Connection", List.of("close"),
                            "Transfer-Encoding", List.of("chunked"),
                            "X-Bad", List.of("a\r\nInjected: yes")))
                    .build())
            .get(30, TimeUnit.SECONDS);
    assertThat(r.status()).isEqualTo(201);
    assertThat(r.header("x-answer")).contains("42");
    assertThat(text(r)).isEqualTo("{\"prompt\":\"hi\"}");
    Exchange ex = seen.get();
    assertThat(ex.header("Host")).isEqualTo("127.0.0.1:" + s.port());
    assertThat(ex.header("Content-Type")).startsWith("application/json");
    assertThat(ex.header("X-Request-Id")).isEqualTo("r1");
    assertThat(ex.header("Connection")).isNull();
    assertThat(ex.header("X-Bad")).isNull();
    assertThat(ex.header("Injected")).isNull();
    assertThat(client.openResponses()).isZero();
  }

  @Test
  void keepsConnectionsAliveBetweenCalls() throws Exception {
    List<Integer> clientPorts = new CopyOnWriteArrayList<>();
    EdgeServer s =
        upstream(
            "GET",
            "/health",
            ex -> {
              clientPorts.add(ex.remoteAddress().getPort());
              ex.respond(200, "text/plain", new byte[0]);
            });
    for (int i = 0; i < 5; i++) {
      StreamingResponse r =
          client.send(Outbound.get(at(s.port()), "/health").build()).get(30, TimeUnit.SECONDS);
      assertThat(text(r)).isEmpty();
    }
    assertThat(clientPorts).hasSize(5);
    assertThat(clientPorts.stream().distinct()).hasSize(1);
    assertThat(client.idleConnections()).isEqualTo(1);
  }

  @Test
  void aCallMadeOnAnEventLoopStaysOnThatLoop() throws Exception {
    EdgeServer engine = completions(ex -> ex.respond(200, "application/json", ex.body()));
    AtomicReference<Thread> handlerThread = new AtomicReference<>();
    AtomicReference<Thread> headThread = new AtomicReference<>();
    AtomicReference<Thread> bodyThread = new AtomicReference<>();
    EdgeServer front =
        upstream(
            EdgeServer.builder()
                .ioThreads(2)
                .route(
                    "POST",
                    "/v1/completions",
                    ex -> {
                      handlerThread.set(Thread.currentThread());
                      client
                          .send(post(engine.port(), "{}").build())
                          .thenCompose(
                              r -> {
                                headThread.set(Thread.currentThread());
                                return r.readAll(1024);
                              })
                          .thenAccept(
                              b -> {
                                bodyThread.set(Thread.currentThread());
                                ex.respond(200, "application/json", b);
                              });
                    }));
    try (Socket sock = new Socket("127.0.0.1", front.port())) {
      OutputStream o = sock.getOutputStream();
      o.write(
          ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                  + "Connection: close\r\n\r\n{}")
              .getBytes(StandardCharsets.US_ASCII));
      o.flush();
      String answer = new String(sock.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(answer).startsWith("HTTP/1.1 200").endsWith("{}");
    }
    assertThat(headThread.get()).isSameAs(handlerThread.get());
    assertThat(bodyThread.get()).isSameAs(handlerThread.get());
  }

  @Test
  void streamsWithBackPressureAndCancels() throws Exception {
    AtomicInteger produced = new AtomicInteger();
    CountDownLatch clientGone = new CountDownLatch(1);
    EdgeServer s =
        completions(
            ex -> {
              ex.onClientGone(clientGone::countDown);
              ex.respond(
                  Response.status(200).contentType("text/event-stream").stream(endless(produced))
                      .build());
            });
    StreamingResponse r =
        client.send(post(s.port(), "{}").streaming(true).build()).get(30, TimeUnit.SECONDS);
    BlockingSubscriber sub = new BlockingSubscriber();
    r.subscribe(sub);
    sub.subscription.get(30, TimeUnit.SECONDS).request(3);
    sub.awaitItems(3);
    // Nothing more is asked for: the client stops reading, the socket buffers fill, and the
    // upstream's writes stall (the server says so); no more than was asked for reaches the
    // subscriber.
    Raw.await("the upstream's writes stall", () -> s.stats().stalledWrites() == 1);
    assertThat(produced.get()).isLessThan(64 << 20);
    assertThat(sub.items).hasSize(3);
    sub.subscription.get().cancel();
    assertThat(clientGone.await(30, TimeUnit.SECONDS)).isTrue();
    awaitZero(client::openResponses);
  }

  @Test
  void aWholeCallThatTakesTooLongTimesOut() {
    EdgeServer s = completions(ex -> {});
    UpstreamException e =
        failureOf(client.send(post(s.port(), "{}").timeout(Duration.ofMillis(300)).build()));
    assertThat(e.kind()).isEqualTo(UpstreamException.Kind.TIMEOUT);
    assertThat(e).hasMessageContaining("decode request to http://127.0.0.1:" + s.port());
  }

  @Test
  void aStreamThatFallsSilentTimesOut() throws Exception {
    try (ServerSocket raw = new ServerSocket(0)) {
      answerOnceThenStall(
          raw,
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
              + "Transfer-Encoding: chunked\r\n\r\n5\r\ndata:\r\n");
      StreamingResponse r =
          client
              .send(
                  post(raw.getLocalPort(), "{}")
                      .streaming(true)
                      .timeout(Duration.ofMillis(300))
                      .build())
              .get(30, TimeUnit.SECONDS);
      CompletableFuture<byte[]> body = r.readAll(1024);
      UpstreamException e = failureOf(body);
      assertThat(e.kind()).isEqualTo(UpstreamException.Kind.TIMEOUT);
    }
  }

  @Test
  void aRefusedConnectionIsAnIoFailure() throws Exception {
    int port;
    try (ServerSocket free = new ServerSocket(0)) {
      port = free.getLocalPort();
    }
    UpstreamException e = failureOf(client.send(post(port, "{}").build()));
    assertThat(e.kind()).isEqualTo(UpstreamException.Kind.IO);
    assertThat(e).hasMessageContaining("refused");
    assertThat(e.endpointId()).isEqualTo("127.0.0.1:" + port);
  }

  @Test
  void anUpstreamThatClosesIdleConnectionsIsNoticedAndTheNextCallUsesANewOne() throws Exception {
    try (ServerSocket raw = new ServerSocket(0)) {
      AtomicInteger accepted = new AtomicInteger();
      Thread t =
          new Thread(
              () -> {
                while (!raw.isClosed()) {
                  try (Socket c = raw.accept()) {
                    accepted.incrementAndGet();
                    readHead(c.getInputStream());
                    c.getOutputStream()
                        .write(
                            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                                .getBytes(StandardCharsets.US_ASCII));
                    c.getOutputStream().flush();
                  } catch (IOException e) {
                    return;
                  }
                }
              });
      t.setDaemon(true);
      t.start();
      for (int i = 0; i < 3; i++) {
        StreamingResponse r =
            client
                .send(Outbound.get(at(raw.getLocalPort()), "/health").build())
                .get(30, TimeUnit.SECONDS);
        assertThat(text(r)).isEqualTo("ok");
        awaitZero(client::idleConnections); // the close was seen while the connection idled
      }
      assertThat(accepted.get()).isEqualTo(3);
    }
  }

  @Test
  void aResponseHeadTooLargeIsAProtocolFailure() throws Exception {
    try (ServerSocket raw = new ServerSocket(0)) {
      answerOnceThenStall(raw, "HTTP/1.1 200 OK\r\nX-Big: " + "a".repeat(100_000) + "\r\n\r\n");
      UpstreamException e = failureOf(client.send(post(raw.getLocalPort(), "{}").build()));
      assertThat(e.kind()).isEqualTo(UpstreamException.Kind.PROTOCOL);
    }
  }

  @Test
  void cancellingTheFutureBeforeTheHeadClosesTheCall() throws Exception {
    CountDownLatch arrived = new CountDownLatch(1);
    CountDownLatch gone = new CountDownLatch(1);
    EdgeServer s =
        completions(
            ex -> {
              ex.onClientGone(gone::countDown);
              arrived.countDown();
            });
    CompletableFuture<StreamingResponse> f = client.send(post(s.port(), "{}").build());
    assertThat(arrived.await(30, TimeUnit.SECONDS)).isTrue();
    f.cancel(true);
    assertThat(gone.await(30, TimeUnit.SECONDS)).isTrue();
    assertThat(client.openResponses()).isZero();
  }

  @Test
  void talksTlsToUpstreamsItTrustsAndRefusesOthers(@TempDir Path dir) throws Exception {
    HeldCertificate ca =
        new HeldCertificate.Builder().certificateAuthority(0).commonName("test CA").build();
    HeldCertificate cert =
        new HeldCertificate.Builder()
            .signedBy(ca)
            .commonName("localhost")
            .addSubjectAlternativeName("127.0.0.1")
            .build();
    Path certFile = dir.resolve("server.pem");
    Path keyFile = dir.resolve("server.key");
    Files.writeString(certFile, cert.certificatePem() + ca.certificatePem());
    Files.writeString(keyFile, cert.privateKeyPkcs8Pem());
    EdgeServer s =
        upstream(
            EdgeServer.builder()
                .tls(TlsConfig.builder().certificateChain(certFile).privateKey(keyFile).build())
                .route("GET", "/health", ex -> ex.respond(200, "text/plain", "tls".getBytes())));
    Endpoint e = Endpoint.of("https://127.0.0.1:" + s.port(), Endpoint.Role.DECODE);
    KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
    trust.load(null, null);
    trust.setCertificateEntry("ca", ca.certificate());
    try (EdgeClient trusting = EdgeClient.builder().trustStore(trust).build()) {
      StreamingResponse r =
          trusting.send(Outbound.get(e, "/health").build()).get(30, TimeUnit.SECONDS);
      assertThat(text(r)).isEqualTo("tls");
    }
    UpstreamException refused = failureOf(client.send(Outbound.get(e, "/health").build()));
    assertThat(refused.kind()).isEqualTo(UpstreamException.Kind.IO);
  }

  @Test
  void aClosedClientRefusesCalls() {
    client.close();
    UpstreamException e = failureOf(client.send(post(9, "{}").build()));
    assertThat(e).hasMessageContaining("closed");
    assertThatThrownBy(() -> EdgeClient.builder().connectionPool(-1, Duration.ofSeconds(1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxIdle");
  }

  // ------------------------------------------------------------------ helpers

  /**
   * A daemon thread that accepts one connection on {@code raw}, reads a request head, writes {@code
   * answer} and then holds the connection open until the client closes it (at most 60 s).
   */
  private static void answerOnceThenStall(ServerSocket raw, String answer) {
    Thread t =
        new Thread(
            () -> {
              try (Socket c = raw.accept()) {
                readHead(c.getInputStream());
                OutputStream o = c.getOutputStream();
                o.write(answer.getBytes(StandardCharsets.US_ASCII));
                o.flush();
                c.setSoTimeout(60_000);
                while (c.getInputStream().read() >= 0) {
                  // the client's bytes, if any, until it closes the connection
                }
              } catch (IOException e) {
                // test over
              }
            });
    t.setDaemon(true);
    t.start();
  }

  private static void awaitZero(java.util.function.IntSupplier n) {
    Raw.await("the count returns to 0", () -> n.getAsInt() == 0);
  }

  private static void readHead(InputStream in) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    int c;
    while ((c = in.read()) >= 0) {
      b.write(c);
      byte[] a = b.toByteArray();
      int n = a.length;
      if (n >= 4 && a[n - 4] == '\r' && a[n - 3] == '\n' && a[n - 2] == '\r' && a[n - 1] == '\n') {
        String head = b.toString(StandardCharsets.US_ASCII);
        int i = head.toLowerCase().indexOf("content-length: ");
        if (i >= 0) {
          int len = Integer.parseInt(head.substring(i + 16, head.indexOf('\r', i)).trim());
          in.readNBytes(len);
        }
        return;
      }
    }
  }

  /** A publisher of 1 KiB chunks for as long as it is asked, counting what it made. */
  private static Flow.Publisher<ByteBuffer> endless(AtomicInteger produced) {
    return s ->
        s.onSubscribe(
            new Flow.Subscription() {
              private boolean cancelled;
              private boolean emitting;
              private long demand;

              @Override
              public synchronized void request(long n) {
                demand += n;
                if (emitting) {
                  return;
                }
                emitting = true;
                while (demand > 0 && !cancelled) {
                  demand--;
                  produced.addAndGet(1024);
                  s.onNext(ByteBuffer.wrap(new byte[1024]));
                }
                emitting = false;
              }

              @Override
              public synchronized void cancel() {
                cancelled = true;
              }
            });
  }

  /** Collects items; the test drives demand. */
  private static final class BlockingSubscriber implements Flow.Subscriber<ByteBuffer> {
    final CompletableFuture<Flow.Subscription> subscription = new CompletableFuture<>();
    final List<ByteBuffer> items = new CopyOnWriteArrayList<>();

    @Override
    public void onSubscribe(Flow.Subscription s) {
      subscription.complete(s);
    }

    @Override
    public void onNext(ByteBuffer item) {
      items.add(item);
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onComplete() {}

    void awaitItems(int n) {
      Raw.await(n + " items", () -> items.size() >= n);
    }
  }
}
