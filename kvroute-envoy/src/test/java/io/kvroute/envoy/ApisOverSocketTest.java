package io.kvroute.envoy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
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
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Anthropic Messages and OpenAI Responses through the picker served by {@link EppServer} on a real
 * loopback port (gRPC over Netty), {@link MiniEnvoy} forwarding to three simulated vLLM pods (real
 * HTTP, real ZMQ KV events): a request sharing a long prefix is routed to the pod that cached it
 * with a precise prediction that the pod's own usage block (each API's) equals, and bad input
 * (invalid JSON, wrong types, unknown content-block types, a body over {@code maxRequestBytes}) is
 * answered with an immediate response in the API's own error shape, reaching no pod.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ApisOverSocketTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String MODEL = ExtProcModesTest.MODEL;
  private static final String LONG =
      "You are a careful assistant who reads the whole manual before answering. ".repeat(30);
  private static final int MAX_REQUEST_BYTES = 64 * 1024;

  private SimulatedCluster cluster;
  private KvRouter router;
  private EppServer server;
  private ManagedChannel channel;
  private MiniEnvoy envoy;

  @BeforeAll
  void start() throws Exception {
    cluster =
        SimulatedCluster.builder()
            .both(3)
            .model(MODEL)
            .configure(b -> b.blockSize(16).gpuBlocks(2048).latency(LatencyModel.ZERO))
            .build()
            .start();
    BlockIndex index =
        BlockIndex.inMemory(IndexConfig.builder().blockSize(16).modelName(MODEL).build());
    Scheduler.Builder sb =
        Scheduler.builder()
            .prefixCacheLookup(BlockIndexLookup.of(index))
            .tokenizer(ExtProcModesTest::tokenize);
    Scheduler.defaultProfiles(true).forEach(sb::profile);
    KvRouter.Builder rb =
        KvRouter.builder()
            .scheduler(sb.build())
            .eventFeed(KvEventFeeds.zmq(KvEventFeeds.subscriberFor(index).build(), index));
    for (VllmSimulator pod : cluster.pods()) {
      rb.endpoint(
          ExtProcModesTest.endpoint(pod),
          new KvEventFeed.Source(pod.eventsEndpoint(), pod.replayEndpoint(), pod.topic()));
    }
    router = rb.build();
    server =
        EppServer.builder(EndpointPicker.builder(router).maxRequestBytes(MAX_REQUEST_BYTES).build())
            .host("127.0.0.1")
            .port(0)
            .build()
            .start();
    channel = NettyChannelBuilder.forAddress("127.0.0.1", server.port()).usePlaintext().build();
    envoy = new MiniEnvoy(channel, null);
  }

  @AfterAll
  void stop() throws Exception {
    if (channel != null) {
      channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
    if (server != null) {
      server.close();
    }
    if (router != null) {
      router.close();
    }
    if (cluster != null) {
      cluster.close();
    }
  }

  @Test
  void messagesAreRoutedToThePodThatCachedTheirPrefix() throws Exception {
    String body =
        "{\"model\":\""
            + MODEL
            + "\",\"max_tokens\":2,\"system\":[{\"type\":\"text\",\"text\":\""
            + LONG
            + "\"}],\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
            + "\"text\":\"QUESTION\"}]}]}";
    Exchange x = untilCached("/v1/messages", body);
    JsonNode answer = JSON.readTree(x.clientText());
    assertThat(answer.path("type").asText()).isEqualTo("message");
    assertThat(answer.path("usage").path("cache_read_input_tokens").asLong())
        .as("the pod's own count of cached tokens")
        .isEqualTo(predicted(x));
  }

  @Test
  void responsesAreRoutedToThePodThatCachedTheirPrefix() throws Exception {
    String body =
        "{\"model\":\""
            + MODEL
            + "\",\"max_output_tokens\":2,\"instructions\":\"R"
            + LONG
            + "\",\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":"
            + "[{\"type\":\"input_text\",\"text\":\"QUESTION\"}]}]}";
    Exchange x = untilCached("/v1/responses", body);
    JsonNode answer = JSON.readTree(x.clientText());
    assertThat(answer.path("object").asText()).isEqualTo("response");
    assertThat(answer.path("usage").path("input_tokens_details").path("cached_tokens").asLong())
        .as("the pod's own count of cached tokens")
        .isEqualTo(predicted(x));
  }

  @Test
  void badMessagesAreAnsweredInAnthropicsShape() throws Exception {
    String m = "{\"model\":\"" + MODEL + "\",\"max_tokens\":2,\"messages\":";
    assertImmediate("/v1/messages", m + "[", 400, "invalid_request_error", "JSON");
    assertImmediate(
        "/v1/messages",
        m + "[{\"role\":\"user\",\"content\":null}]}",
        400,
        "invalid_request_error",
        "messages[0].content");
    assertImmediate(
        "/v1/messages",
        m + "[{\"role\":\"user\",\"content\":[{\"type\":\"server_tool_use\",\"id\":\"s\"}]}]}",
        400,
        "invalid_request_error",
        "\"server_tool_use\"");
    assertImmediate(
        "/v1/messages",
        m + "[{\"role\":\"user\",\"content\":\"" + "x".repeat(MAX_REQUEST_BYTES) + "\"}]}",
        413,
        "request_too_large",
        "exceeds");
    assertNoPodSaw("server_tool_use");
  }

  @Test
  void badResponsesRequestsAreAnsweredInOpenAisShape() throws Exception {
    String r = "{\"model\":\"" + MODEL + "\",\"input\":";
    assertImmediate("/v1/responses", r + "[}", 400, "invalid_request_error", "JSON");
    assertImmediate("/v1/responses", r + "{\"a\":1}}", 400, "invalid_request_error", "input");
    assertImmediate(
        "/v1/responses",
        r + "\"q\",\"tools\":[\"search\"]}",
        400,
        "invalid_request_error",
        "tools[0]");
    assertImmediate(
        "/v1/responses",
        r + "\"" + "x".repeat(MAX_REQUEST_BYTES) + "\"}",
        413,
        "invalid_request_error",
        "exceeds");
  }

  /** Posts {@code body} until the picker predicts cached tokens; that exchange. */
  private Exchange untilCached(String path, String body) throws Exception {
    Exchange first = post(path, body.replace("QUESTION", "first"));
    assertThat(first.immediate).as(path).isNull();
    assertThat(first.status).as(path).isEqualTo(200);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      // the pod's KV events reach the index asynchronously: repeat until a hit is predicted
      assertThat(System.nanoTime()).as("no hit predicted for " + path).isLessThan(deadline);
      Exchange again = post(path, body.replace("QUESTION", "again"));
      assertThat(again.immediate).as(path).isNull();
      long predicted =
          Long.parseLong(
              EnvoyReplay.dynamic(
                  again.routingAnswer,
                  EndpointPicker.KVROUTE_NAMESPACE,
                  "predicted_cached_tokens"));
      if (predicted > 0) {
        assertThat(again.destinations.get(0)).as("the cached pod first").isEqualTo(first.target);
        assertThat(predicted).isGreaterThanOrEqualTo(16 * 10);
        return again;
      }
    }
  }

  private static long predicted(Exchange x) {
    return Long.parseLong(
        EnvoyReplay.dynamic(
            x.routingAnswer, EndpointPicker.KVROUTE_NAMESPACE, "predicted_cached_tokens"));
  }

  private Exchange post(String path, String body) throws Exception {
    return envoy.post(path, body, Map.of(), Mode.of(BodyMode.FULL_DUPLEX_STREAMED), null);
  }

  private void assertImmediate(String path, String body, int status, String type, String inMessage)
      throws Exception {
    Exchange x = post(path, body);
    ImmediateResponse ir = x.immediate;
    assertThat(ir).as("an immediate response to " + body).isNotNull();
    assertThat(ir.getStatus().getCodeValue()).isEqualTo(status);
    JsonNode e = JSON.readTree(ir.getBody().toStringUtf8());
    if (path.equals("/v1/messages")) {
      assertThat(e.path("type").asText()).as(e.toString()).isEqualTo("error");
    } else {
      assertThat(e.path("error").path("code").asInt()).as(e.toString()).isEqualTo(status);
    }
    assertThat(e.path("error").path("type").asText()).as(e.toString()).isEqualTo(type);
    assertThat(e.path("error").path("message").asText()).contains(inMessage);
    ExtProcModesTest.await(() -> router.inFlight() == 0, "nothing left in flight");
  }

  private void assertNoPodSaw(String text) {
    for (VllmSimulator p : cluster.pods()) {
      assertThat(p.requests()).noneMatch(r -> r.body().contains(text));
    }
  }
}
