package io.kvroute.scoring.internal;

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
    // The UTF-8 bytes of String.getBytes(UTF_8) (an unpaired surrogate is '?'), encoded straight
    // into the tokens: no byte array the size of the prompt per request.
    int n = text.length();
    int[] t = new int[(utf8Length(text) + 3) / 4];
    int at = 0;
    for (int i = 0; i < n; i++) {
      char c = text.charAt(i);
      if (c < 0x80) {
        at = put(t, at, c);
      } else if (c < 0x800) {
        at = put(t, at, 0xc0 | (c >> 6));
        at = put(t, at, 0x80 | (c & 0x3f));
      } else if (Character.isSurrogate(c)) {
        char d;
        if (Character.isHighSurrogate(c)
            && i + 1 < n
            && Character.isLowSurrogate(d = text.charAt(i + 1))) {
          int cp = Character.toCodePoint(c, d);
          i++;
          at = put(t, at, 0xf0 | (cp >> 18));
          at = put(t, at, 0x80 | ((cp >> 12) & 0x3f));
          at = put(t, at, 0x80 | ((cp >> 6) & 0x3f));
          at = put(t, at, 0x80 | (cp & 0x3f));
        } else {
          at = put(t, at, '?');
        }
      } else {
        at = put(t, at, 0xe0 | (c >> 12));
        at = put(t, at, 0x80 | ((c >> 6) & 0x3f));
        at = put(t, at, 0x80 | (c & 0x3f));
      }
    }
    return t;
  }

  /**
   * {@code chainedBlocks(estimateTokens(text), blockSize, maxBlocks, model, salt)} without the
   * token array: the UTF-8 bytes are packed into tokens and hashed as they are encoded, and
   * encoding stops at {@code maxBlocks} blocks.
   */
  public static long[] chainedBlocksOfText(
      String text, int blockSize, int maxBlocks, String model, String salt) {
    return new TextBlocks(text, blockSize, maxBlocks, model, salt).hashes;
  }

  /** {@code estimateTokens(text).length}, without the tokens. */
  public static int estimatedTokenCount(String text) {
    return (utf8Length(text) + 3) / 4;
  }

  /** The block hashing of {@link #chainedBlocksOfText}: a byte-at-a-time UTF-8 encoder. */
  private static final class TextBlocks {
    final long[] hashes;
    private final int blockSize;
    private int block;
    private int inBlock;
    private long h;
    private long parent;
    private int token;
    private int tokenBytes;
    private int tokensLeft;

    TextBlocks(String text, int blockSize, int maxBlocks, String model, String salt) {
      int tokens = (utf8Length(text) + 3) / 4;
      int n = (tokens + blockSize - 1) / blockSize;
      if (maxBlocks > 0) {
        n = Math.min(n, maxBlocks);
      }
      this.hashes = new long[n];
      this.blockSize = blockSize;
      this.tokensLeft = tokens;
      this.parent = hashString(hashString(0, model), salt);
      this.h = parent * P2 + 0x27d4eb2f165667c5L;
      if (n > 0) {
        encode(text);
      }
    }

    private void encode(String text) {
      int len = text.length();
      for (int i = 0; i < len && block < hashes.length; i++) {
        char c = text.charAt(i);
        if (c < 0x80) {
          put(c);
        } else if (c < 0x800) {
          put(0xc0 | (c >> 6));
          put(0x80 | (c & 0x3f));
        } else if (Character.isSurrogate(c)) {
          char d;
          if (Character.isHighSurrogate(c)
              && i + 1 < len
              && Character.isLowSurrogate(d = text.charAt(i + 1))) {
            int cp = Character.toCodePoint(c, d);
            i++;
            put(0xf0 | (cp >> 18));
            put(0x80 | ((cp >> 12) & 0x3f));
            put(0x80 | ((cp >> 6) & 0x3f));
            put(0x80 | (cp & 0x3f));
          } else {
            put('?');
          }
        } else {
          put(0xe0 | (c >> 12));
          put(0x80 | ((c >> 6) & 0x3f));
          put(0x80 | (c & 0x3f));
        }
      }
      if (tokenBytes > 0) {
        token(); // the last token, zero-padded
      }
    }

    private void put(int b) {
      token |= (b & 0xff) << (tokenBytes * 8);
      if (++tokenBytes == 4) {
        token();
      }
    }

    private void token() {
      if (block == hashes.length) {
        return;
      }
      h = Long.rotateLeft(h ^ ((token & 0xffffffffL) * P1), 29) * P2;
      token = 0;
      tokenBytes = 0;
      tokensLeft--;
      if (++inBlock == blockSize || tokensLeft == 0) {
        h ^= inBlock;
        parent = fmix(h);
        hashes[block++] = parent;
        inBlock = 0;
        h = parent * P2 + 0x27d4eb2f165667c5L;
      }
    }
  }

  private static int put(int[] t, int at, int b) {
    t[at >> 2] |= (b & 0xff) << ((at & 3) * 8);
    return at + 1;
  }

  /** The length of {@code text} in UTF-8 as {@code String.getBytes(UTF_8)} encodes it. */
  static int utf8Length(String text) {
    int n = text.length();
    int len = n;
    for (int i = 0; i < n; i++) {
      char c = text.charAt(i);
      if (c < 0x80) {
        continue;
      }
      if (c < 0x800) {
        len += 1;
      } else if (Character.isSurrogate(c)) {
        if (Character.isHighSurrogate(c)
            && i + 1 < n
            && Character.isLowSurrogate(text.charAt(i + 1))) {
          len += 2; // 4 bytes for 2 chars
          i++;
        }
        // an unpaired surrogate is one '?'
      } else {
        len += 2;
      }
    }
    return len;
  }
}
