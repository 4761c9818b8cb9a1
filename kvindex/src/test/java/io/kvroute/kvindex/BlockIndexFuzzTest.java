package io.kvroute.kvindex;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import java.util.List;
import java.util.Map;

/**
 * Arbitrary event sequences (odd block sizes, non-dense spans, unknown parents and hashes, bad
 * groups, many tiers) never make the index throw, and its counters stay consistent. Runs its seeds
 * in regression mode under {@code mvn verify}; fuzz with {@code JAZZER_FUZZ=1}.
 */
class BlockIndexFuzzTest {
  private static final String[] MEDIA = {null, "GPU", "cpu", "STORAGE", "DISK", "x", ""};

  @FuzzTest(maxDuration = "20s")
  void eventsNeverThrow(FuzzedDataProvider data) {
    BlockIndex idx =
        BlockIndex.inMemory(
            IndexConfig.builder()
                .blockSize(data.consumeInt(1, 4) * 4)
                .maxKeys(data.consumeInt(1, 64))
                .maxPodsPerKey(data.consumeInt(1, 4))
                .maxEngineKeys(data.consumeInt(1, 64))
                .maxPods(data.consumeInt(1, 6))
                .build());
    int steps = data.consumeInt(0, 40);
    for (int s = 0; s < steps && data.remainingBytes() > 0; s++) {
      String pod = "p" + data.consumeInt(0, 7);
      int n = data.consumeInt(0, 6);
      long[] hashes = new long[n];
      for (int i = 0; i < n; i++) {
        hashes[i] = data.consumeInt(0, 12);
      }
      String medium = MEDIA[data.consumeInt(0, MEDIA.length - 1)];
      int group = data.consumeInt(-1, 3);
      switch (data.consumeInt(0, 4)) {
        case 0:
        case 1:
          {
            int[] tokens = new int[data.consumeInt(0, 80)];
            for (int i = 0; i < tokens.length; i++) {
              tokens[i] = data.consumeInt(0, 5);
            }
            idx.blockStored(
                pod,
                hashes,
                data.consumeBoolean(),
                data.consumeInt(0, 12),
                tokens,
                data.consumeInt(-1, 20),
                data.consumeBoolean() ? null : "lora",
                medium,
                group);
            break;
          }
        case 2:
          idx.blockRemoved(pod, hashes, medium, group);
          break;
        case 3:
          idx.allBlocksCleared(pod);
          break;
        default:
          idx.removePod(pod);
      }
      IndexStats st = idx.stats();
      check(st.entries() >= st.keys(), "entries >= keys", st);
      long perPod =
          idx.pods().stream()
              .flatMap(p -> idx.podEntries(p).values().stream())
              .mapToLong(Long::longValue)
              .sum();
      check(perPod == st.entries(), "per-pod entries sum to entries", st);
    }
    int[] prompt = new int[64];
    PrefixMatch m = idx.lookup(idx.requestKeys(prompt, (String) null), List.of("p0", "p1", "p9"));
    for (int i = 0; i < m.size(); i++) {
      check(m.matchedBlocks(i) >= 0 && m.matchedBlocks(i) <= m.requestBlocks(), "prefix", m);
    }
    Map<String, Long> dropped = idx.stats().dropped();
    check(dropped.values().stream().allMatch(v -> v >= 0), "dropped >= 0", dropped);
  }

  // plain checks: keeps class loading (and Jazzer start-up) small
  private static void check(boolean ok, String what, Object state) {
    if (!ok) {
      throw new AssertionError(what + ": " + state);
    }
  }
}
