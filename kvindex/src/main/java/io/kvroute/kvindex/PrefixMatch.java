package io.kvroute.kvindex;

import io.kvroute.kvindex.internal.MatchWriter;
import java.util.Arrays;
import java.util.List;

/**
 * Result of {@link BlockIndex#lookup}: for each requested pod (in request order), the longest
 * consecutive prefix of the request's blocks it holds, its tier-weighted score (the sum over those
 * blocks of the best tier's weight), and how many of those blocks are best held on each tier.
 *
 * <p>Instances may be reused across lookups by one thread ({@link BlockIndex#lookup(long[], int,
 * List, PrefixMatch)}) to avoid allocation; not thread-safe. When the pod list given to the lookup
 * is an unmodifiable JDK list ({@link List#of}, {@link List#copyOf}), the result refers to it for
 * the pod ids instead of copying them.
 */
public final class PrefixMatch {
  private String[] pods = new String[0];
  private int[] blocks = new int[0];
  private double[] scores = new double[0];
  private int[] tierBlocks = new int[0]; // [pod * tiers + tier]
  private List<String> tierNames = List.of();
  private List<String> podList; // the pod ids, when an unmodifiable JDK list; else in pods[]
  private int size;
  private int requestBlocks;
  // the positions written with non-zero values since the last reset (so that a reset clears only
  // those: most pods of a big fleet match nothing); past DIRTY_MAX, a reset clears [0, used)
  private static final int DIRTY_MAX = 256;
  private static final int TRACK_FROM = 1024; // below, a reset fills (cheaper than tracking)
  private final int[] dirty = new int[DIRTY_MAX];
  private int dirtyCount;
  private boolean track; // size >= TRACK_FROM
  private int usedTiers = 1;

  static {
    MatchWriter.install(
        new MatchWriter() {
          @Override
          public void reset(PrefixMatch m, int pods, int blocks, List<String> tierNames) {
            m.reset(pods, blocks, tierNames);
          }

          @Override
          public void set(PrefixMatch m, int i, String pod, int matched, double score) {
            m.set(i, pod, matched, score);
          }

          @Override
          public void names(PrefixMatch m, List<String> pods) {
            m.names(pods);
          }

          @Override
          public void addTierBlocks(PrefixMatch m, int i, int tier, int count) {
            m.addTierBlocks(i, tier, count);
          }

          @Override
          public int tierBlocks(PrefixMatch m, int i, int tier) {
            return m.tierBlocksRaw(i, tier);
          }

          @Override
          public int matched(PrefixMatch m, int i) {
            return m.blocks[i];
          }
        });
  }

  /** An empty, reusable result. */
  public PrefixMatch() {}

  void reset(int podCount, int requestBlocks, List<String> tierNames) {
    int t = tierNames.size();
    int used = size; // every write was below the last lookup's size
    if (used < TRACK_FROM || dirtyCount > DIRTY_MAX || dirtyCount * 8 > used || t != usedTiers) {
      // many positions written (e.g. most of a small fleet matched): vectorised fills are faster
      Arrays.fill(blocks, 0, used, 0);
      Arrays.fill(scores, 0, used, 0.0);
      Arrays.fill(tierBlocks, 0, Math.min(tierBlocks.length, used * usedTiers), 0);
    } else {
      for (int k = 0; k < dirtyCount; k++) {
        int i = dirty[k];
        blocks[i] = 0;
        scores[i] = 0.0;
        for (int x = i * usedTiers, end = x + usedTiers; x < end; x++) {
          tierBlocks[x] = 0;
        }
      }
    }
    dirtyCount = 0;
    usedTiers = t;
    if (pods.length < podCount) {
      int cap = Math.max(podCount, pods.length * 2);
      pods = new String[cap];
      blocks = new int[cap];
      scores = new double[cap];
    }
    if (tierBlocks.length < podCount * t) {
      tierBlocks = new int[Math.max(podCount * t, tierBlocks.length * 2)];
    }
    Arrays.fill(pods, podCount, pods.length, null);
    podList = null;
    this.tierNames = tierNames;
    this.size = podCount;
    this.track = podCount >= TRACK_FROM;
    this.requestBlocks = requestBlocks;
  }

  private static final Class<?> LIST12 = List.of("").getClass();
  private static final Class<?> LISTN = List.of("", "", "").getClass();

  /** Takes the pod ids of all positions from {@code list} (after {@link #reset}). */
  void names(List<String> list) {
    Class<?> c = list.getClass();
    if (c == LISTN || c == LIST12) { // unmodifiable: refer to it
      podList = list;
      return;
    }
    for (int i = 0; i < size; i++) {
      String pod = list.get(i);
      if (pods[i] != pod) { // skips the GC barrier of a reference store when reused
        pods[i] = pod;
      }
    }
  }

  void set(int i, String pod, int matched, double score) {
    if (track) {
      setTracked(i, pod, matched, score);
      return;
    }
    if (pods[i] != pod) { // skips the GC barrier of a reference store when reused
      pods[i] = pod;
    }
    blocks[i] = matched;
    scores[i] = score;
  }

  private void setTracked(int i, String pod, int matched, double score) {
    if (podList == null && pods[i] != pod) {
      pods[i] = pod;
    }
    if (matched != 0 || score != 0) { // else already zero (reset)
      blocks[i] = matched;
      scores[i] = score;
      dirty(i);
    }
  }

  void addTierBlocks(int i, int tier, int count) {
    tierBlocks[i * tierNames.size() + tier] += count;
    if (track) {
      dirty(i);
    }
  }

  private void dirty(int i) {
    if (dirtyCount < DIRTY_MAX) {
      dirty[dirtyCount] = i;
    }
    dirtyCount++;
  }

  int tierBlocksRaw(int i, int tier) {
    return tierBlocks[i * tierNames.size() + tier];
  }

  /** Number of pods in the result (as requested). */
  public int size() {
    return size;
  }

  /** Number of request blocks looked up. */
  public int requestBlocks() {
    return requestBlocks;
  }

  /** The i-th requested pod. */
  public String podId(int i) {
    check(i);
    return podList != null ? podList.get(i) : pods[i];
  }

  /** Longest consecutive cached prefix of the i-th pod, in blocks. */
  public int matchedBlocks(int i) {
    check(i);
    return blocks[i];
  }

  /** Tier-weighted score of the i-th pod (GPU block 1.0, CPU block 0.8 by default). */
  public double score(int i) {
    check(i);
    return scores[i];
  }

  /** Blocks of the i-th pod's prefix whose best tier is {@code tierNames().get(tier)}. */
  public int blocksOnTier(int i, int tier) {
    check(i);
    return tierBlocks[i * tierNames.size() + tier];
  }

  /**
   * Blocks of the i-th pod's prefix best held on {@code medium} (case-insensitive; {@code null}
   * means GPU; 0 if the tier is unknown).
   */
  public int blocksOnTier(int i, String medium) {
    int t = tierNames.indexOf(medium == null ? "GPU" : medium.toUpperCase(java.util.Locale.ROOT));
    return t < 0 ? 0 : blocksOnTier(i, t);
  }

  /** Names of the tiers, in the index's tier order (GPU first). */
  public List<String> tierNames() {
    return tierNames;
  }

  /** Index of {@code podId} in this result, or -1. */
  public int indexOf(String podId) {
    for (int i = 0; i < size; i++) {
      if (podId(i).equals(podId)) {
        return i;
      }
    }
    return -1;
  }

  /** Matched blocks of {@code podId} (0 if it was not requested). */
  public int matchedBlocks(String podId) {
    int i = indexOf(podId);
    return i < 0 ? 0 : blocks[i];
  }

  /** Score of {@code podId} (0 if it was not requested). */
  public double score(String podId) {
    int i = indexOf(podId);
    return i < 0 ? 0 : scores[i];
  }

  /** The largest matched prefix over all pods. */
  public int maxMatchedBlocks() {
    int m = 0;
    for (int i = 0; i < size; i++) {
      m = Math.max(m, blocks[i]);
    }
    return m;
  }

  private void check(int i) {
    if (i < 0 || i >= size) {
      throw new IndexOutOfBoundsException("pod index " + i + " out of [0, " + size + ")");
    }
  }

  @Override
  public String toString() {
    StringBuilder sb = new StringBuilder("PrefixMatch{blocks=").append(requestBlocks);
    for (int i = 0; i < size; i++) {
      sb.append(", ").append(podId(i)).append('=').append(blocks[i]).append('/').append(scores[i]);
    }
    return sb.append('}').toString();
  }
}
