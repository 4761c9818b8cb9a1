package io.kvroute.cli;

import io.kvroute.kvindex.event.KvEvent;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code kvroute doctor}'s view of an engine's {@code BlockStored} events: chains of events linked
 * by {@code parent_block_hash} (one chain per request the engine cached), and which chain holds a
 * probe prompt, found by comparing each chain's tokens with the probe's token ids from every
 * tokenizer (the best agreement wins; when none agrees at all, the first chain that starts at the
 * root). Pure; not thread-safe.
 */
final class ProbeChains {
  private ProbeChains() {}

  /**
   * A run of events, each continuing the previous one.
   *
   * @param events the events, in arrival order
   * @param root whether the first event starts at the prompt's first token (no parent)
   * @param blockSize the events' block size
   * @param tokens the events' tokens, concatenated
   */
  record Chain(List<KvEvent.BlockStored> events, boolean root, int blockSize, int[] tokens) {
    int blocks() {
      int n = 0;
      for (KvEvent.BlockStored e : events) {
        n += e.blockHashes().size();
      }
      return n;
    }
  }

  /**
   * Where a probe prompt's blocks are among the engine's events.
   *
   * @param chain the chain
   * @param offset the prompt token the chain's first token is
   * @param how {@code "token ids"} when matched by tokens, {@code "arrival"} when only by time
   */
  record Attribution(Chain chain, int offset, String how) {
    /** The engine's tokens at prompt positions {@code [offset, offset + n)}, cut at {@code end}. */
    int[] tokensUpTo(int end) {
      int n = Math.max(0, Math.min(chain.tokens().length, end - offset));
      return java.util.Arrays.copyOf(chain.tokens(), n);
    }
  }

  /** Links GPU events of KV-cache group 0 into chains, in arrival order. */
  static List<Chain> chains(List<KvEvent.BlockStored> events) {
    List<List<KvEvent.BlockStored>> runs = new ArrayList<>();
    Map<Long, List<KvEvent.BlockStored>> byLastHash = new HashMap<>();
    for (KvEvent.BlockStored e : events) {
      boolean gpu = e.medium() == null || e.medium().equalsIgnoreCase("GPU");
      if (!gpu
          || e.groupIndex() != 0
          || e.blockSize() <= 0
          || e.blockHashes().size() == 0
          || e.tokenIds().length != e.blockHashes().size() * e.blockSize()) {
        continue; // offload copies, other KV-cache groups, token-less or sparse spans
      }
      List<KvEvent.BlockStored> run = e.hasParent() ? byLastHash.remove(e.parentHash()) : null;
      if (run == null) {
        run = new ArrayList<>();
        runs.add(run);
      }
      run.add(e);
      byLastHash.put(e.blockHashes().get(e.blockHashes().size() - 1), run);
    }
    List<Chain> out = new ArrayList<>(runs.size());
    for (List<KvEvent.BlockStored> run : runs) {
      int length = 0;
      for (KvEvent.BlockStored e : run) {
        length += e.tokenIds().length;
      }
      int[] tokens = new int[length];
      int at = 0;
      for (KvEvent.BlockStored e : run) {
        System.arraycopy(e.tokenIds(), 0, tokens, at, e.tokenIds().length);
        at += e.tokenIds().length;
      }
      out.add(new Chain(List.copyOf(run), !run.get(0).hasParent(), run.get(0).blockSize(), tokens));
    }
    return out;
  }

  /**
   * The chain holding a probe prompt of {@code promptLength} tokens (-1: unknown), given the
   * prompt's ids from each tokenizer; null when no chain can be placed.
   */
  static Attribution attribute(
      List<Chain> chains, Map<String, int[]> candidates, int promptLength) {
    Attribution best = null;
    int bestAgreement = 0;
    for (Chain c : chains) {
      for (int[] candidate : candidates.values()) {
        for (int offset : offsets(c, candidate)) {
          int compared = compared(c, offset, candidate, promptLength);
          int agreement = agreement(c, offset, candidate, promptLength);
          // most positions must agree: a tokenizer shifted by one token agrees by chance only
          if (agreement > bestAgreement && 2 * agreement >= compared) {
            bestAgreement = agreement;
            best = new Attribution(c, offset, "token ids");
          }
        }
      }
    }
    if (best != null) {
      return best;
    }
    // no tokenizer agrees with any chain: the root chain that looks most like the probe (the
    // longest common prefix with a tokenizer's ids, then the longest)
    Chain pick = null;
    int pickPrefix = -1;
    for (Chain c : chains) {
      if (!c.root()) {
        continue;
      }
      int prefix = 0;
      for (int[] candidate : candidates.values()) {
        int m = java.util.Arrays.mismatch(candidate, c.tokens());
        prefix = Math.max(prefix, m < 0 ? candidate.length : m);
      }
      if (pick == null
          || prefix > pickPrefix
          || (prefix == pickPrefix && c.tokens().length > pick.tokens().length)) {
        pick = c;
        pickPrefix = prefix;
      }
    }
    return pick == null ? null : new Attribution(pick, 0, "arrival");
  }

  /** Where the chain may start in the prompt: 0 for a root, else where its first block occurs. */
  private static List<Integer> offsets(Chain c, int[] candidate) {
    if (c.root()) {
      return List.of(0);
    }
    List<Integer> out = new ArrayList<>();
    int bs = c.blockSize();
    for (int k = bs; k + bs <= candidate.length; k += bs) {
      if (java.util.Arrays.equals(candidate, k, k + bs, c.tokens(), 0, bs)) {
        out.add(k);
      }
    }
    return out;
  }

  private static int compared(Chain c, int offset, int[] candidate, int promptLength) {
    int end = Math.min(candidate.length, promptLength < 0 ? candidate.length : promptLength);
    return Math.max(0, Math.min(c.tokens().length, end - offset));
  }

  private static int agreement(Chain c, int offset, int[] candidate, int promptLength) {
    int end = Math.min(candidate.length, promptLength < 0 ? candidate.length : promptLength);
    int n = 0;
    for (int i = 0; i < c.tokens().length && offset + i < end; i++) {
      if (c.tokens()[i] == candidate[offset + i]) {
        n++;
      }
    }
    return n;
  }

  /** The block sizes of the chains' events, with their counts. */
  static Map<Integer, Integer> blockSizes(List<KvEvent.BlockStored> events) {
    Map<Integer, Integer> sizes = new LinkedHashMap<>();
    for (KvEvent.BlockStored e : events) {
      if (e.blockSize() > 0) {
        sizes.merge(e.blockSize(), 1, Integer::sum);
      }
    }
    return sizes;
  }
}
