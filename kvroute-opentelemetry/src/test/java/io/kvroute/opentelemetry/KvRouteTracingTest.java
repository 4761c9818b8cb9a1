package io.kvroute.opentelemetry;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RoutedResponse;
import io.kvroute.scoring.Filters;
import io.kvroute.scoring.PdDecider;
import io.kvroute.scoring.Pickers;
import io.kvroute.scoring.Profile;
import io.kvroute.scoring.ReuseSplit;
import io.kvroute.scoring.Scheduler;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimRole;
import io.kvroute.testkit.VllmSimulator;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** A real KvRouter (http connector, prefill + decode) in front of two simulated vLLM pods. */
class KvRouteTracingTest {
  private static final String TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
  private static final String CLIENT_SPAN = "00f067aa0ba902b7";

  private final InMemorySpanExporter exporter = InMemorySpanExporter.create();
  private OpenTelemetrySdk otel;
  private VllmSimulator prefill;
  private VllmSimulator decode;
  private KvRouter router;

  @BeforeEach
  void start() {
    otel =
        OpenTelemetrySdk.builder()
            .setTracerProvider(
                SdkTracerProvider.builder()
                    .addSpanProcessor(SimpleSpanProcessor.create(exporter))
                    .build())
            .build();
    prefill = VllmSimulator.builder().name("p0").model("m").role(SimRole.PREFILL).build().start();
    decode = VllmSimulator.builder().name("d0").model("m").role(SimRole.DECODE).build().start();
    KvRouteTracing tracing = KvRouteTracing.create(otel);
    Scheduler scheduler =
        Scheduler.builder()
            .profile(
                Profile.builder(Scheduler.DECODE_PROFILE)
                    .filter(Filters.decode())
                    .picker(Pickers.topN(1))
                    .build())
            .profile(
                Profile.builder(Scheduler.PREFILL_PROFILE)
                    .filter(Filters.prefill())
                    .picker(Pickers.topN(1))
                    .build())
            .pdEnabled(true)
            .pdDecider(PdDecider.always())
            .prefillProfile(Scheduler.PREFILL_PROFILE)
            .build();
    router =
        KvRouter.builder()
            .scheduler(scheduler)
            .transportDecorator(tracing::transport)
            .routeListener(tracing.routeListener())
            .defaultConnector(
                ConnectorConfig.of("http")
                    .withRetry(
                        new ConnectorConfig.Retry(1, Duration.ofMillis(1), Duration.ofMillis(1))))
            .endpoint(endpoint(prefill, Endpoint.Role.PREFILL))
            .endpoint(endpoint(decode, Endpoint.Role.DECODE))
            .build();
  }

  @AfterEach
  void stop() {
    router.close();
    prefill.close();
    decode.close();
    otel.close();
  }

  private static Endpoint endpoint(VllmSimulator pod, Endpoint.Role role) {
    return Endpoint.builder(pod.name(), pod.baseUrl().getHost(), pod.baseUrl().getPort())
        .role(role)
        .build();
  }

  private static InferenceRequest request(Map<String, List<String>> headers) {
    String body =
        "{\"model\":\"m\",\"prompt\":\"tell me about prefix caches and routing\","
            + "\"max_tokens\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    return InferenceRequest.of(
        InferenceRequest.Api.COMPLETIONS, body.getBytes(StandardCharsets.UTF_8), headers, "req-1");
  }

  private List<SpanData> awaitSpans(int n) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (exporter.getFinishedSpanItems().size() < n && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    List<SpanData> spans = exporter.getFinishedSpanItems();
    assertThat(spans).hasSize(n);
    return spans;
  }

  private static SpanData named(List<SpanData> spans, String name) {
    return spans.stream().filter(s -> s.getName().equals(name)).findFirst().orElseThrow();
  }

  private static String traceparent(VllmSimulator pod) {
    List<RecordedRequest> requests = pod.requests();
    assertThat(requests).isNotEmpty();
    return requests.get(requests.size() - 1).header("traceparent").orElseThrow();
  }

  @Test
  void aRoutedRequestIsOneTraceFromTheClientThroughBothLegsToTheEngines() throws Exception {
    RoutedResponse r =
        router
            .route(
                request(
                    Map.of("traceparent", List.of("00-" + TRACE_ID + "-" + CLIENT_SPAN + "-01"))))
            .get(20, TimeUnit.SECONDS);
    String body = new String(r.readAll(1 << 20).get(20, TimeUnit.SECONDS), StandardCharsets.UTF_8);
    assertThat(body).contains("[DONE]");

    List<SpanData> spans = awaitSpans(3);
    SpanData route = named(spans, "kvroute.route");
    SpanData prefillLeg = named(spans, "kvroute.prefill");
    SpanData decodeLeg = named(spans, "kvroute.decode");
    assertThat(spans).allSatisfy(s -> assertThat(s.getTraceId()).isEqualTo(TRACE_ID));
    assertThat(route.getParentSpanId()).isEqualTo(CLIENT_SPAN);
    assertThat(route.getKind()).isEqualTo(SpanKind.SERVER);
    assertThat(prefillLeg.getParentSpanId()).isEqualTo(route.getSpanId());
    assertThat(decodeLeg.getParentSpanId()).isEqualTo(route.getSpanId());
    assertThat(prefillLeg.getKind()).isEqualTo(SpanKind.CLIENT);

    var a = route.getAttributes();
    assertThat(a.get(AttributeKey.stringKey("gen_ai.request.model"))).isEqualTo("m");
    assertThat(a.get(AttributeKey.stringKey("kvroute.decision.result"))).isEqualTo("ROUTED");
    assertThat(a.get(AttributeKey.stringKey("kvroute.decision.pd"))).isEqualTo("PREFILL_DECODE");
    assertThat(a.get(AttributeKey.stringKey("kvroute.decode.endpoint"))).isEqualTo("d0");
    assertThat(a.get(AttributeKey.stringKey("kvroute.prefill.endpoint"))).isEqualTo("p0");
    assertThat(a.get(AttributeKey.stringKey("kvroute.request.id"))).isEqualTo("req-1");
    assertThat(a.get(AttributeKey.longKey("kvroute.cached_tokens.predicted"))).isNotNull();
    // Disaggregated: the prefill engine computed the prompt; its answer is the one compared.
    assertThat(a.get(AttributeKey.longKey("kvroute.cached_tokens.actual")))
        .isEqualTo(prefill.stats().cachedTokens());
    assertThat(a.get(AttributeKey.longKey("gen_ai.usage.input_tokens"))).isPositive();
    // The reuse split: this router keeps no index, so nothing was available to it; the engine's
    // report is the delivered part.
    assertThat(a.get(AttributeKey.longKey("kvroute.reuse.available_tokens"))).isZero();
    assertThat(a.get(AttributeKey.longKey("kvroute.reuse.captured_tokens"))).isZero();
    assertThat(a.get(AttributeKey.longKey("kvroute.reuse.delivered_tokens")))
        .isEqualTo(prefill.stats().cachedTokens());
    assertThat(a.get(AttributeKey.stringArrayKey("kvroute.reuse.misses")))
        .containsExactly("none_available");
    assertThat(a.get(AttributeKey.longKey("kvroute.scheduling.duration_us"))).isNotNull();
    assertThat(a.get(AttributeKey.longKey("kvroute.attempts"))).isEqualTo(1);
    assertThat(a.get(AttributeKey.stringKey("kvroute.outcome"))).isEqualTo("ok");
    assertThat(route.getStatus().getStatusCode()).isEqualTo(StatusCode.UNSET);

    for (SpanData leg : List.of(prefillLeg, decodeLeg)) {
      var la = leg.getAttributes();
      assertThat(la.get(AttributeKey.longKey("http.response.status_code"))).isEqualTo(200);
      assertThat(la.get(AttributeKey.stringKey("kvroute.outcome"))).isEqualTo("ok");
      assertThat(la.get(AttributeKey.doubleKey("kvroute.ttft_ms"))).isNotNull();
      assertThat(la.get(AttributeKey.stringKey("url.path"))).isEqualTo("/v1/completions");
    }
    assertThat(prefillLeg.getAttributes().get(AttributeKey.stringKey("kvroute.endpoint.id")))
        .isEqualTo("p0");
    assertThat(decodeLeg.getAttributes().get(AttributeKey.stringKey("kvroute.endpoint.id")))
        .isEqualTo("d0");

    // Each engine sees its own leg's span as the parent of whatever it traces.
    assertThat(traceparent(prefill))
        .isEqualTo("00-" + TRACE_ID + "-" + prefillLeg.getSpanId() + "-01");
    assertThat(traceparent(decode))
        .isEqualTo("00-" + TRACE_ID + "-" + decodeLeg.getSpanId() + "-01");
  }

  /**
   * The split as the router reports it, on a span of the SDK's own: each cause as the router names
   * it.
   */
  @Test
  void theReuseSplitAndItsMissCausesAreOnTheRouteSpan() {
    var listener = KvRouteTracing.create(otel).routeListener();
    // captured < available (load won) and delivered < captured (the index was stale)
    var both = listener.requestStarted(request(Map.of()));
    both.reuse(new ReuseSplit(1000, 640, 320, 160));
    both.ended(null, null);
    // the engine reported nothing: no delivered attribute, and no stale-index cause
    var unmeasured = listener.requestStarted(request(Map.of()));
    unmeasured.reuse(new ReuseSplit(1000, 640, 640, ReuseSplit.UNKNOWN));
    unmeasured.ended(null, null);
    // everything available was reused
    var hit = listener.requestStarted(request(Map.of()));
    hit.reuse(new ReuseSplit(1000, 640, 640, 640));
    hit.ended(null, null);

    List<SpanData> spans = exporter.getFinishedSpanItems();
    assertThat(spans).hasSize(3);
    var a = spans.get(0).getAttributes();
    assertThat(a.get(AttributeKey.longKey("kvroute.reuse.available_tokens"))).isEqualTo(640);
    assertThat(a.get(AttributeKey.longKey("kvroute.reuse.captured_tokens"))).isEqualTo(320);
    assertThat(a.get(AttributeKey.longKey("kvroute.reuse.delivered_tokens"))).isEqualTo(160);
    assertThat(a.get(AttributeKey.stringArrayKey("kvroute.reuse.misses")))
        .containsExactly("load", "stale_index");
    var u = spans.get(1).getAttributes();
    assertThat(u.get(AttributeKey.longKey("kvroute.reuse.captured_tokens"))).isEqualTo(640);
    assertThat(u.get(AttributeKey.longKey("kvroute.reuse.delivered_tokens"))).isNull();
    assertThat(u.get(AttributeKey.stringArrayKey("kvroute.reuse.misses"))).isEmpty();
    var h = spans.get(2).getAttributes();
    assertThat(h.get(AttributeKey.longKey("kvroute.reuse.delivered_tokens"))).isEqualTo(640);
    assertThat(h.get(AttributeKey.stringArrayKey("kvroute.reuse.misses"))).isEmpty();
  }

  @Test
  void withoutAClientTraceTheRouteSpanStartsOne() throws Exception {
    RoutedResponse r = router.route(request(Map.of())).get(20, TimeUnit.SECONDS);
    r.readAll(1 << 20).get(20, TimeUnit.SECONDS);
    List<SpanData> spans = awaitSpans(3);
    SpanData route = named(spans, "kvroute.route");
    assertThat(route.getParentSpanContext().isValid()).isFalse();
    assertThat(traceparent(decode)).startsWith("00-" + route.getTraceId() + "-");
  }

  @Test
  void aFailedLegIsAnErrorOnItsSpanAndOnTheRouteSpan() throws Exception {
    decode.faults().failNext(1, 500);
    assertThatThrownBy(() -> router.route(request(Map.of())).get(20, TimeUnit.SECONDS))
        .hasMessageContaining("500");
    List<SpanData> spans = awaitSpans(3);
    SpanData route = named(spans, "kvroute.route");
    SpanData decodeLeg = named(spans, "kvroute.decode");
    SpanData prefillLeg = named(spans, "kvroute.prefill");
    assertThat(decodeLeg.getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    assertThat(decodeLeg.getAttributes().get(AttributeKey.longKey("http.response.status_code")))
        .isEqualTo(500);
    assertThat(prefillLeg.getStatus().getStatusCode()).isEqualTo(StatusCode.UNSET);
    assertThat(route.getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    assertThat(route.getEvents())
        .anySatisfy(e -> assertThat(e.getName()).isEqualTo("kvroute.attempt.failed"));
    assertThat(route.getAttributes().get(AttributeKey.stringKey("kvroute.outcome")))
        .isNotEqualTo("ok");
  }

  @Test
  void aCancelledStreamEndsItsLegSpanOnceAsCancelled() throws Exception {
    RoutedResponse r = router.route(request(Map.of())).get(20, TimeUnit.SECONDS);
    r.cancel();
    r.cancel();
    List<SpanData> spans = awaitSpans(3);
    SpanData decodeLeg = named(spans, "kvroute.decode");
    assertThat(decodeLeg.getAttributes().get(AttributeKey.stringKey("kvroute.outcome")))
        .isEqualTo("cancelled");
    assertThat(decodeLeg.getStatus().getStatusCode()).isEqualTo(StatusCode.UNSET);
    assertThat(named(spans, "kvroute.prefill").getAttributes().get(TracingTransport.STATUS))
        .isEqualTo(200);
  }
}
