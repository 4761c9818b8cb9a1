package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import java.util.AbstractList;
import java.util.List;
import java.util.Objects;
import java.util.RandomAccess;

/**
 * Adapts kvindex's {@link BlockIndex} to {@link PrefixCacheLookup}: request keys from the index's
 * own hasher (block size, seed and model of the index; LoRA and cache salt as extra keys), and the
 * allocation-light lookup. Endpoint ids are the index's pod ids.
 *
 * <p>Thread-safe (the reusable result object is per thread).
 */
public final class BlockIndexLookup implements PrefixCacheLookup {
  private final BlockIndex index;
  private final ThreadLocal<io.kvroute.kvindex.PrefixMatch> scratch =
      ThreadLocal.withInitial(io.kvroute.kvindex.PrefixMatch::new);

  private BlockIndexLookup(BlockIndex index) {
    this.index = index;
  }

  /** The lookup over {@code index}. */
  public static BlockIndexLookup of(BlockIndex index) {
    return new BlockIndexLookup(Objects.requireNonNull(index, "index"));
  }

  @Override
  public int blockSizeTokens() {
    return index.config().blockSize();
  }

  @Override
  public long[] requestKeys(int[] tokens, String lora, String cacheSalt) {
    if (cacheSalt == null || cacheSalt.isEmpty()) {
      return index.requestKeys(tokens, lora);
    }
    return index.requestKeys(
        tokens, BlockExtraKeys.builder().loraName(lora).cacheSalt(cacheSalt).build());
  }

  @Override
  public void lookup(
      long[] keys, List<Endpoint> candidates, int[] matchedBlocks, double[] weightedBlocks) {
    io.kvroute.kvindex.PrefixMatch m =
        index.lookup(keys, keys.length, new Ids(candidates), scratch.get());
    int n = Math.min(m.size(), candidates.size());
    for (int i = 0; i < n; i++) {
      matchedBlocks[i] = m.matchedBlocks(i);
      weightedBlocks[i] = m.score(i);
    }
  }

  /** A no-copy view of the candidates' ids. */
  private static final class Ids extends AbstractList<String> implements RandomAccess {
    private final List<Endpoint> endpoints;

    Ids(List<Endpoint> endpoints) {
      this.endpoints = endpoints;
    }

    @Override
    public String get(int index) {
      return endpoints.get(index).id();
    }

    @Override
    public int size() {
      return endpoints.size();
    }
  }
}
