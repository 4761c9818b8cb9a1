package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** Prometheus text with vLLM's names; the concurrency limit shows up as waiting requests. */
class MetricsAndLoadTest {

  private static final Pattern SAMPLE =
      Pattern.compile("^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{([^}]*)\\})? (\\S+)$");

  /** Parses the exposition format into "name{labels}" → value, checking every line. */
  static Map<String, Double> parse(String text) {
    Map<String, Double> out = new HashMap<>();
    Map<String, String> types = new HashMap<>();
    for (String line : text.split("\n")) {
      if (line.startsWith("# TYPE ")) {
        String[] p = line.split(" ");
        assertThat(p).hasSize(4);
        assertThat(p[3]).isIn("gauge", "counter", "histogram");
        types.put(p[2], p[3]);
        continue;
      }
      if (line.startsWith("# HELP ") || line.isEmpty()) {
        continue;
      }
      Matcher m = SAMPLE.matcher(line);
      assertThat(m.matches()).as(line).isTrue();
      String name = m.group(1);
      String family = name.replaceAll("_(bucket|sum|count)$", "");
      assertThat(types)
          .as("TYPE before " + name)
          .containsKey(types.containsKey(name) ? name : family);
      out.put(
          name + (m.group(3) == null ? "" : "{" + m.group(3) + "}"),
          Double.parseDouble(m.group(4)));
    }
    return out;
  }

  private static double value(Map<String, Double> m, String name) {
    return m.entrySet().stream()
        .filter(e -> e.getKey().equals(name) || e.getKey().startsWith(name + "{"))
        .mapToDouble(Map.Entry::getValue)
        .findFirst()
        .orElseThrow(() -> new AssertionError("no metric " + name));
  }

  @Test
  void metricsTextParsesAndCountsPrefixCacheQueriesAndHits() {
    try (VllmSimulator sim = TestSupport.sim().loras(List.of("ad1")).build().start()) {
      String prompt = "metrics prompt words ".repeat(20);
      TestSupport.post(sim, "/v1/completions", TestSupport.completion(prompt, 2));
      TestSupport.post(sim, "/v1/completions", TestSupport.completion(prompt, 2));
      var resp = TestSupport.get(sim, "/metrics");
      assertThat(resp.headers().firstValue("content-type").orElse("")).startsWith("text/plain");
      Map<String, Double> m = parse(resp.body());
      int tokens = SimTokenizer.get().encode(prompt).length;
      assertThat(value(m, "vllm:prefix_cache_queries_total")).isEqualTo(2.0 * tokens);
      assertThat(value(m, "vllm:prefix_cache_hits_total")).isEqualTo(((tokens - 1) / 16) * 16.0);
      assertThat(value(m, "vllm:gpu_prefix_cache_hits_total"))
          .isEqualTo(value(m, "vllm:prefix_cache_hits_total"));
      assertThat(value(m, "vllm:num_requests_running")).isZero();
      assertThat(value(m, "vllm:num_requests_waiting")).isZero();
      assertThat(value(m, "vllm:kv_cache_usage_perc")).isZero();
      assertThat(value(m, "vllm:gpu_cache_usage_perc")).isZero();
      assertThat(value(m, "vllm:request_success_total")).isEqualTo(2.0);
      assertThat(value(m, "vllm:time_to_first_token_seconds_count")).isEqualTo(2.0);
      assertThat(m.keySet()).anyMatch(k -> k.startsWith("vllm:lora_requests_info{max_lora=\"4\""));
      assertThat(m.keySet()).anyMatch(k -> k.contains("vllm:cache_config_info{block_size=\"16\""));
    }
  }

  @Test
  void concurrencyLimitQueuesRequestsAndMetricsShowThem() throws Exception {
    Semaphore gate = new Semaphore(0);
    CountDownLatch inPrefill = new CountDownLatch(1);
    Sleeper blocking =
        nanos -> {
          inPrefill.countDown();
          gate.acquire();
        };
    try (VllmSimulator sim =
        TestSupport.sim().maxRunning(1).sleeper(blocking).loras(List.of("ad1")).build().start()) {
      CompletableFuture<Integer> a =
          CompletableFuture.supplyAsync(
              () ->
                  TestSupport.post(
                          sim,
                          "/v1/completions",
                          "{\"model\":\"ad1\",\"prompt\":\"a\",\"max_tokens\":1}")
                      .statusCode());
      assertThat(inPrefill.await(10, TimeUnit.SECONDS)).isTrue();
      CompletableFuture<Integer> b =
          CompletableFuture.supplyAsync(
              () ->
                  TestSupport.post(sim, "/v1/completions", TestSupport.completion("b", 1))
                      .statusCode());
      Map<String, Double> m = Map.of();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (System.nanoTime() < deadline) {
        m = parse(sim.metricsText());
        if (value(m, "vllm:num_requests_waiting") == 1.0) {
          break;
        }
        Thread.onSpinWait();
      }
      assertThat(value(m, "vllm:num_requests_running")).isEqualTo(1.0);
      assertThat(value(m, "vllm:num_requests_waiting")).isEqualTo(1.0);
      assertThat(value(m, "vllm:kv_cache_usage_perc")).isPositive();
      assertThat(m.keySet()).anyMatch(k -> k.contains("running_lora_adapters=\"ad1\""));
      gate.release(10);
      assertThat(a.get(10, TimeUnit.SECONDS)).isEqualTo(200);
      gate.release(10);
      assertThat(b.get(10, TimeUnit.SECONDS)).isEqualTo(200);
    }
  }

  @Test
  void ttftGrowsWithUncachedTokensUnderTheLatencyModel() {
    long[] now = {0};
    Sleeper virtual = nanos -> now[0] += nanos;
    LatencyModel model =
        new LatencyModel(
            java.time.Duration.ZERO, java.time.Duration.ofMillis(1), java.time.Duration.ZERO);
    try (VllmSimulator sim =
        VllmSimulator.builder()
            .latency(model)
            .sleeper(virtual)
            .nanoClock(() -> now[0])
            .build()
            .start()) {
      String prompt = "ttft words ".repeat(30);
      TestSupport.post(sim, "/v1/completions", TestSupport.completion(prompt, 1));
      TestSupport.post(sim, "/v1/completions", TestSupport.completion(prompt, 1));
      SimStats s = sim.stats();
      int tokens = SimTokenizer.get().encode(prompt).length;
      assertThat(s.ttft().get(0)).isEqualTo(java.time.Duration.ofMillis(tokens));
      int cached = ((tokens - 1) / 16) * 16;
      assertThat(s.ttft().get(1)).isEqualTo(java.time.Duration.ofMillis(tokens - cached));
      assertThat(s.cachedTokens()).isEqualTo(cached);
      assertThat(s.cachedTokenRatio()).isEqualTo((double) cached / (2 * tokens));
    }
  }
}
