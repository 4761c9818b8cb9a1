package io.kvroute.pd;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.AllAttemptsFailedException;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.contract.KVConnectorContract;
import io.kvroute.connector.http.HttpConnector;
import io.kvroute.connector.http.OkHttpTransport;
import io.kvroute.pd.PdOrchestrator.Pair;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.RecordedRequest;
import mockwebserver3.SocketEffect;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Retry, breaker and budget rules of {@link PdOrchestrator}, over real HTTP pods. */
class PdOrchestratorTest {

  /** Runs scheduled work at once but records the delay that was asked for. */
  static final class RecordingScheduler extends ScheduledThreadPoolExecutor {
    final List<Long> delaysNanos = new CopyOnWriteArrayList<>();

    RecordingScheduler() {
      super(1);
    }

    @Override
    public ScheduledFuture<?> schedule(Runnable command, long delay, TimeUnit unit) {
      delaysNanos.add(unit.toNanos(delay));
      return super.schedule(command, 0, TimeUnit.NANOSECONDS);
    }
  }

  private final List<MockWebServer> servers = new ArrayList<>();
  private final List<String> retries = new CopyOnWriteArrayList<>();
  private OkHttpTransport transport;
  private RecordingScheduler scheduler;
  private KVConnector connector;
  private SimpleMeterRegistry meters;
  private ConnectorListener listener;

  @BeforeEach
  void setUp() {
    transport = OkHttpTransport.create();
    scheduler = new RecordingScheduler();
    meters = new SimpleMeterRegistry();
    MicrometerConnectorListener micrometer = new MicrometerConnectorListener(meters);
    listener =
        new ConnectorListener() {
          @Override
          public void retry(String type, int attempt, ConnectorException cause) {
            retries.add(attempt + ":" + ConnectorListener.outcome(cause));
            micrometer.retry(type, attempt, cause);
          }

          @Override
          public void failed(String type, ConnectorException cause) {
            micrometer.failed(type, cause);
          }

          @Override
          public void circuitStateChanged(String endpointId, boolean open) {
            micrometer.circuitStateChanged(endpointId, open);
          }

          @Override
          public void prefillEnded(String type, String id, String outcome, long nanos) {
            micrometer.prefillEnded(type, id, outcome, nanos);
          }

          @Override
          public void decodeFirstByte(String type, String id, long nanos) {
            micrometer.decodeFirstByte(type, id, nanos);
          }
        };
    connector =
        new HttpConnector(
            KVConnectorProvider.Context.builder(ConnectorConfig.of("http"), transport, scheduler)
                .listener(listener)
                .build());
  }

  @AfterEach
  void tearDown() {
    transport.close();
    scheduler.shutdownNow();
    servers.forEach(MockWebServer::close);
  }

  private Endpoint pod(String id, Endpoint.Role role) throws IOException {
    MockWebServer s = new MockWebServer();
    s.start();
    servers.add(s);
    return Endpoint.builder(id, "127.0.0.1", s.getPort())
        .role(role)
        .labels(Map.of("index", "" + (servers.size() - 1)))
        .build();
  }

  private MockWebServer server(Endpoint e) {
    return servers.get(Integer.parseInt(e.label("index")));
  }

  private PdOrchestrator.Builder orchestrator() {
    return PdOrchestrator.builder(connector, scheduler)
        .listener(listener)
        .retryBudget(RetryBudget.unlimited())
        .retry(new ConnectorConfig.Retry(3, Duration.ofMillis(100), Duration.ofSeconds(2)));
  }

  private static InferenceRequest request() {
    return InferenceRequest.of(
        InferenceRequest.Api.COMPLETIONS,
        "{\"prompt\":\"hello\"}".getBytes(StandardCharsets.UTF_8),
        Map.of("X-Request-Id", List.of("req-1")),
        "fb");
  }

  private static MockResponse ok(String body) {
    return new MockResponse.Builder()
        .code(200)
        .setHeader("Content-Type", "application/json")
        .body(body)
        .build();
  }

  private static MockResponse status(int code) {
    return new MockResponse.Builder().code(code).body("{\"error\":\"" + code + "\"}").build();
  }

  private static String body(StreamingResponse r) throws Exception {
    return new String(r.readAll(1 << 20).get(10, TimeUnit.SECONDS), StandardCharsets.UTF_8);
  }

  private static Throwable failure(CompletableFuture<?> f) throws Exception {
    try {
      f.get(20, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      return e.getCause();
    }
    throw new AssertionError("expected a failure");
  }

  @Test
  void prefillFailureMovesToTheNextPairWithAFreshRequestId() throws Exception {
    Endpoint p1 = pod("p1", Endpoint.Role.PREFILL);
    Endpoint p2 = pod("p2", Endpoint.Role.PREFILL);
    Endpoint d1 = pod("d1", Endpoint.Role.DECODE);
    Endpoint d2 = pod("d2", Endpoint.Role.DECODE);
    server(p1).enqueue(status(503));
    server(p2).enqueue(ok("{}"));
    server(d2).enqueue(ok("{\"answer\":2}"));
    StreamingResponse r =
        orchestrator()
            .build()
            .execute(request(), List.of(new Pair(p1, d1), new Pair(p2, d2)))
            .get(20, TimeUnit.SECONDS);
    assertThat(body(r)).isEqualTo("{\"answer\":2}");
    assertThat(server(d1).getRequestCount()).isZero();
    RecordedRequest first = server(p1).takeRequest();
    RecordedRequest second = server(p2).takeRequest();
    assertThat(first.getHeaders().get("X-Request-Id")).isEqualTo("req-1");
    assertThat(second.getHeaders().get("X-Request-Id")).isEqualTo("req-1-r2");
    assertThat(server(d2).takeRequest().getHeaders().get("X-Request-Id")).isEqualTo("req-1-r2");
    assertThat(retries).containsExactly("2:status_5xx");
    assertThat(meters.get("kvroute.connector.retries").counter().count()).isEqualTo(1);
  }

  @Test
  void attemptObserverSeesEachAttemptEndExactlyOnce() throws Exception {
    Endpoint d1 = pod("d1", Endpoint.Role.DECODE);
    Endpoint d2 = pod("d2", Endpoint.Role.DECODE);
    server(d1).enqueue(status(500));
    server(d2).enqueue(ok("{\"n\":2}"));
    List<String> seen = new CopyOnWriteArrayList<>();
    PdOrchestrator.AttemptObserver observer =
        new PdOrchestrator.AttemptObserver() {
          @Override
          public void started(int attempt, Pair pair) {
            seen.add("start " + attempt + " " + pair.decode().id());
          }

          @Override
          public void ended(int attempt, Pair pair, Throwable failure) {
            seen.add(
                "end "
                    + attempt
                    + " "
                    + pair.decode().id()
                    + " "
                    + (failure == null ? "ok" : "failed"));
          }
        };
    StreamingResponse r =
        orchestrator()
            .build()
            .execute(request(), List.of(Pair.decodeOnly(d1), Pair.decodeOnly(d2)), observer)
            .get(20, TimeUnit.SECONDS);
    assertThat(seen).containsExactly("start 1 d1", "end 1 d1 failed", "start 2 d2");
    body(r);
    assertThat(seen).containsExactly("start 1 d1", "end 1 d1 failed", "start 2 d2", "end 2 d2 ok");
  }

  @Test
  void clientErrorsAreNotRetried() throws Exception {
    Endpoint p1 = pod("p1", Endpoint.Role.PREFILL);
    Endpoint d1 = pod("d1", Endpoint.Role.DECODE);
    Endpoint d2 = pod("d2", Endpoint.Role.DECODE);
    server(p1).enqueue(ok("{}"));
    server(d1).enqueue(status(400));
    Throwable t =
        failure(
            orchestrator().build().execute(request(), List.of(new Pair(p1, d1), new Pair(p1, d2))));
    assertThat(t).isInstanceOf(UpstreamException.class);
    assertThat(((UpstreamException) t).httpStatus()).isEqualTo(400);
    assertThat(server(d2).getRequestCount()).isZero();
    assertThat(retries).isEmpty();
  }

  @Test
  void tooManyRequestsIsRetriedAfterRetryAfter() throws Exception {
    Endpoint d1 = pod("d1", Endpoint.Role.DECODE);
    Endpoint d2 = pod("d2", Endpoint.Role.DECODE);
    server(d1)
        .enqueue(
            new MockResponse.Builder()
                .code(429)
                .setHeader("Retry-After", "1")
                .body("slow down")
                .build());
    server(d2).enqueue(ok("{\"ok\":1}"));
    StreamingResponse r =
        orchestrator()
            .build()
            .execute(request(), List.of(Pair.decodeOnly(d1), Pair.decodeOnly(d2)))
            .get(20, TimeUnit.SECONDS);
    assertThat(body(r)).isEqualTo("{\"ok\":1}");
    assertThat(scheduler.delaysNanos).containsExactly(Duration.ofSeconds(1).toNanos());
  }

  @Test
  void everyFailedAttemptIsListed() throws Exception {
    List<Pair> pairs = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      Endpoint d = pod("d" + i, Endpoint.Role.DECODE);
      server(d).enqueue(status(502));
      pairs.add(Pair.decodeOnly(d));
    }
    Throwable t = failure(orchestrator().build().execute(request(), pairs));
    assertThat(t).isInstanceOf(AllAttemptsFailedException.class);
    AllAttemptsFailedException all = (AllAttemptsFailedException) t;
    assertThat(all.attempts())
        .extracting(AllAttemptsFailedException.Attempt::decodeId)
        .containsExactly("d0", "d1", "d2");
    assertThat(all.getMessage())
        .contains("retry.maxAttempts=3")
        .contains("attempt 3 (prefill=-, decode=d2)");
    assertThat(server(pairs.get(3).decode()).getRequestCount()).isZero();
    assertThat(meters.get("kvroute.connector.errors").counter().count()).isEqualTo(1);
  }

  @Test
  void openBreakerSkipsThePodWithinTheEjectionCap() throws Exception {
    Endpoint p1 = pod("p1", Endpoint.Role.PREFILL);
    Endpoint p2 = pod("p2", Endpoint.Role.PREFILL);
    Endpoint d = pod("d", Endpoint.Role.DECODE);
    PdOrchestrator o =
        orchestrator()
            .retry(new ConnectorConfig.Retry(1, Duration.ZERO, Duration.ZERO))
            .circuitBreaker(
                BreakerPolicy.builder()
                    .windowSize(2)
                    .minimumCalls(2)
                    .failureRatePercent(50)
                    .openFor(Duration.ofMinutes(5))
                    .build())
            .build();
    o.addEndpoint("p2");
    server(p1).enqueue(status(500));
    server(p1).enqueue(status(500));
    failure(o.execute(request(), List.of(new Pair(p1, d))));
    failure(o.execute(request(), List.of(new Pair(p1, d))));
    assertThat(o.ejectedEndpoints()).containsExactly("p1");
    assertThat(meters.get("kvroute.connector.circuit.open").gauge().value()).isEqualTo(1);
    server(p2).enqueue(ok("{}"));
    server(d).enqueue(ok("{\"via\":\"p2\"}"));
    StreamingResponse r =
        o.execute(request(), List.of(new Pair(p1, d), new Pair(p2, d))).get(20, TimeUnit.SECONDS);
    assertThat(body(r)).isEqualTo("{\"via\":\"p2\"}");
    assertThat(server(p1).getRequestCount()).isEqualTo(2);
  }

  @Test
  void noMoreThanHalfTheFleetIsEjected() throws Exception {
    Endpoint d1 = pod("d1", Endpoint.Role.DECODE);
    Endpoint d2 = pod("d2", Endpoint.Role.DECODE);
    PdOrchestrator o =
        orchestrator()
            .retry(new ConnectorConfig.Retry(1, Duration.ZERO, Duration.ZERO))
            .circuitBreaker(
                BreakerPolicy.builder()
                    .windowSize(1)
                    .minimumCalls(1)
                    .openFor(Duration.ofMinutes(5))
                    .build())
            .build();
    server(d1).enqueue(status(500));
    server(d2).enqueue(status(500));
    failure(o.execute(request(), List.of(Pair.decodeOnly(d1))));
    failure(o.execute(request(), List.of(Pair.decodeOnly(d2))));
    assertThat(o.breakerState("d1")).isEqualTo(BreakerState.OPEN);
    assertThat(o.breakerState("d2")).isEqualTo(BreakerState.OPEN);
    assertThat(o.ejectedEndpoints()).containsExactly("d1");
    server(d2).enqueue(ok("{\"still\":\"served\"}"));
    StreamingResponse r =
        o.execute(request(), List.of(Pair.decodeOnly(d1), Pair.decodeOnly(d2)))
            .get(20, TimeUnit.SECONDS);
    assertThat(body(r)).isEqualTo("{\"still\":\"served\"}");
  }

  @Test
  void retryBudgetStopsRetryStorms() throws Exception {
    Endpoint d1 = pod("d1", Endpoint.Role.DECODE);
    Endpoint d2 = pod("d2", Endpoint.Role.DECODE);
    server(d1).enqueue(status(503));
    PdOrchestrator o = orchestrator().retryBudget(RetryBudget.of(0, 0, System::nanoTime)).build();
    Throwable t = failure(o.execute(request(), List.of(Pair.decodeOnly(d1), Pair.decodeOnly(d2))));
    assertThat(t)
        .isInstanceOf(AllAttemptsFailedException.class)
        .hasMessageContaining("retry budget exhausted");
    assertThat(server(d2).getRequestCount()).isZero();
  }

  @Test
  void noRetryOnceTheFirstByteWasDelivered() throws Exception {
    Endpoint d2 = pod("d2", Endpoint.Role.DECODE);
    try (ServerSocket raw = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      Thread t = rawServer(raw, "data: {\"x\":1}\n\n");
      Endpoint d1 =
          Endpoint.builder("d1", "127.0.0.1", raw.getLocalPort())
              .role(Endpoint.Role.DECODE)
              .build();
      StreamingResponse r =
          orchestrator()
              .build()
              .execute(request(), List.of(Pair.decodeOnly(d1), Pair.decodeOnly(d2)))
              .get(20, TimeUnit.SECONDS);
      Throwable err = failure(r.readAll(1 << 20));
      assertThat(err).isInstanceOf(UpstreamException.class);
      assertThat(server(d2).getRequestCount()).isZero();
      t.join(10_000);
    }
  }

  @Test
  void anSseStreamThatEndsWithoutDoneIsAnUpstreamFailure() throws Exception {
    Endpoint d = pod("d", Endpoint.Role.DECODE);
    server(d).enqueue(sse("data: {\"x\":1}\n\n"));
    StreamingResponse r =
        orchestrator()
            .build()
            .execute(request(), List.of(Pair.decodeOnly(d)))
            .get(20, TimeUnit.SECONDS);
    Throwable err = failure(r.readAll(1 << 20));
    assertThat(err)
        .isInstanceOf(UpstreamException.class)
        .hasMessageContaining("ended without data: [DONE]");
    assertThat(((UpstreamException) err).kind()).isEqualTo(UpstreamException.Kind.PROTOCOL);
  }

  @Test
  void anSseStreamEndingWithDoneCompletesEvenWhenDoneIsSplitAcrossChunks() throws Exception {
    Endpoint d = pod("d", Endpoint.Role.DECODE);
    String events = "data: {\"x\":1}\n\ndata: [DO";
    server(d)
        .enqueue(
            new MockResponse.Builder()
                .addHeader("Content-Type", "text/event-stream")
                .chunkedBody(events + "NE]\n\n", 3)
                .build());
    StreamingResponse r =
        orchestrator()
            .build()
            .execute(request(), List.of(Pair.decodeOnly(d)))
            .get(20, TimeUnit.SECONDS);
    assertThat(body(r)).isEqualTo(events + "NE]\n\n");
  }

  private static MockResponse sse(String body) {
    return new MockResponse.Builder()
        .addHeader("Content-Type", "text/event-stream")
        .body(body)
        .build();
  }

  @Test
  void aStreamThatBreaksBeforeItsFirstByteIsRetried() throws Exception {
    Endpoint d2 = pod("d2", Endpoint.Role.DECODE);
    server(d2).enqueue(ok("{\"second\":true}"));
    try (ServerSocket raw = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      Thread t = rawServer(raw, null);
      Endpoint d1 =
          Endpoint.builder("d1", "127.0.0.1", raw.getLocalPort())
              .role(Endpoint.Role.DECODE)
              .build();
      StreamingResponse r =
          orchestrator()
              .build()
              .execute(request(), List.of(Pair.decodeOnly(d1), Pair.decodeOnly(d2)))
              .get(20, TimeUnit.SECONDS);
      assertThat(body(r)).isEqualTo("{\"second\":true}");
      assertThat(retries).containsExactly("2:io");
      t.join(10_000);
    }
  }

  @Test
  void cancellingTheRequestCancelsTheLegInFlight() throws Exception {
    Endpoint p = pod("p", Endpoint.Role.PREFILL);
    Endpoint d = pod("d", Endpoint.Role.DECODE);
    server(p)
        .enqueue(new MockResponse.Builder().onResponseStart(SocketEffect.Stall.INSTANCE).build());
    CompletableFuture<StreamingResponse> f =
        orchestrator().build().execute(request(), List.of(new Pair(p, d)));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (server(p).getRequestCount() == 0 && System.nanoTime() < deadline) {
      TimeUnit.MILLISECONDS.sleep(5);
    }
    f.cancel(true);
    while (transport.callsAwaitingHead() > 0 && System.nanoTime() < deadline) {
      TimeUnit.MILLISECONDS.sleep(5);
    }
    assertThat(transport.callsAwaitingHead()).isZero();
    assertThat(server(d).getRequestCount()).isZero();
  }

  /** Answers GET /health with {@code healthStatus} and every POST with 200, counting POSTs. */
  private static mockwebserver3.Dispatcher pathDispatcher(
      int healthStatus,
      java.util.concurrent.atomic.AtomicInteger posts,
      java.util.concurrent.atomic.AtomicInteger probes) {
    return new mockwebserver3.Dispatcher() {
      @Override
      public MockResponse dispatch(RecordedRequest r) {
        if (r.getUrl().encodedPath().equals("/health")) {
          probes.incrementAndGet();
          return new MockResponse.Builder().code(healthStatus).build();
        }
        posts.incrementAndGet();
        return ok("{\"n\":1}");
      }
    };
  }

  @Test
  void healthGatingSkipsAPodWhoseHealthCheckFails() throws Exception {
    Endpoint sick = pod("sick", Endpoint.Role.DECODE);
    Endpoint well = pod("well", Endpoint.Role.DECODE);
    java.util.concurrent.atomic.AtomicInteger sickPosts =
        new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.atomic.AtomicInteger sickProbes =
        new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.atomic.AtomicInteger wellPosts =
        new java.util.concurrent.atomic.AtomicInteger();
    server(sick).setDispatcher(pathDispatcher(503, sickPosts, sickProbes));
    server(well)
        .setDispatcher(
            pathDispatcher(200, wellPosts, new java.util.concurrent.atomic.AtomicInteger()));
    PdOrchestrator o = orchestrator().healthCheckInterval(Duration.ofMinutes(10)).build();
    // The first request learns nothing yet (probes run in the background), so it may use either.
    body(
        o.execute(request(), List.of(Pair.decodeOnly(sick), Pair.decodeOnly(well)))
            .get(20, TimeUnit.SECONDS));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (sickProbes.get() == 0 && System.nanoTime() < deadline) {
      TimeUnit.MILLISECONDS.sleep(5);
    }
    assertThat(sickProbes.get()).as("sick pod probed").isPositive();
    // Let the probe's result land before the next request looks at it.
    while (o.ejectedEndpoints().isEmpty() && System.nanoTime() < deadline) {
      int before = sickPosts.get();
      body(
          o.execute(request(), List.of(Pair.decodeOnly(sick), Pair.decodeOnly(well)))
              .get(20, TimeUnit.SECONDS));
      if (sickPosts.get() == before) {
        break; // skipped: the probe result is in
      }
    }
    int sickBefore = sickPosts.get();
    int wellBefore = wellPosts.get();
    for (int i = 0; i < 3; i++) {
      body(
          o.execute(request(), List.of(Pair.decodeOnly(sick), Pair.decodeOnly(well)))
              .get(20, TimeUnit.SECONDS));
    }
    assertThat(sickPosts.get()).isEqualTo(sickBefore);
    assertThat(wellPosts.get()).isEqualTo(wellBefore + 3);
  }

  @Test
  void noPairsIsAClear503() throws Exception {
    Throwable t = failure(orchestrator().build().execute(request(), List.of()));
    assertThat(t).isInstanceOf(ConnectorException.NoAvailableEndpointException.class);
    assertThat(((ConnectorException) t).httpStatus()).isEqualTo(503);
  }

  /**
   * A decode pod that answers 200 with a chunked body, sends {@code chunk} (or nothing), then
   * drops.
   */
  private static Thread rawServer(ServerSocket raw, String chunk) {
    Thread t =
        new Thread(
            () -> {
              try (Socket s = raw.accept()) {
                KVConnectorContract.readRequest(s.getInputStream());
                StringBuilder sb =
                    new StringBuilder(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
                if (chunk != null) {
                  sb.append(Integer.toHexString(chunk.length()))
                      .append("\r\n")
                      .append(chunk)
                      .append("\r\n");
                }
                s.getOutputStream().write(sb.toString().getBytes(StandardCharsets.UTF_8));
                s.getOutputStream().flush();
              } catch (IOException e) {
                // assertions in the test report the problem
              }
            });
    t.setDaemon(true);
    t.start();
    return t;
  }
}
