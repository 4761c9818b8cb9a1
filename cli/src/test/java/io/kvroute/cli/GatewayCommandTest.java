package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import mockwebserver3.Dispatcher;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.RecordedRequest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code kvroute gateway --config FILE} end to end against real HTTP pods. */
class GatewayCommandTest {
  private final HttpClient client = HttpClient.newHttpClient();

  @Test
  void servesCompletionsMetricsAndProbes(@TempDir Path dir) throws Exception {
    try (MockWebServer prefill = new MockWebServer();
        MockWebServer decode = new MockWebServer()) {
      // Pods answer by path: the gateway tokenizes with the pods' own /tokenize.
      prefill.setDispatcher(pod("{}"));
      decode.setDispatcher(pod("{\"choices\":[{\"text\":\"hi\"}]}"));
      prefill.start();
      decode.start();
      Path cfg =
          GatewayYaml.write(
              dir,
              GatewayYaml.HTTP_ONE_ATTEMPT
                  + "endpoints:\n"
                  + "  - { id: p0, url: \"http://127.0.0.1:"
                  + prefill.getPort()
                  + "\", role: prefill }\n"
                  + "  - { id: d0, url: \"http://127.0.0.1:"
                  + decode.getPort()
                  + "\", role: decode }\n");
      RunningCommand<GatewayCommand> gateway = GatewayYaml.run(cfg);
      String base = GatewayYaml.base(gateway);
      try {
        HttpResponse<String> r =
            client.send(
                HttpRequest.newBuilder(URI.create(base + "/v1/completions"))
                    .timeout(Duration.ofSeconds(20))
                    .POST(
                        HttpRequest.BodyPublishers.ofString(
                            "{\"model\":\"m\",\"prompt\":\"" + "long prompt ".repeat(50) + "\"}"))
                    .build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(r.body()).contains("hi");
        assertThat(r.headers().firstValue("x-kvroute-decode")).contains("d0");

        HttpResponse<String> bad =
            client.send(
                HttpRequest.newBuilder(URI.create(base + "/v1/completions"))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":\"no model\"}"))
                    .build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(bad.statusCode()).isEqualTo(400);
        assertThat(bad.body()).contains("model");

        assertThat(TestHttp.get(base + "/healthz").statusCode()).isEqualTo(200);
        assertThat(TestHttp.get(base + "/readyz").statusCode()).isEqualTo(200);
        HttpResponse<String> metrics = TestHttp.get(base + "/metrics");
        assertThat(metrics.statusCode()).isEqualTo(200);
        assertThat(metrics.body())
            .contains("kvroute_route_seconds")
            .contains("kvroute_connector_decode_seconds");
      } finally {
        gateway.command.shutdown();
      }
      assertThat(gateway.exit.get(20, TimeUnit.SECONDS)).isZero();
    }
  }

  @Test
  void invalidConfigIsReportedWithTheField(@TempDir Path dir) throws Exception {
    Path cfg = dir.resolve("bad.yaml");
    Files.writeString(
        cfg,
        "defaultConnector: { type: http, retry: { maxAttempts: 0 } }\nendpoints: [{url: \"http://127.0.0.1:1\"}]\n");
    CommandLine cl = Main.commandLine();
    StringWriter err = new StringWriter();
    cl.setErr(new PrintWriter(err));
    assertThat(cl.execute("gateway", "--config", cfg.toString())).isEqualTo(2);
    assertThat(err.toString()).contains("defaultConnector.retry.maxAttempts: must be >= 1, was 0");
  }

  private static Dispatcher pod(String completion) {
    return new Dispatcher() {
      @Override
      public MockResponse dispatch(RecordedRequest request) {
        if (request.getUrl().encodedPath().equals("/tokenize")) {
          return new MockResponse.Builder()
              .code(200)
              .body("{\"count\":3,\"max_model_len\":4096,\"tokens\":[1,2,3]}")
              .build();
        }
        return new MockResponse.Builder().code(200).body(completion).build();
      }
    };
  }
}
