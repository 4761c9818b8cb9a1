package io.kvroute.envoy;

import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase.IMMEDIATE_RESPONSE;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase.REQUEST_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase.REQUEST_HEADERS;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase.RESPONSE_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase.RESPONSE_HEADERS;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase.RESPONSE_TRAILERS;
import static org.assertj.core.api.Assertions.assertThat;

import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.kvroute.connector.Endpoint;
import io.kvroute.envoy.EndpointPicker.BodyMode;
import io.kvroute.router.KvRouter;
import io.kvroute.scoring.Filter;
import io.kvroute.scoring.Pickers;
import io.kvroute.scoring.Profile;
import io.kvroute.scoring.Scheduler;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The protocol's edges with endpoints that are never called (only addresses): immediate responses
 * and their statuses, subset hints, bodyless requests, STREAMED without early bodies, and streams
 * that end early — each leaving nothing in flight.
 */
class ExtProcProtocolTest {
  private static final Map<String, String> POST_COMPLETIONS =
      Map.of(":method", "POST", ":path", "/v1/completions", "content-type", "application/json");
  private static final byte[] BODY =
      "{\"model\":\"m\",\"prompt\":\"hello\",\"max_tokens\":2}".getBytes(StandardCharsets.UTF_8);

  private final List<AutoCloseable> closeables = new ArrayList<>();
  private SimpleMeterRegistry meters;
  private KvRouter router;

  @AfterEach
  void close() throws Exception {
    for (int i = closeables.size() - 1; i >= 0; i--) {
      closeables.get(i).close();
    }
  }

  private static Endpoint ep(String id, int port) {
    return Endpoint.builder(id, "127.0.0.1", port).role(Endpoint.Role.BOTH).build();
  }

  /** A router over three addresses and a picker in an in-process server. */
  private ManagedChannel picker(
      Consumer<KvRouter.Builder> routerSetup, Consumer<EndpointPicker.Builder> setup)
      throws Exception {
    KvRouter.Builder rb =
        KvRouter.builder()
            .endpoint(ep("a", 18001))
            .endpoint(ep("b", 18002))
            .endpoint(ep("c", 18003));
    routerSetup.accept(rb);
    router = rb.build();
    closeables.add(router);
    meters = new SimpleMeterRegistry();
    EndpointPicker.Builder pb = EndpointPicker.builder(router).meterRegistry(meters);
    setup.accept(pb);
    return serve(pb.build());
  }

  /** {@code picker} in an in-process server; the channel to it. Both close after the test. */
  private ManagedChannel serve(EndpointPicker picker) throws Exception {
    String name = InProcessServerBuilder.generateName();
    Server server = InProcessServerBuilder.forName(name).addService(picker).build().start();
    closeables.add(() -> server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS));
    ManagedChannel ch = InProcessChannelBuilder.forName(name).build();
    closeables.add(ch::shutdownNow);
    return ch;
  }

  private ManagedChannel picker() throws Exception {
    return picker(b -> {}, b -> {});
  }

  private static ImmediateResponse fullDuplexImmediate(ManagedChannel ch, byte[] body) {
    EnvoyReplay s = opened(ch, fullDuplex());
    s.send(EnvoyReplay.requestBody(body, true));
    ImmediateResponse ir = s.next(IMMEDIATE_RESPONSE).getImmediateResponse();
    assertThat(s.awaitClosed()).isTrue();
    return ir;
  }

  /**
   * A stream on {@code ch} that has sent the headers of a completions request, naming {@code
   * protocol} (null: none, as Envoy before 1.34).
   */
  private static EnvoyReplay opened(ManagedChannel ch, ProtocolConfiguration protocol) {
    EnvoyReplay s = EnvoyReplay.open(ch);
    s.send(EnvoyReplay.requestHeaders(POST_COMPLETIONS, false, null, protocol));
    return s;
  }

  /**
   * A stream on {@code ch} that has sent {@link #BODY} to the completions API in {@code protocol}
   * and taken the picker's routing answers to the request headers and body.
   */
  private static EnvoyReplay routed(ManagedChannel ch, ProtocolConfiguration protocol) {
    EnvoyReplay s = opened(ch, protocol);
    s.send(EnvoyReplay.requestBody(BODY, true));
    s.next(REQUEST_HEADERS);
    s.next(REQUEST_BODY);
    return s;
  }

  /** {@link #routed(ManagedChannel, ProtocolConfiguration)} in full-duplex mode. */
  private static EnvoyReplay routed(ManagedChannel ch) {
    return routed(ch, fullDuplex());
  }

  /** The upstream's response headers, sent and answered. */
  private static void respond(EnvoyReplay s, int status, String contentType, boolean endOfStream) {
    s.send(EnvoyReplay.responseHeaders(status, contentType, endOfStream, null));
    s.next(RESPONSE_HEADERS);
  }

  /** Envoy ends its side; the picker must end the stream too. */
  private static void finish(EnvoyReplay s) {
    s.halfClose();
    assertThat(s.awaitClosed()).isTrue();
  }

  /** Decisions completed with {@code outcome}. */
  private double completions(String outcome) {
    return meters.find("kvroute.epp.completions").tag("outcome", outcome).counter().count();
  }

  /** The headers the picker set in its answer to the request headers. */
  private static Map<String, String> routingHeaders(ProcessingResponse h) {
    return EnvoyReplay.setHeaders(h.getRequestHeaders().getResponse().getHeaderMutation());
  }

  private static ProtocolConfiguration fullDuplex() {
    return EnvoyReplay.protocol(
        BodySendMode.FULL_DUPLEX_STREAMED, BodySendMode.FULL_DUPLEX_STREAMED, false);
  }

  private static String body(ImmediateResponse ir) {
    return ir.getBody().toStringUtf8();
  }

  private static Map<String, String> headers(ImmediateResponse ir) {
    return EnvoyReplay.setHeaders(ir.getHeaders());
  }

  @Test
  void aBodyThatIsNotARequestIs400() throws Exception {
    ImmediateResponse ir =
        fullDuplexImmediate(picker(), "{not json".getBytes(StandardCharsets.UTF_8));
    assertThat(ir.getStatus().getCodeValue()).isEqualTo(400);
    assertThat(headers(ir)).containsEntry("content-type", "application/json");
    assertThat(body(ir)).contains("\"error\"").contains("\"code\":400");
    ImmediateResponse noModel =
        fullDuplexImmediate(picker(), "{\"prompt\":\"x\"}".getBytes(StandardCharsets.UTF_8));
    assertThat(noModel.getStatus().getCodeValue()).isEqualTo(400);
    assertThat(body(noModel)).contains("model");
    assertThat(router.inFlight()).isZero();
  }

  @Test
  void aBodyOverTheLimitIs413() throws Exception {
    ManagedChannel ch = picker(b -> {}, b -> b.maxRequestBytes(64));
    EnvoyReplay s = opened(ch, fullDuplex());
    s.send(EnvoyReplay.requestBody(new byte[40], false));
    s.send(EnvoyReplay.requestBody(new byte[40], true));
    ImmediateResponse ir = s.next(IMMEDIATE_RESPONSE).getImmediateResponse();
    assertThat(ir.getStatus().getCodeValue()).isEqualTo(413);
    assertThat(s.awaitClosed()).isTrue();
    assertThat(meters.find("kvroute.epp.rejections").tag("status", "413").counter().count())
        .isEqualTo(1);
  }

  @Test
  void noEndpointForTheRequestIs503() throws Exception {
    KvRouter empty = KvRouter.builder().build();
    closeables.add(empty);
    ImmediateResponse ir = fullDuplexImmediate(serve(EndpointPicker.builder(empty).build()), BODY);
    assertThat(ir.getStatus().getCodeValue()).isEqualTo(503);
    assertThat(headers(ir))
        .containsEntry("x-llm-d-request-dropped-reason", "rejected-no-endpoints");
  }

  @Test
  void endpointsThatTheSchedulerRefusesAre429() throws Exception {
    Filter refuseAll =
        new Filter() {
          @Override
          public String name() {
            return "refuse-all";
          }

          @Override
          public List<Endpoint> filter(io.kvroute.scoring.SchedulingContext c, List<Endpoint> in) {
            return List.of();
          }
        };
    Scheduler scheduler =
        Scheduler.builder()
            .profile(
                Profile.builder(Scheduler.DECODE_PROFILE)
                    .filter(refuseAll)
                    .picker(Pickers.maxScore())
                    .build())
            .build();
    ImmediateResponse ir = fullDuplexImmediate(picker(b -> b.scheduler(scheduler), b -> {}), BODY);
    assertThat(ir.getStatus().getCodeValue()).isEqualTo(429);
    assertThat(headers(ir)).containsEntry("x-llm-d-request-dropped-reason", "rejected-saturated");
    assertThat(router.inFlight()).isZero();
  }

  /** A stream that has sent {@link #BODY} with the subset hint {@code [address]}, full duplex. */
  private static EnvoyReplay withSubset(ManagedChannel ch, String address) {
    EnvoyReplay s = EnvoyReplay.open(ch);
    s.send(
        EnvoyReplay.requestHeaders(
            POST_COMPLETIONS,
            false,
            EnvoyReplay.metadataList(
                EndpointPicker.SUBSET_NAMESPACE, EndpointPicker.SUBSET_KEY, List.of(address)),
            fullDuplex()));
    s.send(EnvoyReplay.requestBody(BODY, true));
    return s;
  }

  @Test
  void theSubsetHintLimitsThePick() throws Exception {
    ManagedChannel ch = picker();
    for (int i = 0; i < 5; i++) {
      EnvoyReplay s = withSubset(ch, "127.0.0.1:18002");
      ProcessingResponse h = s.next(REQUEST_HEADERS);
      assertThat(routingHeaders(h).get(EndpointPicker.DESTINATION_ENDPOINT_HEADER))
          .isEqualTo("127.0.0.1:18002");
      s.next(REQUEST_BODY);
      s.cancel();
    }
    EnvoyReplay s = withSubset(ch, "10.9.9.9:80");
    ImmediateResponse ir = s.next(IMMEDIATE_RESPONSE).getImmediateResponse();
    assertThat(ir.getStatus().getCodeValue())
        .as("no eligible endpoint in the subset is a 503, per the protocol")
        .isEqualTo(503);
    ExtProcModesTest.await(() -> router.inFlight() == 0, "cancelled streams complete");
  }

  @Test
  void bodylessRequestsAreRoutedByLoadOnly() throws Exception {
    ManagedChannel ch = picker();
    List<String> picked = new ArrayList<>();
    List<EnvoyReplay> open = new ArrayList<>();
    // three requests in flight at once: each goes where the load is lowest, so to a pod of its own
    for (int i = 0; i < 3; i++) {
      EnvoyReplay s = EnvoyReplay.open(ch);
      s.send(
          EnvoyReplay.requestHeaders(
              Map.of(":method", "GET", ":path", "/v1/models"), true, null, fullDuplex()));
      ProcessingResponse h = s.next(REQUEST_HEADERS);
      picked.add(routingHeaders(h).get(EndpointPicker.DESTINATION_ENDPOINT_HEADER));
      open.add(s);
    }
    assertThat(router.inFlight()).isEqualTo(3);
    for (EnvoyReplay s : open) {
      respond(s, 200, "application/json", false);
      s.send(EnvoyReplay.responseBody("{}".getBytes(StandardCharsets.UTF_8), true));
      assertThat(
              s.next(RESPONSE_BODY)
                  .getResponseBody()
                  .getResponse()
                  .getBodyMutation()
                  .getStreamedResponse()
                  .getEndOfStream())
          .isTrue();
      finish(s);
    }
    assertThat(picked)
        .containsExactlyInAnyOrder("127.0.0.1:18001", "127.0.0.1:18002", "127.0.0.1:18003");
    ExtProcModesTest.await(() -> router.inFlight() == 0, "pass-through decisions complete");
    assertThat(meters.find("kvroute.epp.picks").tag("kind", "passthrough").counter().count())
        .isEqualTo(3);
  }

  @Test
  void anotherApiWithABodyPassesThroughLoadOnly() throws Exception {
    ManagedChannel ch = picker();
    EnvoyReplay s = EnvoyReplay.open(ch);
    s.send(
        EnvoyReplay.requestHeaders(
            Map.of(":method", "POST", ":path", "/v1/embeddings"), false, null, fullDuplex()));
    s.send(EnvoyReplay.requestBody(BODY, true));
    ProcessingResponse h = s.next(REQUEST_HEADERS);
    assertThat(routingHeaders(h))
        .containsKey(EndpointPicker.DESTINATION_ENDPOINT_HEADER)
        .containsEntry("content-length", Integer.toString(BODY.length));
    ProcessingResponse b = s.next(REQUEST_BODY);
    assertThat(
            b.getRequestBody()
                .getResponse()
                .getBodyMutation()
                .getStreamedResponse()
                .getBody()
                .toByteArray())
        .isEqualTo(BODY);
    finish(s);
  }

  @Test
  void noBodyModeRoutesOnTheHeaders() throws Exception {
    EnvoyReplay s =
        opened(picker(), EnvoyReplay.protocol(BodySendMode.NONE, BodySendMode.NONE, false));
    ProcessingResponse h = s.next(REQUEST_HEADERS);
    assertThat(routingHeaders(h)).containsKey(EndpointPicker.DESTINATION_ENDPOINT_HEADER);
    finish(s);
  }

  @Test
  void streamedWithoutEarlyBodiesIsAConfigurationErrorNamingTheFix() throws Exception {
    EnvoyReplay s =
        opened(picker(), EnvoyReplay.protocol(BodySendMode.STREAMED, BodySendMode.STREAMED, false));
    ImmediateResponse ir = s.next(IMMEDIATE_RESPONSE).getImmediateResponse();
    assertThat(ir.getStatus().getCodeValue()).isEqualTo(500);
    assertThat(body(ir)).contains("send_body_without_waiting_for_header_response");
    assertThat(s.awaitClosed()).isTrue();
  }

  @Test
  void aStreamCancelledMidResponseCompletesTheDecision() throws Exception {
    EnvoyReplay s = routed(picker());
    assertThat(router.inFlight()).isEqualTo(1);
    respond(s, 200, "text/event-stream", false);
    s.send(
        EnvoyReplay.responseBody(
            "data: {\"choices\":[]}\n\n".getBytes(StandardCharsets.UTF_8), false));
    s.next(RESPONSE_BODY);
    s.cancel();
    ExtProcModesTest.await(() -> router.inFlight() == 0, "the cancelled decision completes");
    ExtProcModesTest.await(() -> completions("cancelled") == 1, "cancelled counted");
    ExtProcModesTest.await(
        () -> meters.get("kvroute.epp.streams").gauge().value() == 0, "stream closed");
  }

  @Test
  void aStreamEndedBeforeAnyResponseCompletesTheDecisionAsCancelled() throws Exception {
    finish(routed(picker()));
    assertThat(router.inFlight()).isZero();
    assertThat(completions("cancelled")).isEqualTo(1);
  }

  @Test
  void responseHeadersOnlyModeCompletesOnTheStatusWhenTheStreamEnds() throws Exception {
    EnvoyReplay s =
        routed(
            picker(),
            EnvoyReplay.protocol(BodySendMode.FULL_DUPLEX_STREAMED, BodySendMode.NONE, false));
    respond(s, 200, "application/json", false);
    finish(s);
    assertThat(completions("success")).isEqualTo(1);
  }

  @Test
  void responseTrailersEndAGrpcStyleResponse() throws Exception {
    EnvoyReplay s = routed(picker());
    respond(s, 200, "application/json", false);
    s.send(
        EnvoyReplay.responseBody(
            "{\"usage\":{\"prompt_tokens\":5}}".getBytes(StandardCharsets.UTF_8), false));
    s.next(RESPONSE_BODY);
    s.send(EnvoyReplay.responseTrailers());
    s.next(RESPONSE_TRAILERS);
    assertThat(router.inFlight()).isZero();
    assertThat(meters.find("kvroute.epp.usage.tokens").tag("kind", "prompt").counter().count())
        .isEqualTo(5);
    finish(s);
  }

  @Test
  void aFailedUpstreamStatusIsAnEndpointErrorAndA4xxIsTheClients() throws Exception {
    ManagedChannel ch = picker();
    for (int status : new int[] {503, 404}) {
      EnvoyReplay s = routed(ch);
      respond(s, status, "text/plain", true);
      finish(s);
    }
    assertThat(completions("endpoint_error")).isEqualTo(1);
    assertThat(completions("client_error")).isEqualTo(1);
    assertThat(router.inFlight()).isZero();
  }

  @Test
  void observabilityModeIsNeverAnswered() throws Exception {
    ManagedChannel ch = picker();
    EnvoyReplay s = EnvoyReplay.open(ch);
    s.send(
        EnvoyReplay.requestHeaders(POST_COMPLETIONS, false, null, fullDuplex()).toBuilder()
            .setObservabilityMode(true)
            .build());
    // Envoy ignores answers in observability mode: the picker sends none and decides nothing.
    finish(s);
    assertThat(s.pending()).isZero();
    assertThat(router.inFlight()).isZero();
  }

  @Test
  void theDestinationNamespaceIsConfigurable() throws Exception {
    ManagedChannel ch =
        picker(b -> {}, b -> b.destinationNamespace("my.lb").requestBodyMode(BodyMode.BUFFERED));
    EnvoyReplay s = opened(ch, null);
    s.next(REQUEST_HEADERS);
    s.send(EnvoyReplay.requestBody(BODY, true));
    ProcessingResponse b = s.next(REQUEST_BODY);
    assertThat(EnvoyReplay.dynamic(b, "my.lb", EndpointPicker.DESTINATION_ENDPOINT_HEADER))
        .isNotBlank();
    assertThat(b.getDynamicMetadata().getFieldsMap()).doesNotContainKey("envoy.lb");
    finish(s);
  }
}
