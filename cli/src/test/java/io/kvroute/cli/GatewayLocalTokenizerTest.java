package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import io.kvroute.tokenizer.hf.HfTokenizer;
import io.kvroute.tokenizer.hf.ReferenceTokenizers;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The gateway with {@code models.<name>.tokenizer.path}: simulated pods tokenize with the real
 * Qwen3 tokenizer, the gateway tokenizes the same way in process, routes repeated prompts to the
 * pod that holds their KV blocks, and never calls {@code /tokenize}.
 */
class GatewayLocalTokenizerTest {
  private final HttpClient client =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  @Test
  void routesPreciselyWithoutTokenizeCalls(@TempDir Path dir) throws Exception {
    Path qwen = ReferenceTokenizers.modelDir("qwen3");
    try (HfTokenizer podTokenizer = HfTokenizer.load(qwen);
        SimulatedCluster cluster =
            SimulatedCluster.builder()
                .both(3)
                .model("qwen3")
                .configure(
                    b ->
                        b.blockSize(16)
                            .latency(LatencyModel.ZERO)
                            .tokenizer(new HfEngineTokenizer(podTokenizer)))
                .build()
                .start()) {
      StringBuilder yaml =
          new StringBuilder(
              "listen: { host: 127.0.0.1, port: 0 }\n"
                  + "observabilityHeaders: true\n"
                  + "index: { blockSize: 16 }\n"
                  + "models:\n"
                  + "  qwen3:\n"
                  + "    tokenizer: { path: \""
                  + qwen
                  + "\", fallback: false }\n"
                  + "endpoints:\n");
      for (VllmSimulator p : cluster.pods()) {
        yaml.append(GatewayYaml.endpoint(p, null));
      }
      Path cfg = dir.resolve("gateway.yaml");
      Files.writeString(cfg, yaml.toString(), StandardCharsets.UTF_8);
      GatewayCommand cmd = new GatewayCommand();
      RunningCommand<GatewayCommand> gateway =
          RunningCommand.start(cmd, () -> cmd.running, "--config", cfg.toString());
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      String base = "http://127.0.0.1:" + cmd.running.port();
      try {
        String body =
            "{\"model\":\"qwen3\",\"max_tokens\":2,\"messages\":["
                + "{\"role\":\"system\",\"content\":\"You are a careful assistant. "
                + "Grüße, 你好 🙂. ".repeat(20)
                + "\"},{\"role\":\"user\",\"content\":\"Summarise the text above.\"}]}";
        HttpResponse<String> first = post(base, body);
        assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
        String pod = first.headers().firstValue("x-kvroute-decode").orElseThrow();
        // The pod's KV events reach the gateway's index asynchronously: repeat until the gateway
        // reports cached tokens for the same conversation, which then goes to the same pod.
        long cached = 0;
        HttpResponse<String> again = first;
        while (cached == 0) {
          assertThat(System.nanoTime()).as("no cached tokens reported").isLessThan(deadline);
          again = post(base, body);
          assertThat(again.statusCode()).isEqualTo(200);
          cached =
              Long.parseLong(again.headers().firstValue("x-kvroute-cached-tokens").orElse("0"));
        }
        assertThat(cached).isGreaterThanOrEqualTo(16 * 10);
        assertThat(again.headers().firstValue("x-kvroute-decode")).contains(pod);
        for (VllmSimulator p : cluster.pods()) {
          assertThat(p.requests()).extracting(RecordedRequest::path).doesNotContain("/tokenize");
        }
        String metrics = get(base + "/metrics");
        assertThat(metrics)
            .contains("kvroute_tokenizer_requests_total{outcome=\"success\",source=\"local\"}")
            .doesNotContain("source=\"remote\"} 1");
      } finally {
        gateway.stop(cmd::shutdown);
      }
    }
  }

  private HttpResponse<String> post(String base, String body) throws Exception {
    return client.send(
        HttpRequest.newBuilder(URI.create(base + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(30))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private String get(String url) throws Exception {
    return client
        .send(
            HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30)).build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }
}
