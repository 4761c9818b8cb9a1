package io.kvroute.service.internal;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The part of the reuse split a KV-cache manager can know, summed over its score queries ({@code
 * kvroute.service.reuse.*} and {@code GET /api/v1/reuse}): the prompt's full blocks, the longest
 * prefix any candidate pod holds (<em>available</em>) and the prefix the recommended pod holds
 * (<em>recommended</em>: the service's stand-in for <em>captured</em>, since it is never told which
 * pod the gateway chose), and the queries where no candidate held anything or the recommendation
 * held less than the best pod (a tier-weighted score preferring a shorter prefix on a faster tier).
 * The engines' cached tokens (<em>delivered</em>) never reach the service: it has no part of them.
 *
 * <p>Thread-safe (Micrometer counters); {@link #record} is called on the score path and allocates
 * nothing.
 */
public final class ReuseTally {
  private final int blockSize;
  private final Counter queries;
  private final Counter prompt;
  private final Counter available;
  private final Counter recommended;
  private final Counter noneAvailable;
  private final Counter belowAvailable;

  /**
   * Registers the meters.
   *
   * @param registry where the meters go
   * @param blockSize tokens per index block (for the token figures of {@link #snapshot})
   */
  public ReuseTally(MeterRegistry registry, int blockSize) {
    this.blockSize = blockSize;
    this.queries =
        Counter.builder("kvroute.service.reuse.queries")
            .description("Score queries answered (each one's reuse split is counted below)")
            .register(registry);
    this.prompt = blocks(registry, "prompt");
    this.available = blocks(registry, "available");
    this.recommended = blocks(registry, "recommended");
    this.noneAvailable = misses(registry, "none_available");
    this.belowAvailable = misses(registry, "below_available");
  }

  private static Counter blocks(MeterRegistry registry, String split) {
    return Counter.builder("kvroute.service.reuse.blocks")
        .description(
            "Blocks of scored prompts: all full blocks (prompt), the longest prefix a candidate pod"
                + " holds (available), the prefix the recommended pod holds (recommended)")
        .baseUnit("blocks")
        .tag("split", split)
        .register(registry);
  }

  private static Counter misses(MeterRegistry registry, String cause) {
    return Counter.builder("kvroute.service.reuse.misses")
        .description(
            "Score queries whose recommendation holds less than the prompt could reuse, by cause"
                + " (none_available, below_available)")
        .tag("cause", cause)
        .register(registry);
  }

  /**
   * Records one answered score query.
   *
   * @param promptBlocks the prompt's full blocks
   * @param availableBlocks the longest prefix any candidate pod holds, in blocks
   * @param recommendedBlocks the prefix the recommended pod holds (0 without a recommendation)
   */
  public void record(int promptBlocks, int availableBlocks, int recommendedBlocks) {
    queries.increment();
    prompt.increment(promptBlocks);
    available.increment(availableBlocks);
    recommended.increment(recommendedBlocks);
    if (availableBlocks == 0) {
      noneAvailable.increment();
    } else if (recommendedBlocks < availableBlocks) {
      belowAvailable.increment();
    }
  }

  /** The totals, as {@code GET /api/v1/reuse} answers them. */
  public Map<String, Object> snapshot() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("queries", (long) queries.count());
    m.put("block_size", blockSize);
    m.put("prompt_blocks", (long) prompt.count());
    m.put("available_blocks", (long) available.count());
    m.put("recommended_blocks", (long) recommended.count());
    m.put("delivered_blocks", null);
    Map<String, Long> misses = new LinkedHashMap<>();
    misses.put("none_available", (long) noneAvailable.count());
    misses.put("below_available", (long) belowAvailable.count());
    m.put("misses", misses);
    return m;
  }
}
