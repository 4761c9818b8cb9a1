package io.kvroute.replay.internal;

/**
 * Deterministic token ids for workload segments: token {@code j} of segment {@code id} is a
 * SplitMix64 mix of the two, reduced to a 128,000-token vocabulary. Equal ids give equal tokens;
 * different ids almost surely differ within a block. Stateless and thread-safe.
 */
public final class Tokens {
  /** The vocabulary size token ids are drawn from (Llama 3's is 128,256). */
  public static final int VOCAB = 128_000;

  private Tokens() {}

  /** Token {@code j} of segment {@code id}. */
  public static int token(long id, int j) {
    long z = id * 0x9E3779B97F4A7C15L + (j + 1) * 0xD1B54A32D192ED03L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    z ^= z >>> 31;
    return (int) Long.remainderUnsigned(z, VOCAB);
  }

  /**
   * The prompt of {@code r}: its segments' tokens, cut at {@code inputLength}; tokens beyond the
   * segments (a trace whose lengths disagree with its block ids) come from a segment unique to the
   * request ({@code uniqueId}).
   */
  public static int[] prompt(TraceRecord r, long uniqueId) {
    int[] out = new int[r.inputLength()];
    int pos = 0;
    long[] ids = r.segmentIds();
    int[] lens = r.segmentLengths();
    for (int s = 0; s < ids.length && pos < out.length; s++) {
      int n = Math.min(lens[s], out.length - pos);
      long id = ids[s];
      for (int j = 0; j < n; j++) {
        out[pos++] = token(id, j);
      }
    }
    long extra = ~uniqueId;
    for (int j = 0; pos < out.length; j++) {
      out[pos++] = token(extra, j);
    }
    return out;
  }
}
