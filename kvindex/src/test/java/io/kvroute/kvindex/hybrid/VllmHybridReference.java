package io.kvroute.kvindex.hybrid;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;

/**
 * A direct transcription, for tests, of vLLM's hybrid prefix-cache hit: {@code
 * HybridKVCacheCoordinator.find_longest_cache_hit} (vllm/v1/core/kv_cache_coordinator.py) over the
 * {@code find_longest_cache_hit} class methods of {@code FullAttentionManager}, {@code
 * SlidingWindowManager} and {@code MambaManager} (vllm/v1/core/single_type_kv_cache_manager.py),
 * without EAGLE, DCP/PCP or fine-grained partial hits. It works on what vLLM works on: a block pool
 * of cached (hash, group) pairs and the request's hash list, with lists of blocks and null
 * placeholders, written independently of {@link HybridRule} (no shared code).
 */
final class VllmHybridReference {
  private static final long NULL = Long.MIN_VALUE;

  private VllmHybridReference() {}

  /** vLLM's SpecGroup: one spec and the groups that share it. */
  private record SpecGroup(GroupSpec spec, List<Integer> groupIds) {}

  /**
   * The hit length in tokens.
   *
   * @param groups the spec of each KV-cache group (index = group id; null: the group is absent)
   * @param cached per group, the block hashes its pool holds (a group's block hash is the hash of
   *     its last hash-block)
   * @param hashes the request's hashes at {@code hashBlockSize}
   * @param maxCacheHitLength tokens
   */
  static int hitTokens(
      GroupSpec[] groups,
      List<Set<Long>> cached,
      long[] hashes,
      int hashBlockSize,
      int maxCacheHitLength) {
    // verify_and_split_kv_cache_groups
    List<SpecGroup> attentionGroups = new ArrayList<>();
    for (int i = 0; i < groups.length; i++) {
      if (groups[i] == null) {
        continue;
      }
      SpecGroup found = null;
      for (SpecGroup g : attentionGroups) {
        if (g.spec().equals(groups[i])) {
          found = g;
          break;
        }
      }
      if (found != null) {
        found.groupIds().add(i);
      } else {
        List<Integer> ids = new ArrayList<>();
        ids.add(i);
        attentionGroups.add(new SpecGroup(groups[i], ids));
      }
    }
    attentionGroups.sort(
        (a, b) ->
            Boolean.compare(
                a.spec().kind() != GroupSpec.Kind.FULL_ATTENTION,
                b.spec().kind() != GroupSpec.Kind.FULL_ATTENTION));
    // scheduler_block_size: the LCM of the group block sizes; alignment of hits
    int alignmentTokens = 1;
    for (GroupSpec g : groups) {
      if (g != null) {
        alignmentTokens = lcm(alignmentTokens, g.blockSize());
      }
    }

    int numGroups = groups.length;
    int hitLength = maxCacheHitLength;
    List<List<Long>> hitBlocksByGroup = new ArrayList<>();
    int[] hitLengthByGroup = new int[numGroups];
    for (int i = 0; i < numGroups; i++) {
      hitBlocksByGroup.add(null);
    }
    boolean isSimpleHybrid =
        attentionGroups.size() == 2
            && attentionGroups.get(0).spec().kind() == GroupSpec.Kind.FULL_ATTENTION;
    while (true) {
      int currHitLength = hitLength;
      for (SpecGroup g : attentionGroups) {
        int first = g.groupIds().get(0);
        if (g.spec().kind() == GroupSpec.Kind.FULL_ATTENTION
            && hitBlocksByGroup.get(first) != null) {
          currHitLength = Math.min(currHitLength, hitLengthByGroup[first]);
          continue;
        }
        List<Long> groupHashes = withBlockSize(hashes, hashBlockSize, g.spec().blockSize());
        List<Long> hitBlocks =
            switch (g.spec().kind()) {
              case FULL_ATTENTION ->
                  fullAttention(groupHashes, currHitLength, g, cached, alignmentTokens);
              case SLIDING_WINDOW ->
                  slidingWindow(groupHashes, currHitLength, g, cached, alignmentTokens);
              case MAMBA -> mamba(groupHashes, currHitLength, g, cached, alignmentTokens);
            };
        int newHitLength = hitBlocks.size() * g.spec().blockSize();
        currHitLength = newHitLength;
        for (int id : g.groupIds()) {
          hitBlocksByGroup.set(id, new ArrayList<>(hitBlocks));
          hitLengthByGroup[id] = newHitLength;
        }
      }
      if (currHitLength >= hitLength) {
        break;
      }
      hitLength = currHitLength;
      if (isSimpleHybrid) {
        break;
      }
    }
    return hitLength;
  }

  /** vLLM's BlockHashListWithBlockSize (newer form): a group block's hash is its last sub-hash. */
  private static List<Long> withBlockSize(long[] hashes, int hashBlockSize, int blockSize) {
    int ratio = blockSize / hashBlockSize;
    List<Long> out = new ArrayList<>();
    for (int j = 0; (j + 1) * ratio <= hashes.length; j++) {
      out.add(hashes[(j + 1) * ratio - 1]);
    }
    return out;
  }

  /** block_pool.get_cached_block(hash, group_ids): a block only if every group holds it. */
  private static boolean getCachedBlock(long hash, List<Integer> groupIds, List<Set<Long>> cached) {
    for (int id : groupIds) {
      if (!cached.get(id).contains(hash)) {
        return false;
      }
    }
    return true;
  }

  private static List<Long> fullAttention(
      List<Long> blockHashes,
      int maxLength,
      SpecGroup g,
      List<Set<Long>> cached,
      int alignmentTokens) {
    int blockSize = g.spec().blockSize();
    List<Long> computed = new ArrayList<>();
    int maxNumBlocks = maxLength / blockSize;
    for (int i = 0; i < Math.min(maxNumBlocks, blockHashes.size()); i++) {
      long h = blockHashes.get(i);
      if (getCachedBlock(h, g.groupIds(), cached)) {
        computed.add(h);
      } else {
        break;
      }
    }
    while (blockSize != alignmentTokens && computed.size() * blockSize % alignmentTokens != 0) {
      computed.remove(computed.size() - 1);
    }
    return computed;
  }

  private static List<Long> slidingWindow(
      List<Long> blockHashes,
      int maxLength,
      SpecGroup g,
      List<Set<Long>> cached,
      int alignmentTokens) {
    int blockSize = g.spec().blockSize();
    int slidingWindowContiguousBlocks = cdiv(g.spec().slidingWindow() - 1, blockSize);
    int maxNumBlocks = maxLength / blockSize;
    List<Long> computed = new ArrayList<>(Arrays.asList(new Long[maxNumBlocks]));
    for (int i = 0; i < maxNumBlocks; i++) {
      computed.set(i, NULL);
    }
    int numContiguousBlocks = 0;
    boolean matchFound = false;
    for (int i = maxNumBlocks - 1; i >= 0; i--) {
      long h = blockHashes.get(i);
      if (getCachedBlock(h, g.groupIds(), cached)) {
        if (numContiguousBlocks == 0 && blockSize != alignmentTokens) {
          int postPopBlocks = i + 1;
          if ((postPopBlocks * blockSize) % alignmentTokens != 0) {
            continue;
          }
        }
        computed.set(i, h);
        numContiguousBlocks += 1;
        if (numContiguousBlocks >= slidingWindowContiguousBlocks) {
          computed.subList(i + numContiguousBlocks, computed.size()).clear();
          matchFound = true;
          break;
        }
      } else {
        numContiguousBlocks = 0;
      }
    }
    if (!matchFound) {
      computed.subList(numContiguousBlocks, computed.size()).clear();
      while (blockSize != alignmentTokens && computed.size() * blockSize % alignmentTokens != 0) {
        computed.remove(computed.size() - 1);
      }
    }
    return computed;
  }

  private static List<Long> mamba(
      List<Long> blockHashes,
      int maxLength,
      SpecGroup g,
      List<Set<Long>> cached,
      int alignmentTokens) {
    int blockSize = g.spec().blockSize();
    List<Long> computed = new ArrayList<>();
    int maxNumBlocks = maxLength / blockSize;
    for (int i = maxNumBlocks - 1; i >= 0; i--) {
      long h = blockHashes.get(i);
      if (getCachedBlock(h, g.groupIds(), cached)) {
        if (blockSize != alignmentTokens && (i + 1) * blockSize % alignmentTokens != 0) {
          continue;
        }
        for (int j = 0; j < i; j++) {
          computed.add(NULL);
        }
        computed.add(h);
        break;
      }
    }
    return computed;
  }

  private static int cdiv(int a, int b) {
    return -Math.floorDiv(-a, b);
  }

  private static int lcm(int a, int b) {
    return a / gcd(a, b) * b;
  }

  private static int gcd(int a, int b) {
    return b == 0 ? a : gcd(b, a % b);
  }
}
