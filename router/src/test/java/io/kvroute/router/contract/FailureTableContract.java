package io.kvroute.router.contract;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.FailureAnswer;
import io.kvroute.router.KvRouter;
import io.kvroute.router.flow.FlowControlConfig;
import io.kvroute.router.flow.RequestDroppedException;
import io.kvroute.scoring.EndpointMetrics;
import io.kvroute.scoring.Filter;
import io.kvroute.scoring.LatencySlo;
import io.kvroute.scoring.Pickers;
import io.kvroute.scoring.Profile;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulingContext;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.stream.Stream;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.SocketEffect;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * kvroute's failure-to-answer table ({@link FailureAnswer}, {@code docs/http-edge.md}) run against
 * a front: every row builds a router over real pods ({@link MockWebServer}) that fail one way,
 * sends one request through the front, and checks the status, the error {@code type}, {@code
 * Retry-After}, the body relayed from the engine, and the SSE error event of a stream cut after its
 * first byte. Each front (the CLI's {@code OpenAiFront}, the Spring Cloud Gateway filter, the Envoy
 * picker) extends it with {@link #send}; a front that only picks endpoints ({@link #runsLegs()}
 * false) runs the rows decided before any leg.
 *
 * <p>Shipped in router's test-jar; the extending module adds {@code mockwebserver3-junit5} to its
 * test dependencies.
 */
public abstract class FailureTableContract {
  private static final String MODEL = "m";
  private final List<AutoCloseable> closeables = new ArrayList<>();

  /**
   * What the client saw.
   *
   * @param status the HTTP status
   * @param headers the response headers, names in lower case
   * @param body the body as text
   */
  protected record Seen(int status, Map<String, String> headers, String body) {
    /** Lower-cases the header names. */
    public Seen {
      Map<String, String> h = new TreeMap<>();
      headers.forEach((k, v) -> h.put(k.toLowerCase(Locale.ROOT), v));
      headers = h;
    }
  }

  /**
   * Serves one client request with {@code headers} through the front under test, routed by {@code
   * router}, over a real socket where the front has one, and returns what the client saw once the
   * answer (its whole body) arrived.
   */
  protected abstract Seen send(
      KvRouter router, InferenceRequest.Api api, byte[] body, Map<String, String> headers)
      throws Exception;

  /**
   * True when the front runs the prefill and decode legs itself (the gateway, the Spring filter in
   * relay mode); false when it only picks the endpoint and the proxy runs the legs (Envoy).
   */
  protected boolean runsLegs() {
    return true;
  }

  /** Closes what the rows started. */
  @AfterEach
  void closeAll() throws Exception {
    for (int i = closeables.size() - 1; i >= 0; i--) {
      closeables.get(i).close();
    }
    closeables.clear();
  }

  /** One row of the table: the failure, how to provoke it, and the answer expected. */
  private record Row(String failure, boolean needsLegs, RowTest test) {}

  @FunctionalInterface
  private interface RowTest {
    void run() throws Exception;
  }

  @TestFactory
  Stream<DynamicTest> theFailureTable() {
    List<Row> rows =
        List.of(
            new Row("a body that is not JSON", false, this::notJson),
            new Row("a body without model", false, this::noModel),
            new Row("no endpoint serves the model", false, this::noEndpoint),
            new Row("every endpoint refused by the filters (saturated)", false, this::saturated),
            new Row("an upstream 429 with Retry-After", true, this::upstream429),
            new Row("an upstream 4xx with a JSON body", true, this::upstream400),
            new Row("an upstream 500", true, this::upstream500),
            new Row("an upstream timeout", true, this::upstreamTimeout),
            new Row("an upstream connection refused", true, this::connectionRefused),
            new Row("an SSE stream cut after its first byte", true, this::sseCut),
            new Row("flow control: the queue is full (queue-full)", false, this::queueFull),
            new Row("flow control: a wait past the band's TTL (ttl-expired)", false, this::ttl),
            new Row(
                "flow control: a higher band evicts a waiting lower one (shed-lower-priority)",
                false,
                this::shed),
            new Row(
                "flow control: no endpoint can meet the TTFT objective (slo-unattainable)",
                false,
                this::sloUnattainable),
            new Row(
                "flow control: a malformed priority or objective header",
                false,
                this::badFlowHeaders));
    return rows.stream()
        .filter(r -> runsLegs() || !r.needsLegs())
        .map(r -> DynamicTest.dynamicTest(r.failure(), () -> r.test().run()));
  }

  // ---------------------------------------------------------------- rows

  private void notJson() throws Exception {
    Seen s = send(router(decodePod(null), b -> {}), completions("{\"model\": "));
    assertAnswer(s, 400, FailureAnswer.INVALID_REQUEST, null);
  }

  private void noModel() throws Exception {
    Seen s = send(router(decodePod(null), b -> {}), completions("{\"prompt\":\"hi\"}"));
    assertAnswer(s, 400, FailureAnswer.INVALID_REQUEST, null);
  }

  private void noEndpoint() throws Exception {
    Endpoint other = decodePod(null).withLabels(Map.of(KvRouter.MODEL_LABEL, "another-model"));
    Seen s = send(router(other, b -> {}), completions(prompt(false)));
    assertAnswer(s, 503, FailureAnswer.NO_ENDPOINT, null);
  }

  private void saturated() throws Exception {
    Filter refuseAll =
        new Filter() {
          @Override
          public String name() {
            return "refuse-all";
          }

          @Override
          public List<Endpoint> filter(SchedulingContext context, List<Endpoint> candidates) {
            return List.of();
          }
        };
    Scheduler scheduler =
        Scheduler.builder()
            .profile(
                Profile.builder(Scheduler.DECODE_PROFILE)
                    .filter(refuseAll)
                    .picker(Pickers.topN(1))
                    .build())
            .build();
    Seen s = send(router(decodePod(null), b -> b.scheduler(scheduler)), completions(prompt(false)));
    assertAnswer(s, 429, FailureAnswer.SATURATED, "1");
  }

  private void upstream429() throws Exception {
    MockResponse busy =
        new MockResponse.Builder().code(429).setHeader("Retry-After", "7").body("busy").build();
    Seen s = send(router(decodePod(busy), b -> {}), completions(prompt(false)));
    assertAnswer(s, 503, FailureAnswer.UPSTREAM_UNAVAILABLE, "7");
  }

  private void upstream400() throws Exception {
    String engine = "{\"object\":\"error\",\"message\":\"max_tokens is too large\",\"code\":400}";
    MockResponse refused =
        new MockResponse.Builder()
            .code(400)
            .setHeader("Content-Type", "application/json")
            .body(engine)
            .build();
    Seen s = send(router(decodePod(refused), b -> {}), completions(prompt(false)));
    assertThat(s.status()).isEqualTo(400);
    assertThat(s.body()).isEqualTo(engine);
    assertThat(s.headers()).doesNotContainKey("retry-after");
  }

  private void upstream500() throws Exception {
    MockResponse broken = new MockResponse.Builder().code(500).body("oops").build();
    Seen s = send(router(decodePod(broken), b -> {}), completions(prompt(false)));
    assertAnswer(s, 502, FailureAnswer.UPSTREAM_ERROR, null);
  }

  private void upstreamTimeout() throws Exception {
    MockResponse stalled =
        new MockResponse.Builder().onResponseStart(SocketEffect.Stall.INSTANCE).build();
    ConnectorConfig quick =
        oneAttempt()
            .withTimeouts(
                new ConnectorConfig.Timeouts(
                    Duration.ofSeconds(5),
                    Duration.ofMillis(300),
                    Duration.ofSeconds(5),
                    Duration.ofSeconds(5)));
    Seen s =
        send(
            router(decodePod(stalled), b -> b.defaultConnector(quick)), completions(prompt(false)));
    assertAnswer(s, 504, FailureAnswer.UPSTREAM_TIMEOUT, null);
  }

  private void connectionRefused() throws Exception {
    int closed;
    try (ServerSocket s = new ServerSocket(0)) {
      closed = s.getLocalPort();
    }
    Endpoint gone =
        Endpoint.builder("gone", "127.0.0.1", closed).role(Endpoint.Role.DECODE).build();
    Seen s = send(router(gone, b -> {}), completions(prompt(false)));
    assertAnswer(s, 502, FailureAnswer.UPSTREAM_ERROR, null);
  }

  private void sseCut() throws Exception {
    MockResponse cut =
        new MockResponse.Builder()
            .code(200)
            .setHeader("Content-Type", "text/event-stream")
            .body("data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
            .build();
    Seen s = send(router(decodePod(cut), b -> {}), completions(prompt(true)));
    assertThat(s.status()).isEqualTo(200);
    assertThat(s.body())
        .startsWith("data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
        .contains("data: {\"error\":{")
        .contains("\"type\":\"" + FailureAnswer.UPSTREAM_ERROR + "\"")
        .doesNotContainPattern("(?m)^data: \\[DONE\\]")
        .endsWith("}}\n\n");
  }

  // ---------------------------------------------------------------- flow control rows

  /**
   * A router with flow control whose one pod reports a waiting queue far beyond the saturation
   * threshold: every request must wait. Bands: {@code critical} (100) and {@code standard} (0) wait
   * 300 ms at most, {@code sheddable} (−100) 60 s; tenants are named by {@code x-tenant}.
   */
  private KvRouter saturated(int maxQueued, MeterRegistry registry) throws IOException {
    Duration ttl = Duration.ofMillis(300);
    FlowControlConfig config =
        FlowControlConfig.builder()
            .maxQueued(maxQueued)
            .tenantHeader("x-tenant")
            .bands(
                List.of(
                    new FlowControlConfig.Band(
                        "critical", 100, 10, ttl, FlowControlConfig.Ordering.FCFS, 1, false),
                    new FlowControlConfig.Band(
                        "standard", 0, 10, ttl, FlowControlConfig.Ordering.FCFS, 1, false),
                    new FlowControlConfig.Band(
                        "sheddable",
                        -100,
                        10,
                        Duration.ofSeconds(60),
                        FlowControlConfig.Ordering.FCFS,
                        1,
                        true)))
            .build();
    KvRouter r = router(decodePod(null), b -> b.flowControl(config).meterRegistry(registry));
    // 1,000 waiting requests at the engine (saturated at 5), fresh for the row's duration
    r.scheduler().metricsStore().update("d0", EndpointMetrics.of(1000, 0, 0.0));
    return r;
  }

  private static void assertDropped(Seen s, String reason) {
    assertAnswer(s, 429, FailureAnswer.DROPPED, "1");
    assertThat(s.headers().get(RequestDroppedException.HEADER))
        .as("x-kvroute-dropped-reason of %s", s)
        .isEqualTo(reason);
    assertThat(s.body()).contains(reason);
  }

  private static double dropped(MeterRegistry registry, String reason, String tenant) {
    return registry
        .find("kvroute.flow.dropped")
        .tag("reason", reason)
        .tag("tenant", tenant)
        .counters()
        .stream()
        .mapToDouble(io.micrometer.core.instrument.Counter::count)
        .sum();
  }

  private void queueFull() throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    KvRouter r = saturated(0, registry);
    Seen s = send(r, completions(prompt(false)), Map.of("x-tenant", "acme"));
    assertDropped(s, "queue-full");
    assertThat(dropped(registry, "queue-full", "acme")).isEqualTo(1);
  }

  private void ttl() throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    KvRouter r = saturated(10, registry);
    // no tenant header: the API key's hash names the tenant
    Seen s = send(r, completions(prompt(false)), Map.of("Authorization", "Bearer sk-secret"));
    assertDropped(s, "ttl-expired");
    assertThat(
            registry.find("kvroute.flow.dropped").tag("reason", "ttl-expired").counters().stream()
                .filter(c -> c.count() == 1)
                .map(c -> c.getId().getTag("tenant"))
                .toList())
        .singleElement()
        .asString()
        .startsWith("key-")
        .doesNotContain("sk-secret");
  }

  private void shed() throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    KvRouter r = saturated(1, registry);
    ExecutorService client = Executors.newSingleThreadExecutor();
    try {
      Future<Seen> low =
          client.submit(
              () ->
                  send(
                      r,
                      completions(prompt(false)),
                      Map.of(FlowControlConfig.PRIORITY_HEADER, "-5", "x-tenant", "batch")));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (registry.get("kvroute.flow.queued").gauge().value() < 1) {
        assertThat(System.nanoTime()).as("the low request waits").isLessThan(deadline);
        Thread.onSpinWait();
      }
      Seen high =
          send(
              r,
              completions(prompt(false)),
              Map.of(FlowControlConfig.PRIORITY_HEADER, "100", "x-tenant", "chat"));
      assertDropped(low.get(30, TimeUnit.SECONDS), "shed-lower-priority");
      assertDropped(high, "ttl-expired");
      assertThat(dropped(registry, "shed-lower-priority", "batch")).isEqualTo(1);
      assertThat(
              registry
                  .find("kvroute.flow.dropped")
                  .tag("band", "critical")
                  .tag("reason", "ttl-expired")
                  .counter()
                  .count())
          .isEqualTo(1);
    } finally {
      client.shutdownNow();
    }
  }

  private void sloUnattainable() throws Exception {
    KvRouter r = saturated(10, new SimpleMeterRegistry());
    Seen s = send(r, completions(prompt(false)), Map.of(LatencySlo.TTFT_HEADER, "50"));
    assertDropped(s, "slo-unattainable");
  }

  private void badFlowHeaders() throws Exception {
    KvRouter r = saturated(10, new SimpleMeterRegistry());
    Seen p = send(r, completions(prompt(false)), Map.of(FlowControlConfig.PRIORITY_HEADER, "high"));
    assertAnswer(p, 400, FailureAnswer.INVALID_REQUEST, null);
    assertThat(p.body()).contains(FlowControlConfig.PRIORITY_HEADER);
    Seen o = send(r, completions(prompt(false)), Map.of(LatencySlo.TPOT_HEADER, "0"));
    assertAnswer(o, 400, FailureAnswer.INVALID_REQUEST, null);
    assertThat(o.body()).contains(LatencySlo.TPOT_HEADER);
  }

  // ---------------------------------------------------------------- helpers

  private static void assertAnswer(Seen s, int status, String type, String retryAfter) {
    assertThat(s.status()).as("status of %s", s).isEqualTo(status);
    assertThat(s.body())
        .as("body")
        .contains("\"type\":\"" + type + "\"")
        .contains("\"code\":" + status);
    assertThat(s.headers().get("content-type")).as("content type").startsWith("application/json");
    assertThat(Optional.ofNullable(s.headers().get("retry-after")))
        .as("Retry-After")
        .isEqualTo(Optional.ofNullable(retryAfter));
  }

  private Seen send(KvRouter router, byte[] body) throws Exception {
    return send(router, InferenceRequest.Api.COMPLETIONS, body, Map.of());
  }

  private Seen send(KvRouter router, byte[] body, Map<String, String> headers) throws Exception {
    return send(router, InferenceRequest.Api.COMPLETIONS, body, headers);
  }

  private static byte[] completions(String json) {
    return json.getBytes(StandardCharsets.UTF_8);
  }

  private static String prompt(boolean stream) {
    return "{\"model\":\""
        + MODEL
        + "\",\"prompt\":\"hello\",\"max_tokens\":2"
        + (stream ? ",\"stream\":true" : "")
        + "}";
  }

  /** The default connector with one attempt: the row's failure is the answer. */
  private static ConnectorConfig oneAttempt() {
    return ConnectorConfig.of("http")
        .withRetry(new ConnectorConfig.Retry(1, Duration.ZERO, Duration.ZERO));
  }

  /** A decode pod answering {@code answer} (null: never asked), closed after the row. */
  private Endpoint decodePod(MockResponse answer) throws IOException {
    MockWebServer pod = new MockWebServer();
    if (answer != null) {
      pod.enqueue(answer);
    }
    pod.start();
    closeables.add(pod);
    return Endpoint.builder("d0", "127.0.0.1", pod.getPort()).role(Endpoint.Role.DECODE).build();
  }

  /** A router over {@code pod} with one attempt per request, closed after the row. */
  private KvRouter router(Endpoint pod, Consumer<KvRouter.Builder> setup) {
    KvRouter.Builder b = KvRouter.builder().endpoint(pod).defaultConnector(oneAttempt());
    setup.accept(b);
    KvRouter r = b.build();
    closeables.add(r);
    return r;
  }
}
