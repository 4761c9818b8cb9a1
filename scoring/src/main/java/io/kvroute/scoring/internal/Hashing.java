package io.kvroute.scoring.internal;

import java.nio.charset.StandardCharsets;

/**
 * Fast non-cryptographic 64-bit hashing for the router's approximate prefix index. Not vLLM's
 * hashing and never compared with engine hashes.
 *
 * <p>Stateless and thread-safe.
 */
public final class Hashing {
  private static final long P1 = 0x9E3779B97F4A7C15L;
  private static final long P2 = 0xC2B2AE3D27D4EB4FL;

  private Hashing() {}

  /** MurmurHash3's 64-bit finaliser. */
  public static long fmix(long h) {
    h ^= h >>> 33;
    h *= 0xff51afd7ed558ccdL;
    h ^= h >>> 33;
    h *= 0xc4ceb9fe1a85ec53L;
    h ^= h >>> 33;
    return h;
  }

  /** Hash of a string (UTF-16 code units), for seeds. */
  public static long hashString(long seed, String s) {
    long h = seed ^ P1;
    if (s != null) {
      for (int i = 0; i < s.length(); i++) {
        h = Long.rotateLeft(h ^ (s.charAt(i) * P2), 31) * P1;
      }
      h ^= s.length();
    } else {
      h ^= 0x5bd1e995L;
    }
    return fmix(h);
  }

  /**
   * Chained block hashes: {@code h_i = H(h_{i-1}, tokens of block i)}, the seed being the hash of
   * the model name and cache salt. The trailing partial block is hashed too (as llm-d's approximate
   * producer does), and at most {@code maxBlocks} blocks are produced.
   */
  public static long[] chainedBlocks(
      int[] tokens, int blockSize, int maxBlocks, String model, String salt) {
    int n = (tokens.length + blockSize - 1) / blockSize;
    if (maxBlocks > 0) {
      n = Math.min(n, maxBlocks);
    }
    long[] out = new long[n];
    long parent = hashString(hashString(0, model), salt);
    for (int b = 0; b < n; b++) {
      int from = b * blockSize;
      int to = Math.min(tokens.length, from + blockSize);
      long h = parent * P2 + 0x27d4eb2f165667c5L;
      for (int i = from; i < to; i++) {
        h = Long.rotateLeft(h ^ ((tokens[i] & 0xffffffffL) * P1), 29) * P2;
      }
      h ^= (to - from);
      parent = fmix(h);
      out[b] = parent;
    }
    return out;
  }

  /**
   * Estimated tokens for text when no tokenizer is available: the UTF-8 bytes packed four to a
   * token, little-endian, zero-padded (llm-d's {@code estimate} backend).
   */
  public static int[] estimateTokens(String text) {
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    int[] t = new int[(b.length + 3) / 4];
    for (int i = 0; i < b.length; i++) {
      t[i >> 2] |= (b[i] & 0xff) << ((i & 3) * 8);
    }
    return t;
  }
}
