package io.kvroute.envoy;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.kvroute.connector.Endpoint;
import io.kvroute.envoy.EndpointPicker.BodyMode;
import io.kvroute.envoy.MiniEnvoy.Exchange;
import io.kvroute.envoy.MiniEnvoy.Mode;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.router.KvEventFeed;
import io.kvroute.router.KvEventFeeds;
import io.kvroute.router.KvRouter;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulingRequest;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimTokenizer;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The picker in every body mode Envoy's ext_proc filter has, driven by {@link MiniEnvoy} against
 * three simulated vLLM pods (real HTTP, real ZMQ KV events, precise prefix routing): the answers
 * each mode requires in order, the destination as header and metadata, the body passed unchanged,
 * usage read from the response, and the decision completed so nothing stays in flight.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ExtProcModesTest {
  static final String MODEL = "sim-model";

  private SimulatedCluster cluster;
  private BlockIndex index;
  private KvRouter router;
  private SimpleMeterRegistry meters;
  private Server server;
  private ManagedChannel channel;
  private MiniEnvoy envoy;
  private Set<String> podAddresses;

  @BeforeAll
  void start() throws Exception {
    cluster =
        SimulatedCluster.builder()
            .both(3)
            .model(MODEL)
            .configure(b -> b.blockSize(16).gpuBlocks(2048).latency(LatencyModel.ZERO))
            .build()
            .start();
    index = BlockIndex.inMemory(IndexConfig.builder().blockSize(16).modelName(MODEL).build());
    Scheduler.Builder sb =
        Scheduler.builder()
            .prefixCacheLookup(BlockIndexLookup.of(index))
            .tokenizer(ExtProcModesTest::tokenize);
    Scheduler.defaultProfiles(true).forEach(sb::profile);
    KvRouter.Builder rb =
        KvRouter.builder()
            .scheduler(sb.build())
            .eventFeed(KvEventFeeds.zmq(KvEventFeeds.subscriberFor(index).build(), index));
    podAddresses = new HashSet<>();
    for (VllmSimulator pod : cluster.pods()) {
      rb.endpoint(
          endpoint(pod),
          new KvEventFeed.Source(pod.eventsEndpoint(), pod.replayEndpoint(), pod.topic()));
      podAddresses.add(pod.hostPort());
    }
    router = rb.build();
    meters = new SimpleMeterRegistry();
    EndpointPicker picker = EndpointPicker.builder(router).meterRegistry(meters).build();
    String name = InProcessServerBuilder.generateName();
    server = InProcessServerBuilder.forName(name).addService(picker).build().start();
    channel = InProcessChannelBuilder.forName(name).build();
    envoy = new MiniEnvoy(channel, null);
  }

  @AfterAll
  void stop() throws Exception {
    channel.shutdownNow();
    server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    router.close();
    cluster.close();
  }

  static Endpoint endpoint(VllmSimulator pod) {
    return Endpoint.builder(pod.name(), pod.baseUrl().getHost(), pod.baseUrl().getPort())
        .role(Endpoint.Role.BOTH)
        .build();
  }

  static CompletableFuture<int[]> tokenize(SchedulingRequest r) {
    if (r.chatTemplateInputs().isPresent()) {
      // a Messages or Responses request's chat form, rendered with the pods' own template
      try {
        com.fasterxml.jackson.databind.JsonNode in =
            new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(r.chatTemplateInputs().get());
        return CompletableFuture.completedFuture(
            SimTokenizer.get()
                .encode(
                    SimTokenizer.get()
                        .applyChatTemplate(
                            in.get("messages"), in.path("add_generation_prompt").asBoolean(true))));
      } catch (java.io.IOException e) {
        return CompletableFuture.failedFuture(e);
      }
    }
    return CompletableFuture.completedFuture(SimTokenizer.get().encode(r.prompt().orElse("")));
  }

  static String completion(String prompt, boolean stream) {
    return "{\"model\":\""
        + MODEL
        + "\",\"prompt\":\""
        + prompt
        + "\",\"max_tokens\":4,\"stream\":"
        + stream
        + (stream ? ",\"stream_options\":{\"include_usage\":true}" : "")
        + "}";
  }

  static String chat(String prompt, boolean stream) {
    return "{\"model\":\""
        + MODEL
        + "\",\"messages\":[{\"role\":\"user\",\"content\":\""
        + prompt
        + "\"}],\"max_tokens\":4,\"stream\":"
        + stream
        + (stream ? ",\"stream_options\":{\"include_usage\":true}" : "")
        + "}";
  }

  static void await(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting for " + what);
      }
      TimeUnit.MILLISECONDS.sleep(5);
    }
  }

  double counter(String name, String tag, String value) {
    var c = meters.find(name).tag(tag, value).counter();
    return c == null ? 0 : c.count();
  }

  static Stream<Arguments> modes() {
    return Stream.of(
            BodyMode.FULL_DUPLEX_STREAMED,
            BodyMode.BUFFERED,
            BodyMode.BUFFERED_PARTIAL,
            BodyMode.STREAMED)
        .flatMap(
            m ->
                Stream.of(
                    Arguments.of(m, true, false),
                    Arguments.of(m, true, true),
                    Arguments.of(m, false, false)));
  }

  @ParameterizedTest(name = "{0} streaming={1} chat={2}")
  @MethodSource("modes")
  void everyBodyModeRoutesForwardsAndAccounts(BodyMode m, boolean streaming, boolean chat)
      throws Exception {
    double successes = counter("kvroute.epp.completions", "outcome", "success");
    double prompts = counter("kvroute.epp.usage.tokens", "kind", "prompt");
    String prompt = "mode " + m + " " + streaming + " " + chat + " tell me about caches";
    String body = chat ? chat(prompt, streaming) : completion(prompt, streaming);
    Exchange x =
        envoy.post(
            chat ? "/v1/chat/completions" : "/v1/completions", body, Map.of(), Mode.of(m), null);

    assertThat(x.immediate).as("no immediate response").isNull();
    assertThat(x.destinations).hasSize(3).doesNotHaveDuplicates();
    assertThat(podAddresses).containsAll(x.destinations);
    assertThat(new String(x.forwardedBody, java.nio.charset.StandardCharsets.UTF_8))
        .as("the body reaches the pod unchanged")
        .isEqualTo(body);
    assertThat(x.setHeaders).containsKey("x-request-id");
    assertThat(x.removedHeaders)
        .as("a client cannot pick the prefill pod")
        .contains("x-prefiller-host-port");
    assertThat(
            EnvoyReplay.dynamic(x.routingAnswer, EndpointPicker.KVROUTE_NAMESPACE, "disaggregated"))
        .isEqualTo("false");
    if (m == BodyMode.FULL_DUPLEX_STREAMED) {
      assertThat(x.setHeaders).containsEntry("content-length", Integer.toString(body.length()));
    } else {
      assertThat(x.setHeaders).doesNotContainKey("content-length");
    }
    assertThat(x.status).isEqualTo(200);
    assertThat(x.clientText())
        .isEqualTo(new String(x.upstreamBody, java.nio.charset.StandardCharsets.UTF_8));
    assertThat(x.clientText()).contains(streaming ? "data: [DONE]" : "\"choices\"");
    assertThat(Long.parseLong(x.usageFact("prompt_tokens"))).as("usage read").isPositive();
    assertThat(x.usageFact("completion_tokens")).isNotNull();
    assertThat(x.usageFact("served")).isNotNull();
    await(() -> router.inFlight() == 0, "the decision completes");
    assertThat(counter("kvroute.epp.completions", "outcome", "success")).isEqualTo(successes + 1);
    assertThat(counter("kvroute.epp.usage.tokens", "kind", "prompt")).isGreaterThan(prompts);
  }

  @Test
  void envoyWithoutProtocolConfigGetsTheConfiguredMode() throws Exception {
    // The picker assumes FULL_DUPLEX_STREAMED (GIE's mode) when Envoy does not say.
    Exchange x =
        envoy.post(
            "/v1/completions",
            completion("unannounced", false),
            Map.of(),
            Mode.of(BodyMode.FULL_DUPLEX_STREAMED).unannounced(),
            null);
    assertThat(x.immediate).isNull();
    assertThat(x.status).isEqualTo(200);
    await(() -> router.inFlight() == 0, "completion");
  }

  @Test
  void requestTrailersEndTheBody() throws Exception {
    for (BodyMode m :
        List.of(BodyMode.FULL_DUPLEX_STREAMED, BodyMode.STREAMED, BodyMode.BUFFERED)) {
      Exchange x =
          envoy.post(
              "/v1/completions",
              completion("trailers " + m, false),
              Map.of(),
              Mode.of(m).withTrailers(),
              null);
      assertThat(x.immediate).as(m.name()).isNull();
      assertThat(x.status).isEqualTo(200);
      assertThat(x.requestAnswers.get(x.requestAnswers.size() - 1).getResponseCase())
          .isEqualTo(
              io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase
                  .REQUEST_TRAILERS);
    }
    await(() -> router.inFlight() == 0, "completion");
  }

  @Test
  void aLargeBodyComesBackInChunksUnderEnvoysLimit() throws Exception {
    String prompt = "word ".repeat(40_000); // ~200 KB
    Exchange x =
        envoy.post(
            "/v1/completions",
            completion(prompt, false),
            Map.of(),
            Mode.of(BodyMode.FULL_DUPLEX_STREAMED),
            null);
    assertThat(x.immediate).isNull();
    assertThat(x.forwardedBody).hasSize(completion(prompt, false).length());
    assertThat(x.requestAnswers.stream().filter(a -> a.hasRequestBody()).count())
        .as("several streamed chunks")
        .isGreaterThan(3);
    await(() -> router.inFlight() == 0, "completion");
  }

  @Test
  void messagesAndResponsesRequestsFollowTheCache() throws Exception {
    String system = "a long shared system prompt about anthropic messages routing ".repeat(24);
    for (String[] api :
        new String[][] {
          {
            "/v1/messages",
            "{\"model\":\""
                + MODEL
                + "\",\"max_tokens\":2,\"system\":\""
                + system
                + "\","
                + "\"messages\":[{\"role\":\"user\",\"content\":\"QUESTION\"}]}"
          },
          {
            "/v1/responses",
            "{\"model\":\""
                + MODEL
                + "\",\"max_output_tokens\":2,\"instructions\":\"R"
                + system
                + "\",\"input\":\"QUESTION\"}"
          }
        }) {
      Exchange first =
          envoy.post(
              api[0],
              api[1].replace("QUESTION", "first"),
              Map.of(),
              Mode.of(BodyMode.FULL_DUPLEX_STREAMED),
              null);
      assertThat(first.immediate).as(api[0]).isNull();
      String pod = first.target;
      Exchange second = null;
      long predicted = 0;
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (predicted == 0) {
        assertThat(System.nanoTime()).as("no hit predicted for " + api[0]).isLessThan(deadline);
        second =
            envoy.post(
                api[0],
                api[1].replace("QUESTION", "second"),
                Map.of(),
                Mode.of(BodyMode.FULL_DUPLEX_STREAMED),
                null);
        predicted =
            Long.parseLong(
                EnvoyReplay.dynamic(
                    second.routingAnswer,
                    EndpointPicker.KVROUTE_NAMESPACE,
                    "predicted_cached_tokens"));
      }
      assertThat(second.destinations.get(0)).as("the cached pod comes first").isEqualTo(pod);
      assertThat(predicted).isGreaterThanOrEqualTo(16 * 10);
    }
    await(() -> router.inFlight() == 0, "completion");
  }

  @Test
  void repeatedPromptsFollowTheCacheAndUsageShowsTheHit() throws Exception {
    String prefix = "a long shared system prompt about kv cache aware routing ".repeat(12);
    Exchange first =
        envoy.post(
            "/v1/completions",
            completion(prefix + "first", false),
            Map.of(),
            Mode.of(BodyMode.FULL_DUPLEX_STREAMED),
            null);
    String pod = first.target;
    String podId =
        cluster.pods().stream()
            .filter(p -> p.hostPort().equals(pod))
            .findFirst()
            .orElseThrow()
            .name();
    await(() -> index.pods().contains(podId), "the first pod's KV events are indexed");
    Exchange second =
        envoy.post(
            "/v1/completions",
            completion(prefix + "second", false),
            Map.of(),
            Mode.of(BodyMode.FULL_DUPLEX_STREAMED),
            null);
    assertThat(second.destinations.get(0)).as("the cached pod comes first").isEqualTo(pod);
    assertThat(
            Long.parseLong(
                EnvoyReplay.dynamic(
                    second.routingAnswer,
                    EndpointPicker.KVROUTE_NAMESPACE,
                    "predicted_cached_tokens")))
        .isPositive();
    assertThat(Long.parseLong(second.usageFact("cached_tokens")))
        .as("the engine reports the hit")
        .isPositive();
    await(() -> router.inFlight() == 0, "completion");
  }

  @Test
  void envoyServingAFallbackIsWhatTheDecisionRecords() throws Exception {
    Exchange x =
        envoy.post(
            "/v1/completions",
            completion("fallback please", false),
            Map.of(),
            Mode.of(BodyMode.FULL_DUPLEX_STREAMED).servedBy(1),
            null);
    assertThat(x.target).isEqualTo(x.destinations.get(1));
    String servedId =
        cluster.pods().stream()
            .filter(p -> p.hostPort().equals(x.target))
            .findFirst()
            .orElseThrow()
            .name();
    assertThat(x.usageFact("served")).isEqualTo(servedId);
    await(() -> router.inFlight() == 0, "completion");
  }

  @Test
  void aPodFailingMidTestIsAnEndpointError() throws Exception {
    double errors = counter("kvroute.epp.completions", "outcome", "endpoint_error");
    cluster.pods().forEach(p -> p.faults().failNext(1, 503));
    try {
      Exchange x =
          envoy.post(
              "/v1/completions",
              completion("failing pod", false),
              Map.of(),
              Mode.of(BodyMode.FULL_DUPLEX_STREAMED),
              null);
      assertThat(x.status).isEqualTo(503);
      await(
          () -> counter("kvroute.epp.completions", "outcome", "endpoint_error") == errors + 1,
          "the endpoint error is recorded");
    } finally {
      cluster.resetFaults();
    }
    Exchange ok =
        envoy.post(
            "/v1/completions",
            completion("after the failure", true),
            Map.of(),
            Mode.of(BodyMode.FULL_DUPLEX_STREAMED),
            null);
    assertThat(ok.status).isEqualTo(200);
    await(() -> router.inFlight() == 0, "completion");
  }

  @Test
  void aClientSentPrefillerHeaderIsRemoved() throws Exception {
    Exchange x =
        envoy.post(
            "/v1/completions",
            completion("no smuggling", false),
            Map.of("x-prefiller-host-port", "evil.example:80"),
            Mode.of(BodyMode.BUFFERED),
            null);
    assertThat(x.forwardedHeaders).doesNotContainKey("x-prefiller-host-port");
    await(() -> router.inFlight() == 0, "completion");
  }
}
