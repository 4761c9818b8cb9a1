package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.List;

/**
 * The read path of a precise (KV-event fed) block index, as the precise prefix scorer needs it.
 * {@link Scorers} and {@link Scheduler} use it; {@link BlockIndexLookup} adapts kvindex's {@code
 * BlockIndex}, and tests can supply their own.
 *
 * <p>Implementations must be thread-safe and non-blocking (in-memory).
 */
public interface PrefixCacheLookup {

  /** Tokens per block of the request keys. */
  int blockSizeTokens();

  /**
   * The request keys of a prompt: one chained 64-bit key per full block, computed from the tokens,
   * the LoRA adapter name ({@code null} for the base model, whose name the index knows) and the
   * cache salt (nullable) — the same keys the index stores from KV events.
   */
  long[] requestKeys(int[] tokens, String lora, String cacheSalt);

  /**
   * For each candidate, the longest consecutive run of {@code keys} from key 0 it holds.
   *
   * @param matchedBlocks out: per candidate, the unweighted run length (zeroed by the caller)
   * @param weightedBlocks out: per candidate, the run weighted by the best tier of each block
   */
  void lookup(long[] keys, List<Endpoint> candidates, int[] matchedBlocks, double[] weightedBlocks);
}
