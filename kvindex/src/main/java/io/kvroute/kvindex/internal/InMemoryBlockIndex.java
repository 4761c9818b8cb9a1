package io.kvroute.kvindex.internal;

import static io.kvroute.kvindex.backend.StoreSpan.engineKey;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.backend.IndexCounters;
import io.kvroute.kvindex.backend.PendingBlocks;
import io.kvroute.kvindex.backend.StoreSpan;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.RequestKeyHasher;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.StampedLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The in-memory {@link BlockIndex}.
 *
 * <p><b>Layout.</b> One open-addressing table (linear probing, backward-shift deletion) of request
 * keys in one {@code long[]}: per slot the key, then its cell (32 bits) and stamp (8 bits: last
 * access, for eviction), so that a probe and what it finds share a cache line. An entry is an int:
 * {@code pod << 12 | group << 4 | tier}, pods being small dense ids. A key's cell is its entry when
 * it has one (the common case: no other storage), else an index into {@code pairs[]} (two entries,
 * as two ints) or into {@code sets[]} (a {@link PodSet} once a key has more than two entries). A
 * {@code PodSet} with many entries also keeps a row of two pod bitsets (any tier, GPU) in {@link
 * PodBits}, one packed {@code long[]} for all sets, so a lookup intersects 64 pods per instruction;
 * a compact descriptor array by set index (row, and whether any entry is off GPU) lets a lookup
 * reach the row without touching the set object. Engine keys live in a second table ({@link
 * EngineKeyMap}: 17 bytes per slot).
 *
 * <p><b>Memory.</b> Tables double from 1,024 slots up to {@code maxKeys / 0.8} slots (slots are
 * picked by multiply-shift, so the last size need not be a power of two): a full index is at load
 * 0.8. The request-key table costs 16 bytes per slot (20 per key when full), plus 8 bytes per
 * two-entry key and about 80 per key with more entries (a dense set's bitset row is {@code 16 *
 * ceil(pods / 64)} bytes in {@code PodBits}); an engine-key mapping about 21 per mapping. Measured
 * with {@code IndexMemoryMain} at 10 million entries over 100 pods, mappings included, before the
 * table was interleaved (13 bytes per slot then): about 38 bytes per entry when each block is on
 * one pod, 24 on two and 27 on four; add about 4 bytes per key now.
 *
 * <p><b>Lookup.</b> The blocks are scanned in order with an "active pods" bitset; a pod drops out
 * at its first missing block; the scan stops when none is left. Up to 128 pods, one pass probes
 * each key and intersects its two words of pod bits with the active set held in registers. Beyond,
 * all keys of the request are resolved first (independent probes the CPU overlaps, into primitive
 * scratch), then scanned. The requested pod list is resolved to pod ids once and remembered per
 * thread until the list (compared by element identity) or the index's pods change. Nothing is
 * allocated and no reference is stored on the read path (a reference store into a long-lived array
 * costs G1 a card-mark barrier with a fence).
 *
 * <p><b>Bounds.</b> {@code maxKeys}: when full, an insert evicts the least recently used of 8
 * randomly sampled keys (approximate LRU, like Redis); stamps are refreshed by stores and by lookup
 * hits. Stamps count coarse ticks of {@code maxKeys / 64} inserts (8 bits: ages compare over about
 * four turnovers of the table). {@code maxPodsPerKey}: the oldest entry of the key is dropped.
 * {@code maxEngineKeys}: the same sampled LRU.
 *
 * <p><b>Clears are O(1): pod ids are generations.</b> An entry names its pod by a dense id, and a
 * pod's name maps to its current id. {@code allBlocksCleared} retires the pod's id and gives the
 * pod a fresh one; {@code removePod} retires it. A retired (DEAD) id's entries are <em>stale</em>:
 * no lookup sees them (a lookup only ever intersects with the ids of the pods it was asked about,
 * all live), and the pod's own counts start again from zero. Nothing is walked: the clear costs a
 * few array writes, plus one reclaim step. Stale entries are reclaimed lazily: (1) when an insert
 * finds its key holding {@code maxPodsPerKey} entries (its stale entries are dropped first, so the
 * bound is never spent on them); (2) by eviction, which takes a sampled key holding only stale
 * entries before any other; (3) by a cursor that examines {@value #RECLAIM_MIN} to {@value
 * #RECLAIM_SLOTS} slots (a big pod set counting for a quarter of its entries; how many follows the
 * ids and entries awaiting reclamation: {@link #reclaimStep}) at the end of every write call
 * (store, removal, clear) while stale entries remain, round the table; a pod set is scanned at most
 * once per retirement (it remembers the retirement count it was last purged at). A DEAD id becomes
 * FREE when its last stale entry goes; new ids are the lowest FREE ones, so the lookups' pod
 * bitsets stay as narrow as the live pods allow. Ids go up to {@code 2 * maxPods} (at most 2^19):
 * if a pod needs an id while every one is live or DEAD (more than {@code maxPods} clears within one
 * round of the cursor), the reclamation is finished at once by a walk of the table under the write
 * lock (counted: {@code kvroute.kvindex.reclaims.forced}).
 *
 * <p><b>What the sizes mean.</b> {@code entries} (stats and gauge) counts live entries exactly: a
 * clear subtracts the pod's entries at once. {@code kvroute.kvindex.entries.stale} counts the stale
 * entries not reclaimed yet, exactly. {@code keys} counts occupied slots, so it includes keys left
 * holding only stale entries until they are reclaimed; {@code maxKeys} bounds occupied slots (stale
 * or not), and a full table evicts stale-only keys first. {@link #podEntries} counts the pod's
 * current id only (zero right after a clear).
 *
 * <p><b>Thread-safety.</b> Thread-safe. Writes are serialised by one {@link StampedLock} (its write
 * lock, once per call). <b>Lookups take no lock</b> (each with its own per-thread scratch), so a
 * writer that holds the lock, even one the machine has descheduled in the middle of a call, never
 * delays them:
 *
 * <ol>
 *   <li>With no writer in, a lookup reads under the lock's optimistic stamp and is done if no write
 *       lock was taken meanwhile (two volatile reads: the uncontended cost is unchanged).
 *   <li>Else it reads again recording every slot it found a key in, with the slot's version, and
 *       the probe of the key it missed; then validates that none of them changed (the versioned
 *       slots of {@link SampledLruTable}: a writer <em>opens</em> a slot, its version odd, before
 *       changing its key, its cell or the pair, set or bitset row the cell points to, and closes it
 *       after), that the tiers and the arrays' layout did not change ({@link Seq}, odd while they
 *       change), and that none of the pods it was asked about joined, was cleared or was removed (a
 *       second {@link Seq} for pods' ids, and the log of changed pods in {@link PodIds}: a clear of
 *       another pod does not touch what it read). A write call's blocks thus become visible one by
 *       one, in order: a lookup beside a store may see its first blocks and not the last (as if the
 *       call were several calls), never a block half applied. A lookup that validates is
 *       linearizable: its answer is the index's at the moment validation began.
 *   <li>After {@value #OPTIMISTIC_ATTEMPTS} attempts that did not validate (writers kept changing
 *       what it read; counted: {@code kvroute.kvindex.lookup.retries}), it takes the read lock
 *       ({@code kvroute.kvindex.lookup.locked}); a writer gives way (up to 2 ms) while a lookup
 *       waits for it, since {@link StampedLock} would let writers that follow each other take it
 *       ahead of the queued lookup. Growing the table and forced reclamations run with {@link Seq}
 *       odd: lookups wait for them.
 * </ol>
 *
 * <p>Reads without the lock may see torn state (a set being changed, an index out of range after an
 * array grew): an attempt that throws, or reads a slot being changed, is discarded. Lookups refresh
 * access stamps with a compare-and-set of the slot's value word (only when the stamp changes),
 * which a concurrent writer's change of the word makes fail: the stamp is then left (approximate
 * LRU). {@link #pods}, {@link #podEntries} and {@link #stats} take the read lock.
 */
public final class InMemoryBlockIndex extends SampledLruTable implements BlockIndex {
  private static final Logger LOG = LoggerFactory.getLogger(InMemoryBlockIndex.class);
  private static final int EMPTY = -1;
  private static final int KIND_MASK = 0xC0000000;
  private static final int PAIR = 0x80000000;
  private static final int SET = 0xC0000000;
  private static final int MAX_POOL = 0x3FFFFFFE; // EMPTY is SET | 0x3FFFFFFF
  private static final int MAX_TIERS = 16;
  private static final int MAX_SIDE_ENTRIES = 1 << 16;
  // pod id states: FREE (never handed out, or reclaimed), LIVE (a named pod's current id), DEAD (a
  // cleared or removed pod's former id: its entries are stale, reclaimed lazily)
  private static final byte FREE = 0;
  private static final byte LIVE = 1;
  private static final byte DEAD = 2;
  private static final int ID_SPACE = 1 << 19; // entries are ints >= 0: pod << 12 < 2^31
  static final int RECLAIM_SLOTS = 1024; // slots the reclaimer examines per write call, at most
  static final int RECLAIM_MIN = 32; // ... and at least, while stale entries wait
  // optimistic attempts of a lookup before it takes the read lock
  static final int OPTIMISTIC_ATTEMPTS = 8;
  private static final long STAMP_BITS = 0xFFL << 32;
  private static final VarHandle WORDS = MethodHandles.arrayElementVarHandle(long[].class);

  private final IndexConfig config;
  private final RequestKeyHasher hasher;
  private final StampedLock lock = new StampedLock();
  // odd while the tiers or the layout of the arrays lookups read change (rare)
  private final Seq seq = new Seq();
  // odd while pods' ids change (a pod joins, is cleared or removed): each change is logged in
  // PodIds, so a lookup checks only whether one of its own pods changed
  private final Seq podSeq = new Seq();
  private static final long YIELD_NANOS = 2_000_000L; // how long a writer gives way to lookups
  private final java.util.concurrent.atomic.AtomicInteger waitingReaders =
      new java.util.concurrent.atomic.AtomicInteger();
  private final MatchWriter writer = MatchWriter.get();
  private final ThreadLocal<Scratch> scratch = ThreadLocal.withInitial(Scratch::new);

  // tiers (GPU is id 0)
  private final String[] tierNames = new String[MAX_TIERS];
  private final double[] tierWeights = new double[MAX_TIERS];
  private final Map<String, Integer> tierIds = new HashMap<>();
  private volatile List<String> tierNameList;
  private int tierCount;

  // pods
  private final PodIds podIds = new PodIds();
  private String[] podNames = new String[64];
  private long[] podTierCounts = new long[64 * MAX_TIERS];
  private int podHigh; // 1 + highest pod id ever handed out
  private byte[] podState = new byte[64]; // by id: FREE, LIVE or DEAD
  private long[] staleLeft = new long[64]; // by DEAD id: its entries not reclaimed yet
  private long[] deadBits = new long[1]; // DEAD ids
  private long[] freeBits = new long[1]; // FREE ids below podHigh
  private final int idLimit;
  private final int reclaimBudget;
  private int deadIds;
  private int retirements; // pod ids retired with entries so far (sets remember when purged)
  private long staleEntries;
  private int reclaimAt; // the reclaimer's cursor (a slot)
  private long reclaimSlots; // slots the reclaimer examined
  private final LongAdder forcedReclaims = new LongAdder();
  private final java.util.function.IntConsumer countRemovedFn = e -> countRemoved(e);

  // request-key table (this SampledLruTable)
  // slot i: tab[2i] = key (0: empty), tab[2i + 1] = cell (low 32 bits) | stamp << 32
  private long entries;

  // entries of keys held by two (pairs) or more (sets) entries
  private int[] pairs = new int[64];
  private int pairTop;
  private int pairFree = -1;
  private PodSet[] sets = new PodSet[16];
  private int setTop;
  private int[] setFree = new int[16];
  private int setFreeCount;
  private final PodBits podBits = new PodBits(seq); // rows of the dense sets

  // engine keys
  private final EngineKeyMap engine;
  private final LinkedHashMap<Long, long[]> multi = boundedMap();
  private final PendingBlocks partials = new PendingBlocks();
  private final StoreSpan span; // guarded by the write lock

  // counters
  private final IndexCounters counters =
      new IndexCounters(LOG, List.of("max_keys", "max_pods_per_key", "max_engine_keys"), List.of());
  private final LongAdder lookups = counters.lookups();

  /**
   * Tests only: called by the writer, holding the write lock, after each block a store or a removal
   * applied ({@code "stored"}, blocks of the call so far; {@code "removed"}, 1) and halfway through
   * each reclaim step ({@code "reclaim"}). Set before the writers start.
   */
  java.util.function.ObjIntConsumer<String> testHook;

  /** Tests only: called by a lookup after each optimistic attempt read, before it validates. */
  java.util.function.IntConsumer readHook;

  /** Tests only: called by a lookup right after it bound its pod list, before it reads a slot. */
  Runnable bindHook;

  private final LongAdder retries = new LongAdder(); // optimistic attempts that did not validate
  private final LongAdder locked = new LongAdder(); // lookups that took the read lock

  /** Creates an index; prefer {@link BlockIndex#inMemory(IndexConfig)}. */
  public InMemoryBlockIndex(IndexConfig config) {
    this(config, RECLAIM_SLOTS);
  }

  /** An index whose reclaimer examines {@code reclaimSlots} slots per write call (tests). */
  InMemoryBlockIndex(IndexConfig config, int reclaimSlots) {
    super(
        Objects.requireNonNull(config, "config").maxKeys(),
        8,
        EMPTY & 0xFFFFFFFFL,
        0x9E3779B97F4A7C15L,
        false,
        true);
    this.config = config;
    this.reclaimBudget = reclaimSlots;
    this.idLimit = (int) Math.min(ID_SPACE, 2L * config.maxPods());
    this.hasher =
        RequestKeyHasher.create(config.blockSize(), config.hashSeed(), config.modelName());
    for (Map.Entry<String, Double> e : config.tierWeights().entrySet()) {
      addTier(e.getKey(), e.getValue());
    }
    this.engine = new EngineKeyMap(config.maxEngineKeys());
    this.span = new StoreSpan(hasher, config.blockSize(), counters, partials, this::findParent);
    config.meterRegistry().ifPresent(this::bindMeters);
  }

  private static <V> LinkedHashMap<Long, V> boundedMap() {
    return new LinkedHashMap<>(256, 0.75f, true) {
      private static final long serialVersionUID = 1L;

      @Override
      protected boolean removeEldestEntry(Map.Entry<Long, V> eldest) {
        return size() > MAX_SIDE_ENTRIES;
      }
    };
  }

  private int addTier(String name, double weight) {
    seq.open();
    try {
      int id = tierCount++;
      tierNames[id] = name;
      tierWeights[id] = weight;
      tierIds.put(name, id);
      tierNameList = List.copyOf(Arrays.asList(tierNames).subList(0, id + 1));
      return id;
    } finally {
      seq.close();
    }
  }

  private int tierId(String medium) {
    String m = medium == null || medium.isEmpty() ? IndexConfig.GPU : medium;
    Integer id = tierIds.get(m);
    if (id != null) {
      return id;
    }
    String up = m.toUpperCase(Locale.ROOT);
    id = tierIds.get(up);
    if (id != null) {
      tierIds.put(m, id);
      return id;
    }
    if (tierCount >= MAX_TIERS) {
      warnOnce("tiers", "more than " + MAX_TIERS + " media; counting " + up + " as the last one");
      return MAX_TIERS - 1;
    }
    return addTier(up, config.tierWeight(up));
  }

  // ------------------------------------------------------------------ pods

  private int podIndex(String pod, boolean create) {
    int id = podIds.get(pod);
    if (id >= 0 || !create) {
      return id;
    }
    if (podIds.size() >= config.maxPods()) {
      warnOnce("max_pods", "index.maxPods (" + config.maxPods() + ") reached; dropping events");
      return -1;
    }
    podSeq.open();
    try {
      int p = newId();
      name(pod, p);
      return p;
    } finally {
      podSeq.close();
    }
  }

  private void name(String pod, int p) {
    podIds.put(pod, p);
    podNames[p] = pod;
    podState[p] = LIVE;
  }

  /**
   * A FREE pod id, the lowest (so that ids, and the lookups' bitsets, stay as narrow as the live
   * pods allow); when every id below {@code idLimit} is LIVE or DEAD, reclaims every stale entry
   * first (a walk of the table: see the class comment).
   */
  private int newId() {
    int p = nextBit(freeBits);
    if (p < 0) {
      if (podHigh < idLimit) {
        p = podHigh++;
        if (p >= podNames.length) {
          int n = podNames.length * 2;
          podNames = Arrays.copyOf(podNames, n);
          podTierCounts = Arrays.copyOf(podTierCounts, n * MAX_TIERS);
          podState = Arrays.copyOf(podState, n);
          staleLeft = Arrays.copyOf(staleLeft, n);
        }
        int words = (podHigh + 63) >>> 6;
        if (words > freeBits.length) {
          freeBits = Arrays.copyOf(freeBits, Math.max(words, 2 * freeBits.length));
          deadBits = Arrays.copyOf(deadBits, freeBits.length);
        }
        return p;
      }
      forceReclaim();
      p = nextBit(freeBits);
      if (p < 0) {
        throw new IllegalStateException("kvindex: no pod id free after reclaiming stale entries");
      }
    }
    freeBits[p >>> 6] &= ~(1L << p);
    return p;
  }

  private static int nextBit(long[] bits) {
    for (int w = 0; w < bits.length; w++) {
      if (bits[w] != 0) {
        return (w << 6) + Long.numberOfTrailingZeros(bits[w]);
      }
    }
    return -1;
  }

  /** The entries pod id {@code p} holds, all tiers. */
  private long podTotal(int p) {
    long total = 0;
    for (int t = 0; t < MAX_TIERS; t++) {
      total += podTierCounts[p * MAX_TIERS + t];
    }
    return total;
  }

  /**
   * Retires pod id {@code p} (its name was unmapped): its {@code total} entries become stale, no
   * longer counted in {@link #entries} and invisible to lookups; the id is DEAD until the last of
   * them is reclaimed, then FREE.
   */
  private void retire(int p, long total) {
    podNames[p] = null;
    if (total == 0) {
      free(p);
      return;
    }
    podState[p] = DEAD;
    deadBits[p >>> 6] |= 1L << p;
    deadIds++;
    retirements++;
    staleLeft[p] = total;
    entries -= total;
    staleEntries += total;
  }

  private void free(int p) {
    podState[p] = FREE;
    freeBits[p >>> 6] |= 1L << p;
  }

  private static int entry(int pod, int group, int tier) {
    return pod << 12 | group << 4 | tier;
  }

  private static int podOf(int e) {
    return e >>> 12;
  }

  private static int tierOf(int e) {
    return e & 0xF;
  }

  // ------------------------------------------------------------------ write path

  @Override
  public void blockStored(String podId, KvEvent.BlockStored event) {
    Objects.requireNonNull(podId, "podId");
    long[] engineHashes = event.blockHashes().values();
    int groupIdx = event.groupIndex();
    counters.eventStored();
    int n = engineHashes.length;
    if (n == 0 || !counters.validGroup(groupIdx, n)) {
      return;
    }
    int[] tokenIds = event.tokenIds();
    int blockSize = event.blockSize();
    long stamp = beginWrite();
    try {
      int pod = podIndex(podId, true);
      if (pod < 0) {
        drop("max_pods", n);
        return;
      }
      int tier = tierId(event.medium());
      if (tokenIds.length == 0 || blockSize <= 0) {
        tierUpdate(pod, engineHashes, tier, groupIdx);
        return;
      }
      storeWithTokens(
          pod,
          engineHashes,
          event.hasParent(),
          event.parentHash(),
          tokenIds,
          blockSize,
          event.effectiveLoraName(),
          tier,
          groupIdx,
          event.extraKeys());
    } finally {
      endWrite(stamp);
    }
  }

  private void tierUpdate(int pod, long[] hashes, int tier, int group) {
    for (long h : hashes) {
      long ek = engineKey(h, group);
      int es = engine.find(ek);
      if (es < 0) {
        drop("unknown_engine_key", 1);
        continue;
      }
      engine.touch(es);
      if (engine.meta(es) == EngineKeyMap.MULTI) {
        long[] rks = multi.get(ek);
        if (rks == null) {
          drop("unknown_engine_key", 1);
          continue;
        }
        for (long rk : rks) {
          addEntry(rk, entry(pod, group, tier));
        }
      } else {
        addEntry(engine.value(es), entry(pod, group, tier));
      }
      counters.blocksStored(1);
    }
  }

  private void storeWithTokens(
      int pod,
      long[] hashes,
      boolean hasParent,
      long parentHash,
      int[] tokens,
      int bs,
      String lora,
      int tier,
      int group,
      List<?> extraKeys) {
    int hashed = span.begin(hashes, hasParent, parentHash, tokens, bs, lora, group, extraKeys);
    if (hashed == 0) {
      return;
    }
    long[] rk = span.keys();
    int en = entry(pod, group, tier);
    int first = span.alignedStart();
    if (first >= 0) {
      // the common case: engine block = index block, nothing pending (no divisions per block)
      // touch every block's home slots first: independent loads the CPU overlaps, so the
      // updates below find their lines in cache instead of waiting on each miss in turn
      long touch = 0;
      for (int i = 0; i < hashed; i++) {
        touch += peek(rk[first + i]);
        touch += engine.peek(engineKey(hashes[i], group));
      }
      scratch.get().sink += (int) touch;
      for (int i = 0; i < hashed; i++) {
        addEntry(rk[first + i], en);
        engineKeyStored(engine.put(engineKey(hashes[i], group), rk[first + i], StoreSpan.BOUNDARY));
        if (testHook != null) {
          testHook.accept("stored", i + 1);
        }
      }
      counters.blocksStored(hashed);
      span.finish();
      return;
    }
    int stored = 0;
    for (int i = 0; i < hashed; i++) {
      if (!span.locate(i)) {
        continue; // its index block is not complete yet (pending)
      }
      int from = span.from();
      int to = span.to();
      for (int j = from; j <= to; j++) {
        addEntry(rk[j], en);
      }
      long ek = engineKey(hashes[i], group);
      long evicted = engine.put(ek, rk[to], span.kind());
      if (span.kind() == StoreSpan.MULTI) {
        multi.put(ek, Arrays.copyOfRange(rk, from, to + 1));
      }
      engineKeyStored(evicted);
      stored++;
    }
    counters.blocksStored(stored);
    span.finish();
  }

  /** Counts the engine key {@code put} evicted (0: none) and forgets its request keys. */
  private void engineKeyStored(long evicted) {
    if (evicted != 0) {
      counters.evicted("max_engine_keys", 1);
      multi.remove(evicted);
    }
  }

  /** The mapping of a parent's engine key (see {@link StoreSpan.Mappings}). */
  private int findParent(long ek, long[] out) {
    int es = engine.find(ek);
    if (es < 0) {
      return -1;
    }
    int kind = engine.meta(es);
    if (kind != EngineKeyMap.MID) {
      out[0] = engine.value(es);
      engine.touch(es);
    }
    return kind;
  }

  @Override
  public void blockRemoved(String podId, KvEvent.BlockRemoved event) {
    Objects.requireNonNull(podId, "podId");
    long[] engineHashes = event.blockHashes().values();
    String medium = event.medium();
    int groupIdx = event.groupIndex();
    counters.eventRemoved();
    if (!counters.validGroup(groupIdx, engineHashes.length)) {
      return;
    }
    long stamp = beginWrite();
    try {
      int pod = podIndex(podId, false);
      if (pod < 0) {
        drop("unknown_pod", engineHashes.length);
        return;
      }
      int tier = tierId(medium);
      int e = entry(pod, groupIdx, tier);
      for (long h : engineHashes) {
        removeBlock(engineKey(h, groupIdx), e);
        if (testHook != null) {
          testHook.accept("removed", 1);
        }
      }
    } finally {
      endWrite(stamp);
    }
  }

  /** Removes entry {@code e} from the request keys of engine key {@code ek}. */
  private void removeBlock(long ek, int e) {
    int es = engine.find(ek);
    if (es < 0) {
      if (!partials.contains(ek)) {
        drop("unknown_engine_key", 1);
      }
      return;
    }
    if (engine.meta(es) == EngineKeyMap.MULTI) {
      long[] rks = multi.get(ek);
      if (rks != null) {
        for (long rk : rks) {
          removeEntry(rk, e);
        }
      }
    } else {
      removeEntry(engine.value(es), e);
    }
    counters.blocksRemoved(1);
  }

  @Override
  public void allBlocksCleared(String podId) {
    Objects.requireNonNull(podId, "podId");
    counters.eventCleared();
    sweep(podId, false);
  }

  @Override
  public void removePod(String podId) {
    Objects.requireNonNull(podId, "podId");
    counters.eventPodRemoved();
    sweep(podId, true);
  }

  /**
   * Drops every entry of {@code podId} if known, and with {@code forget} the pod itself: O(1) plus
   * one reclaim step. The pod's id is retired (its entries become stale at once) and, unless {@code
   * forget}, the pod gets a fresh id.
   */
  private void sweep(String podId, boolean forget) {
    long stamp = beginWrite();
    try {
      int pod = podIndex(podId, false);
      if (pod < 0) {
        return;
      }
      long total = podTotal(pod);
      if (total == 0 && !forget) {
        return; // nothing to invalidate: the pod keeps its id
      }
      if (forget) {
        podSeq.open();
        try {
          podIds.remove(podId);
          retire(pod, total);
        } finally {
          podSeq.close();
        }
      } else {
        // a clear: the pod keeps its place in PodIds, its id changes in one write (a lookup reads
        // the old id or the new one, never a torn map) and the change is logged, so a lookup
        // validates it only if it asked about this pod
        retire(pod, total);
        int fresh = newId(); // may be the same id, if a forced reclamation just freed it
        podNames[fresh] = podId;
        podState[fresh] = LIVE;
        podIds.replace(podId, fresh);
      }
    } finally {
      endWrite(stamp);
    }
  }

  /**
   * Takes the write lock, first giving way to lookups waiting for the read lock (up to {@value
   * #YIELD_NANOS} ns): {@link StampedLock} lets a writer take the lock ahead of queued readers, so
   * two shard threads writing back to back could keep a lookup out for as long as they have work.
   */
  private long beginWrite() {
    if (waitingReaders.get() != 0) {
      long deadline = System.nanoTime() + YIELD_NANOS;
      do {
        Thread.yield();
      } while (waitingReaders.get() != 0 && System.nanoTime() - deadline < 0);
    }
    return lock.writeLock();
  }

  /** Takes the read lock; while it waits, writers give way ({@link #beginWrite}). */
  private long beginRead() {
    long stamp = lock.tryReadLock();
    if (stamp != 0) {
      return stamp;
    }
    waitingReaders.incrementAndGet();
    try {
      return lock.readLock();
    } finally {
      waitingReaders.decrementAndGet();
    }
  }

  /** Ends a write: one reclaim step if stale entries wait, then releases the write lock. */
  private void endWrite(long stamp) {
    try {
      if (deadIds != 0) {
        reclaim(reclaimStep());
      }
    } finally {
      lock.unlockWrite(stamp);
    }
  }

  // ------------------------------------------------------------------ lazy reclamation

  /**
   * The slots the reclaimer examines at the end of this write call: paced by how much is waiting,
   * from {@value #RECLAIM_MIN} to {@code reclaimBudget} ({@value #RECLAIM_SLOTS}). A round of the
   * table frees the ids retired before it began, whatever its speed; at full speed the reclaimer
   * went round many times a second under a storm of clears and took most of the writers' time
   * (measured: 59% of the shard threads' samples at 1,000 pods). So its speed follows the pressure,
   * the larger of: ids awaiting reclamation against {@code max(64, live pods / 2)} (they widen
   * every bitset by pod id, and running out of ids forces a walk), and stale entries against {@code
   * max(4096, 2 x live entries)} (memory). Full speed once the ids awaiting reclamation take half
   * the room left to them, and in a table of at most that many slots.
   */
  private int reclaimStep() {
    int live = podIds.size();
    long room = (long) idLimit - live;
    if (2L * deadIds >= room || cap <= reclaimBudget) {
      return reclaimBudget; // urgent, or a small table: a round at once costs little
    }
    double pressure =
        Math.max(
            deadIds / (double) Math.max(64, live / 2),
            staleEntries / (double) Math.max(4096, 2 * entries));
    int step = (int) Math.min(reclaimBudget, reclaimBudget * pressure);
    return Math.max(step, Math.min(RECLAIM_MIN, reclaimBudget));
  }

  /**
   * Examines up to {@code budget} slots from the reclaimer's cursor, dropping the entries of DEAD
   * pod ids (and keys left with none). The cursor goes round the table for as long as stale entries
   * are left; keys that other deletions shift past it are found on a later round, or when an insert
   * or removal touches them, or when eviction samples them.
   */
  private void reclaim(int budget) {
    int i = reclaimAt;
    for (int n = 0; n < budget && deadIds != 0; n++) {
      if (i >= cap) {
        i = 0;
      }
      reclaimSlots++;
      if (testHook != null && n == budget / 2) {
        testHook.accept("reclaim", n);
      }
      if (tab[2 * i] != 0) {
        int c = cell(i);
        if (c < 0 && !isPair(c) && c != EMPTY) {
          n += sets[index(c)].n >>> 2; // a set costs about its entries
        }
        if (purge(i)) {
          continue; // a later key may have moved into i
        }
      }
      i++;
    }
    reclaimAt = i;
  }

  /**
   * Reclaims every stale entry now: a walk of the whole table under the write lock. Only when a pod
   * needs an id and every id below {@code idLimit} (twice {@code maxPods}) is live or awaiting
   * reclamation: more clears than that within one round of the reclaimer. Counted.
   */
  private void forceReclaim() {
    forcedReclaims.increment();
    warnOnce(
        "forced_reclaim",
        "every pod id (2 x index.maxPods = "
            + idLimit
            + ") is live or awaiting reclamation (many clears within one round of the lazy"
            + " reclaimer); reclaiming now, a walk of the table under the write lock");
    int i = 0;
    while (i < cap && deadIds != 0) {
      reclaimSlots++;
      if (tab[2 * i] != 0 && purge(i)) {
        continue;
      }
      i++;
    }
  }

  private boolean dead(int e) {
    return podState[podOf(e)] == DEAD;
  }

  /**
   * Drops the stale entries of the key in {@code slot} (only called while some id is DEAD); returns
   * true if the key was left with none and deleted (a later key may have moved into {@code slot}).
   */
  private boolean purge(int slot) {
    int c = cell(slot);
    if (c >= 0) {
      if (!dead(c)) {
        return false;
      }
      open(slot);
      countRemoved(c);
    } else if (isPair(c)) {
      int r = index(c);
      int a = pairs[2 * r];
      int b = pairs[2 * r + 1];
      boolean da = dead(a);
      boolean db = dead(b);
      if (!da && !db) {
        return false;
      }
      open(slot);
      if (da) {
        countRemoved(a);
      }
      if (db) {
        countRemoved(b);
      }
      if (!(da && db)) {
        setCell(slot, da ? b : a);
        freePair(r);
        close(slot);
        return false;
      }
      freePair(r);
    } else if (c == EMPTY) {
      return false;
    } else {
      int si = index(c);
      PodSet ps = sets[si];
      if (ps.purgedAt == retirements) {
        return false; // no pod id was retired since this set was last purged
      }
      ps.purgedAt = retirements;
      if (ps.row >= 0
          ? !podBits.intersects(ps.row, deadBits, deadBits.length)
          : !ps.anyDead(podState, DEAD)) {
        return false;
      }
      open(slot);
      ps.removeDead(podState, DEAD, countRemovedFn);
      if (ps.n != 0) {
        close(slot);
        return false;
      }
      freeSet(si);
    }
    setCell(slot, EMPTY);
    deleteSlot(slot); // closes it
    return true;
  }

  /** Whether every entry of the key with cell {@code c} is stale. */
  private boolean allDead(int c) {
    if (c >= 0) {
      return dead(c);
    }
    if (isPair(c)) {
      return dead(pairs[2 * index(c)]) && dead(pairs[2 * index(c) + 1]);
    }
    return c != EMPTY && sets[index(c)].allDead(podState, DEAD);
  }

  /** Stale entries not reclaimed yet (for tests and the gauge). */
  long staleEntries() {
    return staleEntries;
  }

  /** Slots the reclaimer examined so far (for tests). */
  long reclaimSlots() {
    return reclaimSlots;
  }

  /** Whether a writer holds the write lock (for tests). */
  boolean writeLocked() {
    return lock.isWriteLocked();
  }

  /** Lookups that took the read lock after their optimistic attempts (for tests). */
  long lockedLookups() {
    return locked.sum();
  }

  /** Pod ids handed out so far (1 + the highest; for tests). */
  int podIdHigh() {
    return podHigh;
  }

  // ------------------------------------------------------------------ table

  private int cell(int i) {
    return (int) tab[2 * i + 1];
  }

  private void setCell(int i, int c) {
    long v = tab[2 * i + 1];
    tab[2 * i + 1] = (v & ~0xFFFFFFFFL) | (c & 0xFFFFFFFFL);
  }

  @Override
  void relayout(boolean begin) {
    if (begin) {
      seq.open();
    } else {
      seq.close();
    }
  }

  @Override
  int stamp(int slot) {
    long v = tab[2 * slot + 1];
    if (deadIds != 0 && allDead((int) v)) {
      return tick + 1; // only stale entries: the oldest possible, evicted first
    }
    return (int) (v >>> 32) & 0xFF;
  }

  private void touchSlot(int i) {
    tab[2 * i + 1] = withStamp(tab[2 * i + 1], tick);
  }

  /** The value word {@code v} (cell in the low 32 bits) with stamp {@code stamp} (version kept). */
  private static long withStamp(long v, int stamp) {
    return (v & ~STAMP_BITS) | (long) (stamp & 0xFF) << 32;
  }

  /**
   * The value word of the key in {@code slot} of table {@code t}, a lookup hit: its stamp is set to
   * {@code now} first, written only if it changes (the line is already in cache from the probe).
   */
  private static long hit(long[] t, int slot, byte now) {
    long cv = t[2 * slot + 1];
    refresh(t, slot, cv, now);
    return cv;
  }

  /**
   * Sets the stamp of the key in {@code slot} to {@code now} if it differs, with a compare-and-set
   * of its value word {@code cv}: a lookup may run beside a writer (optimistic reads), and a plain
   * write could undo the writer's change of the same word. A failed compare-and-set leaves the
   * stamp as it is (an approximate LRU); nothing else in the word is changed.
   */
  private static void refresh(long[] t, int slot, long cv, byte now) {
    if ((byte) (cv >>> 32) != now) {
      WORDS.compareAndSet(t, 2 * slot + 1, cv, withStamp(cv, now));
    }
  }

  /** Evicts the key in {@code slot} (the table is full): drops its entries. */
  @Override
  void evicting(int slot) {
    if (dropAllEntries(slot) != 0) { // a key with only stale entries is reclaimed, not evicted
      counters.evicted("max_keys", 1);
    }
  }

  /** Drops every entry of the key in {@code slot}; returns how many were live. */
  private int dropAllEntries(int slot) {
    int c = cell(slot);
    int live = 0;
    if (c >= 0) {
      live = countRemoved(c);
    } else if (isPair(c)) {
      int r = index(c);
      live = countRemoved(pairs[2 * r]) + countRemoved(pairs[2 * r + 1]);
      freePair(r);
    } else if (c != EMPTY) {
      PodSet ps = sets[index(c)];
      for (int i = 0; i < ps.n; i++) {
        live += countRemoved(ps.e[i]);
      }
      freeSet(index(c));
    }
    setCell(slot, EMPTY);
    return live;
  }

  /**
   * Counts entry {@code e} out: 1 if it was live; 0 if stale (reclaimed: its DEAD id becomes FREE
   * with its last entry).
   */
  private int countRemoved(int e) {
    int p = podOf(e);
    podTierCounts[p * MAX_TIERS + tierOf(e)]--;
    if (deadIds == 0 || podState[p] != DEAD) {
      entries--;
      return 1;
    }
    staleEntries--;
    if (--staleLeft[p] == 0) {
      deadBits[p >>> 6] &= ~(1L << p);
      deadIds--;
      free(p);
    }
    return 0;
  }

  private void countAdded(int e) {
    podTierCounts[podOf(e) * MAX_TIERS + tierOf(e)]++;
    entries++;
  }

  // cells: an entry (>= 0), PAIR | index into pairs[] (two entries, oldest first), SET | index
  // into sets[] (a PodSet), or EMPTY (no key)

  private static boolean isPair(int cell) {
    return (cell & KIND_MASK) == PAIR;
  }

  private static int index(int cell) {
    return cell & ~KIND_MASK;
  }

  private int allocPair(int a, int b) {
    int r;
    if (pairFree >= 0) {
      r = pairFree;
      pairFree = pairs[2 * r];
    } else {
      r = pairTop++;
      if (2 * r + 1 >= pairs.length) {
        pairs = Arrays.copyOf(pairs, grow(pairs.length, 2 * r + 2));
      }
    }
    pairs[2 * r] = a;
    pairs[2 * r + 1] = b;
    return PAIR | r;
  }

  private void freePair(int r) {
    pairs[2 * r] = pairFree;
    pairFree = r;
  }

  private int allocSet(PodSet ps) {
    int r;
    if (setFreeCount > 0) {
      r = setFree[--setFreeCount];
    } else {
      r = setTop++;
      if (r >= sets.length) {
        sets = Arrays.copyOf(sets, grow(sets.length, r + 1));
      }
    }
    sets[r] = ps;
    ps.bind(r);
    return SET | r;
  }

  private void freeSet(int r) {
    sets[r].release();
    sets[r] = null;
    if (setFreeCount == setFree.length) {
      setFree = Arrays.copyOf(setFree, grow(setFree.length, setFreeCount + 1));
    }
    setFree[setFreeCount++] = r;
  }

  private static int grow(int length, int need) {
    long n = Math.max((long) need, length + (length >> 1) + 16);
    if (n > MAX_POOL) {
      throw new IllegalStateException("kvindex: more than " + MAX_POOL + " multi-pod keys");
    }
    return (int) n;
  }

  /**
   * Adds entry {@code e} to key {@code rk}. The key's slot is open (its version odd) while its cell
   * and what the cell points to change; a key that already holds {@code e} only has its stamp
   * refreshed (not a change a lookup can see).
   */
  private void addEntry(long rk, int e) {
    int slot = find(rk);
    if (slot >= 0 && deadIds != 0 && full(cell(slot)) && purge(slot)) {
      slot = -1; // stale entries are dropped before they could cost a live one its place
    }
    if (slot < 0) {
      slot = insert(rk, withStamp(EMPTY, tick)); // returned open
      setCell(slot, e);
      close(slot);
      countAdded(e);
      return;
    }
    touchSlot(slot);
    int c = cell(slot);
    int max = config.maxPodsPerKey();
    if (c >= 0) {
      if (c == e) {
        return;
      }
      open(slot);
      if (max <= 1) {
        dropOldest(c);
        setCell(slot, e);
      } else {
        setCell(slot, allocPair(c, e));
      }
    } else if (isPair(c)) {
      int r = index(c);
      int a = pairs[2 * r];
      int b = pairs[2 * r + 1];
      if (a == e || b == e) {
        return;
      }
      open(slot);
      if (max <= 2) {
        dropOldest(a);
        pairs[2 * r] = b;
        pairs[2 * r + 1] = e;
      } else {
        PodSet ps = new PodSet(podBits);
        ps.add(a, podHigh);
        ps.add(b, podHigh);
        ps.add(e, podHigh);
        setCell(slot, allocSet(ps));
        freePair(r);
      }
    } else if (c == EMPTY) { // not left behind by any write; handled for safety
      open(slot);
      setCell(slot, e);
    } else {
      PodSet ps = sets[index(c)];
      if (ps.indexOf(e) >= 0) {
        return;
      }
      open(slot);
      if (ps.n >= max) {
        int old = ps.e[0];
        ps.removeAt(0);
        dropOldest(old);
      }
      ps.add(e, podHigh);
    }
    close(slot);
    countAdded(e);
  }

  /** The entries of the key with cell {@code c} (an upper bound of the pods holding it). */
  private int holders(int c) {
    if (c >= 0) {
      return 1;
    }
    if (isPair(c)) {
      return 2;
    }
    return c == EMPTY ? 0 : sets[index(c)].n;
  }

  /** Whether the key with cell {@code c} holds {@code maxPodsPerKey} entries (live or stale). */
  private boolean full(int c) {
    int max = config.maxPodsPerKey();
    if (c >= 0) {
      return max <= 1;
    }
    if (isPair(c)) {
      return max <= 2;
    }
    return c != EMPTY && sets[index(c)].n >= max;
  }

  private void dropOldest(int e) {
    countRemoved(e);
    counters.evicted("max_pods_per_key", 1);
  }

  /** Removes entry {@code e} from key {@code rk} (its slot open while it changes). */
  private void removeEntry(long rk, int e) {
    int slot = find(rk);
    if (slot < 0) {
      return;
    }
    int c = cell(slot);
    boolean empty;
    if (c >= 0) {
      if (c != e) {
        return;
      }
      open(slot);
      empty = true;
    } else if (isPair(c)) {
      int r = index(c);
      int a = pairs[2 * r];
      int b = pairs[2 * r + 1];
      if (a != e && b != e) {
        return;
      }
      open(slot);
      setCell(slot, a == e ? b : a);
      freePair(r);
      empty = false;
    } else {
      PodSet ps = sets[index(c)];
      int i = ps.indexOf(e);
      if (i < 0) {
        return;
      }
      open(slot);
      ps.removeAt(i);
      empty = ps.n == 0;
      if (empty) {
        freeSet(index(c));
      }
    }
    countRemoved(e);
    if (empty) {
      deleteSlot(slot); // closes it
    } else {
      close(slot);
    }
  }

  // ------------------------------------------------------------------ read path

  @Override
  public RequestKeyHasher keyHasher() {
    return hasher;
  }

  @Override
  public PrefixMatch lookup(long[] requestKeys, int numKeys, List<String> pods, PrefixMatch into) {
    Objects.requireNonNull(requestKeys, "requestKeys");
    Objects.requireNonNull(pods, "podIds");
    Objects.requireNonNull(into, "into");
    Objects.checkFromIndexSize(0, numKeys, requestKeys.length);
    lookups.increment();
    int podCount = pods.size();
    Scratch s = scratch.get();
    for (int attempt = 0; attempt < OPTIMISTIC_ATTEMPTS; attempt++) {
      if (attempt > 0) {
        Thread.onSpinWait(); // not yield(): on a busy machine it gives the core away for ms
      }
      long stamp = lock.tryOptimisticRead(); // 0 while a writer holds the lock
      long seq0 = seq.read();
      long pods0 = podSeq.read();
      if (((seq0 | pods0) & 1) != 0) {
        retries.increment();
        continue; // pods, tiers or arrays are being replaced
      }
      // with no writer in, the lock's stamp validates the whole lookup; else (or once that
      // failed) every slot read is recorded and validated by its version
      boolean checked = stamp == 0 || attempt > 0;
      long[] t = tab;
      boolean complete;
      try {
        complete = run(requestKeys, numKeys, pods, podCount, into, s, checked, t, pods0);
      } catch (RuntimeException torn) { // what a concurrent write tore (an index out of range...)
        s.forget();
        retries.increment();
        continue;
      }
      if (readHook != null) {
        readHook.accept(attempt);
      }
      if (stamp != 0 && lock.validate(stamp)) {
        return into; // no write began or ended during the lookup
      }
      if (complete && checked && validate(s, t, seq0, pods0)) {
        return into; // nothing the lookup read changed while it read: linearizable at validation
      }
      retries.increment();
      if (s.bindTorn || seq.read() != seq0) {
        s.forget(); // its binding of pods may have read ids while they changed
      } else {
        s.clean();
      }
    }
    // the writers kept changing what this lookup reads: take the read lock (writers give way)
    locked.increment();
    long stamp = beginRead();
    try {
      run(requestKeys, numKeys, pods, podCount, into, s, false, tab, -1);
    } finally {
      lock.unlockRead(stamp);
    }
    return into;
  }

  /**
   * One attempt of a lookup into {@code into}. {@code checked}: probe table {@code t} recording
   * each slot read with its value word ({@link #probe}) for {@link #validate}; returns false when a
   * slot read was being changed, or (without the lock: {@code pods0} the pods' {@link Seq}, else
   * -1) when pods' ids changed while the pod list was bound to them (the attempt cannot validate).
   */
  private boolean run(
      long[] requestKeys,
      int numKeys,
      List<String> pods,
      int podCount,
      PrefixMatch into,
      Scratch s,
      boolean checked,
      long[] t,
      long pods0) {
    List<String> tierNames = tierNameList;
    writer.reset(into, podCount, numKeys, tierNames);
    s.checkedCount = 0;
    s.absentHome = -1;
    s.torn = false;
    s.bindTorn = false;
    int activeCount = s.bind(podIds, podHigh, pods, podCount);
    if (bindHook != null) {
      bindHook.run();
    }
    if (pods0 >= 0) {
      VarHandle.acquireFence(); // the binding's reads before the check
      if (podSeq.read() != pods0) {
        s.bindTorn = true; // bound while pods' ids changed: it may hold wrong ids
        return false;
      }
    }
    // over a big list, record the pods that match when they can only be few (the first
    // block's holders are at most a quarter of the list): finish then visits only them; up
    // to 128 pods, or with duplicates, a pass over the list
    s.recording = s.words > 2 && !s.duplicates;
    s.touchedCount = 0;
    if (activeCount > 0) {
      if (s.words <= 2) {
        lookupTwoWords(requestKeys, numKeys, activeCount, s, into, checked, t);
      } else {
        int found = resolve(requestKeys, numKeys, s, checked, t);
        if (!s.torn) {
          scan(found, activeCount, s, into);
        }
      }
    }
    if (s.torn) {
      return false;
    }
    finish(pods, podCount, s, into, tierNames.size());
    return true;
  }

  /**
   * Whether none of the pods bound in {@code s} changed id since it bound them (the pods' {@link
   * Seq} is even: every change since is complete and logged in {@link PodIds}).
   */
  private boolean noneChanged(Scratch s) {
    long now = podIds.version();
    VarHandle.loadLoadFence(); // the log entries up to now were written before it
    long from = s.boundVersion;
    java.util.HashMap<String, Integer> positions = s.positions;
    if (now - from >= PodIds.LOG || positions == null) {
      return now == from; // too many changes to check, or a list with duplicates: no checking
    }
    for (long v = from + 1; v <= now; v++) {
      if (positions.containsKey(podIds.changed(v))) {
        return false;
      }
    }
    return true;
  }

  /**
   * The slot of {@code k} in table {@code t} for a lookup without the lock, or -1: each slot's
   * value word is read before its key, so that the version read covers the key. A hit leaves its
   * word in {@code s.word}; a miss records its probe (first and last slot, and the sum of their
   * versions) for {@link #validate}. A slot being changed (odd version) where it matters marks the
   * attempt torn.
   */
  private static int probe(long[] t, long k, Scratch s) {
    int c = t.length >>> 1;
    int i = home(k, c);
    int first = i;
    long sum = 0;
    long odd = 0;
    for (int n = 0; n < c; n++) {
      long w = t[2 * i + 1];
      VarHandle.loadLoadFence();
      long x = t[2 * i];
      if (x == k) {
        if (changing(w)) {
          s.torn = true;
        }
        s.word = w;
        return i;
      }
      sum += w >>> 40;
      odd |= w;
      if (x == 0) {
        s.absentHome = first;
        s.absentEnd = i;
        s.absentSum = sum;
        if (changing(odd)) {
          s.torn = true;
        }
        return -1;
      }
      if (++i == c) {
        i = 0;
      }
    }
    s.torn = true; // no empty slot seen: torn by a concurrent write
    return -1;
  }

  /**
   * Whether nothing a checked attempt read changed since: the layout (the {@link Seq} still at
   * {@code seq0}, the table still {@code t}), the ids of the pods it was asked about (none of them
   * joined, was cleared or removed since the binding: other pods' changes do not touch what it
   * read), every slot it found a key in (same version), and the probe of the key it missed (same
   * versions). The reads are then those of the index at the start of this validation (each one
   * unchanged from when it was made until then).
   */
  private boolean validate(Scratch s, long[] t, long seq0, long pods0) {
    VarHandle.acquireFence(); // the reads above before the checks below
    if (seq.read() != seq0 || tab != t) {
      return false;
    }
    // joins and removals move PodIds' entries with the pods' Seq odd; a clear changes one id in
    // place without it, so the log of changed pods is checked whatever the Seq says: a lookup that
    // bound an asked pod's old id may have read some of its keys after the reclaimer purged them
    long pods = podSeq.read();
    if ((pods != pods0 && (pods & 1) != 0) || !noneChanged(s)) {
      return false;
    }
    int[] slots = s.slotOf;
    long[] words = s.wordOf;
    for (int b = 0, n = s.checkedCount; b < n; b++) {
      if (((t[2 * slots[b] + 1] ^ words[b]) & ~BELOW_VERSION) != 0) {
        return false;
      }
    }
    int i = s.absentHome;
    if (i >= 0) {
      int c = t.length >>> 1;
      long sum = 0;
      while (true) {
        sum += t[2 * i + 1] >>> 40;
        if (i == s.absentEnd) {
          break;
        }
        if (++i == c) {
          i = 0;
        }
      }
      return sum == s.absentSum;
    }
    return true;
  }

  /**
   * Phase 1: for the request's leading run of known keys, each key's cell into {@code s.cellOf}
   * and, for a dense set, its {@link PodBits} row into {@code s.rowOf} ({@code row << 1 | 1} if
   * some of its entries are off GPU; -1 for no row). Returns the run's length. The probes of
   * different keys are independent, so the CPU overlaps their misses here, while in phase 2 each
   * block would wait on its own chain of loads. Stamps are refreshed on the line the probe brought
   * in (only when they change). Only primitives are stored: a reference store into a long-lived
   * array costs a GC card-mark barrier (with a fence) per key.
   */
  private int resolve(long[] requestKeys, int numKeys, Scratch s, boolean checked, long[] t) {
    int[] cellOf = s.cells(numKeys);
    int[] rowOf = s.rowOf;
    int[] slots = s.slotOf;
    long[] words = s.wordOf;
    int[] desc = podBits.descriptors();
    PodSet[] ss = sets;
    byte now = (byte) tick;
    int touch = 0;
    int n = 0;
    while (n < numKeys) {
      int sl;
      long cv;
      if (checked) {
        sl = probe(t, requestKeys[n], s);
        if (sl < 0 || s.torn) {
          break;
        }
        cv = s.word;
        slots[n] = sl;
        words[n] = cv;
        refresh(t, sl, cv, now);
      } else {
        sl = find(requestKeys[n]);
        if (sl < 0) {
          break;
        }
        cv = hit(t, sl, now);
      }
      int c = (int) cv;
      int d = -1;
      if ((c & KIND_MASK) == SET) {
        d = desc[index(c)];
        if (d < 0) {
          touch += ss[index(c)].e[0]; // a small set: phase 2 reads its entries
        }
      }
      cellOf[n] = c;
      rowOf[n] = d;
      n++;
    }
    if (checked) {
      s.checkedCount = n;
    }
    s.sink += touch;
    return n;
  }

  /**
   * Phase 2: scans the {@code n} resolved blocks in order with the "active pods" bitset of {@code
   * s} (bound by {@link Scratch#bind}); a pod drops out at its first missing block, recording in
   * {@code s.matchedOf} how many blocks it matched, and the scan stops when none is left. Blocks
   * held on tiers other than GPU are counted into {@code into} as the scan goes.
   */
  private void scan(int n, int activeCount, Scratch s, PrefixMatch into) {
    if (s.recording && n > 0 && holders(s.cellOf[0]) > s.boundCount >>> 2) {
      s.recording = false; // the first block's holders may all match: finish takes a pass
    }
    int[] rowOf = s.rowOf;
    long[] active = s.active;
    int words = s.words;
    int[] matchedOf = s.matchedOf;
    boolean rec = s.recording;
    long[] dense = podBits.bits();
    int stride = podBits.stride();
    // fast path: a row of pod bits, every entry on GPU, rows as wide as the active set
    boolean wide = words <= stride;
    int left = activeCount;
    int b = 0;
    for (; b < n; b++) {
      int v = rowOf[b];
      if ((v & 1) == 0 && wide) {
        int base = (v >>> 1) * 2 * stride;
        for (int w = 0; w < words; w++) {
          long a = active[w];
          long nx = a & dense[base + w];
          if (nx != a) {
            left -= rec ? s.dropped(a & ~nx, w, b) : dropped(a & ~nx, w, b, matchedOf);
            active[w] = nx;
          }
        }
      } else {
        left = step(b, v, left, s, dense, stride, into);
      }
      if (left == 0) {
        return;
      }
    }
    // pods that hold every resolved block
    for (int w = 0; w < words; w++) {
      long a = active[w];
      if (a != 0) {
        if (rec) {
          s.dropped(a, w, b);
        } else {
          dropped(a, w, b, matchedOf);
        }
      }
      active[w] = 0;
    }
  }

  /**
   * Writes the two words of pod bits of the key with cell {@code c} (at most 128 pods) into {@code
   * rows[at]} and {@code rows[at + 1]}; returns 1 if some of its entries are off GPU, else 0.
   */
  private int rowOf(int c, long[] rows, int at) {
    long r0 = 0;
    long r1 = 0;
    int off;
    if (c >= 0) {
      int p = podOf(c);
      r0 = p < 64 ? 1L << p : 0;
      r1 = p < 64 ? 0 : 1L << p;
      off = tierOf(c);
    } else if (isPair(c)) {
      int ea = pairs[2 * index(c)];
      int eb = pairs[2 * index(c) + 1];
      int pa = podOf(ea);
      int pb = podOf(eb);
      r0 = (pa < 64 ? 1L << pa : 0) | (pb < 64 ? 1L << pb : 0);
      r1 = (pa < 64 ? 0 : 1L << pa) | (pb < 64 ? 0 : 1L << pb);
      off = tierOf(ea) | tierOf(eb);
    } else {
      PodSet ps = sets[index(c)];
      if (ps.row >= 0) {
        long[] dense = podBits.bits();
        int stride = podBits.stride();
        int base = ps.row * 2 * stride;
        r0 = dense[base];
        r1 = stride > 1 ? dense[base + 1] : 0;
      } else {
        int[] es = ps.e;
        for (int k = 0; k < ps.n; k++) {
          int p = podOf(es[k]);
          if (p < 64) {
            r0 |= 1L << p;
          } else {
            r1 |= 1L << p;
          }
        }
      }
      off = ps.nonGpu;
    }
    rows[at] = r0;
    rows[at + 1] = r1;
    return off == 0 ? 0 : 1;
  }

  /**
   * The lookup for at most 128 pods (two words of pod bits), in one pass: each key is probed and
   * intersected with the active set, held in registers, at once. A key with a packed row whose
   * entries are all on GPU (the common multi-pod case) costs a probe, a descriptor and two words; a
   * cell, pair or small set has its two words built by {@link #rowOf}; keys with entries off GPU go
   * through {@link #step}. (With two words there is little per-key work for a separate resolve
   * phase to overlap: one pass measured faster than {@link #resolve} + {@link #scan}.)
   */
  private void lookupTwoWords(
      long[] requestKeys,
      int numKeys,
      int activeCount,
      Scratch s,
      PrefixMatch into,
      boolean checked,
      long[] t) {
    int[] cellOf = s.cells(numKeys);
    int[] slots = s.slotOf;
    long[] words = s.wordOf;
    int recorded = 0;
    long[] row = s.two;
    long[] active = s.active;
    int[] matchedOf = s.matchedOf;
    int[] desc = podBits.descriptors();
    long[] dense = podBits.bits();
    int stride = podBits.stride();
    int rowLen = 2 * stride;
    int second = stride - 1; // word 1 of a row; with one-word rows, word 0 masked out
    long secondMask = stride > 1 ? -1L : 0L;
    byte now = (byte) tick;
    int left = activeCount;
    long a0 = active[0];
    long a1 = active[1]; // 0 when there is one word
    int b = 0;
    for (; b < numKeys; b++) {
      int sl;
      long cv;
      if (checked) {
        sl = probe(t, requestKeys[b], s);
        if (sl < 0 || s.torn) {
          break;
        }
        cv = s.word;
        slots[recorded] = sl;
        words[recorded++] = cv;
        refresh(t, sl, cv, now);
      } else {
        sl = find(requestKeys[b]);
        if (sl < 0) {
          break;
        }
        cv = hit(t, sl, now);
      }
      int c = (int) cv;
      int d;
      long r0;
      long r1;
      if ((c & KIND_MASK) == SET && ((d = desc[index(c)]) & 0x80000001) == 0) {
        // the common multi-pod case: a packed row, every entry on GPU
        int base = (d >>> 1) * rowLen;
        r0 = dense[base];
        r1 = dense[base + second] & secondMask;
      } else if (rowOf(c, row, 0) == 0) {
        r0 = row[0];
        r1 = row[1];
      } else {
        active[0] = a0;
        active[1] = a1;
        cellOf[b] = c;
        int v = (c & KIND_MASK) == SET ? desc[index(c)] : -1;
        left = step(b, v, left, s, dense, stride, into);
        a0 = active[0];
        a1 = active[1];
        if (left == 0) {
          break;
        }
        continue;
      }
      long n0 = a0 & r0;
      long n1 = a1 & r1;
      if (((n0 ^ a0) | (n1 ^ a1)) != 0) {
        if (n0 != a0) {
          left -= dropped(a0 & ~n0, 0, b, matchedOf);
        }
        if (n1 != a1) {
          left -= dropped(a1 & ~n1, 1, b, matchedOf);
        }
        a0 = n0;
        a1 = n1;
        if (left == 0) {
          break;
        }
      }
    }
    s.checkedCount = recorded;
    // pods that hold every resolved block
    for (int w = 0; w < 2; w++) {
      long a = w == 0 ? a0 : a1;
      while (a != 0) {
        matchedOf[(w << 6) + Long.numberOfTrailingZeros(a)] = b;
        a &= a - 1;
      }
      active[w] = 0;
    }
  }

  /**
   * Records that the pods of {@code gone} (word {@code w}) matched {@code b} blocks; counts them
   * (the two-word lookup, which never records: see {@link Scratch#dropped}).
   */
  private static int dropped(long gone, int w, int b, int[] matchedOf) {
    int count = Long.bitCount(gone);
    int first = w << 6;
    do {
      matchedOf[first + Long.numberOfTrailingZeros(gone)] = b;
      gone &= gone - 1;
    } while (gone != 0);
    return count;
  }

  /**
   * Phase 2's general step for block {@code b} (descriptor {@code v}): a key without a bitset row
   * (one entry, a pair or a small set: its row is built for the active pods), with entries off GPU
   * (counted per tier) or whose row is narrower than the active set. Returns the pods left.
   */
  private int step(int b, int v, int left, Scratch s, long[] dense, int stride, PrefixMatch into) {
    long[] active = s.active;
    int words = s.words;
    int c = s.cellOf[b];
    long[] row;
    int base;
    int gpuBase;
    int lim;
    boolean offGpu;
    if (v >= 0) {
      row = dense;
      base = (v >>> 1) * 2 * stride;
      gpuBase = base + stride;
      lim = Math.min(words, stride);
      offGpu = (v & 1) != 0;
    } else {
      row = s.sparse;
      base = 0;
      gpuBase = words;
      lim = words;
      offGpu = markSparse(c, active, row, words);
    }
    for (int w = 0; w < words; w++) {
      long a = active[w];
      if (a == 0) {
        continue;
      }
      long nx = w < lim ? a & row[base + w] : 0;
      if (nx != a) {
        left -= s.dropped(a & ~nx, w, b);
        active[w] = nx;
      }
      if (offGpu && nx != 0) {
        tierBlocks(nx & ~row[gpuBase + w], w, c, s.posOf, into);
      }
    }
    if (v < 0) {
      unmarkSparse(c, row, words);
    }
    return left;
  }

  /**
   * Clears what {@link #markSparse} set for cell {@code c} in {@code sparse}: by its entries' words
   * when it has fewer entries than the row has words, else the whole row.
   */
  private void unmarkSparse(int c, long[] sparse, int words) {
    if (c >= 0) {
      int w = podOf(c) >>> 6;
      sparse[w] = 0;
      sparse[words + w] = 0;
    } else if (isPair(c)) {
      int r = index(c);
      int wa = podOf(pairs[2 * r]) >>> 6;
      int wb = podOf(pairs[2 * r + 1]) >>> 6;
      sparse[wa] = 0;
      sparse[words + wa] = 0;
      sparse[wb] = 0;
      sparse[words + wb] = 0;
    } else {
      PodSet ps = sets[index(c)];
      if (ps.n >= words) {
        Arrays.fill(sparse, 0, 2 * words, 0);
        return;
      }
      int[] es = ps.e;
      for (int k = 0; k < ps.n; k++) {
        int w = podOf(es[k]) >>> 6;
        sparse[w] = 0;
        sparse[words + w] = 0;
      }
    }
  }

  /**
   * Builds the row of a key without a {@link PodBits} row (one entry, a pair or a small set) into
   * {@code sparse}, for the active pods only; returns whether any of them holds it off GPU.
   */
  private boolean markSparse(int c, long[] active, long[] sparse, int words) {
    if (c >= 0) {
      return mark(c, active, sparse, words);
    }
    if (isPair(c)) {
      int r = index(c);
      return mark(pairs[2 * r], active, sparse, words)
          | mark(pairs[2 * r + 1], active, sparse, words);
    }
    PodSet ps = sets[index(c)];
    boolean off = false;
    for (int k = 0; k < ps.n; k++) {
      off |= mark(ps.e[k], active, sparse, words);
    }
    return off;
  }

  /** Marks entry {@code e}'s pod in {@code sparse} if active; returns whether it is off GPU. */
  private static boolean mark(int e, long[] active, long[] sparse, int words) {
    int p = podOf(e);
    int w = p >>> 6;
    long bit = 1L << p;
    if ((active[w] & bit) == 0) {
      return false;
    }
    sparse[w] |= bit;
    if (tierOf(e) == 0) {
      sparse[words + w] |= bit;
      return false;
    }
    return true;
  }

  /** Counts one block for each pod of {@code offGpu} (word {@code w}) on its best tier. */
  private void tierBlocks(long offGpu, int w, int cell, int[] posOf, PrefixMatch into) {
    while (offGpu != 0) {
      int p = (w << 6) + Long.numberOfTrailingZeros(offGpu);
      writer.addTierBlocks(into, posOf[p], bestTier(cell, p), 1);
      offGpu &= offGpu - 1;
    }
  }

  /**
   * Writes the requested pods' matches and scores. When the scan recorded the pods that matched
   * (few of a big list), the pod ids of every position at once, then only those pods (the others
   * keep the zeros of the reset), so that a lookup over a big fleet costs what its matches cost;
   * else one pass over the positions (duplicates copy their first occurrence), reading every
   * requested pod's {@code matchedOf}, which the scan then wrote for every one of them.
   */
  private void finish(List<String> pods, int podCount, Scratch s, PrefixMatch into, int tiers) {
    int[] posOf = s.posOf;
    int[] matchedOf = s.matchedOf;
    int[] touched = s.touched;
    int n = s.touchedCount;
    if (s.recording) { // every match recorded, and few: visit only them
      writer.names(into, pods);
      for (int k = 0; k < n; k++) {
        int p = touched[k];
        int i = posOf[p];
        result(pods, i, i, matchedOf[p], into, tiers);
      }
    } else { // many matched (or a small list, or duplicates): one pass over the positions
      int[] podOfPos = s.podOfPos;
      boolean dup = s.duplicates;
      double gpuWeight = tierWeights[0];
      for (int i = 0; i < podCount; i++) {
        String pod = pods.get(i);
        int p = podOfPos[i];
        int matched = p < 0 ? 0 : matchedOf[p];
        if (matched == 0) {
          writer.set(into, i, pod, 0, 0);
          continue;
        }
        // as result(), written out: this loop runs once per requested pod
        int src = posOf[p];
        double score = 0;
        int offGpu = 0;
        for (int t = 1; t < tiers; t++) {
          int c = writer.tierBlocks(into, src, t);
          if (c != 0) {
            offGpu += c;
            score += c * tierWeights[t];
            if (src != i) {
              writer.addTierBlocks(into, i, t, c);
            }
          }
        }
        writer.addTierBlocks(into, i, 0, matched - offGpu);
        score += (matched - offGpu) * gpuWeight;
        writer.set(into, i, pod, matched, score);
      }
    }
    s.touchedCount = 0;
  }

  /** Writes position {@code i}'s result ({@code src}: where the scan counted its tiers). */
  private void result(List<String> pods, int i, int src, int matched, PrefixMatch into, int tiers) {
    {
      // the single pass of finish writes the same out
      double gpuWeight = tierWeights[0];
      double score = 0;
      int offGpu = 0;
      for (int t = 1; t < tiers; t++) {
        int c = writer.tierBlocks(into, src, t);
        if (c != 0) {
          offGpu += c;
          score += c * tierWeights[t];
          if (src != i) {
            writer.addTierBlocks(into, i, t, c);
          }
        }
      }
      writer.addTierBlocks(into, i, 0, matched - offGpu);
      score += (matched - offGpu) * gpuWeight;
      writer.set(into, i, pods.get(i), matched, score);
    }
  }

  /** Best (highest-weight) tier of pod {@code p} in a slot, GPU excluded (caller checked). */
  private int bestTier(int cell, int p) {
    int best = -1;
    if (cell >= 0) {
      best = better(best, cell, p);
    } else if (isPair(cell)) {
      best = better(best, pairs[2 * index(cell)], p);
      best = better(best, pairs[2 * index(cell) + 1], p);
    } else {
      PodSet ps = sets[index(cell)];
      for (int k = 0; k < ps.n; k++) {
        best = better(best, ps.e[k], p);
      }
    }
    return Math.max(best, 0);
  }

  private int better(int best, int e, int p) {
    if (podOf(e) != p) {
      return best;
    }
    int t = tierOf(e);
    return best < 0 || tierWeights[t] > tierWeights[best] ? t : best;
  }

  // ------------------------------------------------------------------ introspection

  @Override
  public Set<String> pods() {
    long stamp = lock.readLock();
    try {
      return Set.of(podIds.keys());
    } finally {
      lock.unlockRead(stamp);
    }
  }

  @Override
  public Map<String, Long> podEntries(String podId) {
    long stamp = lock.readLock();
    try {
      int id = podIds.get(podId);
      if (id < 0) {
        return Map.of();
      }
      Map<String, Long> m = new LinkedHashMap<>();
      List<String> names = tierNameList;
      for (int t = 0; t < names.size(); t++) {
        long c = podTierCounts[id * MAX_TIERS + t];
        if (c != 0) {
          m.put(names.get(t), c);
        }
      }
      return Collections.unmodifiableMap(m);
    } finally {
      lock.unlockRead(stamp);
    }
  }

  @Override
  public IndexStats stats() {
    long stamp = lock.readLock();
    try {
      return counters
          .stats()
          .keys(size)
          .entries(entries)
          .engineKeys(engine.size())
          .pods(podIds.size())
          .build();
    } finally {
      lock.unlockRead(stamp);
    }
  }

  @Override
  public IndexConfig config() {
    return config;
  }

  private void drop(String reason, long n) {
    counters.dropped(reason, n);
  }

  private void warnOnce(String key, String message) {
    counters.warnOnce(key, message);
  }

  private void bindMeters(MeterRegistry r) {
    Gauge.builder("kvroute.kvindex.keys", this, i -> i.size)
        .description("request keys held (some may hold only stale entries)")
        .register(r);
    Gauge.builder("kvroute.kvindex.entries", this, i -> i.entries)
        .description("(key, pod, tier, group) entries held, stale ones not counted")
        .register(r);
    Gauge.builder("kvroute.kvindex.entries.stale", this, i -> i.staleEntries)
        .description("entries of cleared or removed pods not reclaimed yet")
        .register(r);
    IndexCounters.counter(r, "kvroute.kvindex.reclaims.forced", null, null, forcedReclaims);
    IndexCounters.counter(r, "kvroute.kvindex.lookup.retries", null, null, retries);
    IndexCounters.counter(r, "kvroute.kvindex.lookup.locked", null, null, locked);
    Gauge.builder("kvroute.kvindex.engine.keys", this, i -> i.engine.size())
        .description("engine-key mappings held")
        .register(r);
    Gauge.builder("kvroute.kvindex.pods", this, i -> i.podIds.size()).register(r);
    counters.bind(r);
  }

  // ------------------------------------------------------------------ helpers

  private static final Class<?> LIST12 = List.of("").getClass();
  private static final Class<?> LISTN = List.of("", "", "").getClass();

  /** Per-thread lookup scratch. */
  private static final class Scratch {
    // Also remembers the last pod list it resolved (the pod strings, by identity, and the
    // PodIds.version() they were resolved at), so a gateway that passes the same endpoint strings
    // again skips hashing them. Not thread-safe: one per thread and index.
    long[] active = new long[16];
    long[] sparse = new long[32];
    long[] two = new long[2]; // lookupTwoWords: one key's pod bits
    int[] posOf = new int[0]; // pod id -> first position in the bound list, or -1
    // pod id -> blocks matched, written by the scan for every active pod, or (recording) only for
    // those that matched a block, which touched then lists
    int[] matchedOf = new int[0];
    int[] touched = new int[0];
    int touchedCount;
    boolean recording;
    boolean duplicates; // the bound list names a known pod more than once
    // the bound list's pods by name -> position (null if it has duplicates): for catchUp
    java.util.HashMap<String, Integer> positions;
    List<String> boundList; // the bound list itself (trusted when an unmodifiable JDK list)
    // phase 1 results by request block
    int[] cellOf = new int[1024];
    int[] rowOf = new int[1024];
    // a checked attempt (optimistic, validated per slot): the slots found and their value words,
    // the probe of the key missed (first and last slot, sum of versions), whether a slot read was
    // being changed; the last probe's value word
    int[] slotOf = new int[1024];
    long[] wordOf = new long[1024];
    int checkedCount;
    int absentHome = -1;
    int absentEnd;
    long absentSum;
    boolean torn;
    boolean bindTorn; // bound while pods' ids changed
    long word;
    // the bound pod list
    String[] boundNames = new String[64];
    int boundCount;
    long boundVersion = -1;
    int words;
    long[] initActive = new long[16];
    int initCount;
    int[] podOfPos = new int[64];
    int sink;

    /**
     * Binds {@code pods} (pod ids resolved through {@code ids}, whose highest id is below {@code
     * high}): fills {@code podOfPos}, {@code posOf} and {@code active}; returns the number of
     * distinct known pods.
     */
    int bind(PodIds ids, int high, List<String> pods, int count) {
      // the version first: a clear changes a pod's id, then the version (a lookup without the
      // lock that reads the new version reads the new id too)
      long v = ids.version();
      VarHandle.loadLoadFence();
      if (boundVersion == v && boundCount == count && pods == boundList) {
        Class<?> c = pods.getClass();
        if (c == LISTN || c == LIST12) { // unmodifiable: the same instance, the same pods
          System.arraycopy(initActive, 0, active, 0, words);
          return initCount;
        }
      }
      if (boundCount == count
          && (v == boundVersion || (positions != null && v - boundVersion < PodIds.LOG))) {
        boolean same = pods == boundList && (pods.getClass() == LISTN || pods.getClass() == LIST12);
        if (!same) {
          String[] names = boundNames;
          int i = 0;
          while (i < count && pods.get(i) == names[i]) {
            i++;
          }
          same = i == count;
        }
        if (same) {
          if (v != boundVersion) {
            catchUp(ids, high, v);
          }
          System.arraycopy(initActive, 0, active, 0, words);
          return initCount;
        }
      }
      return rebind(ids, high, pods, count, v);
    }

    /**
     * Brings the binding of the same list from {@code boundVersion} to version {@code v}: only the
     * pods whose mapping changed in between (new pods, cleared pods' fresh ids, removed pods) are
     * resolved again, so pods joining or being cleared do not cost each lookup thread a walk of the
     * whole list (a list without duplicates only).
     */
    private void catchUp(PodIds ids, int high, long v) {
      grow(high);
      // first the changed pods' old ids go, then their new ids come (two pods may swap ids)
      for (long x = boundVersion + 1; x <= v; x++) {
        Integer at = positions.get(ids.changed(x));
        if (at != null) {
          int i = at;
          int old = podOfPos[i];
          if (old >= 0) {
            posOf[old] = -1;
            initActive[old >>> 6] &= ~(1L << old);
            initCount--;
            podOfPos[i] = -1;
          }
        }
      }
      for (long x = boundVersion + 1; x <= v; x++) {
        String pod = ids.changed(x);
        Integer at = positions.get(pod);
        if (at != null && podOfPos[at] < 0) {
          int i = at;
          int now = ids.get(pod);
          if (now >= 0) {
            podOfPos[i] = now;
            posOf[now] = i;
            initActive[now >>> 6] |= 1L << now;
            initCount++;
          }
        }
      }
      boundVersion = v;
    }

    /** Grows the arrays indexed by pod id (contents kept) for ids below {@code high}. */
    private void grow(int high) {
      int w = (high + 63) >>> 6;
      if (active.length < w) {
        active = Arrays.copyOf(active, w * 2);
        sparse = new long[w * 4];
        initActive = Arrays.copyOf(initActive, w * 2);
      }
      if (w > words) {
        words = w;
      }
      if (posOf.length < high) {
        int old = posOf.length;
        posOf = Arrays.copyOf(posOf, Math.max(high, old * 2));
        Arrays.fill(posOf, old, posOf.length, -1);
        matchedOf = Arrays.copyOf(matchedOf, posOf.length);
        touched = Arrays.copyOf(touched, posOf.length);
      }
    }

    /** Records that the pods of {@code gone} (word {@code w}) matched {@code b}; counts them. */
    int dropped(long gone, int w, int b) {
      int count = Long.bitCount(gone);
      int first = w << 6;
      int[] m = matchedOf;
      if (!recording) { // finish reads every requested pod's value
        do {
          m[first + Long.numberOfTrailingZeros(gone)] = b;
          gone &= gone - 1;
        } while (gone != 0);
      } else if (b != 0) { // finish reads the recorded ones only: a pod that matched none is left
        int[] t = touched;
        int k = touchedCount;
        do {
          int p = first + Long.numberOfTrailingZeros(gone);
          m[p] = b;
          t[k++] = p;
          gone &= gone - 1;
        } while (gone != 0);
        touchedCount = k;
      }
      return count;
    }

    private int rebind(PodIds ids, int high, List<String> pods, int count, long v) {
      for (int i = 0; i < boundCount; i++) {
        int p = podOfPos[i];
        if (p >= 0) {
          posOf[p] = -1;
        }
      }
      int w = (high + 63) >>> 6;
      if (active.length < w) {
        active = new long[w * 2];
        sparse = new long[w * 4];
        initActive = new long[w * 2];
      }
      if (posOf.length < high) {
        int old = posOf.length;
        posOf = Arrays.copyOf(posOf, Math.max(high, old * 2));
        Arrays.fill(posOf, old, posOf.length, -1);
        matchedOf = new int[posOf.length];
        touched = new int[posOf.length];
      }
      if (boundNames.length < count) {
        boundNames = new String[Math.max(count, boundNames.length * 2)];
      }
      int[] pos = podOfPos(count);
      Arrays.fill(initActive, 0);
      int known = 0;
      boolean dup = false;
      for (int i = 0; i < count; i++) {
        String pod = pods.get(i);
        boundNames[i] = pod;
        int p = ids.get(pod);
        pos[i] = p;
        if (p >= 0 && posOf[p] < 0) {
          posOf[p] = i;
          initActive[p >>> 6] |= 1L << p;
          known++;
        } else if (p >= 0) {
          dup = true;
        }
      }
      Arrays.fill(boundNames, count, boundNames.length, null);
      positions = null;
      java.util.HashMap<String, Integer> byName = new java.util.HashMap<>(count * 2);
      for (int i = 0; i < count; i++) {
        if (byName.put(pods.get(i), i) != null) {
          byName = null; // a name twice: no catching up for this list
          break;
        }
      }
      positions = byName;
      boundCount = count;
      boundVersion = v; // read before the ids (see bind)
      boundList = pods;
      duplicates = dup;
      words = w;
      initCount = known;
      System.arraycopy(initActive, 0, active, 0, w);
      return known;
    }

    int[] cells(int numKeys) {
      if (cellOf.length < numKeys) {
        cellOf = new int[Math.max(numKeys, cellOf.length * 2)];
        rowOf = new int[cellOf.length];
        slotOf = new int[cellOf.length];
        wordOf = new long[cellOf.length];
      }
      return cellOf;
    }

    /**
     * After an attempt that did not validate: clears what a scan leaves clean when it completes on
     * a stable index (the active and sparse bitsets), since a concurrent write may have changed
     * entries between marking and unmarking them.
     */
    void clean() {
      Arrays.fill(active, 0);
      Arrays.fill(sparse, 0);
      two[0] = 0;
      two[1] = 0;
      touchedCount = 0;
    }

    /**
     * After an attempt torn by a concurrent write, or one during which pods changed: {@link
     * #clean}, and forgets the bound pod list (it may hold ids read while they changed), so the
     * next lookup binds its list again.
     */
    void forget() {
      clean();
      Arrays.fill(posOf, -1);
      Arrays.fill(initActive, 0);
      Arrays.fill(boundNames, null);
      boundCount = 0;
      boundVersion = -1;
      boundList = null;
      positions = null;
      initCount = 0;
    }

    int[] podOfPos(int n) {
      if (podOfPos.length < n) {
        podOfPos = new int[Math.max(n, podOfPos.length * 2)];
      }
      return podOfPos;
    }
  }
}
