package io.kvroute.spring.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.router.KvRouter;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import java.net.http.HttpResponse;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The starter routes Anthropic Messages and OpenAI Responses requests precisely (relay mode, pods'
 * KV events indexed): a second request sharing a long prefix lands on the pod that cached it, and
 * the pod's own usage agrees with the prediction. Messages errors are in Anthropic's shape and
 * Responses errors in OpenAI's (bad input: invalid JSON, wrong types, unknown content-block types,
 * bodies over {@code max-request-size}); another {@code /v1/} path passes through, load-only.
 */
@GatewayAppTest
class ApisTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String LONG =
      "You are a careful assistant who reads the whole manual before answering. ".repeat(30);
  static SimulatedCluster cluster;

  @LocalServerPort int port;
  @Autowired KvRouter router;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    cluster = SimPods.start(b -> b.both(3), LatencyModel.ZERO);
    SimPods.mode(registry, "relay");
    registry.add("kvroute.index.block-size", () -> "16");
    registry.add("kvroute.max-request-size", () -> "64KB");
    SimPods.register(registry, cluster.pods(), p -> null, true);
  }

  @AfterAll
  static void stopCluster() {
    cluster.close();
  }

  @Test
  void messagesAndResponsesAreRoutedPrecisely() throws Exception {
    String messages =
        "{\"model\":\""
            + SimPods.MODEL
            + "\",\"max_tokens\":2,\"system\":\""
            + LONG
            + "\",\"messages\":[{\"role\":\"user\",\"content\":\"Summarise it.\"}]}";
    HttpResponse<String> m = untilCached("/v1/messages", messages);
    assertThat(JSON.readTree(m.body()).path("usage").path("cache_read_input_tokens").asLong())
        .isEqualTo(Long.parseLong(m.headers().firstValue("x-kvroute-cached-tokens").get()));

    String responses =
        "{\"model\":\""
            + SimPods.MODEL
            + "\",\"max_output_tokens\":2,\"instructions\":\""
            + LONG
            + "\",\"input\":\"Which chapter covers caching?\"}";
    HttpResponse<String> r = untilCached("/v1/responses", responses);
    JsonNode usage = JSON.readTree(r.body()).path("usage");
    assertThat(usage.path("input_tokens_details").path("cached_tokens").asLong())
        .isEqualTo(Long.parseLong(r.headers().firstValue("x-kvroute-cached-tokens").get()));
  }

  @Test
  void messagesErrorsAreInAnthropicsShape() throws Exception {
    HttpResponse<String> r = Http.post(port, "/v1/messages", "{\"model\":\"x\",\"max_tokens\":1}");
    assertThat(r.statusCode()).isEqualTo(400);
    JsonNode e = JSON.readTree(r.body());
    assertThat(e.path("type").asText()).isEqualTo("error");
    assertThat(e.path("error").path("type").asText()).isEqualTo("invalid_request_error");
  }

  @Test
  void anUnknownApiPassesThroughLoadOnly() throws Exception {
    HttpResponse<String> models = Http.get(port, "/v1/models");
    assertThat(models.statusCode()).as(models.body()).isEqualTo(200);
    assertThat(models.body()).contains("\"" + SimPods.MODEL + "\"");
    String pod = models.headers().firstValue("x-kvroute-decode").orElseThrow();
    assertThat(cluster.pod(pod)).isPresent();
    Http.await("the pass-through decision completes", () -> router.inFlight() == 0);
  }

  @Test
  void badMessagesAreRefusedInAnthropicsShape() throws Exception {
    String m = "{\"model\":\"" + SimPods.MODEL + "\",\"max_tokens\":2,\"messages\":";
    assertRefused("/v1/messages", m + "[", 400, "invalid_request_error", "JSON");
    assertRefused(
        "/v1/messages",
        m + "[{\"role\":\"user\",\"content\":{\"text\":\"hi\"}}]}",
        400,
        "invalid_request_error",
        "messages[0].content");
    assertRefused(
        "/v1/messages",
        m + "[{\"role\":\"user\",\"content\":[{\"type\":\"document\"}]}]}",
        400,
        "invalid_request_error",
        "\"document\"");
    assertRefused(
        "/v1/messages",
        m + "[{\"role\":\"user\",\"content\":\"" + "x".repeat(100 * 1024) + "\"}]}",
        413,
        "request_too_large",
        "exceeds");
  }

  @Test
  void badResponsesRequestsAreRefusedInOpenAisShape() throws Exception {
    String r = "{\"model\":\"" + SimPods.MODEL + "\",\"input\":";
    assertRefused("/v1/responses", r + "\"hi\"", 400, "invalid_request_error", "JSON");
    assertRefused("/v1/responses", r + "true}", 400, "invalid_request_error", "input");
    assertRefused(
        "/v1/responses",
        r + "\"hi\",\"instructions\":{\"a\":1}}",
        400,
        "invalid_request_error",
        "instructions");
    assertRefused(
        "/v1/responses",
        r + "\"" + "x".repeat(100 * 1024) + "\"}",
        413,
        "invalid_request_error",
        "exceeds");
  }

  /**
   * Posts {@code body}; the answer has {@code status} and an error of {@code type} in the API's
   * shape.
   */
  private void assertRefused(String path, String body, int status, String type, String inMessage)
      throws Exception {
    HttpResponse<String> r = Http.post(port, path, body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(status);
    JsonNode e = JSON.readTree(r.body());
    if (path.equals("/v1/messages")) {
      assertThat(e.path("type").asText()).as(r.body()).isEqualTo("error");
    } else {
      assertThat(e.path("error").path("code").asInt()).as(r.body()).isEqualTo(status);
    }
    assertThat(e.path("error").path("type").asText()).as(r.body()).isEqualTo(type);
    assertThat(e.path("error").path("message").asText()).contains(inMessage);
  }

  private HttpResponse<String> untilCached(String path, String body) throws Exception {
    HttpResponse<String> first = Http.post(port, path, body);
    assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
    String pod = first.headers().firstValue("x-kvroute-decode").orElseThrow();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      assertThat(System.nanoTime()).as("no cached tokens predicted").isLessThan(deadline);
      HttpResponse<String> again = Http.post(port, path, body);
      assertThat(again.statusCode()).as(again.body()).isEqualTo(200);
      if (Long.parseLong(again.headers().firstValue("x-kvroute-cached-tokens").orElse("0")) > 0) {
        assertThat(again.headers().firstValue("x-kvroute-decode")).contains(pod);
        return again;
      }
    }
  }
}
