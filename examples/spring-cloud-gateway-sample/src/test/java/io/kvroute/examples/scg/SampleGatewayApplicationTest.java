package io.kvroute.examples.scg;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The sample as it ships (its {@code application.yaml}), with only the pods' URLs pointed at a
 * testkit cluster of one prefill and one decode pod speaking NIXL, over real HTTP.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class SampleGatewayApplicationTest {
  static final String MODEL = "sim-model";

  /** Long and uncached, so the decider disaggregates it (prefill, then decode). */
  static final String PROMPT =
      "a long system prompt for the sample gateway's smoke test ".repeat(16);

  static final HttpClient CLIENT =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(10))
          .build();

  static SimulatedCluster cluster;

  @LocalServerPort int port;

  @DynamicPropertySource
  static void pods(DynamicPropertyRegistry registry) {
    cluster =
        SimulatedCluster.builder()
            .prefill(1)
            .decode(1)
            .model(MODEL)
            .protocol(KvTransferProtocol.NIXL)
            .configure(
                b ->
                    b.latency(new LatencyModel(Duration.ZERO, Duration.ZERO, Duration.ofMillis(1))))
            .build()
            .start();
    // What PREFILL_URL and DECODE_URL set when the sample runs against `kvroute sim` pods.
    registry.add("PREFILL_URL", () -> cluster.prefillPods().get(0).baseUrl().toString());
    registry.add("DECODE_URL", () -> cluster.decodePods().get(0).baseUrl().toString());
  }

  @AfterAll
  static void stopPods() {
    cluster.close();
  }

  /** The endpoint ids in the headers are the ones {@code application.yaml} gives the pods. */
  @Test
  void aStreamedChatCompletionRunsPrefillThenDecode() throws Exception {
    HttpResponse<String> r =
        prefillThenDecode(
            "/v1/chat/completions",
            "{\"model\":\""
                + MODEL
                + "\",\"stream\":true,\"max_tokens\":8,\"messages\":[{\"role\":\"user\","
                + "\"content\":\"chat: "
                + PROMPT
                + "\"}]}");

    assertThat(r.headers().firstValue("content-type"))
        .hasValueSatisfying(t -> assertThat(t).startsWith("text/event-stream"));
    assertThat(r.body()).startsWith("data: ").endsWith("data: [DONE]\n\n");
    assertThat(r.headers().firstValue("x-kvroute-prefill")).contains("prefill-0");
  }

  @Test
  void aCompletionRunsPrefillThenDecode() throws Exception {
    HttpResponse<String> r =
        prefillThenDecode(
            "/v1/completions",
            "{\"model\":\"" + MODEL + "\",\"max_tokens\":8,\"prompt\":\"text: " + PROMPT + "\"}");

    assertThat(r.body()).contains("\"choices\"");
  }

  /**
   * Posts {@code body} to {@code path} and checks that it succeeded on the decode pod after a
   * prefill: a 200 naming {@code decode-0}, and a new request at the prefill pod.
   */
  private HttpResponse<String> prefillThenDecode(String path, String body) throws Exception {
    VllmSimulator prefill = cluster.prefillPods().get(0);
    int prefillSeen = prefill.requests().size();
    HttpResponse<String> r = post(path, body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.headers().firstValue("x-kvroute-decode")).contains("decode-0");
    assertThat(prefill.requests()).as("the prefill pod's requests").hasSizeGreaterThan(prefillSeen);
    return r;
  }

  @Test
  void healthIsUpWithTheKvrouteComponent() throws Exception {
    HttpResponse<String> r = get("/actuator/health");

    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.body())
        .endsWith(",\"status\":\"UP\"}")
        .containsPattern(
            "\"kvroute\":\\{\"details\":\\{\"endpoints\":\\{\"decode\":1,\"prefill\":1}"
                + "(,\"\\w+\":[^,{}]+)*},\"status\":\"UP\"}");
  }

  @Test
  void theRoutersMetersArePublished() throws Exception {
    HttpResponse<String> r = get("/actuator/metrics/kvroute.endpoints");

    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.body()).contains("\"name\":\"kvroute.endpoints\"").contains("\"value\":2.0");
  }

  private HttpResponse<String> get(String path) throws Exception {
    return CLIENT.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(30))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private HttpResponse<String> post(String path, String body) throws Exception {
    return CLIENT.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(60))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }
}
