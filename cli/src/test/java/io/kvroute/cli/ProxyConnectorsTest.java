package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@code kvroute proxy --connector TYPE} between simulated prefill and decode pods speaking that
 * connector's protocol: streamed and plain answers come back, and the decode pod got what the
 * protocol needs from the prefill.
 */
class ProxyConnectorsTest {
  private static final String PROMPT = "a prompt long enough to fill several kv blocks ".repeat(8);

  @ParameterizedTest
  @CsvSource({"nixl,NIXL", "lmcache,SHARED_STORAGE", "sglang,SGLANG", "http,NONE"})
  void proxiesThroughEachConnector(String connector, KvTransferProtocol protocol) throws Exception {
    throughProxy(
        protocol,
        connector,
        prefill ->
            protocol == KvTransferProtocol.SGLANG
                ? List.of("--param", "bootstrapPort=" + prefill.bootstrapPort())
                : List.of(),
        (base, prefill, decode) -> {
          HttpResponse<String> plain =
              ok(
                  base + "/v1/completions",
                  "{\"model\":\"m\",\"prompt\":\"" + PROMPT + "\",\"max_tokens\":5}");
          assertThat(plain.body()).contains("\"choices\"");
          HttpResponse<String> streamed =
              ok(
                  base + "/v1/chat/completions",
                  "{\"model\":\"m\",\"stream\":true,\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\""
                      + PROMPT
                      + "\"}]}");
          assertThat(streamed.body()).contains("data: [DONE]");
          assertThat(prefill.requests()).hasSize(2);
          RecordedRequest decoded = decode.requests().get(0);
          if (protocol == KvTransferProtocol.NIXL) {
            assertThat(decoded.field("kv_transfer_params").path("remote_block_ids").isArray())
                .isTrue();
          }
          if (protocol == KvTransferProtocol.SGLANG) {
            assertThat(decoded.field("bootstrap_room").isIntegralNumber()).isTrue();
          }
          if (protocol != KvTransferProtocol.NONE) {
            // The decode pod took the prompt's KV from the prefill side instead of computing it.
            assertThat(decode.stats().cachedTokenRatio()).isGreaterThan(0.5);
          }
        });
  }

  /**
   * {@code shared-storage} with {@code cache_hit_threshold}: a decoder without the prompt refuses
   * and the proxy falls back to prefill then decode; once the decoder holds the prompt, it serves
   * the request alone.
   */
  @Test
  void sharedStorageDecodesFirstOnceTheDecoderHoldsThePrompt() throws Exception {
    throughProxy(
        KvTransferProtocol.SHARED_STORAGE,
        "shared-storage",
        prefill -> List.of(),
        (base, prefill, decode) -> {
          String url = base + "/v1/completions";
          String threshold = "\",\"max_tokens\":5,\"cache_hit_threshold\":0.5}";
          HttpResponse<String> first =
              ok(url, "{\"model\":\"m\",\"prompt\":\"" + PROMPT + threshold);
          assertThat(first.body()).doesNotContain("cache_threshold").contains("\"length\"");
          assertThat(prefill.requests()).hasSize(1);
          assertThat(decode.requests()).hasSize(2); // refused, then after the prefill

          HttpResponse<String> second =
              ok(url, "{\"model\":\"m\",\"stream\":true,\"prompt\":\"" + PROMPT + threshold);
          assertThat(second.body()).contains("data: [DONE]").doesNotContain("cache_threshold");
          assertThat(prefill.requests()).as("served by the decoder alone").hasSize(1);
          assertThat(decode.requests()).hasSize(3);

          HttpResponse<String> other =
              ok(
                  url,
                  "{\"model\":\"m\",\"stream\":true,\"prompt\":\""
                      + "another prompt entirely, also long enough for blocks ".repeat(8)
                      + threshold);
          assertThat(other.body()).contains("data: [DONE]").doesNotContain("cache_threshold");
          assertThat(prefill.requests()).hasSize(2);
          assertThat(decode.requests()).hasSize(5);
        });
  }

  /** LMCache's first-token flow: /tokenize, prefill returns the first token, decode continues. */
  @Test
  void lmcacheFirstTokenModeAgainstSimulatedPods() throws Exception {
    throughProxy(
        KvTransferProtocol.SHARED_STORAGE,
        "lmcache",
        prefill -> List.of("--param", "firstToken=true"),
        (base, prefill, decode) -> {
          String url = base + "/v1/completions";
          HttpResponse<String> streamed =
              ok(
                  url,
                  "{\"model\":\"m\",\"stream\":true,\"max_tokens\":6,\"prompt\":\""
                      + PROMPT
                      + "\"}");
          assertThat(streamed.body()).startsWith("data: {\"id\":").contains("data: [DONE]");
          assertThat(prefill.requests().get(0).path()).isEqualTo("/tokenize");
          RecordedRequest p =
              prefill.requests().stream()
                  .filter(r -> r.path().equals("/v1/completions"))
                  .findFirst()
                  .orElseThrow();
          assertThat(p.field("kv_transfer_params").path("ret_first_tok").asBoolean()).isTrue();
          assertThat(p.field("prompt").isArray()).isTrue();
          RecordedRequest d = decode.requests().get(0);
          assertThat(d.field("prompt").size()).isEqualTo(p.field("prompt").size() + 1);
          assertThat(d.field("max_tokens").asInt()).isEqualTo(5);
          assertThat(decode.stats().cachedTokenRatio()).isGreaterThan(0.5);

          HttpResponse<String> plain =
              ok(url, "{\"model\":\"m\",\"max_tokens\":4,\"prompt\":\"" + PROMPT + "\"}");
          assertThat(plain.body()).startsWith("{").contains("\"completion_tokens\":4");
        });
  }

  /** What a test checks through the proxy, given its base URL and the pods behind it. */
  @FunctionalInterface
  private interface ProxyCheck {
    void check(String base, VllmSimulator prefill, VllmSimulator decode) throws Exception;
  }

  /**
   * Starts one simulated prefill pod and one decode pod speaking {@code protocol} (model "m"), runs
   * {@code kvroute proxy --connector connector} in this JVM between them (with the extra arguments
   * {@code extraArgs} gives for the prefill pod), runs {@code check} against it, then shuts it down
   * and expects exit code 0.
   */
  private static void throughProxy(
      KvTransferProtocol protocol,
      String connector,
      Function<VllmSimulator, List<String>> extraArgs,
      ProxyCheck check)
      throws Exception {
    try (SimulatedCluster cluster =
        SimulatedCluster.builder()
            .prefill(1)
            .decode(1)
            .model("m")
            .protocol(protocol)
            .configure(b -> b.latency(LatencyModel.ZERO))
            .build()
            .start()) {
      VllmSimulator prefill = cluster.prefillPods().get(0);
      VllmSimulator decode = cluster.decodePods().get(0);
      RunningCommand<ProxyCommand> proxy =
          ProxyFixture.run(
              connector,
              prefill.baseUrl().toString(),
              decode.baseUrl().toString(),
              extraArgs.apply(prefill).toArray(new String[0]));
      try {
        check.check(ProxyFixture.base(proxy), prefill, decode);
      } finally {
        proxy.command.shutdown();
      }
      assertThat(proxy.exit.get(20, TimeUnit.SECONDS)).isZero();
    }
  }

  /** POSTs {@code json} to {@code url}; asserts a 200. */
  private static HttpResponse<String> ok(String url, String json) throws Exception {
    HttpResponse<String> r = TestHttp.postJson(url, json);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return r;
  }
}
