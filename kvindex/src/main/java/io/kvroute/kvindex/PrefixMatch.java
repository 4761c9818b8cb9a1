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
 * List, PrefixMatch)}) to avoid allocation; not thread-safe.
 */
public final class PrefixMatch {
  private String[] pods = new String[0];
  private int[] blocks = new int[0];
  private double[] scores = new double[0];
  private int[] tierBlocks = new int[0]; // [pod * tiers + tier]
  private List<String> tierNames = List.of();
  private int size;
  private int requestBlocks;

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
    if (pods.length < podCount) {
      int cap = Math.max(podCount, pods.length * 2);
      pods = new String[cap];
      blocks = new int[cap];
      scores = new double[cap];
    }
    int t = tierNames.size();
    if (tierBlocks.length < podCount * t) {
      tierBlocks = new int[Math.max(podCount * t, tierBlocks.length * 2)];
    }
    Arrays.fill(blocks, 0, podCount, 0);
    Arrays.fill(scores, 0, podCount, 0.0);
    Arrays.fill(tierBlocks, 0, podCount * t, 0);
    Arrays.fill(pods, podCount, pods.length, null);
    this.tierNames = tierNames;
    this.size = podCount;
    this.requestBlocks = requestBlocks;
  }

  void set(int i, String pod, int matched, double score) {
    if (pods[i] != pod) { // skips the GC barrier of a reference store when reused
      pods[i] = pod;
    }
    blocks[i] = matched;
    scores[i] = score;
  }

  void addTierBlocks(int i, int tier, int count) {
    tierBlocks[i * tierNames.size() + tier] += count;
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
    return pods[i];
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
      if (pods[i].equals(podId)) {
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
      sb.append(", ").append(pods[i]).append('=').append(blocks[i]).append('/').append(scores[i]);
    }
    return sb.append('}').toString();
  }
}
