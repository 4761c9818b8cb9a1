package io.kvroute.kvindex.hash.internal;

/**
 * XXH64 of a byte array, and its final avalanche as a 64-bit mixer.
 *
 * <p>Thread-safe: stateless.
 */
public final class Xxh64 {
  private Xxh64() {}

  // the spec's PRIME64_1..5, which XXH3 uses too
  static final long P1 = 0x9E3779B185EBCA87L;
  static final long P2 = 0xC2B2AE3D27D4EB4FL;
  static final long P3 = 0x165667B19E3779F9L;
  static final long P4 = 0x85EBCA77C2B2AE63L;
  static final long P5 = 0x27D4EB2F165667C5L;

  /** XXH64 of {@code b[0..len)} with {@code seed}. */
  public static long hash(byte[] b, int len, long seed) {
    int p = 0;
    long h;
    if (len >= 32) {
      long v1 = seed + P1 + P2;
      long v2 = seed + P2;
      long v3 = seed;
      long v4 = seed - P1;
      int limit = len - 32;
      do {
        v1 = round(v1, Xxh3.le64(b, p));
        v2 = round(v2, Xxh3.le64(b, p + 8));
        v3 = round(v3, Xxh3.le64(b, p + 16));
        v4 = round(v4, Xxh3.le64(b, p + 24));
        p += 32;
      } while (p <= limit);
      h =
          Long.rotateLeft(v1, 1)
              + Long.rotateLeft(v2, 7)
              + Long.rotateLeft(v3, 12)
              + Long.rotateLeft(v4, 18);
      h = merge(h, v1);
      h = merge(h, v2);
      h = merge(h, v3);
      h = merge(h, v4);
    } else {
      h = seed + P5;
    }
    h += len;
    for (; p + 8 <= len; p += 8) {
      h ^= round(0, Xxh3.le64(b, p));
      h = Long.rotateLeft(h, 27) * P1 + P4;
    }
    if (p + 4 <= len) {
      h ^= Xxh3.le32(b, p) * P1;
      h = Long.rotateLeft(h, 23) * P2 + P3;
      p += 4;
    }
    for (; p < len; p++) {
      h ^= (b[p] & 0xFFL) * P5;
      h = Long.rotateLeft(h, 11) * P1;
    }
    return avalanche(h);
  }

  private static long round(long acc, long input) {
    acc += input * P2;
    acc = Long.rotateLeft(acc, 31);
    return acc * P1;
  }

  private static long merge(long acc, long val) {
    acc ^= round(0, val);
    return acc * P1 + P4;
  }

  /** XXH64's final avalanche. */
  public static long avalanche(long h) {
    h ^= h >>> 33;
    h *= P2;
    h ^= h >>> 29;
    h *= P3;
    return h ^ (h >>> 32);
  }
}
