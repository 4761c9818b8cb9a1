package io.kvroute.testkit.internal;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * A model of vLLM's (v1) {@code BlockPool} and {@code KVCacheManager} with prefix caching, shared
 * by the real-time {@code VllmSimulator} and the virtual-time {@code EngineModel}: a fixed number
 * of GPU blocks, a hash → blocks map of cached full blocks (two blocks may hold the same hash, as
 * in vLLM when two requests compute one prefix at once), a doubly linked LRU queue of free blocks
 * (taking a cached block from its head evicts it), and an optional CPU offload tier (an LRU of
 * block hashes).
 *
 * <p>Two ways to allocate, both vLLM's: {@link #allocateSlots} grows a request's blocks step by
 * step (the v1 scheduler's {@code allocate_slots}, with chunked prefill and decode), {@link
 * #allocate} takes all blocks of a request at once (what the real-time simulator does).
 *
 * <p>Every mutation that vLLM reports produces one list of events, handed to the sink while the
 * pool's lock is held, so lists reach the sink in mutation order.
 *
 * <p>Thread-safe: every method synchronizes on the pool (uncontended in the single-threaded engine
 * model). The sink must not block.
 */
public final class BlockPool {

  /** A request's view of the pool: its tokens, hashes and blocks. Guarded by the pool lock. */
  public static final class Seq {
    final BlockExtraKeys extras;
    final Long loraId;
    final String loraName;
    int[] tokens;
    int numTokens;
    final ArrayList<BlockHash> hashes;
    int[] blocks = new int[8];
    int numBlocks;
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
      this(prompt, extras, loraId, loraName, null, 0);
    }

    /**
     * Creates a sequence that reuses already computed full-block hashes of its prompt (they must
     * come from a hasher configured like the pool's).
     *
     * @param extraCapacity tokens expected to be appended (output), to size the token array once
     */
    public Seq(
        int[] prompt,
        BlockExtraKeys extras,
        Long loraId,
        String loraName,
        List<BlockHash> precomputed,
        int extraCapacity) {
      this.tokens = Arrays.copyOf(prompt, Math.max(16, prompt.length + Math.max(1, extraCapacity)));
      this.numTokens = prompt.length;
      this.extras = Objects.requireNonNull(extras, "extras");
      this.loraId = loraId;
      this.loraName = loraName;
      this.hashes = precomputed == null ? new ArrayList<>() : new ArrayList<>(precomputed);
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

    /** Blocks currently held. */
    public int numBlocks() {
      return numBlocks;
    }

    void addBlock(int id) {
      if (numBlocks == blocks.length) {
        blocks = Arrays.copyOf(blocks, blocks.length * 2);
      }
      blocks[numBlocks++] = id;
    }
  }

  /** The result of a lookup: tokens found on GPU and on CPU (continuing the GPU prefix). */
  public record Hit(int gpuTokens, int cpuTokens) {
    /** Total cached tokens. */
    public int tokens() {
      return gpuTokens + cpuTokens;
    }
  }

  private static final int NONE = -1;

  private final int numBlocks;
  private final int blockSize;
  private final VllmBlockHasher hasher;
  private final Consumer<List<KvEvent>> sink;
  // per block
  private final int[] refCount;
  private final BlockHash[] blockHash; // null: not cached
  private final int[] dupNext; // next block holding the same hash, or NONE
  // free queue: a doubly linked list over block ids, sentinel = numBlocks
  private final int[] prev;
  private final int[] next;
  private final boolean[] free;
  private int freeCount;
  // cached hashes (event u64 form) → first block holding it
  private final LongIntMap cached;
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
    if (numBlocks < 1) {
      throw new IllegalArgumentException("numBlocks must be >= 1, was " + numBlocks);
    }
    this.numBlocks = numBlocks;
    this.blockSize = hasher.blockSize();
    this.hasher = hasher;
    this.sink = Objects.requireNonNull(sink, "sink");
    this.cpuCapacity = cpuBlocks;
    this.refCount = new int[numBlocks];
    this.blockHash = new BlockHash[numBlocks];
    this.dupNext = new int[numBlocks];
    this.prev = new int[numBlocks + 1];
    this.next = new int[numBlocks + 1];
    this.free = new boolean[numBlocks];
    this.cached = new LongIntMap(numBlocks);
    int sentinel = numBlocks;
    prev[sentinel] = sentinel;
    next[sentinel] = sentinel;
    for (int i = 0; i < numBlocks; i++) {
      dupNext[i] = NONE;
      appendFree(i);
    }
  }

  // ---------------------------------------------------------------- free queue

  private void appendFree(int b) {
    int s = numBlocks;
    int last = prev[s];
    next[last] = b;
    prev[b] = last;
    next[b] = s;
    prev[s] = b;
    free[b] = true;
    freeCount++;
  }

  private void removeFree(int b) {
    int p = prev[b];
    int n = next[b];
    next[p] = n;
    prev[n] = p;
    free[b] = false;
    freeCount--;
  }

  // ---------------------------------------------------------------- sizes

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

  /** Whether a request of {@code totalTokens} could ever fit. */
  public boolean fits(int totalTokens) {
    return blocksFor(totalTokens) <= numBlocks;
  }

  /** Free blocks (cached or not) now. */
  public synchronized int numFreeBlocks() {
    return freeCount;
  }

  // ---------------------------------------------------------------- hashing and lookup

  private void ensureHashes(Seq s, int fullBlocks) {
    List<BlockHash> hs = s.hashes;
    while (hs.size() < fullBlocks) {
      int i = hs.size();
      int from = i * blockSize;
      int to = from + blockSize;
      byte[] parent = i == 0 ? null : hs.get(i - 1).digest();
      hs.add(hasher.hashBlock(parent, s.tokens, from, to, s.extras.forBlock(from, to)));
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
    while (gpu < maxBlocks && cached.get(s.hashes.get(gpu).u64()) != NONE) {
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
   * The number of leading blocks of {@code hashes} cached on GPU now, at most {@code maxBlocks}; no
   * side effect (an oracle's view of the pool, no statistics).
   */
  public synchronized int cachedPrefixBlocks(List<BlockHash> hashes, int maxBlocks) {
    int n = Math.min(maxBlocks, hashes.size());
    int i = 0;
    while (i < n && cached.get(hashes.get(i).u64()) != NONE) {
      i++;
    }
    return i;
  }

  // ---------------------------------------------------------------- allocation

  /**
   * Allocates blocks for {@code totalTokens}, reusing the {@code hitGpuTokens} GPU prefix (which
   * must be the last {@link #lookup} result, re-validated here). Evictions produce one event list.
   *
   * @return false if there are not enough free blocks now (nothing changed)
   */
  public synchronized boolean allocate(Seq s, int hitGpuTokens, int totalTokens) {
    return allocateSlots(s, hitGpuTokens, Math.max(0, totalTokens - hitGpuTokens));
  }

  /**
   * vLLM's {@code allocate_slots}: on the request's first allocation, takes the {@code
   * hitGpuTokens} prefix found by {@link #lookup} (re-validated: blocks evicted since are computed
   * instead), then makes the request hold blocks for {@code computed + numNewTokens} tokens, where
   * {@code computed} is {@code hitGpuTokens} (a hit block evicted since the lookup is then computed
   * as part of the new tokens). Evictions produce one event list. Does not cache (see {@link
   * #cacheFullBlocks}); a request that already holds blocks grows with {@link #growSlots}.
   *
   * @param hitGpuTokens the lookup's GPU hit on a first allocation (ignored afterwards)
   * @param numNewTokens tokens to be computed now
   * @return false if there are not enough free blocks now (nothing changed)
   */
  public synchronized boolean allocateSlots(Seq s, int hitGpuTokens, int numNewTokens) {
    if (s.numBlocks > 0) {
      throw new IllegalStateException("the sequence already holds blocks: use growSlots");
    }
    return allocateSlotsFrom(s, hitGpuTokens, 0, numNewTokens);
  }

  /**
   * {@link #allocateSlots} for a request already holding blocks: room for {@code computedTokens +
   * numNewTokens} tokens.
   */
  public synchronized boolean growSlots(Seq s, int computedTokens, int numNewTokens) {
    return allocateSlotsFrom(s, 0, computedTokens, numNewTokens);
  }

  private boolean allocateSlotsFrom(Seq s, int hitGpuTokens, int computedTokens, int numNewTokens) {
    int hitBlocks = 0;
    int freeHits = 0;
    int[] hitIds = null;
    int target = computedTokens + numNewTokens;
    if (s.numBlocks == 0) {
      target = hitGpuTokens + numNewTokens;
      int want = hitGpuTokens / blockSize;
      ensureHashes(s, want);
      hitIds = new int[want];
      while (hitBlocks < want) {
        int b = cached.get(s.hashes.get(hitBlocks).u64());
        if (b == NONE) {
          break; // evicted since lookup: compute the rest
        }
        hitIds[hitBlocks++] = b;
        if (refCount[b] == 0) {
          freeHits++;
        }
      }
    }
    int need = blocksFor(target) - s.numBlocks - hitBlocks;
    if (need < 0) {
      need = 0;
    }
    if (need + freeHits > freeCount) {
      return false;
    }
    for (int i = 0; i < hitBlocks; i++) {
      int b = hitIds[i];
      if (refCount[b]++ == 0) {
        removeFree(b);
      }
      s.addBlock(b);
    }
    if (hitIds != null) {
      s.numCachedBlocks = hitBlocks;
    }
    List<KvEvent> events = null;
    for (int i = 0; i < need; i++) {
      int b = next[numBlocks];
      removeFree(b);
      if (blockHash[b] != null) {
        if (events == null) {
          events = new ArrayList<>();
        }
        uncache(b, events);
      }
      refCount[b] = 1;
      s.addBlock(b);
    }
    emit(events);
    return true;
  }

  /** Tokens the last {@link #allocateSlots} on a fresh sequence found cached (its hit). */
  public synchronized int cachedTokens(Seq s) {
    return s.numCachedBlocks * blockSize;
  }

  /** Ids of the blocks {@code s} holds (NIXL {@code remote_block_ids}). */
  public synchronized List<Integer> blockIds(Seq s) {
    List<Integer> ids = new ArrayList<>(s.numBlocks);
    for (int i = 0; i < s.numBlocks; i++) {
      ids.add(s.blocks[i]);
    }
    return ids;
  }

  private void uncache(int b, List<KvEvent> events) {
    BlockHash h = blockHash[b];
    long key = h.u64();
    int head = cached.get(key);
    if (head == b) {
      if (dupNext[b] == NONE) {
        cached.remove(key);
      } else {
        cached.put(key, dupNext[b]);
      }
    } else {
      int p = head;
      while (p != NONE && dupNext[p] != b) {
        p = dupNext[p];
      }
      if (p != NONE) {
        dupNext[p] = dupNext[b];
      }
    }
    dupNext[b] = NONE;
    blockHash[b] = null;
    events.add(KvEvent.BlockRemoved.of(EngineHashes.ofInts(key)));
  }

  /**
   * vLLM's {@code cache_full_blocks}: registers every block that is full after {@code
   * computedTokens} tokens and emits one BlockStored (plus CPU offload events).
   */
  public synchronized void cacheFullBlocks(Seq s, int computedTokens) {
    if (s.freed) {
      return;
    }
    int full = Math.min(Math.min(computedTokens, s.numTokens) / blockSize, s.numBlocks);
    if (full <= s.numCachedBlocks) {
      return;
    }
    ensureHashes(s, full);
    int first = s.numCachedBlocks;
    long[] newHashes = new long[full - first];
    List<Object> extraKeys = new ArrayList<>(full - first);
    for (int i = first; i < full; i++) {
      int b = s.blocks[i];
      BlockHash h = s.hashes.get(i);
      long key = h.u64();
      blockHash[b] = h;
      int head = cached.get(key);
      dupNext[b] = head; // NONE when new
      cached.put(key, b);
      newHashes[i - first] = key;
      extraKeys.add(s.extras.forBlock(i * blockSize, (i + 1) * blockSize));
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

  // ---------------------------------------------------------------- release

  /**
   * Releases the sequence's blocks for good; blocks whose reference count drops to 0 join the free
   * queue tail in reverse order (the request's last block is evicted first), keeping their hashes.
   */
  public synchronized void free(Seq s) {
    if (s.freed) {
      return;
    }
    s.freed = true;
    release(s);
    notifyAll();
  }

  /**
   * vLLM's preemption: releases the sequence's blocks like {@link #free} but leaves it usable: its
   * next {@link #lookup} and {@link #allocateSlots} start over (cached blocks it freed may hit).
   */
  public synchronized void preempt(Seq s) {
    if (s.freed) {
      return;
    }
    release(s);
    notifyAll();
  }

  private void release(Seq s) {
    for (int i = s.numBlocks - 1; i >= 0; i--) {
      int b = s.blocks[i];
      if (--refCount[b] == 0) {
        appendFree(b);
      }
    }
    s.numBlocks = 0;
    s.numCachedBlocks = 0;
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
    for (int b = 0; b < numBlocks; b++) {
      blockHash[b] = null;
      dupNext[b] = NONE;
    }
    cached.clear();
    cpuTier.clear();
    emit(new ArrayList<>(List.of(KvEvent.AllBlocksCleared.INSTANCE)));
  }

  private void emit(List<KvEvent> events) {
    if (events != null && !events.isEmpty()) {
      sink.accept(events);
    }
  }

  // ---------------------------------------------------------------- introspection

  /** Fraction of GPU blocks in use by running requests (0..1). */
  public synchronized double usage() {
    return (double) (numBlocks - freeCount) / numBlocks;
  }

  /** Fraction of the CPU tier holding blocks (0..1). */
  public synchronized double cpuUsage() {
    return cpuCapacity == 0 ? 0 : (double) cpuTier.size() / cpuCapacity;
  }

  /** Cached GPU block hashes (event u64 form, each once), in no particular order. */
  public synchronized List<Long> cachedHashes() {
    List<Long> out = new ArrayList<>(cached.size());
    cached.forEachKey(out::add);
    return out;
  }

  /** Blocks holding each cached hash (event u64 form), for tests: hash → count. */
  public synchronized java.util.Map<Long, Integer> cachedBlockCounts() {
    java.util.Map<Long, Integer> out = new java.util.HashMap<>();
    for (int b = 0; b < numBlocks; b++) {
      if (blockHash[b] != null) {
        out.merge(blockHash[b].u64(), 1, Integer::sum);
      }
    }
    return out;
  }

  /**
   * Checks the pool's invariants (for tests): every block is either free (reference count 0, in the
   * queue once) or held; the free count matches; every cached block is reachable from its hash.
   *
   * @throws IllegalStateException naming the first broken invariant
   */
  public synchronized void checkInvariants() {
    int inQueue = 0;
    int s = numBlocks;
    for (int b = next[s]; b != s; b = next[b]) {
      if (!free[b] || refCount[b] != 0) {
        throw new IllegalStateException("block " + b + " in the free queue is held");
      }
      if (++inQueue > numBlocks) {
        throw new IllegalStateException("free queue has a cycle");
      }
    }
    if (inQueue != freeCount) {
      throw new IllegalStateException("free count " + freeCount + " but " + inQueue + " queued");
    }
    for (int b = 0; b < numBlocks; b++) {
      if (refCount[b] < 0) {
        throw new IllegalStateException("block " + b + " has reference count " + refCount[b]);
      }
      if ((refCount[b] == 0) != free[b]) {
        throw new IllegalStateException("block " + b + " free flag disagrees with its count");
      }
      if (blockHash[b] != null) {
        int p = cached.get(blockHash[b].u64());
        while (p != NONE && p != b) {
          p = dupNext[p];
        }
        if (p != b) {
          throw new IllegalStateException("cached block " + b + " unreachable from its hash");
        }
      }
    }
  }

  /** Sum of reference counts (for tests: equals the blocks all live sequences hold). */
  public synchronized long totalReferences() {
    long n = 0;
    for (int r : refCount) {
      n += r;
    }
    return n;
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

  /** An open-addressing map from long keys to int values (NONE when absent); not thread-safe. */
  static final class LongIntMap {
    private long[] keys;
    private int[] values;
    private boolean[] used;
    private int size;
    private int mask;

    LongIntMap(int expected) {
      int cap = Integer.highestOneBit(Math.max(4, expected) * 2 - 1) << 1;
      alloc(cap);
    }

    private void alloc(int cap) {
      keys = new long[cap];
      values = new int[cap];
      used = new boolean[cap];
      mask = cap - 1;
    }

    private static int spread(long k) {
      long h = k * 0x9E3779B97F4A7C15L;
      return (int) (h ^ (h >>> 32));
    }

    int size() {
      return size;
    }

    int get(long k) {
      int i = spread(k) & mask;
      while (used[i]) {
        if (keys[i] == k) {
          return values[i];
        }
        i = (i + 1) & mask;
      }
      return NONE;
    }

    void put(long k, int v) {
      if ((size + 1) * 2 > keys.length) {
        grow();
      }
      int i = spread(k) & mask;
      while (used[i]) {
        if (keys[i] == k) {
          values[i] = v;
          return;
        }
        i = (i + 1) & mask;
      }
      used[i] = true;
      keys[i] = k;
      values[i] = v;
      size++;
    }

    void remove(long k) {
      int i = spread(k) & mask;
      while (used[i]) {
        if (keys[i] == k) {
          break;
        }
        i = (i + 1) & mask;
      }
      if (!used[i]) {
        return;
      }
      // backward-shift deletion keeps probe chains intact
      int gap = i;
      int j = (i + 1) & mask;
      while (used[j]) {
        int home = spread(keys[j]) & mask;
        boolean movable = gap <= j ? (home <= gap || home > j) : (home <= gap && home > j);
        if (movable) {
          keys[gap] = keys[j];
          values[gap] = values[j];
          gap = j;
        }
        j = (j + 1) & mask;
      }
      used[gap] = false;
      size--;
    }

    void clear() {
      Arrays.fill(used, false);
      size = 0;
    }

    void forEachKey(java.util.function.LongConsumer c) {
      for (int i = 0; i < keys.length; i++) {
        if (used[i]) {
          c.accept(keys[i]);
        }
      }
    }

    private void grow() {
      long[] ok = keys;
      int[] ov = values;
      boolean[] ou = used;
      alloc(ok.length * 2);
      size = 0;
      for (int i = 0; i < ok.length; i++) {
        if (ou[i]) {
          put(ok[i], ov[i]);
        }
      }
    }
  }
}
