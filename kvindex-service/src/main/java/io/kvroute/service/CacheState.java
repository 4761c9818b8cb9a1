package io.kvroute.service;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;

/**
 * The answer of {@code GET /api/v1/cache/state}: totals over the whole index.
 *
 * @param totalBlocks (block, pod, tier) entries held: a block cached on three pods counts three
 * @param uniqueBlocks distinct blocks (request keys) held
 * @param totalPods configured pods
 * @param podsReporting configured pods heard from at least once
 * @param averageCacheUtilization mean over pods with a configured {@code capacity_blocks} of their
 *     GPU blocks over capacity, or {@code null} when no pod has a capacity
 * @param lastUpdated ISO-8601 instant of the last event applied, or {@code null} before the first
 * @param eventsTotal events applied since start
 * @param droppedTotal blocks or events the index could not apply (unknown parents, ...)
 * @param blockSize tokens per index block
 * @param model the base model
 * @param ready whether every configured pod has been heard from or timed out
 */
@JsonInclude(JsonInclude.Include.ALWAYS)
public record CacheState(
    @JsonProperty("total_blocks") long totalBlocks,
    @JsonProperty("unique_blocks") long uniqueBlocks,
    @JsonProperty("total_pods") int totalPods,
    @JsonProperty("pods_reporting") int podsReporting,
    @JsonProperty("average_cache_utilization") Double averageCacheUtilization,
    @JsonProperty("last_updated") String lastUpdated,
    @JsonProperty("events_total") long eventsTotal,
    @JsonProperty("dropped_total") long droppedTotal,
    @JsonProperty("block_size") int blockSize,
    @JsonProperty("model") String model,
    @JsonProperty("ready") boolean ready) {}
