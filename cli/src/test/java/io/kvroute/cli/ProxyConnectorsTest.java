package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimulatedCluster;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

/**
 * {@code kvroute proxy --connector TYPE} between simulated prefill and decode pods speaking that
 * connector's protocol: streamed and plain answers come back, and the decode pod got what the
 * protocol needs from the prefill.
 */
class ProxyConnectorsTest {
  private final HttpClient client = HttpClient.newHttpClient();

  @ParameterizedTest
  @CsvSource({"nixl,NIXL", "lmcache,SHARED_STORAGE", "sglang,SGLANG", "http,NONE"})
  void proxiesThroughEachConnector(String connector, KvTransferProtocol protocol) throws Exception {
    try (SimulatedCluster cluster = onePair(protocol)) {
      List<String> args =
          new ArrayList<>(
              List.of(
                  "--connector",
                  connector,
                  "--prefill",
                  cluster.prefillPods().get(0).baseUrl().toString(),
                  "--decode",
                  cluster.decodePods().get(0).baseUrl().toString(),
                  "--port",
                  "0",
                  "--max-attempts",
                  "1"));
      if (protocol == KvTransferProtocol.SGLANG) {
        args.addAll(
            List.of("--param", "bootstrapPort=" + cluster.prefillPods().get(0).bootstrapPort()));
      }
      Proxy proxy = Proxy.start(args.toArray(new String[0]));
      ProxyCommand cmd = proxy.cmd();
      CompletableFuture<Integer> exit = proxy.exit();
      String base = proxy.base();
      try {
        String prompt = "a prompt long enough to fill several kv blocks ".repeat(8);
        HttpResponse<String> plain =
            post(
                base + "/v1/completions",
                "{\"model\":\"m\",\"prompt\":\"" + prompt + "\",\"max_tokens\":5}");
        assertThat(plain.statusCode()).as(plain.body()).isEqualTo(200);
        assertThat(plain.body()).contains("\"choices\"");
        HttpResponse<String> streamed =
            post(
                base + "/v1/chat/completions",
                "{\"model\":\"m\",\"stream\":true,\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\""
                    + prompt
                    + "\"}]}");
        assertThat(streamed.statusCode()).as(streamed.body()).isEqualTo(200);
        assertThat(streamed.body()).contains("data: [DONE]");
        assertThat(cluster.prefillPods().get(0).requests()).hasSize(2);
        RecordedRequest decoded = cluster.decodePods().get(0).requests().get(0);
        if (protocol == KvTransferProtocol.NIXL) {
          assertThat(decoded.field("kv_transfer_params").path("remote_block_ids").isArray())
              .isTrue();
        }
        if (protocol == KvTransferProtocol.SGLANG) {
          assertThat(decoded.field("bootstrap_room").isIntegralNumber()).isTrue();
        }
        if (protocol != KvTransferProtocol.NONE) {
          // The decode pod took the prompt's KV from the prefill side instead of computing it.
          assertThat(cluster.decodePods().get(0).stats().cachedTokenRatio()).isGreaterThan(0.5);
        }
      } finally {
        cmd.shutdown();
      }
      assertThat(exit.get(20, TimeUnit.SECONDS)).isZero();
    }
  }

  /**
   * {@code shared-storage} with {@code cache_hit_threshold}: a decoder without the prompt refuses
   * and the proxy falls back to prefill then decode; once the decoder holds the prompt, it serves
   * the request alone.
   */
  @org.junit.jupiter.api.Test
  void sharedStorageDecodesFirstOnceTheDecoderHoldsThePrompt() throws Exception {
    try (SimulatedCluster cluster = onePair(KvTransferProtocol.SHARED_STORAGE)) {
      Proxy proxy =
          Proxy.start(
              "--connector",
              "shared-storage",
              "--prefill",
              cluster.prefillPods().get(0).baseUrl().toString(),
              "--decode",
              cluster.decodePods().get(0).baseUrl().toString(),
              "--port",
              "0",
              "--max-attempts",
              "1");
      ProxyCommand cmd = proxy.cmd();
      CompletableFuture<Integer> exit = proxy.exit();
      String url = proxy.base() + "/v1/completions";
      var prefill = cluster.prefillPods().get(0);
      var decode = cluster.decodePods().get(0);
      try {
        String prompt = "a prompt long enough to fill several kv blocks ".repeat(8);
        HttpResponse<String> first =
            post(
                url,
                "{\"model\":\"m\",\"prompt\":\""
                    + prompt
                    + "\",\"max_tokens\":5,\"cache_hit_threshold\":0.5}");
        assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
        assertThat(first.body()).doesNotContain("cache_threshold").contains("\"length\"");
        assertThat(prefill.requests()).hasSize(1);
        assertThat(decode.requests()).hasSize(2); // refused, then after the prefill

        HttpResponse<String> second =
            post(
                url,
                "{\"model\":\"m\",\"stream\":true,\"prompt\":\""
                    + prompt
                    + "\",\"max_tokens\":5,\"cache_hit_threshold\":0.5}");
        assertThat(second.statusCode()).as(second.body()).isEqualTo(200);
        assertThat(second.body()).contains("data: [DONE]").doesNotContain("cache_threshold");
        assertThat(prefill.requests()).as("served by the decoder alone").hasSize(1);
        assertThat(decode.requests()).hasSize(3);

        HttpResponse<String> other =
            post(
                url,
                "{\"model\":\"m\",\"stream\":true,\"prompt\":\""
                    + "another prompt entirely, also long enough for blocks ".repeat(8)
                    + "\",\"max_tokens\":5,\"cache_hit_threshold\":0.5}");
        assertThat(other.statusCode()).isEqualTo(200);
        assertThat(other.body()).contains("data: [DONE]").doesNotContain("cache_threshold");
        assertThat(prefill.requests()).hasSize(2);
        assertThat(decode.requests()).hasSize(5);
      } finally {
        cmd.shutdown();
      }
      assertThat(exit.get(20, TimeUnit.SECONDS)).isZero();
    }
  }

  /** LMCache's first-token flow: /tokenize, prefill returns the first token, decode continues. */
  @org.junit.jupiter.api.Test
  void lmcacheFirstTokenModeAgainstSimulatedPods() throws Exception {
    try (SimulatedCluster cluster = onePair(KvTransferProtocol.SHARED_STORAGE)) {
      Proxy proxy =
          Proxy.start(
              "--connector",
              "lmcache",
              "--param",
              "firstToken=true",
              "--prefill",
              cluster.prefillPods().get(0).baseUrl().toString(),
              "--decode",
              cluster.decodePods().get(0).baseUrl().toString(),
              "--port",
              "0",
              "--max-attempts",
              "1");
      ProxyCommand cmd = proxy.cmd();
      CompletableFuture<Integer> exit = proxy.exit();
      String url = proxy.base() + "/v1/completions";
      try {
        String prompt = "a prompt long enough to fill several kv blocks ".repeat(8);
        HttpResponse<String> streamed =
            post(
                url,
                "{\"model\":\"m\",\"stream\":true,\"max_tokens\":6,\"prompt\":\"" + prompt + "\"}");
        assertThat(streamed.statusCode()).as(streamed.body()).isEqualTo(200);
        assertThat(streamed.body()).startsWith("data: {\"id\":").contains("data: [DONE]");
        assertThat(cluster.prefillPods().get(0).requests().get(0).path()).isEqualTo("/tokenize");
        RecordedRequest p =
            cluster.prefillPods().get(0).requests().stream()
                .filter(r -> r.path().equals("/v1/completions"))
                .findFirst()
                .orElseThrow();
        assertThat(p.field("kv_transfer_params").path("ret_first_tok").asBoolean()).isTrue();
        assertThat(p.field("prompt").isArray()).isTrue();
        RecordedRequest d = cluster.decodePods().get(0).requests().get(0);
        assertThat(d.field("prompt").size()).isEqualTo(p.field("prompt").size() + 1);
        assertThat(d.field("max_tokens").asInt()).isEqualTo(5);
        assertThat(cluster.decodePods().get(0).stats().cachedTokenRatio()).isGreaterThan(0.5);

        HttpResponse<String> plain =
            post(url, "{\"model\":\"m\",\"max_tokens\":4,\"prompt\":\"" + prompt + "\"}");
        assertThat(plain.statusCode()).as(plain.body()).isEqualTo(200);
        assertThat(plain.body()).startsWith("{").contains("\"completion_tokens\":4");
      } finally {
        cmd.shutdown();
      }
      assertThat(exit.get(20, TimeUnit.SECONDS)).isZero();
    }
  }

  /** One simulated prefill pod and one decode pod speaking {@code protocol}, model "m". */
  private static SimulatedCluster onePair(KvTransferProtocol protocol) {
    return SimulatedCluster.builder()
        .prefill(1)
        .decode(1)
        .model("m")
        .protocol(protocol)
        .configure(b -> b.latency(LatencyModel.ZERO))
        .build()
        .start();
  }

  /** A {@code kvroute proxy} running in this JVM. */
  record Proxy(ProxyCommand cmd, CompletableFuture<Integer> exit, String base) {
    static Proxy start(String... args) throws InterruptedException {
      ProxyCommand cmd = new ProxyCommand();
      CommandLine cl = new CommandLine(cmd);
      StringWriter err = new StringWriter();
      cl.setOut(new PrintWriter(new StringWriter()));
      cl.setErr(new PrintWriter(err));
      CompletableFuture<Integer> exit = CompletableFuture.supplyAsync(() -> cl.execute(args));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (cmd.running == null) {
        assertThat(exit).as("proxy exited: " + err).isNotDone();
        assertThat(System.nanoTime()).isLessThan(deadline);
        TimeUnit.MILLISECONDS.sleep(10);
      }
      return new Proxy(cmd, exit, "http://127.0.0.1:" + cmd.running.port());
    }
  }

  private HttpResponse<String> post(String url, String body) throws Exception {
    return client.send(
        HttpRequest.newBuilder(URI.create(url))
            .timeout(Duration.ofSeconds(20))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }
}
