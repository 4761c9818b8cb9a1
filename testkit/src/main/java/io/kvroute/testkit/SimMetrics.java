package io.kvroute.testkit;

import io.kvroute.testkit.internal.BlockPool;
import io.kvroute.testkit.internal.PrometheusText;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A simulator's load and accounting: running and waiting requests (per LoRA too), the resettable
 * {@link SimStats}, the cumulative totals and TTFT histogram behind {@code /metrics}, and the
 * {@code /metrics} text itself with vLLM's metric names.
 *
 * <p>Thread-safe: gauges are atomic; the stats and totals are guarded by one lock.
 */
final class SimMetrics {
  private static final int MAX_TTFT_SAMPLES = 10_000;
  private static final double[] TTFT_BOUNDS = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0
  };

  private final VllmSimulator.Builder b;
  private final BlockPool pool;
  private final AtomicInteger waiting = new AtomicInteger();
  private final AtomicInteger running = new AtomicInteger();
  private final Map<String, AtomicInteger> runningLoras = new ConcurrentHashMap<>();
  private final Map<String, AtomicInteger> waitingLoras = new ConcurrentHashMap<>();
  private final Object statsLock = new Object();
  private long statRequests;
  private long statErrors;
  private long statPrompt;
  private long statCached;
  private long statGenerated;
  private long totalPrompt;
  private long totalGenerated;
  private long totalSuccess;
  private final ArrayDeque<Duration> ttft = new ArrayDeque<>();
  private final long[] ttftBuckets = new long[TTFT_BOUNDS.length];
  private long ttftCount;
  private double ttftSum;

  SimMetrics(VllmSimulator.Builder b, BlockPool pool) {
    this.b = b;
    this.pool = pool;
  }

  // ---------------------------------------------------------------- load

  /** A request joined the queue. */
  void queued(String lora) {
    add(waiting, waitingLoras, lora, 1);
  }

  /** A queued request left the queue (admitted or not). */
  void dequeued(String lora) {
    add(waiting, waitingLoras, lora, -1);
  }

  /** An admitted request started running. */
  void started(String lora) {
    add(running, runningLoras, lora, 1);
  }

  /** A running request ended. */
  void ended(String lora) {
    add(running, runningLoras, lora, -1);
  }

  private static void add(
      AtomicInteger all, Map<String, AtomicInteger> byLora, String lora, int delta) {
    all.addAndGet(delta);
    if (lora != null) {
      byLora.computeIfAbsent(lora, k -> new AtomicInteger()).addAndGet(delta);
    }
  }

  // ---------------------------------------------------------------- stats

  SimStats stats() {
    synchronized (statsLock) {
      return new SimStats(
          statRequests, statErrors, statPrompt, statCached, statGenerated, new ArrayList<>(ttft));
    }
  }

  void resetStats() {
    synchronized (statsLock) {
      statRequests = statErrors = statPrompt = statCached = statGenerated = 0;
      ttft.clear();
    }
  }

  void countError() {
    synchronized (statsLock) {
      statErrors++;
    }
  }

  void countSuccess(int prompt, int cached, int generated, long ttftNanos) {
    synchronized (statsLock) {
      statRequests++;
      statPrompt += prompt;
      statCached += cached;
      statGenerated += generated;
      totalPrompt += prompt;
      totalGenerated += generated;
      totalSuccess++;
      if (ttft.size() == MAX_TTFT_SAMPLES) {
        ttft.removeFirst();
      }
      ttft.addLast(Duration.ofNanos(ttftNanos));
      double s = ttftNanos / 1e9;
      ttftSum += s;
      ttftCount++;
      for (int i = 0; i < TTFT_BOUNDS.length; i++) {
        if (s <= TTFT_BOUNDS[i]) {
          ttftBuckets[i]++;
        }
      }
    }
  }

  // ---------------------------------------------------------------- /metrics

  /** The {@code /metrics} text, with vLLM's names, help texts and labels. */
  String text() {
    String lbl = PrometheusText.labels("engine", "0", "model_name", b.model);
    PrometheusText t = new PrometheusText();
    t.gauge(
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        lbl,
        running.get());
    t.gauge(
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
        lbl,
        waiting.get());
    double usage = pool.usage();
    t.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", lbl, usage);
    t.gauge(
        "vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", lbl, usage);
    t.gauge(
        "vllm:cpu_cache_usage_perc",
        "CPU KV-cache usage. 1 means 100 percent usage.",
        lbl,
        pool.cpuUsage());
    t.counter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        lbl,
        pool.queries());
    t.counter(
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        lbl,
        pool.hits());
    t.counter(
        "vllm:gpu_prefix_cache_queries",
        "GPU prefix cache queries, in terms of number of queried tokens.",
        lbl,
        pool.queries());
    t.counter(
        "vllm:gpu_prefix_cache_hits",
        "GPU prefix cache hits, in terms of number of cached tokens.",
        lbl,
        pool.hits());
    long prompt;
    long gen;
    long success;
    long[] buckets;
    long count;
    double sum;
    synchronized (statsLock) {
      prompt = totalPrompt;
      gen = totalGenerated;
      success = totalSuccess;
      buckets = ttftBuckets.clone();
      count = ttftCount;
      sum = ttftSum;
    }
    t.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", lbl, prompt);
    t.counter("vllm:generation_tokens", "Number of generation tokens processed.", lbl, gen);
    t.counter("vllm:request_success", "Count of successfully processed requests.", lbl, success);
    t.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", lbl, 0);
    t.histogram(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        lbl,
        TTFT_BOUNDS,
        buckets,
        count,
        sum);
    t.gauge(
        "vllm:lora_requests_info",
        "Running stats on lora requests.",
        PrometheusText.labels(
            "max_lora",
            String.valueOf(b.maxLoras),
            "running_lora_adapters",
            activeLoras(runningLoras),
            "waiting_lora_adapters",
            activeLoras(waitingLoras)),
        b.clock.millis() / 1000.0);
    t.gauge(
        "vllm:cache_config_info",
        "Information of the LLMEngine CacheConfig",
        PrometheusText.labels(
            "block_size",
            String.valueOf(b.blockSize),
            "enable_prefix_caching",
            "True",
            "num_cpu_blocks",
            String.valueOf(b.cpuBlocks),
            "num_gpu_blocks",
            String.valueOf(b.gpuBlocks),
            "prefix_caching_hash_algo",
            b.hashAlgorithm.vllmName()),
        1.0);
    return t.toString();
  }

  private static String activeLoras(Map<String, AtomicInteger> m) {
    List<String> names = new ArrayList<>();
    m.forEach(
        (k, v) -> {
          if (v.get() > 0) {
            names.add(k);
          }
        });
    names.sort(null);
    return String.join(",", names);
  }
}
