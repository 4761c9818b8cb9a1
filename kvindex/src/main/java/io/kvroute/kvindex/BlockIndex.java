package io.kvroute.kvindex;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.RequestKeyHasher;
import io.kvroute.kvindex.internal.InMemoryBlockIndex;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Which pods hold which KV-cache blocks, fed by vLLM KV events and queried on a router's request
 * path.
 *
 * <p><b>Dual keys.</b> Blocks are keyed by the index's own fast 64-bit <em>request keys</em>
 * ({@link RequestKeyHasher}: a chained XXH64 over the tokens, rooted at the model or LoRA name),
 * computed from an event's tokens at ingestion and from a prompt's tokens at lookup. Events that
 * carry only engine hashes (removals, token-less offload events) are resolved through an <em>engine
 * key → request key</em> mapping recorded when the blocks were first stored. Engine and index block
 * sizes may differ by a whole multiple in either direction.
 *
 * <p><b>Entries.</b> A request key holds entries (pod, tier, KV-cache group). A pod holds a block
 * if it has an entry for it on any tier and group. {@link #lookup} returns, per pod, the longest
 * consecutive prefix of the request's blocks the pod holds, and its score: the sum over those
 * blocks of the best tier's weight ({@link IndexConfig#tierWeight(String)}).
 *
 * <p><b>Writes.</b> A block index is a {@link KvEventSink}: the subscriber feeds it directly, and
 * the positional {@code blockStored}/{@code blockRemoved} conveniences of {@code KvEventSink} work
 * on it too.
 *
 * <p><b>Lossy input never throws.</b> A stored event whose parent is unknown, an engine hash that
 * was never mapped, a token span that does not fit the block size: each is counted in {@link
 * IndexStats#dropped()} and skipped.
 *
 * <p><b>Thread-safety.</b> All methods are thread-safe. Lookups run concurrently with each other
 * and with ingestion; writes are serialised (in-memory implementation: one {@code StampedLock},
 * each write call holds it once; lookups take no lock: they validate what they read and read again
 * if a write changed it, so a writer never delays them; a write call's blocks become visible one by
 * one, in order).
 */
public interface BlockIndex extends KvEventSink {

  /** An in-memory index (see {@link IndexConfig} for bounds and eviction). */
  static BlockIndex inMemory(IndexConfig config) {
    return new InMemoryBlockIndex(config);
  }

  // ------------------------------------------------------------------ write path

  /**
   * Records that {@code podId} stored blocks (vLLM {@code BlockStored}). The event's tokens may
   * cover more blocks than its hashes (skipped null or cached blocks: the hashes are then taken to
   * be the last blocks of the span), or be empty for token-less offload events (then a tier update
   * through the engine-key mapping). Its per-block {@code extra_keys} are folded into the request
   * keys when the engine block size equals the index block size (ignored otherwise), so that
   * lookups with {@link #requestKeys(int[], BlockExtraKeys)} match multimodal and salted prompts.
   */
  @Override
  void blockStored(String podId, KvEvent.BlockStored event);

  /** Records that {@code podId} removed blocks from the event's medium ({@code null} = GPU). */
  @Override
  void blockRemoved(String podId, KvEvent.BlockRemoved event);

  /**
   * Drops every entry of {@code podId}, all tiers and groups (vLLM {@code AllBlocksCleared}). Both
   * shipped backends do it in O(1): the pod's entries are invalidated at once (no later lookup sees
   * them) and their storage is reclaimed lazily, so a clear never holds lookups up.
   */
  @Override
  void allBlocksCleared(String podId);

  /** Forgets {@code podId} entirely (pod deleted or lost); O(1) as {@link #allBlocksCleared}. */
  @Override
  void removePod(String podId);

  // ------------------------------------------------------------------ read path

  /** The request-key hasher (block size, seed and model of this index). */
  RequestKeyHasher keyHasher();

  /**
   * Request keys of the full blocks of {@code tokens}.
   *
   * @param loraOrModelName the LoRA adapter's name, or {@code null} / the base model name
   */
  default long[] requestKeys(int[] tokens, String loraOrModelName) {
    return keyHasher().requestKeys(tokens, loraOrModelName);
  }

  /** Request keys with extra keys (LoRA root, multimodal items, cache salt, embeddings). */
  default long[] requestKeys(int[] tokens, BlockExtraKeys extras) {
    return keyHasher().requestKeys(tokens, extras);
  }

  /** Looks up {@code requestKeys} for {@code podIds}; the result lists pods in iteration order. */
  default PrefixMatch lookup(long[] requestKeys, Collection<String> podIds) {
    List<String> pods =
        podIds instanceof List<String> list ? list : new java.util.ArrayList<>(podIds);
    return lookup(requestKeys, requestKeys.length, pods, new PrefixMatch());
  }

  /**
   * Allocation-light lookup: the first {@code numKeys} keys, for {@code podIds}, written into
   * {@code into} (which is returned).
   */
  PrefixMatch lookup(long[] requestKeys, int numKeys, List<String> podIds, PrefixMatch into);

  // ------------------------------------------------------------------ introspection

  /** Pods currently known (they have sent events and were not removed). */
  Set<String> pods();

  /** Entries of {@code podId} by tier name (empty if unknown). */
  Map<String, Long> podEntries(String podId);

  /** Sizes and counters. */
  IndexStats stats();

  /** The configuration. */
  IndexConfig config();
}
