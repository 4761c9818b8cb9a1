package io.kvroute.kvindex.contract;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The behaviour every {@link BlockIndex} backend must have, as tests a backend's test class extends
 * (shipped in kvindex's test-jar): chains across events, prefixes, tiers and scores, removals,
 * token-less tier updates, clears and pod removal, lossy input counted not thrown, non-dense spans,
 * engine blocks larger and smaller than index blocks, LoRA roots and extra keys, the per-key entry
 * bound, many pods and reused results, lookups concurrent with ingestion.
 *
 * <p>A backend supplies {@link #newIndex(IndexConfig)}; indexes that are {@link AutoCloseable} are
 * closed after each test. A backend whose writes are asynchronous must make them visible to the
 * next call of the same thread (read-your-writes) for these tests.
 */
public abstract class BlockIndexContract {
  private final List<BlockIndex> created = new ArrayList<>();

  /** Tokens shared by the tests: 64 tokens (4 blocks of 16). */
  public static final int[] TOKENS = tokens(0, 64);

  /** Deterministic pseudo-random tokens. */
  public static int[] tokens(int seed, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = (seed * 7919 + i * 104729) % 150_000;
    }
    return t;
  }

  /** vLLM's engine hashes (sha256_cbor, seed "0") of {@code tokens}' full blocks, as u64 bits. */
  public static long[] engine(int blockSize, int[] tokens, String lora) {
    VllmBlockHasher h =
        VllmBlockHasher.builder()
            .algorithm(HashAlgorithm.SHA256_CBOR)
            .blockSize(blockSize)
            .hashSeed("0")
            .build();
    return h.hashBlocks(tokens, BlockExtraKeys.lora(lora)).stream()
        .mapToLong(BlockHash::u64)
        .toArray();
  }

  /** A new, empty index of the backend under test. */
  protected abstract BlockIndex createIndex(IndexConfig config);

  /**
   * Whether {@link IndexStats#keys()} is exact (an index that clears pods lazily may count keys
   * whose entries are all invalidated).
   */
  protected boolean exactKeyCounts() {
    return true;
  }

  /** A new index, closed after the test. */
  protected final BlockIndex newIndex(IndexConfig config) {
    BlockIndex idx = createIndex(config);
    created.add(idx);
    return idx;
  }

  /** An index with block size 16 and model "m". */
  protected final BlockIndex index() {
    return newIndex(IndexConfig.builder().blockSize(16).modelName("m").build());
  }

  @AfterEach
  protected void closeIndexes() throws Exception {
    for (BlockIndex idx : created) {
      if (idx instanceof AutoCloseable) {
        ((AutoCloseable) idx).close();
      }
    }
    created.clear();
  }

  @Test
  public void storesChainsAcrossEventsAndLooksUpPrefixes() {
    BlockIndex idx = index();
    long[] e = engine(16, TOKENS, null);
    // first event: blocks 0-1; second: blocks 2-3 with parent block 1
    idx.blockStored(
        "a", Arrays.copyOf(e, 2), false, 0, Arrays.copyOf(TOKENS, 32), 16, null, null, 0);
    idx.blockStored(
        "a",
        Arrays.copyOfRange(e, 2, 4),
        true,
        e[1],
        Arrays.copyOfRange(TOKENS, 32, 64),
        16,
        null,
        "GPU",
        0);
    idx.blockStored(
        "b", Arrays.copyOf(e, 1), false, 0, Arrays.copyOf(TOKENS, 16), 16, null, null, 0);
    long[] keys = idx.requestKeys(TOKENS, (String) null);
    assertThat(keys).hasSize(4);
    PrefixMatch m = idx.lookup(keys, List.of("a", "b", "c"));
    assertThat(m.matchedBlocks("a")).isEqualTo(4);
    assertThat(m.matchedBlocks("b")).isEqualTo(1);
    assertThat(m.matchedBlocks("c")).isZero();
    assertThat(m.score("a")).isEqualTo(4.0);
    assertThat(m.blocksOnTier(0, "GPU")).isEqualTo(4);
    if (exactKeyCounts()) {
      assertThat(idx.stats().keys()).isEqualTo(4);
    }
    assertThat(idx.stats().entries()).isEqualTo(5);
    assertThat(idx.podEntries("a")).containsEntry("GPU", 4L);
    assertThat(idx.pods()).containsExactlyInAnyOrder("a", "b");

    // the model name is the base root; a LoRA chain does not match
    assertThat(idx.lookup(idx.requestKeys(TOKENS, "m"), List.of("a")).matchedBlocks(0))
        .isEqualTo(4);
    assertThat(idx.lookup(idx.requestKeys(TOKENS, "lora"), List.of("a")).matchedBlocks(0)).isZero();
  }

  @Test
  public void removalsTierUpdatesClearAndPodRemoval() {
    BlockIndex idx = index();
    long[] e = engine(16, TOKENS, null);
    idx.blockStored("a", e, false, 0, TOKENS, 16, null, null, 0);
    long[] keys = idx.requestKeys(TOKENS, (String) null);
    // token-less offload of blocks 2 and 3 to CPU, then GPU eviction of block 2
    idx.blockStored("a", Arrays.copyOfRange(e, 2, 4), true, e[1], new int[0], 0, null, "CPU", 0);
    idx.blockRemoved("a", new long[] {e[2]}, "GPU", 0);
    PrefixMatch m = idx.lookup(keys, List.of("a"));
    assertThat(m.matchedBlocks(0)).isEqualTo(4);
    assertThat(m.blocksOnTier(0, "GPU")).isEqualTo(3);
    assertThat(m.blocksOnTier(0, "CPU")).isEqualTo(1);
    assertThat(m.score(0)).isEqualTo(3.8, org.assertj.core.data.Offset.offset(1e-9));
    assertThat(idx.podEntries("a")).containsEntry("GPU", 3L).containsEntry("CPU", 2L);

    idx.blockRemoved("a", new long[] {e[1]}, null, 0);
    assertThat(idx.lookup(keys, List.of("a")).matchedBlocks(0)).isEqualTo(1);

    idx.allBlocksCleared("a");
    assertThat(idx.lookup(keys, List.of("a")).matchedBlocks(0)).isZero();
    assertThat(idx.stats().entries()).isZero();
    if (exactKeyCounts()) {
      assertThat(idx.stats().keys()).isZero();
    }
    assertThat(idx.pods()).contains("a");

    idx.blockStored("a", e, false, 0, TOKENS, 16, null, null, 0);
    idx.removePod("a");
    assertThat(idx.pods()).isEmpty();
    assertThat(idx.lookup(keys, List.of("a")).matchedBlocks(0)).isZero();
    assertThat(idx.stats().events()).containsEntry("pod_removed", 1L);
  }

  @Test
  public void lossyInputIsCountedNotThrown() {
    BlockIndex idx = index();
    long[] e = engine(16, TOKENS, null);
    idx.blockStored(
        "a", new long[] {e[2]}, true, e[1], Arrays.copyOfRange(TOKENS, 32, 48), 16, null, null, 0);
    idx.blockRemoved("a", new long[] {123}, null, 0);
    idx.blockRemoved("zzz", new long[] {123}, null, 0);
    idx.blockStored("a", new long[] {7}, false, 0, new int[0], 0, null, "CPU", 0);
    idx.blockStored("a", e, false, 0, TOKENS, 24, null, null, 0); // 24 vs 16: not a multiple
    idx.blockStored("a", e, false, 0, TOKENS, 16, null, null, 999);
    idx.blockStored("a", new long[0], false, 0, new int[0], 16, null, null, 0);
    Map<String, Long> d = idx.stats().dropped();
    assertThat(d).containsEntry("unknown_parent", 1L);
    assertThat(d).containsEntry("unknown_engine_key", 2L);
    assertThat(d).containsEntry("unknown_pod", 1L);
    assertThat(d).containsEntry("block_size", 4L);
    assertThat(d).containsEntry("group_idx", 4L);
    assertThat(idx.stats().entries()).isZero();
  }

  @Test
  public void nonDenseSpanMapsHashesToTheLastBlocks() {
    BlockIndex idx = index();
    long[] e = engine(16, TOKENS, null);
    // tokens cover 4 blocks but only blocks 2 and 3 are announced
    idx.blockStored("a", Arrays.copyOfRange(e, 2, 4), false, 0, TOKENS, 16, null, null, 0);
    long[] keys = idx.requestKeys(TOKENS, (String) null);
    assertThat(idx.lookup(keys, List.of("a")).matchedBlocks(0)).isZero();
    assertThat(idx.lookup(Arrays.copyOfRange(keys, 2, 4), List.of("a")).matchedBlocks(0))
        .isEqualTo(2);
    idx.blockRemoved("a", new long[] {e[3]}, null, 0);
    assertThat(idx.lookup(Arrays.copyOfRange(keys, 2, 4), List.of("a")).matchedBlocks(0))
        .isEqualTo(1);
  }

  @Test
  public void engineBlocksLargerThanIndexBlocks() {
    BlockIndex idx = index();
    long[] e = engine(64, TOKENS, null); // one engine block = 4 index blocks
    idx.blockStored("a", e, false, 0, TOKENS, 64, null, null, 0);
    long[] keys = idx.requestKeys(TOKENS, (String) null);
    assertThat(idx.lookup(keys, List.of("a")).matchedBlocks(0)).isEqualTo(4);
    idx.blockStored("a", e, false, 0, new int[0], 0, null, "CPU", 0);
    assertThat(idx.podEntries("a")).containsEntry("CPU", 4L);
    idx.blockRemoved("a", e, "GPU", 0);
    PrefixMatch m = idx.lookup(keys, List.of("a"));
    assertThat(m.matchedBlocks(0)).isEqualTo(4);
    assertThat(m.blocksOnTier(0, "CPU")).isEqualTo(4);
  }

  @Test
  public void engineBlocksSmallerThanIndexBlocksAcrossEvents() {
    BlockIndex idx = newIndex(IndexConfig.builder().blockSize(32).build());
    long[] e = engine(16, TOKENS, null); // two engine blocks = one index block
    // event 1: engine blocks 0..2 (index block 0 complete, half of block 1 pending)
    idx.blockStored(
        "a", Arrays.copyOf(e, 3), false, 0, Arrays.copyOf(TOKENS, 48), 16, null, null, 0);
    long[] keys = idx.requestKeys(TOKENS, (String) null);
    assertThat(keys).hasSize(2);
    assertThat(idx.lookup(keys, List.of("a")).matchedBlocks(0)).isEqualTo(1);
    // event 2: engine block 3, parent = block 2 (pending) -> completes index block 1
    idx.blockStored(
        "a", new long[] {e[3]}, true, e[2], Arrays.copyOfRange(TOKENS, 48, 64), 16, null, null, 0);
    assertThat(idx.lookup(keys, List.of("a")).matchedBlocks(0)).isEqualTo(2);
    // evicting either engine block of index block 0 removes it
    idx.blockRemoved("a", new long[] {e[1]}, null, 0);
    assertThat(idx.lookup(keys, List.of("a")).matchedBlocks(0)).isZero();
  }

  @Test
  public void loraEventsMatchLoraLookupsAndExtraKeysFoldIn() {
    BlockIndex idx = index();
    long[] e = engine(16, TOKENS, "ad");
    idx.blockStored("a", e, false, 0, TOKENS, 16, "ad", null, 0);
    assertThat(idx.lookup(idx.requestKeys(TOKENS, "ad"), List.of("a")).matchedBlocks(0))
        .isEqualTo(4);
    assertThat(idx.lookup(idx.requestKeys(TOKENS, (String) null), List.of("a")).matchedBlocks(0))
        .isZero();

    BlockExtraKeys extras = BlockExtraKeys.builder().loraName("ad").cacheSalt("s").build();
    List<Object> perBlock =
        Arrays.asList(
            extras.forBlock(0, 16),
            extras.forBlock(16, 32),
            extras.forBlock(32, 48),
            extras.forBlock(48, 64));
    idx.blockStored(
        "b",
        KvEvent.BlockStored.builder()
            .blockHashes(1, 2, 3, 4)
            .tokenIds(TOKENS)
            .blockSize(16)
            .loraName("ad")
            .medium(null)
            .extraKeys(perBlock)
            .build());
    PrefixMatch m = idx.lookup(idx.requestKeys(TOKENS, extras), List.of("a", "b"));
    assertThat(m.matchedBlocks("b")).isEqualTo(4);
    assertThat(m.matchedBlocks("a")).isZero();
  }

  @Test
  public void manyPodsUseDenseSetsAndReusableResults() {
    BlockIndex idx = index();
    long[] e = engine(16, TOKENS, null);
    List<String> pods = new java.util.ArrayList<>();
    for (int p = 0; p < 300; p++) {
      String pod = "pod-" + p;
      pods.add(pod);
      int blocks = p % 5; // 0..4 blocks
      if (blocks > 0) {
        idx.blockStored(
            pod,
            Arrays.copyOf(e, blocks),
            false,
            0,
            Arrays.copyOf(TOKENS, blocks * 16),
            16,
            null,
            p % 2 == 0 ? "GPU" : "CPU",
            0);
      }
    }
    long[] keys = idx.requestKeys(TOKENS, (String) null);
    PrefixMatch into = new PrefixMatch();
    for (int round = 0; round < 2; round++) {
      idx.lookup(keys, keys.length, pods, into);
      for (int p = 0; p < 300; p++) {
        assertThat(into.matchedBlocks(p)).as("pod %d", p).isEqualTo(p % 5);
        double w = p % 2 == 0 ? 1.0 : 0.8;
        assertThat(into.score(p)).isCloseTo((p % 5) * w, org.assertj.core.data.Offset.offset(1e-9));
      }
    }
    assertThat(into.maxMatchedBlocks()).isEqualTo(4);
  }

  @Test
  public void concurrentLookupsDuringIngestion() throws Exception {
    BlockIndex idx = index();
    long[] e = engine(16, TOKENS, null);
    long[] keys = idx.requestKeys(TOKENS, (String) null);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    CountDownLatch start = new CountDownLatch(1);
    try {
      Future<?> writer =
          pool.submit(
              () -> {
                start.await();
                for (int i = 0; i < 2000; i++) {
                  idx.blockStored("p" + (i % 50), e, false, 0, TOKENS, 16, null, null, 0);
                  idx.blockRemoved("p" + ((i + 25) % 50), new long[] {e[i % 4]}, null, 0);
                }
                return null;
              });
      Future<?> reader =
          pool.submit(
              () -> {
                start.await();
                List<String> pods = List.of("p1", "p2", "p3");
                for (int i = 0; i < 2000; i++) {
                  PrefixMatch m = idx.lookup(keys, pods);
                  for (int p = 0; p < 3; p++) {
                    assertThat(m.matchedBlocks(p)).isBetween(0, 4);
                  }
                }
                return null;
              });
      start.countDown();
      writer.get(30, TimeUnit.SECONDS);
      reader.get(30, TimeUnit.SECONDS);
    } finally {
      pool.shutdownNow();
    }
  }

  /** Stores one block (16 tokens) on p1, p2, then p3, and looks it up for the three. */
  protected static PrefixMatch oneBlockOnThreePods(BlockIndex idx) {
    int[] t = tokens(100, 16);
    long[] e = engine(16, t, null);
    for (String pod : List.of("p1", "p2", "p3")) {
      idx.blockStored(pod, e, false, 0, t, 16, null, null, 0);
    }
    return idx.lookup(idx.requestKeys(t, (String) null), List.of("p1", "p2", "p3"));
  }

  @Test
  public void maxPodsPerKeyDropsTheOldestEntryAndCountsIt() {
    BlockIndex idx = newIndex(IndexConfig.builder().maxPodsPerKey(2).build());
    PrefixMatch m = oneBlockOnThreePods(idx);
    assertThat(m.matchedBlocks("p1")).isZero();
    assertThat(m.matchedBlocks("p2")).isEqualTo(1);
    assertThat(m.matchedBlocks("p3")).isEqualTo(1);
    assertThat(idx.stats().evictions()).containsEntry("max_pods_per_key", 1L);
    assertThat(idx.stats().entries()).isEqualTo(2);
    assertThat(idx.podEntries("p1")).isEmpty();
    assertThat(idx.stats().lookups()).isEqualTo(1);
    assertThat(idx.stats().events()).containsEntry("stored", 3L);
  }
}
