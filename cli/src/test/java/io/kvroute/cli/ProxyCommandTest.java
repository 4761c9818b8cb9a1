package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.http.HttpResponse;
import java.util.concurrent.TimeUnit;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.RecordedRequest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@code kvroute proxy --connector http} between real HTTP servers. */
class ProxyCommandTest {
  @RegisterExtension final ProxyFixture proxy = new ProxyFixture();

  private final MockWebServer prefill = proxy.prefill;
  private final MockWebServer decode = proxy.decode;
  private final ProxyCommand command = proxy.command;

  private HttpResponse<String> post(String path, String body)
      throws IOException, InterruptedException {
    return TestHttp.postJson("http://127.0.0.1:" + command.running.port() + path, body);
  }

  @Test
  void proxiesANonStreamingCompletion() throws Exception {
    prefill.enqueue(new MockResponse.Builder().code(200).body("{\"choices\":[]}").build());
    decode.enqueue(
        new MockResponse.Builder()
            .code(200)
            .setHeader("Content-Type", "application/json")
            .body("{\"choices\":[{\"text\":\"world\"}]}")
            .build());
    HttpResponse<String> r =
        post("/v1/completions", "{\"model\":\"m\",\"prompt\":\"hello\",\"max_tokens\":8}");
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).isEqualTo("{\"choices\":[{\"text\":\"world\"}]}");
    RecordedRequest p = prefill.takeRequest(5, TimeUnit.SECONDS);
    RecordedRequest d = decode.takeRequest(5, TimeUnit.SECONDS);
    assertThat(p.getBody().utf8()).contains("\"max_tokens\":1").contains("\"stream\":false");
    assertThat(d.getBody().utf8()).contains("\"max_tokens\":8");
    assertThat(p.getHeaders().get("X-Request-Id"))
        .isNotBlank()
        .isEqualTo(d.getHeaders().get("X-Request-Id"));
  }

  @Test
  void proxiesAStreamingChat() throws Exception {
    prefill.enqueue(new MockResponse.Builder().code(200).body("{}").build());
    StringBuilder sse = new StringBuilder();
    for (int i = 0; i < 20; i++) {
      sse.append("data: {\"choices\":[{\"delta\":{\"content\":\"w").append(i).append("\"}}]}\n\n");
    }
    sse.append("data: [DONE]\n\n");
    decode.enqueue(
        new MockResponse.Builder()
            .code(200)
            .setHeader("Content-Type", "text/event-stream")
            .chunkedBody(sse.toString(), 32)
            .build());
    HttpResponse<String> r =
        post(
            "/v1/chat/completions",
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}");
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("Content-Type")).contains("text/event-stream");
    assertThat(r.body()).isEqualTo(sse.toString());
    assertThat(prefill.takeRequest(5, TimeUnit.SECONDS).getBody().utf8())
        .contains("\"max_completion_tokens\":1");
  }

  @Test
  void aFailingLegGivesACleanError() throws Exception {
    prefill.enqueue(new MockResponse.Builder().code(500).body("boom").build());
    HttpResponse<String> r = post("/v1/completions", "{\"prompt\":\"x\"}");
    assertThat(r.statusCode()).isEqualTo(502);
    assertThat(r.body()).contains("\"error\"").contains("prefill leg").contains("HTTP 500");
    assertThat(decode.getRequestCount()).isZero();
  }

  @Test
  void aClientThatGoesAwayMidStreamCancelsTheDecodeLeg() throws Exception {
    prefill.enqueue(new MockResponse.Builder().code(200).body("{}").build());
    StringBuilder sse = new StringBuilder();
    for (int i = 0; i < 5000; i++) {
      sse.append("data: {\"choices\":[{\"text\":\"token number ").append(i).append("\"}]}\n\n");
    }
    decode.enqueue(
        new MockResponse.Builder()
            .code(200)
            .setHeader("Content-Type", "text/event-stream")
            .chunkedBody(sse.toString(), 256)
            .throttleBody(512, 10, TimeUnit.MILLISECONDS)
            .build());
    try (java.net.Socket s = new java.net.Socket("127.0.0.1", command.running.port())) {
      String body = "{\"prompt\":\"x\",\"stream\":true}";
      s.getOutputStream()
          .write(
              ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      + "Content-Length: "
                      + body.length()
                      + "\r\n\r\n"
                      + body)
                  .getBytes(java.nio.charset.StandardCharsets.UTF_8));
      s.getOutputStream().flush();
      byte[] buf = new byte[1024];
      assertThat(s.getInputStream().read(buf)).isPositive();
      s.setSoLinger(true, 0); // reset, as a browser tab being closed does
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (command.running.inFlight() > 0 && System.nanoTime() < deadline) {
      TimeUnit.MILLISECONDS.sleep(10);
    }
    assertThat(command.running.inFlight()).as("request finished after the client left").isZero();
  }

  @Test
  void sigtermDrainsAndExits() throws Exception {
    String javaBin =
        java.nio.file.Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process p =
        new ProcessBuilder(
                javaBin,
                "-cp",
                System.getProperty("java.class.path"),
                "io.kvroute.cli.Main",
                "proxy",
                "--decode",
                "http://127.0.0.1:" + decode.getPort(),
                "--port",
                "0",
                "--grace",
                "2")
            .redirectErrorStream(true)
            .start();
    try (java.io.BufferedReader out =
        new java.io.BufferedReader(
            new java.io.InputStreamReader(
                p.getInputStream(), java.nio.charset.StandardCharsets.UTF_8))) {
      String line = out.readLine();
      assertThat(line).contains("listening on http://127.0.0.1:");
      p.toHandle().destroy(); // SIGTERM, leaving our end of the pipes open
      assertThat(p.waitFor(20, TimeUnit.SECONDS)).isTrue();
      StringBuilder rest = new StringBuilder();
      for (String l = out.readLine(); l != null; l = out.readLine()) {
        rest.append(l).append('\n');
      }
      assertThat(rest.toString()).contains("draining");
    } finally {
      p.destroyForcibly();
    }
  }

  @Test
  void badRequestsAreRejectedPrecisely() throws Exception {
    assertThat(post("/v1/completions", "{oops").statusCode()).isEqualTo(400);
    assertThat(post("/v1/completions", "[]").body()).contains("must be a JSON object");
    assertThat(post("/v1/embeddings", "{}").statusCode()).isEqualTo(404);
    assertThat(prefill.getRequestCount()).isZero();
  }
}
