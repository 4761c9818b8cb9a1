package io.kvroute.kvindex.hash.internal;

/**
 * XXH3-128 (seed 0, default secret), written from the published xxHash specification. Verified
 * against vLLM's golden vectors (kvindex test resources) (every length class: 1-3, 4-8, 9-16,
 * 17-128, 129-240 and long inputs).
 *
 * <p>Thread-safe: stateless.
 */
public final class Xxh3 {
  private Xxh3() {}

  private static final long P32_1 = 0x9E3779B1L;
  private static final long P32_2 = 0x85EBCA77L;
  private static final long P32_3 = 0xC2B2AE3DL;
  private static final long PRIME_MX1 = 0x165667919E3779F9L;
  private static final long PRIME_MX2 = 0x9FB21C651E98DF25L;

  private static final byte[] SECRET = {
    (byte) 0xb8, (byte) 0xfe, (byte) 0x6c, (byte) 0x39, (byte) 0x23, (byte) 0xa4, (byte) 0x4b,
    (byte) 0xbe, (byte) 0x7c, (byte) 0x01, (byte) 0x81, (byte) 0x2c, (byte) 0xf7, (byte) 0x21,
    (byte) 0xad, (byte) 0x1c, (byte) 0xde, (byte) 0xd4, (byte) 0x6d, (byte) 0xe9, (byte) 0x83,
    (byte) 0x90, (byte) 0x97, (byte) 0xdb, (byte) 0x72, (byte) 0x40, (byte) 0xa4, (byte) 0xa4,
    (byte) 0xb7, (byte) 0xb3, (byte) 0x67, (byte) 0x1f, (byte) 0xcb, (byte) 0x79, (byte) 0xe6,
    (byte) 0x4e, (byte) 0xcc, (byte) 0xc0, (byte) 0xe5, (byte) 0x78, (byte) 0x82, (byte) 0x5a,
    (byte) 0xd0, (byte) 0x7d, (byte) 0xcc, (byte) 0xff, (byte) 0x72, (byte) 0x21, (byte) 0xb8,
    (byte) 0x08, (byte) 0x46, (byte) 0x74, (byte) 0xf7, (byte) 0x43, (byte) 0x24, (byte) 0x8e,
    (byte) 0xe0, (byte) 0x35, (byte) 0x90, (byte) 0xe6, (byte) 0x81, (byte) 0x3a, (byte) 0x26,
    (byte) 0x4c, (byte) 0x3c, (byte) 0x28, (byte) 0x52, (byte) 0xbb, (byte) 0x91, (byte) 0xc3,
    (byte) 0x00, (byte) 0xcb, (byte) 0x88, (byte) 0xd0, (byte) 0x65, (byte) 0x8b, (byte) 0x1b,
    (byte) 0x53, (byte) 0x2e, (byte) 0xa3, (byte) 0x71, (byte) 0x64, (byte) 0x48, (byte) 0x97,
    (byte) 0xa2, (byte) 0x0d, (byte) 0xf9, (byte) 0x4e, (byte) 0x38, (byte) 0x19, (byte) 0xef,
    (byte) 0x46, (byte) 0xa9, (byte) 0xde, (byte) 0xac, (byte) 0xd8, (byte) 0xa8, (byte) 0xfa,
    (byte) 0x76, (byte) 0x3f, (byte) 0xe3, (byte) 0x9c, (byte) 0x34, (byte) 0x3f, (byte) 0xf9,
    (byte) 0xdc, (byte) 0xbb, (byte) 0xc7, (byte) 0xc7, (byte) 0x0b, (byte) 0x4f, (byte) 0x1d,
    (byte) 0x8a, (byte) 0x51, (byte) 0xe0, (byte) 0x4b, (byte) 0xcd, (byte) 0xb4, (byte) 0x59,
    (byte) 0x31, (byte) 0xc8, (byte) 0x9f, (byte) 0x7e, (byte) 0xc9, (byte) 0xd9, (byte) 0x78,
    (byte) 0x73, (byte) 0x64, (byte) 0xea, (byte) 0xc5, (byte) 0xac, (byte) 0x83, (byte) 0x34,
    (byte) 0xd3, (byte) 0xeb, (byte) 0xc3, (byte) 0xc5, (byte) 0x81, (byte) 0xa0, (byte) 0xff,
    (byte) 0xfa, (byte) 0x13, (byte) 0x63, (byte) 0xeb, (byte) 0x17, (byte) 0x0d, (byte) 0xdd,
    (byte) 0x51, (byte) 0xb7, (byte) 0xf0, (byte) 0xda, (byte) 0x49, (byte) 0xd3, (byte) 0x16,
    (byte) 0x55, (byte) 0x26, (byte) 0x29, (byte) 0xd4, (byte) 0x68, (byte) 0x9e, (byte) 0x2b,
    (byte) 0x16, (byte) 0xbe, (byte) 0x58, (byte) 0x7d, (byte) 0x47, (byte) 0xa1, (byte) 0xfc,
    (byte) 0x8f, (byte) 0xf8, (byte) 0xb8, (byte) 0xd1, (byte) 0x7a, (byte) 0xd0, (byte) 0x31,
    (byte) 0xce, (byte) 0x45, (byte) 0xcb, (byte) 0x3a, (byte) 0x8f, (byte) 0x95, (byte) 0x16,
    (byte) 0x04, (byte) 0x28, (byte) 0xaf, (byte) 0xd7, (byte) 0xfb, (byte) 0xca, (byte) 0xbb,
    (byte) 0x4b, (byte) 0x40, (byte) 0x7e,
  };

  /**
   * Returns the canonical (big-endian high64 then low64) 16-byte XXH3-128 digest of {@code
   * in[0..len)}, as python-xxhash's {@code xxh3_128_digest}.
   */
  public static byte[] digest128(byte[] in, int len) {
    long lo;
    long hi;
    if (len <= 16) {
      if (len > 8) {
        long bitflipl = le64(SECRET, 32) ^ le64(SECRET, 40);
        long bitfliph = le64(SECRET, 48) ^ le64(SECRET, 56);
        long inLo = le64(in, 0);
        long inHi = le64(in, len - 8);
        long x = inLo ^ inHi ^ bitflipl;
        long mLo = x * Xxh64.P1;
        long mHi = umulh(x, Xxh64.P1);
        mLo += (long) (len - 1) << 54;
        inHi ^= bitfliph;
        mHi += inHi + (inHi & 0xFFFFFFFFL) * (P32_2 - 1);
        mLo ^= Long.reverseBytes(mHi);
        long hLo = mLo * Xxh64.P2;
        long hHi = umulh(mLo, Xxh64.P2) + mHi * Xxh64.P2;
        lo = avalanche3(hLo);
        hi = avalanche3(hHi);
      } else if (len >= 4) {
        long inLo = le32(in, 0);
        long inHi = le32(in, len - 4);
        long input64 = inLo + (inHi << 32);
        long bitflip = le64(SECRET, 16) ^ le64(SECRET, 24);
        long keyed = input64 ^ bitflip;
        long m = Xxh64.P1 + ((long) len << 2);
        long mLo = keyed * m;
        long mHi = umulh(keyed, m);
        mHi += mLo << 1;
        mLo ^= mHi >>> 3;
        mLo ^= mLo >>> 35;
        mLo *= PRIME_MX2;
        mLo ^= mLo >>> 28;
        lo = mLo;
        hi = avalanche3(mHi);
      } else if (len > 0) {
        int c1 = in[0] & 0xFF;
        int c2 = in[len >> 1] & 0xFF;
        int c3 = in[len - 1] & 0xFF;
        int combinedl = (c1 << 16) | (c2 << 24) | c3 | (len << 8);
        int combinedh = Integer.rotateLeft(Integer.reverseBytes(combinedl), 13);
        long bitflipl = (le32(SECRET, 0) ^ le32(SECRET, 4));
        long bitfliph = (le32(SECRET, 8) ^ le32(SECRET, 12));
        lo = Xxh64.avalanche((combinedl & 0xFFFFFFFFL) ^ bitflipl);
        hi = Xxh64.avalanche((combinedh & 0xFFFFFFFFL) ^ bitfliph);
      } else {
        lo = Xxh64.avalanche(le64(SECRET, 64) ^ le64(SECRET, 72));
        hi = Xxh64.avalanche(le64(SECRET, 80) ^ le64(SECRET, 88));
      }
    } else if (len <= 128) {
      long accLo = len * Xxh64.P1;
      long accHi = 0;
      long[] acc = {accLo, accHi};
      if (len > 32) {
        if (len > 64) {
          if (len > 96) {
            mix32(acc, in, 48, len - 64, 96);
          }
          mix32(acc, in, 32, len - 48, 64);
        }
        mix32(acc, in, 16, len - 32, 32);
      }
      mix32(acc, in, 0, len - 16, 0);
      lo = avalanche3(acc[0] + acc[1]);
      hi = -avalanche3(acc[0] * Xxh64.P1 + acc[1] * Xxh64.P4 + len * Xxh64.P2);
    } else if (len <= 240) {
      int nbRounds = len / 32;
      long[] acc = {len * Xxh64.P1, 0};
      for (int i = 0; i < 4; i++) {
        mix32(acc, in, 32 * i, 32 * i + 16, 32 * i);
      }
      acc[0] = avalanche3(acc[0]);
      acc[1] = avalanche3(acc[1]);
      for (int i = 4; i < nbRounds; i++) {
        mix32(acc, in, 32 * i, 32 * i + 16, 3 + 32 * (i - 4));
      }
      mix32(acc, in, len - 16, len - 32, 136 - 17 - 16);
      lo = avalanche3(acc[0] + acc[1]);
      hi = -avalanche3(acc[0] * Xxh64.P1 + acc[1] * Xxh64.P4 + len * Xxh64.P2);
    } else {
      long[] acc = {P32_3, Xxh64.P1, Xxh64.P2, Xxh64.P3, Xxh64.P4, P32_2, Xxh64.P5, P32_1};
      int stripesPerBlock = (SECRET.length - 64) / 8;
      int blockLen = 64 * stripesPerBlock;
      int nbBlocks = (len - 1) / blockLen;
      for (int n = 0; n < nbBlocks; n++) {
        for (int s = 0; s < stripesPerBlock; s++) {
          accumulate512(acc, in, n * blockLen + s * 64, s * 8);
        }
        for (int i = 0; i < 8; i++) {
          long a = acc[i];
          a ^= a >>> 47;
          a ^= le64(SECRET, SECRET.length - 64 + 8 * i);
          acc[i] = a * P32_1;
        }
      }
      int nbStripes = ((len - 1) - blockLen * nbBlocks) / 64;
      for (int s = 0; s < nbStripes; s++) {
        accumulate512(acc, in, nbBlocks * blockLen + s * 64, s * 8);
      }
      accumulate512(acc, in, len - 64, SECRET.length - 64 - 7);
      lo = mergeAccs(acc, 11, len * Xxh64.P1);
      hi = mergeAccs(acc, SECRET.length - 64 - 11, ~(len * Xxh64.P2));
    }
    byte[] out = new byte[16];
    for (int i = 0; i < 8; i++) {
      out[i] = (byte) (hi >>> (56 - 8 * i));
      out[8 + i] = (byte) (lo >>> (56 - 8 * i));
    }
    return out;
  }

  private static void accumulate512(long[] acc, byte[] in, int off, int secOff) {
    for (int i = 0; i < 8; i++) {
      long v = le64(in, off + 8 * i);
      long k = v ^ le64(SECRET, secOff + 8 * i);
      acc[i ^ 1] += v;
      acc[i] += (k & 0xFFFFFFFFL) * (k >>> 32);
    }
  }

  private static long mergeAccs(long[] acc, int secOff, long start) {
    long r = start;
    for (int i = 0; i < 4; i++) {
      r +=
          fold64(
              acc[2 * i] ^ le64(SECRET, secOff + 16 * i),
              acc[2 * i + 1] ^ le64(SECRET, secOff + 16 * i + 8));
    }
    return avalanche3(r);
  }

  private static void mix32(long[] acc, byte[] in, int in1, int in2, int secOff) {
    acc[0] += mix16(in, in1, secOff);
    acc[0] ^= le64(in, in2) + le64(in, in2 + 8);
    acc[1] += mix16(in, in2, secOff + 16);
    acc[1] ^= le64(in, in1) + le64(in, in1 + 8);
  }

  private static long mix16(byte[] in, int off, int secOff) {
    return fold64(
        le64(in, off) ^ le64(SECRET, secOff), le64(in, off + 8) ^ le64(SECRET, secOff + 8));
  }

  private static long umulh(long a, long b) {
    return Math.multiplyHigh(a, b) + ((a >> 63) & b) + ((b >> 63) & a);
  }

  private static long fold64(long a, long b) {
    return (a * b) ^ umulh(a, b);
  }

  private static long avalanche3(long h) {
    h ^= h >>> 37;
    h *= PRIME_MX1;
    return h ^ (h >>> 32);
  }

  /** The default secret's 8 bytes at {@code offset}, little-endian. */
  static long secret64(int offset) {
    return le64(SECRET, offset);
  }

  static long le64(byte[] b, int i) {
    return (b[i] & 0xFFL)
        | (b[i + 1] & 0xFFL) << 8
        | (b[i + 2] & 0xFFL) << 16
        | (b[i + 3] & 0xFFL) << 24
        | (b[i + 4] & 0xFFL) << 32
        | (b[i + 5] & 0xFFL) << 40
        | (b[i + 6] & 0xFFL) << 48
        | (b[i + 7] & 0xFFL) << 56;
  }

  static long le32(byte[] b, int i) {
    return (b[i] & 0xFFL)
        | (b[i + 1] & 0xFFL) << 8
        | (b[i + 2] & 0xFFL) << 16
        | (b[i + 3] & 0xFFL) << 24;
  }
}
