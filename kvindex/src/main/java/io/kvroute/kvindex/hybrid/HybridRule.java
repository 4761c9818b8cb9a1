package io.kvroute.kvindex.hybrid;

import io.kvroute.kvindex.hybrid.GroupSpec.Kind;

/**
 * vLLM's hybrid prefix-cache hit ({@code HybridKVCacheCoordinator.find_longest_cache_hit} over
 * {@code FullAttentionManager}, {@code SlidingWindowManager} and {@code MambaManager}), on one pod,
 * in index blocks, without EAGLE's last-block drop, context parallelism or mamba's fine-grained
 * partial hits:
 *
 * <ul>
 *   <li>the candidate length starts at the request's length; each spec group in turn (full
 *       attention first) either accepts it or lowers it to its own hit under it; when a pass
 *       lowered it, every group is asked again, until a pass changes nothing (one pass for one
 *       full-attention group and one other); a full-attention group is looked up once, later passes
 *       only cap by its hit;
 *   <li>full attention: the run of held blocks from the first, cut to the candidate and aligned
 *       down;
 *   <li>sliding window of {@code w} tokens on {@code b}-token blocks: the largest aligned end
 *       {@code e} under the candidate such that the {@code max(1, ceil((w - 1) / b))} blocks before
 *       {@code e} are all held; if there is none, the run of held blocks from the first, aligned
 *       down;
 *   <li>mamba: the largest aligned end {@code e} under the candidate whose last block is held.
 * </ul>
 *
 * <p>"Held" means held by every member group of the spec group; "aligned" means a multiple of the
 * least common multiple of the groups' block sizes. The scan over windows skips past each missing
 * block, so each block is read at most once per pass.
 *
 * <p>Stateless; thread-safe.
 */
final class HybridRule {
  private HybridRule() {}

  /** Where the rule reads which blocks a pod holds. */
  interface Probe {
    /**
     * How many consecutive index blocks, from index block {@code from} (at most {@code len}), every
     * member group of spec group {@code spec} holds.
     */
    int run(int spec, int from, int len);
  }

  /**
   * The pod's hit in index blocks for a request of {@code max} index blocks.
   *
   * @param prefix per spec group, its run of held blocks from the first over {@code max} blocks if
   *     the caller knows it, else -1 (filled in as the rule reads them)
   */
  static int match(Layout layout, int max, Probe probe, int[] prefix) {
    Layout.Spec[] specs = layout.specs;
    int n = specs.length;
    int[] fullHit = new int[n];
    java.util.Arrays.fill(fullHit, -1);
    int hit = max;
    while (true) {
      int curr = hit;
      for (int s = 0; s < n; s++) {
        Layout.Spec sp = specs[s];
        if (sp.kind == Kind.FULL_ATTENTION && fullHit[s] >= 0) {
          curr = Math.min(curr, fullHit[s]);
          continue;
        }
        int found = find(sp, s, curr, max, layout.align, probe, prefix);
        if (sp.kind == Kind.FULL_ATTENTION) {
          fullHit[s] = found;
        }
        curr = found;
      }
      if (curr >= hit) {
        break;
      }
      hit = curr;
      if (layout.simple) {
        break;
      }
    }
    return hit;
  }

  private static int find(
      Layout.Spec sp, int s, int curr, int max, int align, Probe probe, int[] prefix) {
    int k = sp.k;
    int step = align / k; // group blocks per aligned unit
    int m = curr / k; // group blocks under the candidate
    switch (sp.kind) {
      case FULL_ATTENTION:
        {
          int p = Math.min(prefix(sp, s, max, probe, prefix) / k, m);
          return (p - p % step) * k;
        }
      case SLIDING_WINDOW:
        {
          int needed = sp.needed;
          int e = m - m % step;
          while (e >= needed && e > 0) {
            int start = e - needed;
            int c = probe.run(s, start * k, needed * k);
            if (c >= needed * k) {
              return e * k;
            }
            int missing = start + c / k; // every end above it covers the missing block
            int next = Math.min(missing, e - 1);
            e = next - next % step;
          }
          int p = Math.min(prefix(sp, s, max, probe, prefix) / k, m);
          return (p - p % step) * k;
        }
      case MAMBA:
      default:
        {
          for (int e = m - m % step; e >= 1; e -= step) {
            if (probe.run(s, (e - 1) * k, k) >= k) {
              return e * k;
            }
          }
          return 0;
        }
    }
  }

  private static int prefix(Layout.Spec sp, int s, int max, Probe probe, int[] prefix) {
    if (prefix[s] < 0) {
      prefix[s] = probe.run(s, 0, max);
    }
    return prefix[s];
  }
}
