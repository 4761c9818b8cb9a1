package io.kvroute.router;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.flow.FlowControlConfig;
import io.kvroute.router.flow.RequestDroppedException;
import io.kvroute.scoring.Filter;
import io.kvroute.scoring.Filters;
import io.kvroute.scoring.Pickers;
import io.kvroute.scoring.Profile;
import io.kvroute.scoring.Scheduler;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class KvRouterTest {
  private final List<MockWebServer> servers = new ArrayList<>();
  private KvRouter router;

  @AfterEach
  void tearDown() {
    if (router != null) {
      router.close();
    }
    servers.forEach(MockWebServer::close);
  }

  private Endpoint pod(String id, Endpoint.Role role, Map<String, String> labels)
      throws IOException {
    MockWebServer s = new MockWebServer();
    s.start();
    servers.add(s);
    return Endpoint.builder(id, "127.0.0.1", s.getPort()).role(role).labels(labels).build();
  }

  /** A decode pod {@code id} without labels. */
  private Endpoint decodePod(String id) throws IOException {
    return pod(id, Endpoint.Role.DECODE, Map.of());
  }

  /** Decode pods d0 and d1, and {@link #router} over them with the defaults. */
  private List<Endpoint> routerOverTwoDecodePods() throws IOException {
    List<Endpoint> pods = List.of(decodePod("d0"), decodePod("d1"));
    router = KvRouter.builder().endpoints(pods).build();
    return pods;
  }

  private MockWebServer server(Endpoint e) {
    for (MockWebServer s : servers) {
      if (s.getPort() == e.port()) {
        return s;
      }
    }
    throw new AssertionError("no server for " + e);
  }

  private static InferenceRequest completion(String body) {
    return InferenceRequest.of(
        InferenceRequest.Api.COMPLETIONS,
        body.getBytes(StandardCharsets.UTF_8),
        Map.of("X-Request-Id", List.of("r-1")),
        "fb");
  }

  private static MockResponse ok(String body) {
    return new MockResponse.Builder()
        .code(200)
        .setHeader("Content-Type", "application/json")
        .body(body)
        .build();
  }

  private static InferenceRequest hello() {
    return completion("{\"model\":\"m\",\"prompt\":\"hello\"}");
  }

  /** {@link #hello()} routed by {@link #router}: the response, head in. */
  private RoutedResponse routeHello() throws Exception {
    return router.route(hello()).get(20, TimeUnit.SECONDS);
  }

  /** A decision made for turn {@code i}. */
  @FunctionalInterface
  private interface Decide {
    RouteDecision turn(int i) throws Exception;
  }

  /** Makes {@code n} decisions, each for {@code expected} with no fallback; completes each. */
  private static void assertDecisions(int n, Endpoint expected, Decide decide) throws Exception {
    for (int i = 0; i < n; i++) {
      RouteDecision rd = decide.turn(i);
      assertThat(rd.decode()).isEqualTo(expected);
      assertThat(rd.fallbacks()).isEmpty();
      rd.complete(RouteDecision.Outcome.SUCCESS, Duration.ZERO, null);
    }
  }

  /** Profile {@code name}: the endpoints {@code filter} keeps, the best one picked. */
  private static Profile topOne(String name, Filter filter) {
    return Profile.builder(name).filter(filter).picker(Pickers.topN(1)).build();
  }

  private static String read(RoutedResponse r) throws Exception {
    return new String(r.readAll(1 << 20).get(20, TimeUnit.SECONDS), StandardCharsets.UTF_8);
  }

  @Test
  void aRouteListenerSeesTheRequestAndItsUpstreamHeadersReachTheEngine() throws Exception {
    Endpoint d = decodePod("d0");
    server(d)
        .enqueue(
            ok(
                "{\"choices\":[{\"text\":\"hi\"}],\"usage\":{\"prompt_tokens\":40,"
                    + "\"prompt_tokens_details\":{\"cached_tokens\":16}}}"));
    List<String> events = java.util.Collections.synchronizedList(new ArrayList<>());
    io.micrometer.core.instrument.simple.SimpleMeterRegistry registry =
        new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
    router =
        KvRouter.builder()
            .endpoint(d)
            .meterRegistry(registry)
            .routeListener(
                request ->
                    new RouteListener.RequestListener() {
                      @Override
                      public Map<String, String> upstreamHeaders() {
                        events.add("start " + request.requestId());
                        return Map.of(
                            "traceparent", "00-" + "1".repeat(32) + "-" + "2".repeat(16) + "-01");
                      }

                      @Override
                      public void decided(RouteDecision decision) {
                        events.add("decided " + decision.decode().id());
                      }

                      @Override
                      public void attemptStarted(
                          int attempt, io.kvroute.pd.PdOrchestrator.Pair pair) {
                        events.add("attempt " + attempt);
                      }

                      @Override
                      public void usage(long promptTokens, long cachedTokens) {
                        events.add("usage " + promptTokens + "/" + cachedTokens);
                      }

                      @Override
                      public void ended(RouteDecision decision, Throwable failure) {
                        events.add("ended " + failure);
                      }
                    })
            .build();
    RoutedResponse r = routeHello();
    read(r);
    assertThat(server(d).takeRequest().getHeaders().get("traceparent"))
        .isEqualTo("00-" + "1".repeat(32) + "-" + "2".repeat(16) + "-01");
    assertThat(events)
        .containsExactly("start r-1", "decided d0", "attempt 1", "usage 40/16", "ended null");
    // The approximate index knew nothing of "hello": predicted 0, the engine reported 16.
    assertThat(registry.get("kvroute.routing.actual.cached.tokens").summary().totalAmount())
        .isEqualTo(16);
    assertThat(registry.get("kvroute.routing.predicted.tokens").summary().count()).isEqualTo(1);
    assertThat(registry.get("kvroute.routing.prediction.error").summary().totalAmount())
        .isEqualTo(0.4);
    assertThat(registry.get("kvroute.routing.predictions").tag("result", "under").counter().count())
        .isEqualTo(1);
  }

  @Test
  void aDisaggregatedRequestIsMeasuredOnThePrefillEnginesAnswer() throws Exception {
    Endpoint p = pod("p0", Endpoint.Role.PREFILL, Map.of());
    Endpoint d = decodePod("d0");
    // The prefill engine computed 48 of 64 tokens; the decode engine received the KV and counts
    // all but the last token as cached, which says nothing about the prefill pick.
    server(p)
        .enqueue(
            ok(
                "{\"choices\":[{\"text\":\"a\"}],\"usage\":{\"prompt_tokens\":64,"
                    + "\"prompt_tokens_details\":{\"cached_tokens\":16}}}"));
    server(d)
        .enqueue(
            ok(
                "{\"choices\":[{\"text\":\"hi\"}],\"usage\":{\"prompt_tokens\":64,"
                    + "\"prompt_tokens_details\":{\"cached_tokens\":63}}}"));
    io.micrometer.core.instrument.simple.SimpleMeterRegistry registry =
        new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
    List<String> usage = java.util.Collections.synchronizedList(new ArrayList<>());
    router =
        KvRouter.builder()
            .scheduler(
                Scheduler.builder()
                    .profile(topOne(Scheduler.DECODE_PROFILE, Filters.decode()))
                    .profile(topOne(Scheduler.PREFILL_PROFILE, Filters.prefill()))
                    .pdEnabled(true)
                    .pdDecider(io.kvroute.scoring.PdDecider.always())
                    .prefillProfile(Scheduler.PREFILL_PROFILE)
                    .build())
            .endpoints(List.of(p, d))
            .meterRegistry(registry)
            .routeListener(
                request ->
                    new RouteListener.RequestListener() {
                      @Override
                      public void usage(long promptTokens, long cachedTokens) {
                        usage.add(promptTokens + "/" + cachedTokens);
                      }
                    })
            .build();
    RoutedResponse r = routeHello();
    read(r);
    assertThat(r.decision().servedPrefill()).contains(p);
    assertThat(server(p).takeRequest().getHeaders().get("X-Request-Id")).isEqualTo("r-1");
    assertThat(usage).containsExactly("64/16");
    assertThat(registry.get("kvroute.routing.actual.cached.tokens").summary().totalAmount())
        .isEqualTo(16);
    assertThat(registry.get("kvroute.routing.prediction.error").summary().totalAmount())
        .isEqualTo(0.25);
  }

  /**
   * A pod answering {@code body} (200, JSON) to every request, except 503 to the first attempt of
   * request {@code r-1} (whose later attempts carry {@code r-1-r2}, ...).
   */
  private static mockwebserver3.Dispatcher failingFirstAttempt(String body) {
    return new mockwebserver3.Dispatcher() {
      @Override
      public MockResponse dispatch(mockwebserver3.RecordedRequest request) {
        return "r-1".equals(request.getHeaders().get("X-Request-Id"))
            ? new MockResponse.Builder().code(503).body("busy").build()
            : ok(body);
      }
    };
  }

  @Test
  void aRetriedDisaggregatedRequestIsParsedOnceAndReportsBothEnginesUsage() throws Exception {
    List<Endpoint> prefills =
        List.of(
            pod("p0", Endpoint.Role.PREFILL, Map.of()), pod("p1", Endpoint.Role.PREFILL, Map.of()));
    List<Endpoint> decodes = List.of(decodePod("d0"), decodePod("d1"));
    for (Endpoint p : prefills) {
      server(p)
          .setDispatcher(
              failingFirstAttempt(
                  "{\"choices\":[{\"text\":\"a\"}],\"usage\":{\"prompt_tokens\":64,"
                      + "\"prompt_tokens_details\":{\"cached_tokens\":16}}}"));
    }
    for (Endpoint d : decodes) {
      server(d)
          .setDispatcher(
              failingFirstAttempt(
                  "{\"choices\":[{\"text\":\"hi\"}],\"usage\":{\"prompt_tokens\":64,"
                      + "\"prompt_tokens_details\":{\"cached_tokens\":63}}}"));
    }
    List<String> usage = java.util.Collections.synchronizedList(new ArrayList<>());
    List<Endpoint> all = new ArrayList<>(prefills);
    all.addAll(decodes);
    router =
        KvRouter.builder()
            .scheduler(
                Scheduler.builder()
                    .profile(
                        Profile.builder(Scheduler.DECODE_PROFILE)
                            .filter(Filters.decode())
                            .picker(Pickers.topN(2))
                            .build())
                    .profile(
                        Profile.builder(Scheduler.PREFILL_PROFILE)
                            .filter(Filters.prefill())
                            .picker(Pickers.topN(2))
                            .build())
                    .pdEnabled(true)
                    .pdDecider(io.kvroute.scoring.PdDecider.always())
                    .prefillProfile(Scheduler.PREFILL_PROFILE)
                    .build())
            .endpoints(all)
            .defaultConnector(
                ConnectorConfig.of("http")
                    .withRetry(new ConnectorConfig.Retry(3, Duration.ZERO, Duration.ZERO)))
            .routeListener(
                request ->
                    new RouteListener.RequestListener() {
                      @Override
                      public void attemptEnded(
                          int attempt, io.kvroute.pd.PdOrchestrator.Pair pair, Throwable failure) {
                        usage.add("attempt " + attempt + (failure == null ? " ok" : " failed"));
                      }

                      @Override
                      public void engineUsage(
                          java.util.Optional<io.kvroute.connector.EngineUsage> prefill,
                          java.util.Optional<io.kvroute.connector.EngineUsage> decode) {
                        usage.add(
                            "prefill " + prefill.orElseThrow() + " decode " + decode.orElseThrow());
                      }
                    })
            .build();
    long parsedBefore = io.kvroute.connector.http.OpenAiJson.clientBodiesParsed();
    RoutedResponse r = routeHello();
    read(r);
    // Scheduled, then run twice (the first attempt's prefill answered 503): one parse in all.
    assertThat(io.kvroute.connector.http.OpenAiJson.clientBodiesParsed() - parsedBefore)
        .isEqualTo(1);
    assertThat(r.prefillUsage()).contains(new io.kvroute.connector.EngineUsage(64, 16));
    assertThat(usage)
        .containsExactly(
            "attempt 1 failed",
            "attempt 2 ok",
            "prefill EngineUsage[promptTokens=64, cachedTokens=16]"
                + " decode EngineUsage[promptTokens=64, cachedTokens=63]");
  }

  @Test
  void aRouteListenerHearsOfAFailedScheduling() throws Exception {
    List<String> events = java.util.Collections.synchronizedList(new ArrayList<>());
    router =
        KvRouter.builder()
            .routeListener(
                request ->
                    new RouteListener.RequestListener() {
                      @Override
                      public void ended(RouteDecision decision, Throwable failure) {
                        events.add(decision + " " + failure.getClass().getSimpleName());
                      }
                    })
            .build();
    CompletableFuture<RoutedResponse> f = router.route(hello());
    assertThatThrownBy(() -> f.get(20, TimeUnit.SECONDS))
        .hasCauseInstanceOf(ConnectorException.class);
    assertThat(events).containsExactly("null NoAvailableEndpointException");
  }

  @Test
  void decideCountsInFlightUntilComplete() throws Exception {
    Endpoint d = decodePod("d0");
    router = KvRouter.builder().endpoint(d).observabilityHeaders(true).build();
    RouteDecision rd = router.decide(hello());
    assertThat(rd.decode()).isEqualTo(d);
    assertThat(rd.prefill()).isEmpty();
    assertThat(router.inFlight()).isEqualTo(1);
    assertThat(router.scheduler().inFlight("d0")).isEqualTo(1);
    assertThat(rd.responseHeaders()).containsEntry("x-kvroute-decode", "d0");
    rd.complete(RouteDecision.Outcome.SUCCESS, Duration.ofMillis(5), Duration.ofMillis(1));
    rd.complete(RouteDecision.Outcome.SUCCESS, Duration.ofMillis(5), Duration.ofMillis(1));
    assertThat(router.inFlight()).isZero();
    assertThat(router.scheduler().inFlight("d0")).isZero();
  }

  @Test
  void aPassThroughRequestIsAdmittedByFlowControlAtOnceOrRefused() throws Exception {
    Endpoint d = decodePod("d0");
    // saturated at 1 request in flight on the one endpoint
    router =
        KvRouter.builder()
            .endpoint(d)
            .flowControl(
                FlowControlConfig.builder()
                    .saturation(new FlowControlConfig.Saturation(5, 0.8, 1, 0))
                    .build())
            .build();
    byte[] body = "{\"model\":\"m\",\"input\":\"x\"}".getBytes(StandardCharsets.UTF_8);
    RouteDecision first = router.decidePassThrough(body, Map.of(), e -> true);
    assertThat(first.decode()).isEqualTo(d);
    assertThat(router.flowController().inFlight("m")).isEqualTo(1);
    // the fleet is saturated: a synchronous decision cannot wait, so it is refused
    assertThatThrownBy(
            () ->
                router.decidePassThrough(
                    body, Map.of("X-Kvroute-Priority", List.of("0")), e -> true))
        .isInstanceOfSatisfying(
            RequestDroppedException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(RequestDroppedException.Reason.QUEUE_FULL);
              assertThat(e.retryAfter()).isPresent();
            });
    assertThat(router.inFlight()).isEqualTo(1);
    // a bad priority header is the client's error, as on the scheduled APIs
    assertThatThrownBy(
            () ->
                router.decidePassThrough(
                    body, Map.of("x-kvroute-priority", List.of("high")), e -> true))
        .isInstanceOf(ConnectorException.InvalidRequestException.class)
        .hasMessageContaining("x-kvroute-priority");
    // completing the first releases its admission: the next is admitted
    first.complete(RouteDecision.Outcome.SUCCESS, Duration.ofMillis(5), null);
    assertThat(router.flowController().inFlight("m")).isZero();
    RouteDecision next = router.decidePassThrough(body, Map.of(), e -> true);
    next.complete(RouteDecision.Outcome.SUCCESS, Duration.ofMillis(5), null);
    assertThat(router.inFlight()).isZero();
    assertThat(router.flowController().inFlight("m")).isZero();
  }

  /** A router with one decode pod answering {@code {"choices":[{"text":"hi"}]}}, and its route. */
  private RoutedResponse routeToOnePod(Endpoint d) throws Exception {
    server(d).enqueue(ok("{\"choices\":[{\"text\":\"hi\"}]}"));
    router = KvRouter.builder().endpoint(d).build();
    RoutedResponse r = routeHello();
    assertThat(router.inFlight()).isEqualTo(1);
    return r;
  }

  @Test
  void routeRunsTheRequestAndEndsItsAccountingWithTheStream() throws Exception {
    Endpoint d = decodePod("d0");
    RoutedResponse r = routeToOnePod(d);
    assertThat(read(r)).isEqualTo("{\"choices\":[{\"text\":\"hi\"}]}");
    assertThat(router.inFlight()).isZero();
    assertThat(router.scheduler().inFlight("d0")).isZero();
    assertThat(r.decision().decode()).isEqualTo(d);
  }

  @Test
  void cancellingTheRoutedStreamEndsItsAccountingOnce() throws Exception {
    RoutedResponse r = routeToOnePod(decodePod("d0"));
    r.cancel();
    r.cancel();
    assertThat(router.inFlight()).isZero(); // ended once, synchronously, not twice
  }

  @Test
  void aFailingPodIsRetriedOnTheNextOne() throws Exception {
    Endpoint d0 = decodePod("d0");
    Endpoint d1 = decodePod("d1");
    server(d0).enqueue(new MockResponse.Builder().code(503).body("busy").build());
    server(d1).enqueue(ok("{\"ok\":1}"));
    router =
        KvRouter.builder()
            .endpoints(List.of(d0, d1))
            .defaultConnector(
                ConnectorConfig.of("http")
                    .withRetry(new ConnectorConfig.Retry(2, Duration.ZERO, Duration.ZERO)))
            .build();
    // Whichever pod the scheduler puts first, the request ends on d1.
    RoutedResponse r = routeHello();
    assertThat(read(r)).isEqualTo("{\"ok\":1}");
    assertThat(r.decision().responseHeaders()).isNotNull();
    assertThat(server(d1).getRequestCount()).isEqualTo(1);
    assertThat(router.scheduler().inFlight("d0") + router.scheduler().inFlight("d1")).isZero();
    assertThat(router.inFlight()).isZero();
  }

  @Test
  void cancellingTheRoutedFutureCancelsTheLegInFlight() throws Exception {
    Endpoint d0 = decodePod("d0");
    server(d0)
        .enqueue(
            new MockResponse.Builder()
                .onResponseStart(mockwebserver3.SocketEffect.Stall.INSTANCE)
                .build());
    router = KvRouter.builder().endpoints(List.of(d0)).build();
    CompletableFuture<RoutedResponse> f = router.route(hello());
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (server(d0).getRequestCount() == 0) {
      assertThat(System.nanoTime()).as("request reached the pod").isLessThan(deadline);
      TimeUnit.MILLISECONDS.sleep(5);
    }
    assertThat(router.inFlight()).isEqualTo(1);
    f.cancel(true);
    while (router.inFlight() > 0) {
      assertThat(System.nanoTime()).as("the leg was cancelled").isLessThan(deadline);
      TimeUnit.MILLISECONDS.sleep(5);
    }
    assertThat(router.scheduler().inFlight("d0")).isZero();
  }

  @Test
  void endpointsOfAnotherModelAreNotCandidates() throws Exception {
    Endpoint a = pod("a", Endpoint.Role.DECODE, Map.of(KvRouter.MODEL_LABEL, "model-a"));
    Endpoint b = pod("b", Endpoint.Role.DECODE, Map.of(KvRouter.MODEL_LABEL, "model-b"));
    router = KvRouter.builder().endpoints(List.of(a, b)).build();
    assertDecisions(
        10, b, i -> router.decide(completion("{\"model\":\"model-b\",\"prompt\":\"p" + i + "\"}")));
    assertThatThrownBy(() -> router.decide(completion("{\"model\":\"model-c\",\"prompt\":\"x\"}")))
        .isInstanceOf(ConnectorException.NoAvailableEndpointException.class)
        .hasMessageContaining("model-c");
  }

  @Test
  void aCandidateFilterLimitsTheChoice() throws Exception {
    Endpoint d0 = routerOverTwoDecodePods().get(0);
    assertDecisions(
        10,
        d0,
        i ->
            router
                .decideAsync(
                    completion("{\"model\":\"m\",\"prompt\":\"p" + i + "\"}"), e -> e.equals(d0))
                .get(10, TimeUnit.SECONDS));
    CompletableFuture<RouteDecision> none =
        router.decideAsync(completion("{\"model\":\"m\",\"prompt\":\"x\"}"), e -> false);
    assertThatThrownBy(() -> none.get(10, TimeUnit.SECONDS))
        .hasCauseInstanceOf(ConnectorException.NoAvailableEndpointException.class);
    assertThat(router.inFlight()).isZero();
  }

  @Test
  void badRequestsAreRejectedPrecisely() throws Exception {
    router = KvRouter.builder().endpoint(decodePod("d")).build();
    assertThatThrownBy(() -> router.decide(completion("{\"prompt\":\"x\"}")))
        .hasMessageContaining("\"model\"");
    assertThatThrownBy(() -> router.decide(completion("{\"model\":\"m\"}")))
        .hasMessageContaining("\"prompt\" is required");
    assertThatThrownBy(() -> router.decide(completion("{\"model\":\"m\",\"prompt\":{}}")))
        .hasMessageContaining("must be a string");
    assertThatThrownBy(
            () ->
                router.decide(
                    InferenceRequest.of(
                        InferenceRequest.Api.CHAT_COMPLETIONS,
                        "{\"model\":\"m\",\"messages\":[]}".getBytes(StandardCharsets.UTF_8),
                        Map.of(),
                        "x")))
        .hasMessageContaining("\"messages\" must be a non-empty array");
    assertThatThrownBy(() -> router.decide(completion("not json")))
        .isInstanceOf(ConnectorException.InvalidRequestException.class);
    assertThat(router.inFlight()).isZero();
  }

  @Test
  void tokenPromptsAreRoutedByTheirTokens() throws Exception {
    router = KvRouter.builder().endpoint(decodePod("d")).build();
    RouteDecision rd = router.decide(completion("{\"model\":\"m\",\"prompt\":[1,2,3,4,5]}"));
    assertThat(rd.scheduling().request().tokenIds())
        .hasValueSatisfying(t -> assertThat(t).containsExactly(1, 2, 3, 4, 5));
    rd.complete(RouteDecision.Outcome.SUCCESS, Duration.ZERO, null);
  }

  @Test
  void unknownConnectorTypeFailsAtBuild() {
    assertThatThrownBy(
            () -> KvRouter.builder().defaultConnector(ConnectorConfig.of("nixl2")).build())
        .isInstanceOf(ConnectorException.UnknownConnectorException.class)
        .hasMessageContaining("nixl2");
  }

  @Test
  void sinkFormDeliversHeadChunksAndEnd() throws Exception {
    Endpoint d = decodePod("d0");
    server(d).enqueue(ok("{\"x\":1}"));
    router = KvRouter.builder().endpoint(d).build();
    CompletableFuture<String> done = new CompletableFuture<>();
    StringBuilder sb = new StringBuilder();
    router.route(
        hello(),
        new KvRouter.ResponseSink() {
          @Override
          public void onHead(int status, Map<String, List<String>> h, Map<String, String> r) {
            sb.append(status).append('|');
          }

          @Override
          public void onChunk(ByteBuffer chunk) {
            sb.append(StandardCharsets.UTF_8.decode(chunk));
          }

          @Override
          public void onComplete() {
            done.complete(sb.toString());
          }

          @Override
          public void onError(ConnectorException error) {
            done.completeExceptionally(error);
          }
        });
    assertThat(done.get(20, TimeUnit.SECONDS)).isEqualTo("200|{\"x\":1}");
  }

  @Test
  void closeDrainsAndThenRefuses() throws Exception {
    Endpoint d = decodePod("d0");
    router = KvRouter.builder().endpoint(d).drainTimeout(Duration.ofMillis(50)).build();
    router.decide(hello());
    router.close();
    assertThatThrownBy(() -> router.decide(completion("{\"model\":\"m\",\"prompt\":\"x\"}")))
        .hasMessageContaining("closed");
  }

  @Test
  void removedEndpointsAreForgotten() throws Exception {
    Endpoint d1 = routerOverTwoDecodePods().get(1);
    assertThat(router.removeEndpoint("d0")).isTrue();
    assertThat(router.removeEndpoint("d0")).isFalse();
    assertDecisions(
        5, d1, i -> router.decide(completion("{\"model\":\"m\",\"prompt\":\"q" + i + "\"}")));
  }

  @Test
  void anUnknownConnectorTypeFailsBeforeAnythingStarts() throws Exception {
    List<String> feedCalls = new ArrayList<>();
    KvEventFeed feed =
        new KvEventFeed() {
          @Override
          public void add(Endpoint endpoint, Source source) {
            feedCalls.add("add " + endpoint.id());
          }

          @Override
          public void remove(String endpointId) {
            feedCalls.add("remove " + endpointId);
          }

          @Override
          public void close() {
            feedCalls.add("close");
          }
        };
    long routerThreadsBefore = routerThreads();
    assertThatThrownBy(
            () ->
                KvRouter.builder()
                    .model("m", ConnectorConfig.of("no-such-connector"))
                    .eventFeed(feed)
                    .scrapeMetrics(Duration.ofSeconds(1))
                    .endpoint(
                        decodePod("d1"), new KvEventFeed.Source("tcp://127.0.0.1:1", null, ""))
                    .build())
        .isInstanceOf(ConnectorException.UnknownConnectorException.class)
        .hasMessageContaining("no-such-connector");
    assertThat(feedCalls).as("no subscription was started").isEmpty();
    assertThat(routerThreads()).as("no executor was started").isEqualTo(routerThreadsBefore);
  }

  private static long routerThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().equals("kvroute-router") && t.isAlive())
        .count();
  }
}
