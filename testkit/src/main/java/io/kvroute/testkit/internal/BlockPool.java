package io.kvroute.testkit.internal;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * A model of vLLM's {@code BlockPool} with prefix caching: a fixed number of GPU blocks, a hash →
 * blocks map of cached full blocks, an LRU queue of free blocks (evicting a cached block when it is
 * reused) and an optional CPU offload tier (an LRU of block hashes).
 *
 * <p>Every mutation that vLLM would report produces exactly one list of events, handed to the event
 * sink while the pool's lock is held, so batches reach the publisher in mutation order.
 *
 * <p>Thread-safe: every method synchronizes on the pool. The sink must not block.
 */
public final class BlockPool {

  /** One GPU block. */
  static final class Block {
    final int id;
    int refCount;
    BlockHash hash;

    Block(int id) {
      this.id = id;
    }
  }

  /** A request's view of the pool: its tokens, hashes and blocks. Guarded by the pool lock. */
  public static final class Seq {
    final BlockExtraKeys extras;
    final Long loraId;
    final String loraName;
    int[] tokens;
    int numTokens;
    final List<BlockHash> hashes = new ArrayList<>();
    final List<Block> blocks = new ArrayList<>();
    int numCachedBlocks;
    boolean freed;

    /**
     * Creates a sequence.
     *
     * @param prompt prompt token ids
     * @param extras vLLM extra keys (LoRA name, cache salt)
     * @param loraId LoRA int id, or null
     * @param loraName LoRA name, or null
     */
    public Seq(int[] prompt, BlockExtraKeys extras, Long loraId, String loraName) {
      this.tokens = Arrays.copyOf(prompt, Math.max(16, prompt.length * 2));
      this.numTokens = prompt.length;
      this.extras = Objects.requireNonNull(extras, "extras");
      this.loraId = loraId;
      this.loraName = loraName;
    }

    /** Appends a generated token. */
    public void append(int token) {
      if (numTokens == tokens.length) {
        tokens = Arrays.copyOf(tokens, tokens.length * 2);
      }
      tokens[numTokens++] = token;
    }

    /** Current token count. */
    public int numTokens() {
      return numTokens;
    }

    /** The tokens so far. */
    public int[] tokens() {
      return Arrays.copyOf(tokens, numTokens);
    }
  }

  /** The result of a lookup: tokens found on GPU and on CPU (continuing the GPU prefix). */
  public record Hit(int gpuTokens, int cpuTokens) {
    /** Total cached tokens. */
    public int tokens() {
      return gpuTokens + cpuTokens;
    }
  }

  private final int numBlocks;
  private final int blockSize;
  private final VllmBlockHasher hasher;
  private final Consumer<List<KvEvent>> sink;
  private final Block[] blocks;
  private final LinkedHashSet<Block> freeQueue = new LinkedHashSet<>();
  private final Map<BlockHash, LinkedHashMap<Integer, Block>> cached = new HashMap<>();
  private final int cpuCapacity;
  private final LinkedHashMap<BlockHash, Boolean> cpuTier = new LinkedHashMap<>(16, 0.75f, true);
  private long queries;
  private long hits;

  /**
   * Creates a pool.
   *
   * @param numBlocks GPU blocks
   * @param cpuBlocks CPU offload blocks (0: no offload tier)
   * @param hasher vLLM-exact hasher (its block size is the pool's)
   * @param sink receives the events of each mutation, under the pool lock
   */
  public BlockPool(
      int numBlocks, int cpuBlocks, VllmBlockHasher hasher, Consumer<List<KvEvent>> sink) {
    this.numBlocks = numBlocks;
    this.blockSize = hasher.blockSize();
    this.hasher = hasher;
    this.sink = sink;
    this.cpuCapacity = cpuBlocks;
    this.blocks = new Block[numBlocks];
    for (int i = 0; i < numBlocks; i++) {
      blocks[i] = new Block(i);
      freeQueue.add(blocks[i]);
    }
  }

  /** Tokens per block. */
  public int blockSize() {
    return blockSize;
  }

  /** GPU blocks. */
  public int numBlocks() {
    return numBlocks;
  }

  /** Blocks needed for {@code tokens} tokens. */
  public int blocksFor(int tokens) {
    return (tokens + blockSize - 1) / blockSize;
  }

  private void ensureHashes(Seq s, int fullBlocks) {
    while (s.hashes.size() < fullBlocks) {
      int i = s.hashes.size();
      int from = i * blockSize;
      int to = from + blockSize;
      byte[] parent = i == 0 ? null : s.hashes.get(i - 1).digest();
      s.hashes.add(hasher.hashBlock(parent, s.tokens, from, to, s.extras.forBlock(from, to)));
    }
  }

  /**
   * vLLM's {@code get_computed_blocks}: the longest cached prefix of full prompt blocks, capped at
   * {@code numTokens - 1} tokens, first on GPU then continuing on the CPU tier. Counts a prefix
   * cache query of {@code numTokens} and the GPU hit tokens.
   */
  public synchronized Hit lookup(Seq s) {
    int maxBlocks = Math.max(0, (s.numTokens - 1) / blockSize);
    ensureHashes(s, maxBlocks);
    int gpu = 0;
    while (gpu < maxBlocks && cached.containsKey(s.hashes.get(gpu))) {
      gpu++;
    }
    int cpu = 0;
    while (gpu + cpu < maxBlocks && cpuTier.containsKey(s.hashes.get(gpu + cpu))) {
      cpu++;
    }
    queries += s.numTokens;
    hits += (long) gpu * blockSize;
    return new Hit(gpu * blockSize, cpu * blockSize);
  }

  /**
   * Allocates blocks for {@code totalTokens}, reusing the {@code hit} GPU prefix (which must be the
   * last {@link #lookup} result, re-validated here). Evictions produce one event list.
   *
   * @return false if there are not enough free blocks now (nothing changed)
   */
  public synchronized boolean allocate(Seq s, int hitGpuTokens, int totalTokens) {
    int hitBlocks = hitGpuTokens / blockSize;
    List<Block> hitList = new ArrayList<>(hitBlocks);
    for (int i = 0; i < hitBlocks; i++) {
      LinkedHashMap<Integer, Block> m = cached.get(s.hashes.get(i));
      if (m == null) {
        break; // evicted since lookup: compute the rest
      }
      hitList.add(m.values().iterator().next());
    }
    int need = blocksFor(totalTokens) - hitList.size();
    int freeHits = 0;
    for (Block b : hitList) {
      if (b.refCount == 0) {
        freeHits++;
      }
    }
    if (need + freeHits > freeQueue.size()) {
      return false;
    }
    for (Block b : hitList) {
      if (b.refCount++ == 0) {
        freeQueue.remove(b);
      }
      s.blocks.add(b);
    }
    s.numCachedBlocks = hitList.size();
    List<KvEvent> events = new ArrayList<>();
    Iterator<Block> it = freeQueue.iterator();
    for (int i = 0; i < need; i++) {
      Block b = it.next();
      it.remove();
      if (b.hash != null) {
        uncache(b, events);
      }
      b.refCount = 1;
      s.blocks.add(b);
    }
    emit(events);
    return true;
  }

  /** Ids of the blocks {@code s} holds (NIXL {@code remote_block_ids}). */
  public synchronized List<Integer> blockIds(Seq s) {
    List<Integer> ids = new ArrayList<>(s.blocks.size());
    for (Block b : s.blocks) {
      ids.add(b.id);
    }
    return ids;
  }

  /** Whether a request of {@code totalTokens} could ever fit. */
  public boolean fits(int totalTokens) {
    return blocksFor(totalTokens) <= numBlocks;
  }

  private void uncache(Block b, List<KvEvent> events) {
    LinkedHashMap<Integer, Block> m = cached.get(b.hash);
    if (m != null) {
      m.remove(b.id);
      if (m.isEmpty()) {
        cached.remove(b.hash);
      }
    }
    events.add(KvEvent.BlockRemoved.of(EngineHashes.ofInts(b.hash.u64())));
    b.hash = null;
  }

  /**
   * vLLM's {@code cache_full_blocks}: registers every block that is full after {@code
   * computedTokens} tokens and emits one BlockStored (plus CPU offload events).
   */
  public synchronized void cacheFullBlocks(Seq s, int computedTokens) {
    if (s.freed) {
      return;
    }
    int full = Math.min(computedTokens, s.numTokens) / blockSize;
    if (full <= s.numCachedBlocks) {
      return;
    }
    ensureHashes(s, full);
    int first = s.numCachedBlocks;
    long[] newHashes = new long[full - first];
    List<Object> extraKeys = new ArrayList<>(full - first);
    boolean anyExtra = false;
    for (int i = first; i < full; i++) {
      Block b = s.blocks.get(i);
      BlockHash h = s.hashes.get(i);
      b.hash = h;
      cached.computeIfAbsent(h, k -> new LinkedHashMap<>()).put(b.id, b);
      newHashes[i - first] = h.u64();
      List<Object> ek = s.extras.forBlock(i * blockSize, (i + 1) * blockSize);
      anyExtra |= ek != null;
      extraKeys.add(ek);
    }
    EngineHashes parent = first == 0 ? null : EngineHashes.ofInts(s.hashes.get(first - 1).u64());
    int[] span = Arrays.copyOfRange(s.tokens, first * blockSize, full * blockSize);
    List<KvEvent> events = new ArrayList<>(2);
    events.add(stored(EngineHashes.ofInts(newHashes), parent, span, s, "GPU", extraKeys));
    if (cpuCapacity > 0) {
      offload(s, first, full, extraKeys, events);
    }
    s.numCachedBlocks = full;
    emit(events);
  }

  private KvEvent stored(
      EngineHashes hashes,
      EngineHashes parent,
      int[] span,
      Seq s,
      String medium,
      List<Object> extraKeys) {
    return KvEvent.BlockStored.builder()
        .blockHashes(hashes)
        .parentBlockHash(parent)
        .tokenIds(span)
        .blockSize(blockSize)
        .loraId(s.loraId)
        .medium(medium)
        .loraName(s.loraName)
        .extraKeys(extraKeys)
        .build();
  }

  private void offload(Seq s, int first, int full, List<Object> extraKeys, List<KvEvent> events) {
    List<Long> added = new ArrayList<>();
    int firstAdded = -1;
    for (int i = first; i < full; i++) {
      BlockHash h = s.hashes.get(i);
      if (cpuTier.get(h) == null) {
        while (cpuTier.size() >= cpuCapacity) {
          Iterator<BlockHash> it = cpuTier.keySet().iterator();
          BlockHash victim = it.next();
          it.remove();
          events.add(
              KvEvent.BlockRemoved.builder().blockHashes(victim.u64()).medium("CPU").build());
        }
        cpuTier.put(h, Boolean.TRUE);
        if (firstAdded < 0) {
          firstAdded = i;
        }
        added.add(h.u64());
      }
    }
    if (!added.isEmpty()) {
      long[] v = added.stream().mapToLong(Long::longValue).toArray();
      EngineHashes parent =
          firstAdded == 0 ? null : EngineHashes.ofInts(s.hashes.get(firstAdded - 1).u64());
      int[] span =
          Arrays.copyOfRange(s.tokens, firstAdded * blockSize, (firstAdded + v.length) * blockSize);
      events.add(
          stored(
              EngineHashes.ofInts(v),
              parent,
              span,
              s,
              "CPU",
              extraKeys.subList(firstAdded - first, firstAdded - first + v.length)));
    }
  }

  /**
   * Releases the sequence's blocks; blocks whose reference count drops to 0 join the free queue
   * tail in reverse order (the request's last block is evicted first), keeping their hashes.
   */
  public synchronized void free(Seq s) {
    if (s.freed) {
      return;
    }
    s.freed = true;
    for (int i = s.blocks.size() - 1; i >= 0; i--) {
      Block b = s.blocks.get(i);
      if (--b.refCount == 0) {
        freeQueue.add(b);
      }
    }
    s.blocks.clear();
    notifyAll();
  }

  /**
   * Waits until blocks may have been freed, or {@code nanos} elapse.
   *
   * @throws InterruptedException if interrupted
   */
  public synchronized void awaitFree(long nanos) throws InterruptedException {
    long ms = Math.max(1, nanos / 1_000_000);
    wait(ms);
  }

  /** vLLM's {@code reset_prefix_cache}: forgets every cached hash (GPU and CPU), one event. */
  public synchronized void reset() {
    for (Block b : blocks) {
      b.hash = null;
    }
    cached.clear();
    cpuTier.clear();
    emit(new ArrayList<>(List.of(KvEvent.AllBlocksCleared.INSTANCE)));
  }

  private void emit(List<KvEvent> events) {
    if (!events.isEmpty()) {
      sink.accept(events);
    }
  }

  /** Fraction of GPU blocks in use by running requests (0..1). */
  public synchronized double usage() {
    return numBlocks == 0 ? 0 : (double) (numBlocks - freeQueue.size()) / numBlocks;
  }

  /** Fraction of the CPU tier holding blocks (0..1). */
  public synchronized double cpuUsage() {
    return cpuCapacity == 0 ? 0 : (double) cpuTier.size() / cpuCapacity;
  }

  /** Cached GPU block hashes (event u64 form), in no particular order. */
  public synchronized List<Long> cachedHashes() {
    List<Long> out = new ArrayList<>(cached.size());
    for (BlockHash h : cached.keySet()) {
      out.add(h.u64());
    }
    return out;
  }

  /** Prefix-cache queries (tokens). */
  public synchronized long queries() {
    return queries;
  }

  /** Prefix-cache hits (tokens). */
  public synchronized long hits() {
    return hits;
  }

  /** Full-block hashes of a token sequence (vLLM-exact), for shared stores and tests. */
  public synchronized List<BlockHash> hashesOf(Seq s, int tokens) {
    ensureHashes(s, tokens / blockSize);
    return new ArrayList<>(s.hashes.subList(0, tokens / blockSize));
  }
}
