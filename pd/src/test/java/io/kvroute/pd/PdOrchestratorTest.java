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
import io.kvroute.connector.contract.DroppingPod;
import io.kvroute.connector.contract.KVConnectorContract;
import io.kvroute.connector.http.HttpConnector;
import io.kvroute.connector.http.OkHttpTransport;
import io.kvroute.pd.PdOrchestrator.Pair;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
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

  /** One attempt a request, and a breaker of {@code policy} that stays open for five minutes. */
  private PdOrchestrator withBreaker(BreakerPolicy.Builder policy) {
    return orchestrator()
        .retry(new ConnectorConfig.Retry(1, Duration.ZERO, Duration.ZERO))
        .circuitBreaker(policy.openFor(Duration.ofMinutes(5)).build())
        .build();
  }

  private static InferenceRequest request() {
    return InferenceRequest.of(
        InferenceRequest.Api.COMPLETIONS,
        "{\"prompt\":\"hello\"}".getBytes(StandardCharsets.UTF_8),
        Map.of("X-Request-Id", List.of("req-1")),
        "fb");
  }

  private static MockResponse ok(String body) {
    return KVConnectorContract.json(200, body);
  }

  private static MockResponse status(int code) {
    return new MockResponse.Builder().code(code).body("{\"error\":\"" + code + "\"}").build();
  }

  private static String body(StreamingResponse r) throws Exception {
    return new String(r.readAll(1 << 20).get(10, TimeUnit.SECONDS), StandardCharsets.UTF_8);
  }

  private static Throwable failure(CompletableFuture<?> f) {
    return KVConnectorContract.failure(f);
  }

  /** The request proxied decode-only over {@code decodes} in turn: the response, head in. */
  private StreamingResponse decodeOnlyOver(Endpoint... decodes) throws Exception {
    return orchestrator()
        .build()
        .execute(request(), Arrays.stream(decodes).map(Pair::decodeOnly).toList())
        .get(20, TimeUnit.SECONDS);
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
    StreamingResponse r = decodeOnlyOver(d1, d2);
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
        withBreaker(BreakerPolicy.builder().windowSize(2).minimumCalls(2).failureRatePercent(50));
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
    PdOrchestrator o = withBreaker(BreakerPolicy.builder().windowSize(1).minimumCalls(1));
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
    try (DroppingPod d1 = new DroppingPod("data: {\"x\":1}\n\n")) {
      StreamingResponse r = decodeOnlyOver(d1.endpoint("d1", Endpoint.Role.DECODE), d2);
      Throwable err = failure(r.readAll(1 << 20));
      assertThat(err).isInstanceOf(UpstreamException.class);
      assertThat(server(d2).getRequestCount()).isZero();
    }
  }

  @Test
  void anSseStreamThatEndsWithoutDoneIsAnUpstreamFailure() throws Exception {
    Endpoint d = pod("d", Endpoint.Role.DECODE);
    server(d).enqueue(sse("data: {\"x\":1}\n\n"));
    StreamingResponse r = decodeOnlyOver(d);
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
    StreamingResponse r = decodeOnlyOver(d);
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
    try (DroppingPod d1 = new DroppingPod(null)) {
      StreamingResponse r = decodeOnlyOver(d1.endpoint("d1", Endpoint.Role.DECODE), d2);
      assertThat(body(r)).isEqualTo("{\"second\":true}");
      assertThat(retries).containsExactly("2:io");
    }
  }

  @Test
  void cancellingTheRequestCancelsTheLegInFlight() throws Exception {
    Endpoint p = pod("p", Endpoint.Role.PREFILL);
    Endpoint d = pod("d", Endpoint.Role.DECODE);
    server(p).enqueue(KVConnectorContract.stalled());
    CompletableFuture<StreamingResponse> f =
        orchestrator().build().execute(request(), List.of(new Pair(p, d)));
    KVConnectorContract.await("prefill received", () -> server(p).getRequestCount() > 0);
    f.cancel(true);
    KVConnectorContract.await("prefill call cancelled", () -> transport.callsAwaitingHead() == 0);
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
}
