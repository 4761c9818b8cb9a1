package io.kvroute.kvindex.contract;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

/**
 * Property contract of every {@link BlockIndex} backend (shipped in kvindex's test-jar): the index
 * agrees with a simple reference model (maps of sets) under random store, offload, remove, clear
 * and pod-removal sequences over sequences that share prefixes. A backend supplies {@link
 * #createIndex(IndexConfig)} (a new, empty index per example; closed after it if {@link
 * AutoCloseable}).
 */
public abstract class BlockIndexPropertyContract {
  private static final List<String> PODS = List.of("a", "b", "c", "d");
  private static final String[] TIERS = {"GPU", "CPU", "STORAGE"};
  private static final double[] WEIGHTS = {1.0, 0.8, 0.5};
  private static final int BLOCKS = 6;
  // three sequences: 1 shares its first 3 blocks with 0, 2 is unrelated
  private static final int[][] SEQS = new int[3][];
  private static final long[][] ENGINE = new long[3][];

  static {
    SEQS[0] = BlockIndexContract.tokens(1, BLOCKS * 16);
    SEQS[1] = SEQS[0].clone();
    for (int i = 48; i < SEQS[1].length; i++) {
      SEQS[1][i] += 7;
    }
    SEQS[2] = BlockIndexContract.tokens(2, BLOCKS * 16);
    for (int s = 0; s < 3; s++) {
      ENGINE[s] = BlockIndexContract.engine(16, SEQS[s], null);
    }
  }

  /** Reference: engine hash -> pod -> tiers; plus the set of engine hashes ever mapped. */
  static final class Model {
    final Map<Long, Map<String, Set<Integer>>> held = new HashMap<>();
    final Set<Long> mapped = new HashSet<>();
    final Set<String> pods = new HashSet<>();

    void add(long h, String pod, int tier) {
      held.computeIfAbsent(h, k -> new HashMap<>())
          .computeIfAbsent(pod, k -> new HashSet<>())
          .add(tier);
    }
  }

  /** A new, empty index of the backend under test. */
  protected abstract BlockIndex createIndex(IndexConfig config);

  /** Examples of the sparse property (150 by default). */
  protected int examples() {
    return 150;
  }

  @Test
  public void agreesWithReferenceModel() {
    qt().withExamples(examples())
        .forAll(lists().of(integers().between(0, Integer.MAX_VALUE)).ofSizeBetween(1, 50))
        .checkAssert(ops -> run(ops, 0, true));
  }

  /** With 70 more pods holding every block, keys use the dense (bitset) pod sets. */
  @Test
  public void agreesWithReferenceModelOnDenseKeys() {
    qt().withExamples(Math.max(1, examples() * 4 / 15))
        .forAll(lists().of(integers().between(0, Integer.MAX_VALUE)).ofSizeBetween(1, 50))
        .checkAssert(ops -> run(ops, 70, true));
  }

  /**
   * With 70 more pods holding only unrelated blocks, the four pods' ids lie beyond the first 64
   * (their keys are cells, pairs and small sets).
   */
  @Test
  public void agreesWithReferenceModelBeyondSixtyFourPods() {
    qt().withExamples(Math.max(1, examples() / 5))
        .forAll(lists().of(integers().between(0, Integer.MAX_VALUE)).ofSizeBetween(1, 50))
        .checkAssert(ops -> run(ops, 70, false));
  }

  /** With 150 more pods holding every block: more than two words of pod bits per key. */
  @Test
  public void agreesWithReferenceModelOnDenseKeysOverManyPods() {
    qt().withExamples(Math.max(1, examples() / 10))
        .forAll(lists().of(integers().between(0, Integer.MAX_VALUE)).ofSizeBetween(1, 50))
        .checkAssert(ops -> run(ops, 150, true));
  }

  private void run(List<Integer> ops, int fillers, boolean fillersHoldAll) {
    BlockIndex idx = createIndex(IndexConfig.builder().tierWeight("STORAGE", 0.5).build());
    try {
      check(idx, ops, fillers, fillersHoldAll);
    } finally {
      if (idx instanceof AutoCloseable) {
        try {
          ((AutoCloseable) idx).close();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
    }
  }

  private static void check(
      BlockIndex idx, List<Integer> ops, int fillers, boolean fillersHoldAll) {
    Model m = new Model();
    for (int f = 0; f < fillers; f++) {
      String pod = "filler-" + f;
      m.pods.add(pod);
      if (!fillersHoldAll) {
        int[] own = BlockIndexContract.tokens(1000 + f, 16);
        long[] ownEngine = BlockIndexContract.engine(16, own, null);
        idx.blockStored(pod, ownEngine, false, 0, own, 16, null, null, 0);
        m.add(ownEngine[0], pod, 0);
        m.mapped.add(ownEngine[0]);
        continue;
      }
      for (int seq = 0; seq < 3; seq++) {
        idx.blockStored(pod, ENGINE[seq], false, 0, SEQS[seq], 16, null, TIERS[f % 2], 0);
        for (long h : ENGINE[seq]) {
          m.add(h, pod, f % 2);
          m.mapped.add(h);
        }
      }
    }
    for (int op : ops) {
      String pod = PODS.get(op & 3);
      int seq = (op >>> 2) % 3;
      int a = (op >>> 4) % BLOCKS;
      int b = (op >>> 8) % BLOCKS;
      int from = Math.min(a, b);
      int to = Math.max(a, b) + 1;
      int tier = (op >>> 12) % 3;
      long[] e = ENGINE[seq];
      switch ((op >>> 16) % 8) {
        case 0:
        case 1:
        case 2: // store blocks [from, to) with tokens; parent = block from-1
          {
            boolean hasParent = from > 0;
            idx.blockStored(
                pod,
                Arrays.copyOfRange(e, from, to),
                hasParent,
                hasParent ? e[from - 1] : 0,
                Arrays.copyOfRange(SEQS[seq], from * 16, to * 16),
                16,
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
            break;
          }
        case 3: // token-less tier update
          idx.blockStored(
              pod, Arrays.copyOfRange(e, from, to), false, 0, new int[0], 0, null, TIERS[tier], 0);
          m.pods.add(pod);
          for (int j = from; j < to; j++) {
            if (m.mapped.contains(e[j])) {
              m.add(e[j], pod, tier);
            }
          }
          break;
        case 4:
        case 5: // remove one block per hash
          idx.blockRemoved(pod, Arrays.copyOfRange(e, from, to), TIERS[tier], 0);
          for (int j = from; j < to; j++) {
            Map<String, Set<Integer>> byPod = m.held.get(e[j]);
            if (byPod != null && byPod.containsKey(pod)) {
              byPod.get(pod).remove(tier);
            }
          }
          break;
        case 6:
          idx.allBlocksCleared(pod);
          m.held.values().forEach(byPod -> byPod.remove(pod));
          break;
        default:
          idx.removePod(pod);
          m.pods.remove(pod);
          m.held.values().forEach(byPod -> byPod.remove(pod));
          break;
      }
    }
    // compare lookups of every sequence, and the entry counts
    List<String> pods = new ArrayList<>(PODS);
    for (int f = 0; f < fillers; f++) {
      pods.add(f % 3 == 0 ? "filler-" + f : "unknown-" + f);
    }
    pods.add(1, "filler-0"); // a duplicate
    for (int s = 0; s < 3; s++) {
      PrefixMatch r = idx.lookup(idx.requestKeys(SEQS[s], (String) null), pods);
      for (int i = 0; i < pods.size(); i++) {
        String pod = pods.get(i);
        int len = 0;
        double score = 0;
        while (len < BLOCKS) {
          Set<Integer> tiers =
              m.held.getOrDefault(ENGINE[s][len], Map.of()).getOrDefault(pod, Set.of());
          if (tiers.isEmpty()) {
            break;
          }
          score += tiers.stream().mapToDouble(t -> WEIGHTS[t]).max().getAsDouble();
          len++;
        }
        assertThat(r.matchedBlocks(i)).as("seq %d pod %s", s, pod).isEqualTo(len);
        assertThat(r.score(i))
            .as("score seq %d pod %s", s, pod)
            .isCloseTo(score, Offset.offset(1e-9));
      }
    }
    long expectedEntries =
        m.held.values().stream()
            .flatMap(byPod -> byPod.values().stream())
            .mapToLong(Set::size)
            .sum();
    assertThat(idx.stats().entries()).isEqualTo(expectedEntries);
    assertThat(idx.pods()).isEqualTo(m.pods);
  }
}
