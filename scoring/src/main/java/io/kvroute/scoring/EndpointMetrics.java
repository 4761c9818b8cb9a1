package io.kvroute.scoring;

import java.util.Objects;
import java.util.Set;

/**
 * One snapshot of an engine's load signals, as scraped from its {@code /metrics} or pushed by a
 * gateway that already has them.
 *
 * <p>Immutable value. Unknown numbers are {@code -1} (counts) or {@code NaN} (usage); unknown LoRA
 * lists are empty with {@code maxLoras = -1}.
 *
 * @param waitingRequests requests waiting in the engine's queue ({@code vllm:num_requests_waiting},
 *     {@code sglang:num_queue_reqs})
 * @param runningRequests requests running ({@code vllm:num_requests_running}, {@code
 *     sglang:num_running_reqs})
 * @param kvCacheUsage KV cache usage in 0..1 ({@code vllm:kv_cache_usage_perc}, {@code
 *     sglang:token_usage})
 * @param runningLoras adapters with running requests ({@code vllm:lora_requests_info})
 * @param waitingLoras adapters with waiting requests
 * @param maxLoras how many adapters the engine can hold at once ({@code max_lora}), -1 if unknown
 * @param blockSize tokens per KV block ({@code cache_config_info}), -1 if unknown
 * @param numGpuBlocks KV blocks on the GPU, -1 if unknown
 */
public record EndpointMetrics(
    int waitingRequests,
    int runningRequests,
    double kvCacheUsage,
    Set<String> runningLoras,
    Set<String> waitingLoras,
    int maxLoras,
    int blockSize,
    long numGpuBlocks) {

  /** Copies the sets and rejects nulls. */
  public EndpointMetrics {
    runningLoras = Set.copyOf(Objects.requireNonNull(runningLoras, "runningLoras"));
    waitingLoras = Set.copyOf(Objects.requireNonNull(waitingLoras, "waitingLoras"));
  }

  /** Queue, running and KV usage only; everything else unknown. */
  public static EndpointMetrics of(int waitingRequests, int runningRequests, double kvCacheUsage) {
    return new EndpointMetrics(
        waitingRequests, runningRequests, kvCacheUsage, Set.of(), Set.of(), -1, -1, -1);
  }

  /** A copy with the given LoRA signals. */
  public EndpointMetrics withLoras(Set<String> running, Set<String> waiting, int max) {
    return new EndpointMetrics(
        waitingRequests,
        runningRequests,
        kvCacheUsage,
        running,
        waiting,
        max,
        blockSize,
        numGpuBlocks);
  }

  /** A copy with the given cache geometry. */
  public EndpointMetrics withCacheConfig(int blockSize, long numGpuBlocks) {
    return new EndpointMetrics(
        waitingRequests,
        runningRequests,
        kvCacheUsage,
        runningLoras,
        waitingLoras,
        maxLoras,
        blockSize,
        numGpuBlocks);
  }
}
