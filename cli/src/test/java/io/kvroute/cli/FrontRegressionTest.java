package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 14's findings against {@code kvroute proxy} on the Netty edge, over raw sockets: slow and
 * silent clients, stalled uploads, malformed framing, client JSON errors, a stream cut short, and
 * the one upstream error table.
 */
class FrontRegressionTest {
  @RegisterExtension
  final ProxyFixture proxy =
      new ProxyFixture(
          "--listen",
          "headerTimeout=2s",
          "--listen",
          "bodyTimeout=2s",
          "--listen",
          "maxHeaderCount=100");

  private final MockWebServer prefill = proxy.prefill;
  private final MockWebServer decode = proxy.decode;
  private final ProxyCommand command = proxy.command;

  private Socket connect() throws IOException {
    return proxy.connect();
  }

  /** Sends {@code raw} on a new connection and reads the answer until the server closes. */
  private String exchange(String raw) throws IOException {
    try (Socket s = connect()) {
      s.getOutputStream().write(raw.getBytes(StandardCharsets.ISO_8859_1));
      s.getOutputStream().flush();
      return readAll(s.getInputStream());
    }
  }

  private static String readAll(InputStream in) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] b = new byte[8192];
    try {
      for (int n; (n = in.read(b)) > 0; ) {
        out.write(b, 0, n);
      }
    } catch (java.net.SocketException reset) {
      // the server closed after its answer
    }
    return out.toString(StandardCharsets.UTF_8);
  }

  private static String completion(String body, boolean close) {
    return "POST /v1/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        + (close ? "Connection: close\r\n" : "")
        + "Content-Length: "
        + body.getBytes(StandardCharsets.UTF_8).length
        + "\r\n\r\n"
        + body;
  }

  private void enqueueOk() {
    prefill.enqueue(new MockResponse.Builder().code(200).body("{}").build());
    decode.enqueue(
        new MockResponse.Builder()
            .code(200)
            .setHeader("Content-Type", "application/json")
            .body("{\"choices\":[{\"text\":\"ok\"}]}")
            .build());
  }

  private static final String PROMPT = "{\"model\":\"m\",\"prompt\":\"hello\",\"max_tokens\":4}";

  @Test
  void slowlorisConnectionsDoNotStopANormalRequest() throws Exception {
    List<Socket> slow = new ArrayList<>();
    for (int i = 0; i < 1500; i++) {
      Socket s = connect();
      s.getOutputStream()
          .write(
              "POST /v1/completions HTTP/1.1\r\nHost: x\r\n".getBytes(StandardCharsets.US_ASCII));
      slow.add(s);
    }
    enqueueOk();
    String answer = exchange(completion(PROMPT, true));
    assertThat(answer).startsWith("HTTP/1.1 200").contains("\"text\":\"ok\"");
    // The slow heads are then refused at the header timeout, each with a status line.
    for (Socket s : slow.subList(0, 20)) {
      assertThat(readAll(s.getInputStream())).startsWith("HTTP/1.1 408");
    }
  }

  @Test
  void stalledUploadsBufferOnlyWhatArrivedAndAreRefusedAtTheBodyTimeout() throws Exception {
    int declared = 15 * 1024 * 1024 + 1;
    List<Socket> stalled = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      Socket s = connect();
      OutputStream out = s.getOutputStream();
      out.write(
          ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + "Content-Length: "
                  + declared
                  + "\r\n\r\n{\"prompt\":\"")
              .getBytes(StandardCharsets.US_ASCII));
      out.write(new byte[1024]);
      out.flush();
      stalled.add(s);
    }
    // Memory follows the bytes received, not the 900 MiB declared.
    assertThat(command.running.stats().bufferedBodyBytes()).isLessThan(60L * 64 * 1024);
    for (Socket s : stalled) {
      assertThat(readAll(s.getInputStream())).startsWith("HTTP/1.1 408");
    }
    assertThat(command.running.stats().bufferedBodyBytes()).isZero();
    // A body declared over the limit is refused before any of it is read.
    String tooLarge =
        exchange(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                + (16 * 1024 * 1024 + 1)
                + "\r\n\r\n");
    assertThat(tooLarge).startsWith("HTTP/1.1 413").contains("invalid_request_error");
  }

  @Test
  void silentConnectionsAreClosedAtTheHeaderTimeout() throws Exception {
    List<Socket> silent = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      silent.add(connect());
    }
    for (Socket s : silent) {
      String answer = readAll(s.getInputStream());
      assertThat(answer)
          .satisfiesAnyOf(
              a -> assertThat(a).isEmpty(), a -> assertThat(a).startsWith("HTTP/1.1 408"));
      assertThat(s.getInputStream().read()).isEqualTo(-1);
    }
  }

  @Test
  void malformedFramingIsAnsweredWithAStatusLineAndAJsonBody() throws Exception {
    String badChunk =
        exchange(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    assertThat(badChunk).startsWith("HTTP/1.1 400").contains("invalid_request_error");
    String bareLf = exchange("POST /v1/completions HTTP/1.1\nHost: x\nContent-Length: 2\n\n{}");
    assertThat(bareLf).startsWith("HTTP/1.1 400").contains("invalid_request_error");
    StringBuilder many = new StringBuilder("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 10_000; i++) {
      many.append("X-H").append(i).append(": v\r\n");
    }
    String tooMany = exchange(many.append("\r\n").toString());
    assertThat(tooMany).startsWith("HTTP/1.1 431").contains("invalid_request_error");
    String smuggle =
        exchange(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    assertThat(smuggle).startsWith("HTTP/1.1 400");
  }

  @Test
  void aClientJsonErrorIsAnInvalidRequestError() throws Exception {
    String answer = exchange(completion("{\"model\": ", true));
    assertThat(answer).startsWith("HTTP/1.1 400").contains("\"type\":\"invalid_request_error\"");
    assertThat(prefill.getRequestCount()).isZero();
  }

  @Test
  void anSseStreamCutBeforeDoneEndsWithAnErrorEvent() throws Exception {
    prefill.enqueue(new MockResponse.Builder().code(200).body("{}").build());
    decode.enqueue(
        new MockResponse.Builder()
            .code(200)
            .setHeader("Content-Type", "text/event-stream")
            .body("data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
            .build());
    String answer =
        exchange(
            completion(
                "{\"model\":\"m\",\"prompt\":\"hello\",\"max_tokens\":4,\"stream\":true}", true));
    assertThat(answer)
        .startsWith("HTTP/1.1 200")
        .contains("data: {\"choices\":[{\"text\":\"a\"}]}")
        .contains("\"type\":\"upstream_error\"")
        .contains("ended without data: [DONE]")
        .doesNotContain("[DONE]\n");
  }

  @Test
  void aPrefill503IsA503WithRetryAfter() throws Exception {
    prefill.enqueue(new MockResponse.Builder().code(503).body("busy").build());
    String answer = exchange(completion(PROMPT, true));
    assertThat(answer)
        .startsWith("HTTP/1.1 503")
        .containsIgnoringCase("Retry-After:")
        .contains("\"type\":\"upstream_unavailable\"");
  }

  @Test
  void proxyServesHealthReadinessAndMetrics() throws Exception {
    assertThat(exchange("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        .startsWith("HTTP/1.1 200");
    assertThat(exchange("GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        .startsWith("HTTP/1.1 200");
    enqueueOk();
    assertThat(exchange(completion(PROMPT, true))).startsWith("HTTP/1.1 200");
    assertThat(exchange("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        .startsWith("HTTP/1.1 200")
        .contains("kvroute_connector_prefill_seconds_count")
        .contains("kvroute_front_inflight");
  }
}
