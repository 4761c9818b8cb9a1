package io.kvroute.kvindex;

import java.util.Map;

/**
 * A snapshot of a {@link BlockIndex}'s size and counters (the same values the {@code
 * kvroute_kvindex_*} Micrometer meters report).
 *
 * @param keys request keys held
 * @param entries (key, pod, tier, group) entries held
 * @param engineKeys engine-key mappings held
 * @param pods pods known
 * @param events events applied, by type ({@code stored}, {@code removed}, {@code cleared}, {@code
 *     pod_removed})
 * @param evictions evictions by reason ({@code max_keys}, {@code max_pods_per_key}, {@code
 *     max_engine_keys})
 * @param dropped blocks or events that could not be applied, by reason ({@code unknown_parent},
 *     {@code unknown_engine_key}, {@code non_dense}, {@code block_size}, {@code max_pods}, ...)
 * @param lookups lookups served
 */
public record IndexStats(
    long keys,
    long entries,
    long engineKeys,
    int pods,
    Map<String, Long> events,
    Map<String, Long> evictions,
    Map<String, Long> dropped,
    long lookups) {
  /** Copies the maps. */
  public IndexStats {
    events = Map.copyOf(events);
    evictions = Map.copyOf(evictions);
    dropped = Map.copyOf(dropped);
  }
}
