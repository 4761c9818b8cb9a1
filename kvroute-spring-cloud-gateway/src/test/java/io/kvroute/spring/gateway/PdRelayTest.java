package io.kvroute.spring.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.router.KvRouter;
import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A Spring Cloud Gateway application with the starter in relay mode in front of simulated NIXL
 * prefill/decode pods publishing real ZMQ KV events: kvroute runs prefill then decode and streams
 * the decode response back through WebFlux.
 */
@GatewayAppTest
class PdRelayTest {
  static final String MODEL = SimPods.MODEL;

  /** Long enough that the decider disaggregates it (most of the prompt is uncached). */
  static final String PROMPT = "a long shared system prompt for the gateway test ".repeat(16);

  static SimulatedCluster cluster;

  @LocalServerPort int port;
  @Autowired KvRouter router;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    cluster =
        SimPods.start(
            b -> b.prefill(1).decode(2).protocol(KvTransferProtocol.NIXL),
            new LatencyModel(Duration.ZERO, Duration.ZERO, Duration.ofMillis(10)));
    SimPods.mode(registry, "relay");
    registry.add("kvroute.default-connector.type", () -> "nixl");
    registry.add("kvroute.index.block-size", () -> "16");
    registry.add("kvroute.max-request-size", () -> "64KB");
    registry.add("management.endpoints.web.exposure.include", () -> "health");
    registry.add("management.endpoint.health.show-details", () -> "always");
    SimPods.register(
        registry,
        cluster.pods(),
        p -> cluster.prefillPods().contains(p) ? "prefill" : "decode",
        true);
  }

  @AfterEach
  void resetFaults() {
    cluster.resetFaults();
  }

  @AfterAll
  static void stopCluster() {
    cluster.close();
  }

  @Test
  void aChatRunsPrefillThenDecode() throws Exception {
    HttpResponse<String> r =
        Http.post(port, "/v1/chat/completions", Http.chat(MODEL, PROMPT, false, 4));

    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.headers().firstValue("content-type"))
        .hasValueSatisfying(t -> assertThat(t).startsWith("application/json"));
    assertThat(r.body()).contains("\"choices\"");
    assertThat(r.headers().firstValue("x-kvroute-prefill"))
        .as("disaggregated")
        .contains(cluster.prefillPods().get(0).name());
    String decode = r.headers().firstValue("x-kvroute-decode").orElseThrow();
    assertThat(cluster.decodePods().stream().map(VllmSimulator::name)).contains(decode);
    Http.await("the request is no longer in flight", () -> router.inFlight() == 0);
  }

  @Test
  void aStreamedCompletionArrivesAsServerSentEvents() throws Exception {
    String body =
        "{\"model\":\""
            + MODEL
            + "\",\"stream\":true,\"max_tokens\":6,\"prompt\":\""
            + PROMPT
            + "\"}";
    HttpResponse<String> r = Http.post(port, "/v1/completions", body);

    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.headers().firstValue("content-type"))
        .hasValueSatisfying(t -> assertThat(t).startsWith("text/event-stream"));
    assertThat(r.body()).startsWith("data: ").endsWith("data: [DONE]\n\n");
    assertThat(r.body().split("\n\n")).hasSizeGreaterThanOrEqualTo(7);
  }

  @Test
  void aFailingDecodePodIsAvoided() throws Exception {
    VllmSimulator failing = cluster.decodePods().get(0);
    VllmSimulator healthy = cluster.decodePods().get(1);
    failing.faults().errorRate(1.0, 500);
    for (int i = 0; i < 4; i++) {
      HttpResponse<String> r =
          Http.post(
              port, "/v1/chat/completions", Http.chat(MODEL, i + " " + PROMPT, i % 2 == 0, 3));
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      assertThat(r.headers().firstValue("x-kvroute-decode")).contains(healthy.name());
    }
  }

  @Test
  void whenEveryDecodePodFailsTheClientGetsAnOpenAiError() throws Exception {
    cluster.decodePods().forEach(p -> p.faults().errorRate(1.0, 503));
    HttpResponse<String> r =
        Http.post(port, "/v1/chat/completions", Http.chat(MODEL, "all down " + PROMPT, false, 3));

    assertThat(r.statusCode()).as(r.body()).isGreaterThanOrEqualTo(500);
    assertThat(r.headers().firstValue("content-type")).contains("application/json");
    assertThat(r.body()).startsWith("{\"error\":{\"message\":").contains("\"type\":\"");
    Http.await("the request is no longer in flight", () -> router.inFlight() == 0);
  }

  @RepeatedTest(3)
  void aClientThatGoesAwayCancelsTheUpstreamStream() throws Exception {
    // 5000 tokens at 10 ms each: the stream would run for 50 s; the client leaves after one event
    byte[] body = Http.chat(MODEL, "cancel " + PROMPT, true, 5000).getBytes(StandardCharsets.UTF_8);
    String decode;
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(30_000);
      OutputStream out = s.getOutputStream();
      out.write(
          ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  + "Content-Type: application/json\r\nContent-Length: "
                  + body.length
                  + "\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      out.write(body);
      out.flush();
      BufferedReader in =
          new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
      assertThat(in.readLine()).isEqualTo("HTTP/1.1 200 OK");
      String line;
      String pod = null;
      while (!(line = in.readLine()).isEmpty()) {
        if (line.toLowerCase(java.util.Locale.ROOT).startsWith("x-kvroute-decode:")) {
          pod = line.substring(line.indexOf(':') + 1).trim();
        }
      }
      decode = pod;
      assertThat(in.readLine()).as("first chunk size").isNotEmpty();
      assertThat(in.readLine()).startsWith("data: ");
      assertThat(router.inFlight()).isEqualTo(1);
    }
    assertThat(decode).isNotNull();
    VllmSimulator pod = cluster.pod(decode).orElseThrow();
    Http.await("the router's accounting ends", () -> router.inFlight() == 0);
    Http.await(
        "the decode pod stops generating",
        () ->
            Pattern.compile("(?m)^vllm:num_requests_running\\{[^}]*} 0(\\.0)?$")
                .matcher(pod.metricsText())
                .find());
  }

  @Test
  void invalidAndOversizedRequestsGetOpenAiErrors() throws Exception {
    HttpResponse<String> bad = Http.post(port, "/v1/chat/completions", "{not json");
    assertThat(bad.statusCode()).isEqualTo(400);
    assertThat(bad.body()).contains("\"type\":\"invalid_request_error\"").contains("\"code\":400");

    String big = Http.chat(MODEL, "x".repeat(70 * 1024), false, 1);
    HttpResponse<String> tooBig = Http.post(port, "/v1/chat/completions", big);
    assertThat(tooBig.statusCode()).isEqualTo(413);
    assertThat(tooBig.body()).contains("\"type\":\"invalid_request_error\"");

    // On a new connection: the 413 left the rest of its body unread on the shared client's
    // connection, which the server may or may not have drained by the time it is reused.
    HttpResponse<String> get =
        java.net.http.HttpClient.newBuilder()
            .version(java.net.http.HttpClient.Version.HTTP_1_1)
            .build()
            .send(
                java.net.http.HttpRequest.newBuilder(
                        java.net.URI.create("http://127.0.0.1:" + port + "/v1/chat/completions"))
                    .timeout(java.time.Duration.ofSeconds(30))
                    .GET()
                    .build(),
                HttpResponse.BodyHandlers.ofString());
    assertThat(get.statusCode()).isEqualTo(405);
    assertThat(get.headers().firstValue("allow")).contains("POST");
  }

  @Test
  void healthReportsTheEndpointsAndTheIndex() throws Exception {
    HttpResponse<String> r = Http.get(port, "/actuator/health");
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.body())
        .contains("\"kvroute\":{")
        .contains("\"decode\":2")
        .contains("\"prefill\":1")
        .contains("\"lastEventAgeMillis\"")
        // the KV-cache parity check's verdict (a failed parity would leave the gateway UP)
        .contains("\"parity\":{")
        .contains("\"expected\":\"sha256, block size 16");
  }
}
