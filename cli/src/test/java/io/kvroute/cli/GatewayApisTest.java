package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The gateway routes Anthropic Messages and OpenAI Responses requests precisely: over real sockets,
 * with simulated vLLM pods serving both APIs, a second request sharing a long prefix lands on the
 * pod that cached it, with the cached tokens the gateway predicted in {@code
 * x-kvroute-cached-tokens} and the pod's own usage block (each API's) agreeing. Errors of a
 * Messages request are in Anthropic's shape (bad input: invalid JSON, wrong types, unknown
 * content-block types, oversized bodies refused by the edge), of a Responses request in OpenAI's; a
 * path of no known API passes through, load-only.
 */
class GatewayApisTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String LONG =
      "You are a careful assistant who reads the whole manual before answering. ".repeat(30);

  @TempDir static Path dir;
  private static SimulatedCluster cluster;
  private static RunningCommand<GatewayCommand> gateway;
  private static String base;

  @BeforeAll
  static void start() throws Exception {
    cluster =
        SimulatedCluster.builder()
            .both(3)
            .model("m")
            .configure(b -> b.blockSize(16).latency(LatencyModel.ZERO))
            .build()
            .start();
    Path cfg =
        GatewayYaml.write(
            dir,
            GatewayYaml.HTTP_ONE_ATTEMPT
                + "index: { blockSize: 16 }\n"
                + GatewayYaml.endpoints(cluster.pods()));
    gateway = GatewayYaml.run(cfg);
    base = GatewayYaml.base(gateway);
  }

  @AfterAll
  static void stop() throws Exception {
    if (gateway != null) {
      gateway.stop(gateway.command::shutdown);
    }
    if (cluster != null) {
      cluster.close();
    }
  }

  @Test
  void messagesRequestsSharingAPrefixLandOnThePodThatCachedIt() throws Exception {
    String body =
        "{\"model\":\"m\",\"max_tokens\":2,\"system\":[{\"type\":\"text\",\"text\":\""
            + LONG
            + "\"}],\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
            + "\"text\":\"Summarise the manual.\"}]}]}";
    HttpResponse<String> again = untilCached("/v1/messages", body);
    JsonNode answer = JSON.readTree(again.body());
    assertThat(answer.path("type").asText()).isEqualTo("message");
    long predicted = Long.parseLong(again.headers().firstValue("x-kvroute-cached-tokens").get());
    // The engine's own count: Anthropic's usage, cached part apart from the input tokens
    assertThat(answer.path("usage").path("cache_read_input_tokens").asLong()).isEqualTo(predicted);
    assertThat(predicted).isGreaterThanOrEqualTo(16 * 10);
    assertNoTokenizeMismatch();
  }

  @Test
  void responsesRequestsSharingAPrefixLandOnThePodThatCachedIt() throws Exception {
    String body =
        "{\"model\":\"m\",\"max_output_tokens\":2,\"instructions\":\""
            + LONG
            + "\",\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":"
            + "[{\"type\":\"input_text\",\"text\":\"Which chapter covers caching?\"}]}]}";
    HttpResponse<String> again = untilCached("/v1/responses", body);
    JsonNode answer = JSON.readTree(again.body());
    assertThat(answer.path("object").asText()).isEqualTo("response");
    long predicted = Long.parseLong(again.headers().firstValue("x-kvroute-cached-tokens").get());
    assertThat(answer.path("usage").path("input_tokens_details").path("cached_tokens").asLong())
        .isEqualTo(predicted);
    assertThat(predicted).isGreaterThanOrEqualTo(16 * 10);
  }

  @Test
  void streamedMessagesCarryAnthropicEventsThroughTheGateway() throws Exception {
    String body =
        "{\"model\":\"m\",\"max_tokens\":3,\"stream\":true,\"messages\":"
            + "[{\"role\":\"user\",\"content\":\"Stream three words.\"}]}";
    HttpResponse<String> r = TestHttp.postJson(base + "/v1/messages", body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.body())
        .startsWith("event: message_start\n")
        .contains("event: content_block_delta\n", "\"cache_read_input_tokens\"")
        .endsWith("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
  }

  @Test
  void messagesErrorsAreInAnthropicsShape() throws Exception {
    HttpResponse<String> r =
        TestHttp.postJson(base + "/v1/messages", "{\"model\":\"m\",\"max_tokens\":2}");
    assertThat(r.statusCode()).isEqualTo(400);
    JsonNode e = JSON.readTree(r.body());
    assertThat(e.path("type").asText()).isEqualTo("error");
    assertThat(e.path("error").path("type").asText()).isEqualTo("invalid_request_error");
    assertThat(e.path("error").path("message").asText()).contains("messages");

    // the engine's own 4xx, already in Anthropic's shape, is relayed as it wrote it
    HttpResponse<String> none =
        TestHttp.postJson(
            base + "/v1/messages",
            "{\"model\":\"nobody-serves-it\",\"max_tokens\":2,\"messages\":"
                + "[{\"role\":\"user\",\"content\":\"hi\"}]}");
    assertThat(none.statusCode()).isEqualTo(404);
    assertThat(JSON.readTree(none.body()).path("type").asText()).isEqualTo("error");
    assertThat(JSON.readTree(none.body()).path("error").path("message").asText())
        .contains("nobody-serves-it");
  }

  @Test
  void anUnknownApiPassesThroughLoadOnly() throws Exception {
    HttpResponse<String> models = TestHttp.get(base + "/v1/models");
    assertThat(models.statusCode()).as(models.body()).isEqualTo(200);
    assertThat(JSON.readTree(models.body()).path("data").get(0).path("id").asText()).isEqualTo("m");
    String pod = models.headers().firstValue("x-kvroute-decode").orElseThrow();
    assertThat(cluster.pods()).extracting(VllmSimulator::name).contains(pod);
    assertThat(models.headers().firstValue("x-kvroute-cached-tokens")).contains("0");

    HttpResponse<String> other =
        TestHttp.postJson(base + "/v1/embeddings", "{\"model\":\"m\",\"input\":\"hi\"}");
    assertThat(other.statusCode()).as("the pod's own answer, relayed").isEqualTo(404);
    assertThat(other.headers().firstValue("x-kvroute-decode")).isPresent();
  }

  @Test
  void badMessagesAreRefusedInAnthropicsShape() throws Exception {
    assertAnthropic400("{\"model\":\"m\",\"max_tokens\":2,\"messages\":[", "JSON");
    assertAnthropic400(
        "{\"model\":\"m\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":42}]}",
        "messages[0].content");
    assertAnthropic400(
        "{\"model\":\"m\",\"max_tokens\":\"two\",\"messages\":[{\"role\":\"user\","
            + "\"content\":\"hi\"}]}",
        "max_tokens");
    assertAnthropic400(
        "{\"model\":\"m\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":"
            + "[{\"type\":\"web_search_tool_result\",\"content\":[]}]}]}",
        "\"web_search_tool_result\"");
    // refused by the HTTP edge before the body is read, still in the API's shape
    String tooLarge = declaredOverLimit("/v1/messages");
    assertThat(tooLarge).startsWith("HTTP/1.1 413");
    JsonNode e = JSON.readTree(tooLarge.substring(tooLarge.indexOf("\r\n\r\n") + 4));
    assertThat(e.path("type").asText()).isEqualTo("error");
    assertThat(e.path("error").path("type").asText()).isEqualTo("request_too_large");
    for (VllmSimulator p : cluster.pods()) {
      assertThat(p.requests())
          .as("a refused request reaches no pod")
          .noneMatch(r -> r.body().contains("web_search_tool_result"));
    }
  }

  @Test
  void badResponsesRequestsAreRefusedInOpenAisShape() throws Exception {
    assertOpenAi400("{\"model\":\"m\",\"input\":", "JSON");
    assertOpenAi400("{\"model\":\"m\",\"input\":42}", "input");
    assertOpenAi400("{\"model\":\"m\",\"input\":[\"hi\"]}", "input[0]");
    assertOpenAi400(
        "{\"model\":\"m\",\"input\":\"hi\",\"max_output_tokens\":1.5}", "max_output_tokens");
    String tooLarge = declaredOverLimit("/v1/responses");
    assertThat(tooLarge).startsWith("HTTP/1.1 413");
    JsonNode e = JSON.readTree(tooLarge.substring(tooLarge.indexOf("\r\n\r\n") + 4));
    assertThat(e.path("error").path("type").asText()).isEqualTo("invalid_request_error");
    assertThat(e.path("error").path("code").asInt()).isEqualTo(413);
  }

  private static void assertAnthropic400(String body, String inMessage) throws Exception {
    HttpResponse<String> r = TestHttp.postJson(base + "/v1/messages", body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(400);
    JsonNode e = JSON.readTree(r.body());
    assertThat(e.path("type").asText()).as(r.body()).isEqualTo("error");
    assertThat(e.path("error").path("type").asText()).isEqualTo("invalid_request_error");
    assertThat(e.path("error").path("message").asText()).contains(inMessage);
  }

  private static void assertOpenAi400(String body, String inMessage) throws Exception {
    HttpResponse<String> r = TestHttp.postJson(base + "/v1/responses", body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(400);
    JsonNode e = JSON.readTree(r.body());
    assertThat(e.path("error").path("type").asText())
        .as(r.body())
        .isEqualTo("invalid_request_error");
    assertThat(e.path("error").path("message").asText()).contains(inMessage);
  }

  /** A request declaring a body over the edge's 16 MiB limit, sent raw; the whole answer. */
  private static String declaredOverLimit(String path) throws Exception {
    try (java.net.Socket s = new java.net.Socket("127.0.0.1", gateway.command.running.port())) {
      s.setSoTimeout(30_000);
      s.getOutputStream()
          .write(
              ("POST "
                      + path
                      + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      + "Content-Length: "
                      + (16 * 1024 * 1024 + 1)
                      + "\r\n\r\n")
                  .getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
      s.getOutputStream().flush();
      java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
      byte[] b = new byte[8192];
      try {
        for (int n; (n = s.getInputStream().read(b)) > 0; ) {
          out.write(b, 0, n);
        }
      } catch (java.net.SocketException reset) {
        // the server closed after its answer
      }
      return out.toString(java.nio.charset.StandardCharsets.UTF_8);
    }
  }

  /** Posts {@code body} until the gateway predicts cached tokens for it; that answer. */
  private static HttpResponse<String> untilCached(String path, String body) throws Exception {
    HttpResponse<String> first = TestHttp.postJson(base + path, body);
    assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
    String pod = first.headers().firstValue("x-kvroute-decode").orElseThrow();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    // The pod's KV events reach the gateway's index asynchronously: repeat until it predicts a hit
    while (true) {
      assertThat(System.nanoTime()).as("no cached tokens predicted").isLessThan(deadline);
      HttpResponse<String> again = TestHttp.postJson(base + path, body);
      assertThat(again.statusCode()).as(again.body()).isEqualTo(200);
      long cached =
          Long.parseLong(again.headers().firstValue("x-kvroute-cached-tokens").orElse("0"));
      if (cached > 0) {
        assertThat(again.headers().firstValue("x-kvroute-decode")).contains(pod);
        return again;
      }
    }
  }

  private static void assertNoTokenizeMismatch() {
    for (VllmSimulator p : cluster.pods()) {
      for (RecordedRequest r : p.requests()) {
        assertThat(r.path()).isNotEqualTo("/v1/messages/render");
      }
    }
  }
}
