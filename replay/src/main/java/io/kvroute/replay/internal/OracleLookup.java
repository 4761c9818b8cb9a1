package io.kvroute.replay.internal;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.scoring.PrefixCacheLookup;
import io.kvroute.testkit.engine.EngineModel;
import java.util.List;
import java.util.Map;

/**
 * A {@link PrefixCacheLookup} that reads the engines' block pools directly: the true cache state at
 * the moment of the decision, with no event lag and no index. The request's keys are its vLLM block
 * hashes, which the simulation computes before each pick ({@link #current}). Not thread-safe.
 */
final class OracleLookup implements PrefixCacheLookup {
  private final Map<String, EngineModel> engines;
  private final int blockSize;
  private List<BlockHash> current = List.of();

  OracleLookup(Map<String, EngineModel> engines, int blockSize) {
    this.engines = engines;
    this.blockSize = blockSize;
  }

  /** The block hashes of the request about to be scheduled. */
  void current(List<BlockHash> hashes) {
    this.current = hashes;
  }

  @Override
  public int blockSizeTokens() {
    return blockSize;
  }

  @Override
  public long[] requestKeys(int[] tokens, String lora, String cacheSalt) {
    long[] keys = new long[current.size()];
    for (int i = 0; i < keys.length; i++) {
      keys[i] = current.get(i).u64();
    }
    return keys;
  }

  @Override
  public void lookup(
      long[] keys, List<Endpoint> candidates, int[] matchedBlocks, double[] weightedBlocks) {
    // uncapped, like the index's lookup: every full block may match
    int fullPrompt = current.size() * blockSize + 1;
    for (int i = 0; i < candidates.size(); i++) {
      EngineModel e = engines.get(candidates.get(i).id());
      int m = e == null ? 0 : e.cachedPrefixTokens(current, fullPrompt) / blockSize;
      matchedBlocks[i] = m;
      weightedBlocks[i] = m;
    }
  }
}
