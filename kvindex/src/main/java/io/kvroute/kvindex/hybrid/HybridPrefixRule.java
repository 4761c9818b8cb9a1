package io.kvroute.kvindex.hybrid;

import java.util.List;
import java.util.Objects;

/**
 * vLLM's hybrid prefix-cache hit as a plain function, for engine models (kvroute's testkit block
 * pool) that keep their own per-group caches: the rule {@link HybridBlockIndex} applies to a pod's
 * indexed blocks (see its class comment), applied to a caller's membership test.
 *
 * <p>Stateless; thread-safe.
 */
public final class HybridPrefixRule {
  private HybridPrefixRule() {}

  /** Which blocks a group holds. */
  @FunctionalInterface
  public interface Held {
    /**
     * Whether KV-cache group {@code group} holds block {@code block} of the request (blocks of
     * {@code blockSize} tokens, counted from the request's first token).
     */
    boolean held(int group, int block);
  }

  /**
   * The request's hit in blocks of {@code blockSize} tokens: the longest prefix of at most {@code
   * maxBlocks} blocks every group can serve by vLLM's rule.
   *
   * @param groups the spec of each group, by group number ({@code null}: no such group); every
   *     block size must be a multiple of {@code blockSize}
   * @param blockSize tokens per block of {@code held} and of the result (vLLM's {@code
   *     hash_block_size})
   * @throws IllegalArgumentException if no group is given, or a block size is not a multiple of
   *     {@code blockSize}
   */
  public static int hitBlocks(List<GroupSpec> groups, int blockSize, int maxBlocks, Held held) {
    Objects.requireNonNull(held, "held");
    if (blockSize < 1) {
      throw new IllegalArgumentException("blockSize must be >= 1, was " + blockSize);
    }
    GroupSpec[] gs = groups.toArray(new GroupSpec[0]);
    boolean any = false;
    for (GroupSpec g : gs) {
      if (g != null) {
        any = true;
        if (g.blockSize() % blockSize != 0) {
          throw new IllegalArgumentException(
              "group block size " + g.blockSize() + " is not a multiple of " + blockSize);
        }
      }
    }
    if (!any) {
      throw new IllegalArgumentException("groups must describe at least one group");
    }
    Layout l = Layout.of("", gs, blockSize);
    HybridRule.Probe probe =
        (spec, from, len) -> {
          int[] members = l.specs[spec].groups;
          int n = 0;
          while (n < len) {
            for (int g : members) {
              if (!held.held(g, from + n)) {
                return n;
              }
            }
            n++;
          }
          return n;
        };
    int[] prefix = new int[l.specs.length];
    java.util.Arrays.fill(prefix, -1);
    return HybridRule.match(l, Math.max(0, maxBlocks), probe, prefix);
  }
}
