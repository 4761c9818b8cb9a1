package io.kvroute.scoring;

/**
 * How much of a request's prompt one endpoint already holds in its KV cache: the longest run of
 * consecutive blocks from block 0.
 *
 * <p>Immutable value.
 *
 * @param matchedBlocks consecutive blocks from the start of the prompt that the endpoint holds (in
 *     any tier), unweighted — the PD decider uses this
 * @param weightedBlocks the same run with each block weighted by its best tier (GPU 1.0, CPU 0.8,
 *     ...); equal to {@code matchedBlocks} when tiers are unknown
 * @param totalBlocks the number of blocks the prompt has (0 when unknown)
 * @param blockSizeTokens tokens per block (0 when unknown)
 */
public record PrefixCacheMatch(
    int matchedBlocks, double weightedBlocks, int totalBlocks, int blockSizeTokens) {

  /** No information: nothing matched and the prompt size is unknown. */
  public static final PrefixCacheMatch NONE = new PrefixCacheMatch(0, 0, 0, 0);

  /** Validates the fields. */
  public PrefixCacheMatch {
    if (matchedBlocks < 0 || totalBlocks < 0 || blockSizeTokens < 0 || weightedBlocks < 0) {
      throw new IllegalArgumentException("prefix match values must be >= 0");
    }
  }

  /** Tokens of the prompt the endpoint holds: {@code matchedBlocks × blockSizeTokens}. */
  public long cachedTokens() {
    return (long) matchedBlocks * blockSizeTokens;
  }
}
