package io.kvroute.kvindex;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class BlockIndexTest {
  static final int[] TOKENS = tokens(0, 64);

  static int[] tokens(int seed, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = (seed * 7919 + i * 104729) % 150_000;
    }
    return t;
  }

  static long[] engine(int blockSize, int[] tokens, String lora) {
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

  static BlockIndex index() {
    return BlockIndex.inMemory(IndexConfig.builder().blockSize(16).modelName("m").build());
  }

  @Test
  void storesChainsAcrossEventsAndLooksUpPrefixes() {
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
    assertThat(idx.stats().keys()).isEqualTo(4);
    assertThat(idx.stats().entries()).isEqualTo(5);
    assertThat(idx.podEntries("a")).containsEntry("GPU", 4L);
    assertThat(idx.pods()).containsExactlyInAnyOrder("a", "b");

    // the model name is the base root; a LoRA chain does not match
    assertThat(idx.lookup(idx.requestKeys(TOKENS, "m"), List.of("a")).matchedBlocks(0))
        .isEqualTo(4);
    assertThat(idx.lookup(idx.requestKeys(TOKENS, "lora"), List.of("a")).matchedBlocks(0)).isZero();
  }

  @Test
  void removalsTierUpdatesClearAndPodRemoval() {
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
    assertThat(idx.stats().keys()).isZero();
    assertThat(idx.pods()).contains("a");

    idx.blockStored("a", e, false, 0, TOKENS, 16, null, null, 0);
    idx.removePod("a");
    assertThat(idx.pods()).isEmpty();
    assertThat(idx.lookup(keys, List.of("a")).matchedBlocks(0)).isZero();
    assertThat(idx.stats().events()).containsEntry("pod_removed", 1L);
  }

  @Test
  void lossyInputIsCountedNotThrown() {
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
  void nonDenseSpanMapsHashesToTheLastBlocks() {
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
  void engineBlocksLargerThanIndexBlocks() {
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
  void engineBlocksSmallerThanIndexBlocksAcrossEvents() {
    BlockIndex idx = BlockIndex.inMemory(IndexConfig.builder().blockSize(32).build());
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
  void loraEventsMatchLoraLookupsAndExtraKeysFoldIn() {
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
  void boundsEvictAndAreCounted() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    BlockIndex idx =
        BlockIndex.inMemory(
            IndexConfig.builder().maxKeys(8).maxPodsPerKey(2).meterRegistry(reg).build());
    for (int s = 0; s < 10; s++) {
      int[] t = tokens(s + 1, 16);
      idx.blockStored("a", engine(16, t, null), false, 0, t, 16, null, null, 0);
    }
    assertThat(idx.stats().keys()).isEqualTo(8);
    assertThat(idx.stats().evictions()).containsEntry("max_keys", 2L);
    int[] t = tokens(100, 16);
    long[] e = engine(16, t, null);
    for (String pod : List.of("p1", "p2", "p3")) {
      idx.blockStored(pod, e, false, 0, t, 16, null, null, 0);
    }
    PrefixMatch m = idx.lookup(idx.requestKeys(t, (String) null), List.of("p1", "p2", "p3"));
    assertThat(m.matchedBlocks("p1")).isZero();
    assertThat(m.matchedBlocks("p3")).isEqualTo(1);
    assertThat(
            reg.get("kvindex_evictions_total")
                .tag("reason", "max_pods_per_key")
                .functionCounter()
                .count())
        .isEqualTo(1.0);
    assertThat(reg.get("kvindex_keys").gauge().value()).isEqualTo(8.0);
    assertThat(
            reg.get("kvindex_applied_events_total").tag("type", "stored").functionCounter().count())
        .isEqualTo(13.0);
    assertThat(reg.get("kvindex_lookups_total").functionCounter().count()).isEqualTo(1.0);
  }

  @Test
  void manyPodsUseDenseSetsAndReusableResults() {
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
  void concurrentLookupsDuringIngestion() throws Exception {
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

  @Test
  void configValidationNamesTheField() {
    assertThatThrownBy(() -> IndexConfig.builder().blockSize(0).build())
        .hasMessage("index.blockSize must be > 0, was 0");
    assertThatThrownBy(() -> IndexConfig.builder().maxKeys(0).build())
        .hasMessage("index.maxKeys must be > 0, was 0");
    assertThatThrownBy(() -> IndexConfig.builder().maxPodsPerKey(-1).build())
        .hasMessage("index.maxPodsPerKey must be > 0, was -1");
    assertThatThrownBy(() -> IndexConfig.builder().maxPods(0).build())
        .hasMessageContaining("index.maxPods must be in [1, 524287], was 0");
    assertThatThrownBy(() -> IndexConfig.builder().tierWeight("cpu", 2.0).build())
        .hasMessageContaining("index.tierWeights[CPU] must be <= the GPU weight 1.0, was 2.0");
    assertThatThrownBy(() -> IndexConfig.builder().defaultTierWeight(-1).build())
        .hasMessageContaining("index.defaultTierWeight");
    IndexConfig c = IndexConfig.builder().tierWeight("storage", 0.3).build();
    assertThat(c.tierWeight("STORAGE")).isEqualTo(0.3);
    assertThat(c.tierWeight(null)).isEqualTo(1.0);
    assertThat(c.tierWeight("disk")).isEqualTo(0.5);
    assertThat(c.maxEngineKeys()).isEqualTo(c.maxKeys());
  }
}
