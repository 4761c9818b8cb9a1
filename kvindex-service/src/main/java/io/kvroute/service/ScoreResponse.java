package io.kvroute.service;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.Map;
import java.util.Optional;

/**
 * The answer of {@code POST /api/v1/score}: per pod, how much of the prompt's prefix it holds, and
 * the recommended pod.
 *
 * @param scores per pod, in request order
 * @param recommendation the pod with the highest score (first one on ties), or {@code null} when no
 *     pod holds any block
 * @param blocksTotal full blocks in the prompt
 * @param blockSize tokens per block
 */
public record ScoreResponse(
    @JsonProperty("scores") Map<String, PodScore> scores,
    @JsonProperty("recommendation") String recommendation,
    @JsonProperty("blocks_total") int blocksTotal,
    @JsonProperty("block_size") int blockSize) {

  /** Copies the map (keeping its order). */
  public ScoreResponse {
    scores =
        scores == null
            ? Map.of()
            : java.util.Collections.unmodifiableMap(new java.util.LinkedHashMap<>(scores));
  }

  /** The recommended pod, if any pod holds a block of the prompt. */
  public Optional<String> best() {
    return Optional.ofNullable(recommendation);
  }

  /**
   * One pod's score.
   *
   * @param cacheHitRate {@code blocksPresent / blocksTotal} (0 when the prompt has no full block)
   * @param blocksPresent the longest consecutive prefix of the prompt's blocks the pod holds
   * @param blocksTotal full blocks in the prompt
   * @param score 0–100: the tier-weighted prefix (a GPU block counts 1, a CPU block 0.8 by default)
   *     over {@code blocksTotal}
   * @param blocksByTier the prefix's blocks by the best tier holding each
   */
  public record PodScore(
      @JsonProperty("cache_hit_rate") double cacheHitRate,
      @JsonProperty("blocks_present") int blocksPresent,
      @JsonProperty("blocks_total") int blocksTotal,
      @JsonProperty("score") double score,
      @JsonProperty("blocks_by_tier") Map<String, Integer> blocksByTier) {
    /** Copies the map. */
    public PodScore {
      blocksByTier = blocksByTier == null ? Map.of() : Map.copyOf(blocksByTier);
    }
  }
}
