package io.kvroute.kvindex.hash.internal;

/**
 * A fast 64-bit digest of a token range for request keys: XXH3-style 16-byte mixing ({@code
 * fold64((a ^ s1) * (b ^ s2))}, a 64x64→128-bit multiply folded to 64 bits) of each group of four
 * tokens against XXH3's default secret, accumulated with a rotation so that order matters, then
 * XXH3's avalanche. Two multiplies per four tokens (XXH64 needs eight).
 *
 * <p>The output is part of the request-key definition: changing it changes every key (index
 * replicas sharing keys must run the same version).
 *
 * <p>Thread-safe: stateless.
 */
public final class TokenHash {
  private TokenHash() {}

  private static final long P1 = 0x9E3779B185EBCA87L;
  private static final long[] S = new long[22];

  static {
    for (int i = 0; i < S.length; i++) {
      S[i] = Xxh3.secret64(8 * i);
    }
  }

  private static final long S0 = S[0];
  private static final long S1 = S[1];
  private static final long S2 = S[2];
  private static final long S3 = S[3];
  private static final long S4 = S[4];
  private static final long S5 = S[5];
  private static final long S6 = S[6];
  private static final long S7 = S[7];

  /** The digest of {@code t[from..to)}. */
  public static long tokens(int[] t, int from, int to) {
    int n = to - from;
    if (n == 16) {
      return tokens16(t, from);
    }
    return generic(t, from, to);
  }

  /** The loop form of {@link #tokens} (any length). */
  static long generic(int[] t, int from, int to) {
    int n = to - from;
    long acc = n * P1;
    int i = from;
    int k = 0;
    for (; i + 4 <= to; i += 4) {
      long a = (t[i] & 0xFFFFFFFFL) | ((long) t[i + 1] << 32);
      long b = (t[i + 2] & 0xFFFFFFFFL) | ((long) t[i + 3] << 32);
      acc = Long.rotateLeft(acc, 17) + fold(a ^ S[k], b ^ S[k + 1]);
      k = k == 20 ? 0 : k + 2;
    }
    if (i < to) {
      long a = t[i] & 0xFFFFFFFFL;
      long b = 0;
      if (i + 1 < to) {
        a |= (long) t[i + 1] << 32;
      }
      if (i + 2 < to) {
        b = t[i + 2] & 0xFFFFFFFFL;
      }
      acc = Long.rotateLeft(acc, 17) + fold(a ^ S[k], b ^ S[k + 1] ^ (to - i));
    }
    acc ^= acc >>> 37;
    acc *= 0x165667919E3779F9L;
    return acc ^ (acc >>> 32);
  }

  /** {@link #tokens} of 16 tokens (the default block size), unrolled; the same digest. */
  private static long tokens16(int[] t, int i) {
    java.util.Objects.checkFromIndexSize(i, 16, t.length);
    long acc = 16 * P1;
    acc = Long.rotateLeft(acc, 17) + fold(pack(t, i) ^ S0, pack(t, i + 2) ^ S1);
    acc = Long.rotateLeft(acc, 17) + fold(pack(t, i + 4) ^ S2, pack(t, i + 6) ^ S3);
    acc = Long.rotateLeft(acc, 17) + fold(pack(t, i + 8) ^ S4, pack(t, i + 10) ^ S5);
    acc = Long.rotateLeft(acc, 17) + fold(pack(t, i + 12) ^ S6, pack(t, i + 14) ^ S7);
    acc ^= acc >>> 37;
    acc *= 0x165667919E3779F9L;
    return acc ^ (acc >>> 32);
  }

  private static long pack(int[] t, int i) {
    return (t[i] & 0xFFFFFFFFL) | ((long) t[i + 1] << 32);
  }

  private static long fold(long a, long b) {
    long hi = Math.multiplyHigh(a, b) + ((a >> 63) & b) + ((b >> 63) & a);
    return (a * b) ^ hi;
  }
}
