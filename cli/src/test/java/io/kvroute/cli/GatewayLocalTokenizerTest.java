package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import io.kvroute.tokenizer.hf.HfTokenizer;
import io.kvroute.tokenizer.hf.ReferenceTokenizers;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The gateway with {@code models.<name>.tokenizer.path}: simulated pods tokenize with the real
 * Qwen3 tokenizer, the gateway tokenizes the same way in process, routes repeated prompts to the
 * pod that holds their KV blocks, and never calls {@code /tokenize}.
 */
class GatewayLocalTokenizerTest {

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
      Path cfg =
          GatewayYaml.write(
              dir,
              "listen: { host: 127.0.0.1, port: 0 }\n"
                  + "observabilityHeaders: true\n"
                  + "index: { blockSize: 16 }\n"
                  + "models:\n"
                  + "  qwen3:\n"
                  + "    tokenizer: { path: \""
                  + qwen
                  + "\", fallback: false }\n"
                  + GatewayYaml.endpoints(cluster.pods()));
      RunningCommand<GatewayCommand> gateway = GatewayYaml.run(cfg);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      String base = GatewayYaml.base(gateway);
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
        String metrics = TestHttp.get(base + "/metrics").body();
        assertThat(metrics)
            .contains("kvroute_tokenizer_requests_total{outcome=\"success\",source=\"local\"}")
            .doesNotContain("source=\"remote\"} 1");
      } finally {
        gateway.stop(gateway.command::shutdown);
      }
    }
  }

  private static HttpResponse<String> post(String base, String body) throws Exception {
    return TestHttp.postJson(base + "/v1/chat/completions", body);
  }
}
