package io.kvroute.kvindex.hybrid;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.longs;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * kvroute's hybrid match against {@link VllmHybridReference} (a direct transcription of vLLM's
 * rule) on random histories: pods with random group layouts (full attention, sliding windows of
 * random sizes, mamba; merged and separate spec groups; the full-attention group first or not;
 * blocks of one or two index blocks) store, remove and clear random block ranges of prompts that
 * share prefixes; every pod's matched length for random prompts must equal vLLM's hit.
 */
class HybridMatchPropertyTest {
  private static final int IBS = 4; // index block size (tokens); vLLM's hash_block_size here
  private static final int PODS = 4;

  /** Layouts (group id → spec), with w / w2 windows and b the group block size. */
  private static GroupSpec[] layout(int which, int b, int w, int w2) {
    GroupSpec full = GroupSpec.fullAttention(b);
    GroupSpec swa = GroupSpec.slidingWindow(b, w);
    GroupSpec mamba = GroupSpec.mamba(b);
    return switch (which) {
      case 0 -> new GroupSpec[] {full}; // plain model
      case 1 -> new GroupSpec[] {full, swa}; // gpt-oss
      case 2 -> new GroupSpec[] {swa, full}; // full attention not in group 0
      case 3 -> new GroupSpec[] {full, swa, swa, swa}; // Gemma-3: sliding groups merged
      case 4 -> new GroupSpec[] {full, mamba}; // Jamba / Nemotron-H
      case 5 -> new GroupSpec[] {mamba, full, swa}; // three spec groups: the fixed point
      case 6 -> new GroupSpec[] {swa}; // sliding only
      case 7 -> new GroupSpec[] {mamba}; // mamba only
      case 8 -> new GroupSpec[] {full, swa, GroupSpec.slidingWindow(b, w2)}; // two windows
      default -> new GroupSpec[] {swa, mamba}; // no full attention at all
    };
  }

  private static final int LAYOUTS = 10;

  @Test
  void matchEqualsVllmsRuleOnRandomHistories() {
    qt().withExamples(400)
        .forAll(longs().all(), integers().between(1, 2))
        .checkAssert((seed, k) -> check(seed, k));
  }

  @Test
  void aFewLongHistories() {
    for (long seed = 1; seed <= 20; seed++) {
      check(seed * 7919, 1 + (int) (seed % 2));
    }
  }

  private static void check(long seed, int k) {
    Random r = new Random(seed);
    int b = IBS * k; // every group has the same block size (see HybridBlockIndex: mixed sizes)
    HybridBlockIndex idx =
        HybridBlockIndex.inMemory(IndexConfig.builder().blockSize(IBS).modelName("m").build());
    String[] pods = new String[PODS];
    GroupSpec[][] layouts = new GroupSpec[PODS][];
    List<List<Set<Long>>> truth = new ArrayList<>();
    for (int p = 0; p < PODS; p++) {
      pods[p] = "pod-" + p;
      int w = 1 + r.nextInt(6 * b);
      int w2 = 1 + r.nextInt(10 * b);
      layouts[p] = layout(r.nextInt(LAYOUTS), b, w, w2);
      List<Set<Long>> groups = new ArrayList<>();
      for (int g = 0; g < layouts[p].length; g++) {
        groups.add(new HashSet<>());
      }
      truth.add(groups);
    }
    // prompts sharing prefixes: 3 families, 6 prompts diverging at random blocks
    int blocks = 6 + r.nextInt(10); // group blocks per prompt
    int[][] family = new int[3][blocks * b];
    for (int[] f : family) {
      for (int i = 0; i < f.length; i++) {
        f[i] = r.nextInt(100_000);
      }
    }
    int[][] prompts = new int[6][];
    long[][] hashes = new long[6][];
    for (int i = 0; i < prompts.length; i++) {
      int[] t = family[r.nextInt(3)].clone();
      // diverging inside the first index block of a group block: two different engine blocks
      // never share a leading index block (the wrapped index keeps entries per index block, so
      // removing one would remove the other's shared index block too: a limit of engine blocks
      // larger than index blocks, not of the hybrid rule)
      int diverge = r.nextInt(blocks + 1) * b + r.nextInt(IBS);
      for (int j = diverge; j < t.length; j++) {
        t[j] = 100_000 + r.nextInt(100_000);
      }
      prompts[i] = t;
      hashes[i] = engineHashes(t);
    }
    Set<Long> mapped = new HashSet<>(); // engine hashes the index has seen stored (any group)
    // vLLM stores every group of a step in group order: each pod's first request describes all
    List<int[]> first = new ArrayList<>();
    for (int p = 0; p < PODS; p++) {
      for (int g = 0; g < layouts[p].length; g++) {
        first.add(new int[] {p, g});
      }
    }
    int ops = first.size() + 10 + r.nextInt(60);
    List<String> history = new ArrayList<>();
    for (int op = 0; op < ops; op++) {
      boolean describe = op < first.size();
      int p = describe ? first.get(op)[0] : r.nextInt(PODS);
      int g = describe ? first.get(op)[1] : r.nextInt(layouts[p].length);
      GroupSpec spec = layouts[p][g];
      int x = describe ? 0 : r.nextInt(100);
      if (x < 70) {
        int q = r.nextInt(prompts.length);
        int a = describe || r.nextInt(3) == 0 ? 0 : r.nextInt(blocks);
        if (a > 0 && !mapped.contains(hashes[q][a * k - 1])) {
          a = 0;
        }
        int e = a + 1 + r.nextInt(Math.min(4, blocks - a));
        long[] h = new long[e - a];
        for (int j = a; j < e; j++) {
          h[j - a] = hashes[q][(j + 1) * k - 1];
        }
        KvEvent.BlockStored.Builder ev =
            KvEvent.BlockStored.builder()
                .blockHashes(EngineHashes.ofInts(h))
                .tokenIds(Arrays.copyOfRange(prompts[q], a * b, e * b))
                .blockSize(b)
                .groupIdx(g)
                .kvCacheSpecKind(kindName(spec))
                .kvCacheSpecSlidingWindow(
                    spec.kind() == GroupSpec.Kind.SLIDING_WINDOW ? spec.slidingWindow() : null);
        if (a > 0) {
          ev.parentBlockHash(hashes[q][a * k - 1]);
        }
        idx.blockStored(pods[p], ev.build());
        for (long v : h) {
          truth.get(p).get(g).add(v);
          mapped.add(v);
        }
        history.add("store " + pods[p] + " g" + g + " prompt " + q + " [" + a + "," + e + ")");
      } else if (x < 95) {
        Set<Long> held = truth.get(p).get(g);
        if (held.isEmpty()) {
          continue;
        }
        long v = new ArrayList<>(held).get(r.nextInt(held.size()));
        idx.blockRemoved(
            pods[p], KvEvent.BlockRemoved.builder().blockHashes(v).groupIdx(g).build());
        held.remove(v);
        history.add("remove " + pods[p] + " g" + g);
      } else {
        idx.allBlocksCleared(pods[p]);
        truth.get(p).forEach(Set::clear);
        history.add("clear " + pods[p]);
      }
    }
    List<String> podList = List.of(pods);
    for (int q = 0; q < prompts.length; q++) {
      int numKeys = r.nextInt(blocks * k + 1);
      int[] tokens = Arrays.copyOf(prompts[q], numKeys * IBS);
      long[] keys = idx.requestKeys(tokens, (String) null);
      assertThat(keys).hasSize(numKeys);
      PrefixMatch m = idx.lookup(keys, podList);
      for (int p = 0; p < PODS; p++) {
        if (layouts[p].length == 1
            && layouts[p][0].kind() == GroupSpec.Kind.FULL_ATTENTION
            && k != 1) {
          // a plain pod keeps the wrapped index's answer, which counts the index blocks of an
          // engine block that differs only in its later index blocks (vLLM would not): not the
          // hybrid rule's business
          continue;
        }
        int expected =
            VllmHybridReference.hitTokens(layouts[p], truth.get(p), hashes[q], IBS, numKeys * IBS)
                / IBS;
        int pod = p;
        int query = q;
        assertThat(m.matchedBlocks(p))
            .as(
                () ->
                    String.format(
                        "seed %d k %d pod %d layout %s prompt %d keys %d history %s%s",
                        seed,
                        k,
                        pod,
                        Arrays.toString(layouts[pod]),
                        query,
                        numKeys,
                        history,
                        debug(idx, keys, pods[pod], truth.get(pod), hashes[query])))
            .isEqualTo(expected);
      }
    }
  }

  static String debug(
      HybridBlockIndex idx, long[] keys, String pod, List<Set<Long>> truth, long[] h) {
    StringBuilder sb = new StringBuilder("\nper key held (group0 index): ");
    for (int i = 0; i < keys.length; i++) {
      sb.append(idx.delegate().lookup(new long[] {keys[i]}, List.of(pod)).matchedBlocks(0));
    }
    sb.append("\ntruth g0: ");
    for (int i = 0; i < keys.length; i++) {
      sb.append(truth.get(0).contains(h[i]) ? 1 : 0);
    }
    sb.append(" layout ").append(idx.layout(pod));
    return sb.toString();
  }

  private static String kindName(GroupSpec s) {
    return switch (s.kind()) {
      case FULL_ATTENTION -> "full_attention";
      case SLIDING_WINDOW -> "sliding_window";
      case MAMBA -> "mamba";
    };
  }

  /** A chained 64-bit hash per index block, standing in for vLLM's block hashes. */
  private static long[] engineHashes(int[] tokens) {
    long[] out = new long[tokens.length / IBS];
    long h = 0x51ED2701L;
    for (int i = 0; i < out.length; i++) {
      for (int j = i * IBS; j < (i + 1) * IBS; j++) {
        h = (h ^ tokens[j]) * 0x9E3779B97F4A7C15L;
        h ^= h >>> 29;
      }
      out[i] = h == 0 ? 1 : h;
    }
    return out;
  }
}
