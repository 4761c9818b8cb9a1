package io.kvroute.service;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.Map;

/**
 * The answer of {@code GET /api/v1/cache/pod/{pod_id}} (and one element of {@code GET
 * /api/v1/cache/pods}).
 *
 * @param podId the pod
 * @param status {@code waiting} (not heard from yet), {@code timed_out} (silent beyond the
 *     readiness timeout), {@code healthy} (events flowing, no recent gap) or {@code degraded} (a
 *     sequence gap in the last minute)
 * @param blocksCached entries held for the pod, all tiers
 * @param blocksByTier entries by tier
 * @param cacheUtilization GPU blocks over the configured {@code capacity_blocks}, or {@code null}
 * @param eventsPerSecond events applied per second over the last few seconds
 * @param eventsTotal events applied since the pod was added
 * @param blocksStoredTotal blocks stored since the pod was added
 * @param blocksRemovedTotal blocks removed (evicted) since the pod was added
 * @param evictionRatePerSec blocks removed per second over the last few seconds
 * @param lastEvent ISO-8601 instant of the pod's last event, or {@code null}
 * @param gaps sequence gaps seen by the subscriber
 * @param replays replays requested by the subscriber
 * @param restarts publisher restarts seen (the pod's entries were then rebuilt)
 * @param eventsEndpoint the pod's KV-event endpoint
 */
@JsonInclude(JsonInclude.Include.ALWAYS)
public record PodState(
    @JsonProperty("pod_id") String podId,
    @JsonProperty("status") String status,
    @JsonProperty("blocks_cached") long blocksCached,
    @JsonProperty("blocks_by_tier") Map<String, Long> blocksByTier,
    @JsonProperty("cache_utilization") Double cacheUtilization,
    @JsonProperty("events_per_second") double eventsPerSecond,
    @JsonProperty("events_total") long eventsTotal,
    @JsonProperty("blocks_stored_total") long blocksStoredTotal,
    @JsonProperty("blocks_removed_total") long blocksRemovedTotal,
    @JsonProperty("eviction_rate_per_sec") double evictionRatePerSec,
    @JsonProperty("last_event") String lastEvent,
    @JsonProperty("gaps") long gaps,
    @JsonProperty("replays") long replays,
    @JsonProperty("restarts") long restarts,
    @JsonProperty("events_endpoint") String eventsEndpoint) {
  /** Copies the map. */
  public PodState {
    blocksByTier =
        blocksByTier == null
            ? Map.of()
            : java.util.Collections.unmodifiableMap(new java.util.TreeMap<>(blocksByTier));
  }
}
