package io.kvroute.kvindex.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.contract.BlockIndexContract;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

/**
 * The in-memory index with lazy clears answers exactly like a model (a map from block to the
 * ordered set of (pod, tier) entries holding it) under random store, remove, clear and pod-removal
 * sequences, whatever the reclaimer has or has not reclaimed yet: lookups (blocks matched and
 * score), live entry counts (total and per pod and tier), the pods known, and {@code
 * maxPodsPerKey}'s oldest-first dropping (stale entries never take a live entry's place). Few pods
 * with a small {@code maxPods} make ids run out, so forced reclamations happen too; "churn"
 * operations (writes of another pod) move the reclaimer's cursor between the others. After each
 * example the reclamation is driven to the end: no stale entry is left, the keys left are exactly
 * the model's, and the pod ids stay within their bound.
 */
class LazyClearPropertyTest {
  private static final int BS = 4;
  private static final int BLOCKS = 8;
  private static final List<String> PODS = List.of("a", "b", "c", "d", "e");
  private static final String CHURN = "z";
  private static final String[] TIERS = {"GPU", "CPU"};
  private static final double[] WEIGHTS = {1.0, 0.8};
  private static final int[] MAX_PER_KEY = {1, 2, 3, 256};
  private static final int[] RECLAIM = {1, 3, 16, InMemoryBlockIndex.RECLAIM_SLOTS};
  private static final int[][] SEQS = new int[3][];
  private static final long[][] ENGINE = new long[3][];
  private static final int[] CHURN_TOKENS = BlockIndexContract.tokens(99, 64 * BS);
  private static final long[] CHURN_ENGINE = BlockIndexContract.engine(BS, CHURN_TOKENS, null);

  static {
    SEQS[0] = BlockIndexContract.tokens(1, BLOCKS * BS);
    SEQS[1] = SEQS[0].clone(); // shares its first 4 blocks with 0
    for (int i = 4 * BS; i < SEQS[1].length; i++) {
      SEQS[1][i] += 7;
    }
    SEQS[2] = BlockIndexContract.tokens(2, BLOCKS * BS);
    for (int s = 0; s < 3; s++) {
      ENGINE[s] = BlockIndexContract.engine(BS, SEQS[s], null);
    }
  }

  /** The model: engine hash -> entries "pod/tier" in insertion order; pods; hashes mapped. */
  private static final class Model {
    final Map<Long, LinkedHashSet<String>> held = new HashMap<>();
    final Set<Long> mapped = new HashSet<>();
    final Set<String> pods = new HashSet<>();
    final int maxPerKey;

    Model(int maxPerKey) {
      this.maxPerKey = maxPerKey;
    }

    void add(long h, String pod, int tier) {
      LinkedHashSet<String> es = held.computeIfAbsent(h, k -> new LinkedHashSet<>());
      String e = pod + "/" + tier;
      if (es.contains(e)) {
        return;
      }
      if (es.size() >= maxPerKey) {
        es.remove(es.iterator().next()); // the oldest
      }
      es.add(e);
    }

    void remove(long h, String pod, int tier) {
      LinkedHashSet<String> es = held.get(h);
      if (es != null) {
        es.remove(pod + "/" + tier);
      }
    }

    void clear(String pod) {
      held.values().forEach(es -> es.removeIf(e -> e.startsWith(pod + "/")));
    }

    long entries() {
      return held.values().stream().mapToLong(Set::size).sum();
    }

    long keys() {
      return held.values().stream().filter(es -> !es.isEmpty()).count();
    }

    Map<String, Long> podEntries(String pod) {
      Map<String, Long> m = new LinkedHashMap<>();
      for (int t = 0; t < TIERS.length; t++) {
        String e = pod + "/" + t;
        long n = held.values().stream().filter(es -> es.contains(e)).count();
        if (n > 0) {
          m.put(TIERS[t], n);
        }
      }
      return m;
    }
  }

  @Test
  void lazyClearsAnswerExactlyLikeTheModel() {
    qt().withExamples(400)
        .forAll(
            integers().between(0, MAX_PER_KEY.length * RECLAIM.length - 1),
            lists().of(integers().between(0, Integer.MAX_VALUE)).ofSizeBetween(1, 80))
        .checkAssert(
            (cfg, ops) -> run(MAX_PER_KEY[cfg % MAX_PER_KEY.length], RECLAIM[cfg / 4], ops));
  }

  private static void run(int maxPerKey, int reclaimSlots, List<Integer> ops) {
    InMemoryBlockIndex idx =
        new InMemoryBlockIndex(
            IndexConfig.builder().blockSize(BS).maxPods(6).maxPodsPerKey(maxPerKey).build(),
            reclaimSlots);
    Model m = new Model(maxPerKey);
    int[] churnAt = {0};
    for (int op : ops) {
      String pod = PODS.get((op & 0xFF) % PODS.size());
      int seq = (op >>> 8) % 3;
      int a = (op >>> 10) % BLOCKS;
      int b = (op >>> 13) % BLOCKS;
      int from = Math.min(a, b);
      int to = Math.max(a, b) + 1;
      int tier = (op >>> 16) & 1;
      long[] e = ENGINE[seq];
      switch ((op >>> 17) % 9) {
        case 0, 1, 2 -> {
          boolean hasParent = from > 0;
          idx.blockStored(
              pod,
              Arrays.copyOfRange(e, from, to),
              hasParent,
              hasParent ? e[from - 1] : 0,
              Arrays.copyOfRange(SEQS[seq], from * BS, to * BS),
              BS,
              null,
              TIERS[tier],
              0);
          m.pods.add(pod);
          if (!hasParent || m.mapped.contains(e[from - 1])) {
            for (int j = from; j < to; j++) {
              m.add(e[j], pod, tier);
              m.mapped.add(e[j]);
            }
          }
        }
        case 3, 4 -> {
          idx.blockRemoved(pod, Arrays.copyOfRange(e, from, to), TIERS[tier], 0);
          for (int j = from; j < to; j++) {
            m.remove(e[j], pod, tier);
          }
        }
        case 5 -> {
          idx.allBlocksCleared(pod);
          m.clear(pod);
        }
        case 6 -> {
          idx.removePod(pod);
          m.clear(pod);
          m.pods.remove(pod);
        }
        default -> churn(idx, m, 1 + (op >>> 20) % 8, churnAt);
      }
      assertThat(idx.stats().entries()).isEqualTo(m.entries());
      assertThat(idx.staleEntries()).isNotNegative();
    }
    check(idx, m);
    // drive the reclamation to its end: every stale entry goes, the keys left are the model's
    for (int i = 0; i < 100_000 && idx.staleEntries() > 0; i++) {
      churn(idx, m, 1, churnAt);
    }
    assertThat(idx.staleEntries()).isZero();
    assertThat(idx.podIdHigh()).isLessThanOrEqualTo(12); // 2 x maxPods
    check(idx, m);
    assertThat(idx.stats().keys()).isEqualTo(m.keys());
  }

  /** {@code n} writes of the churn pod: stores and removals of blocks of its own chain. */
  private static void churn(InMemoryBlockIndex idx, Model m, int n, int[] at) {
    for (int i = 0; i < n; i++) {
      int j = at[0]++ % CHURN_ENGINE.length;
      long h = CHURN_ENGINE[j];
      if ((at[0] / CHURN_ENGINE.length) % 2 == 0) {
        idx.blockStored(
            CHURN,
            new long[] {h},
            j > 0,
            j > 0 ? CHURN_ENGINE[j - 1] : 0,
            Arrays.copyOfRange(CHURN_TOKENS, j * BS, (j + 1) * BS),
            BS,
            null,
            null,
            0);
        m.pods.add(CHURN);
        if (j == 0 || m.mapped.contains(CHURN_ENGINE[j - 1])) {
          m.add(h, CHURN, 0);
          m.mapped.add(h);
        }
      } else {
        idx.blockRemoved(CHURN, new long[] {h}, null, 0);
        m.remove(h, CHURN, 0);
      }
    }
  }

  private static void check(InMemoryBlockIndex idx, Model m) {
    List<String> pods = new ArrayList<>(PODS);
    pods.add(CHURN);
    pods.add("unknown");
    pods.add(1, "a"); // a duplicate
    for (int s = 0; s < 3; s++) {
      PrefixMatch r = idx.lookup(idx.requestKeys(SEQS[s], (String) null), pods);
      for (int i = 0; i < pods.size(); i++) {
        String pod = pods.get(i);
        int len = 0;
        double score = 0;
        while (len < BLOCKS) {
          Set<String> es = m.held.getOrDefault(ENGINE[s][len], new LinkedHashSet<>());
          double best = -1;
          for (int t = 0; t < TIERS.length; t++) {
            if (es.contains(pod + "/" + t)) {
              best = Math.max(best, WEIGHTS[t]);
            }
          }
          if (best < 0) {
            break;
          }
          score += best;
          len++;
        }
        assertThat(r.matchedBlocks(i)).as("seq %d pod %s", s, pod).isEqualTo(len);
        assertThat(r.score(i))
            .as("score seq %d pod %s", s, pod)
            .isCloseTo(score, Offset.offset(1e-9));
      }
    }
    assertThat(idx.stats().entries()).isEqualTo(m.entries());
    assertThat(idx.pods()).isEqualTo(m.pods);
    for (String pod : PODS) {
      assertThat(idx.podEntries(pod)).as("entries of %s", pod).isEqualTo(m.podEntries(pod));
    }
  }
}
