package io.kvroute.testkit.engine;

import java.util.Locale;

/**
 * How long one engine step takes, from what the step computes: a roofline with a fixed overhead.
 *
 * <pre>
 * step = overhead
 *      + max(weightsRead, perToken × batchedTokens)      // weights streamed once vs. GEMM compute
 *      + attentionPerPair × prefillAttentionPairs         // prefill attention, quadratic in context
 *      + kvReadPerToken × decodeContextTokens             // decode attention reads every cached token
 * </pre>
 *
 * where {@code batchedTokens} counts every token in the step (prefill chunk tokens plus one per
 * decoding sequence), {@code prefillAttentionPairs} sums, over the prefill chunks, new tokens times
 * the context each attends to ({@code n × computed + n(n+1)/2}), and {@code decodeContextTokens}
 * sums the context length of every decoding sequence. A lone decode step therefore costs {@code
 * overhead + weightsRead + kvReadPerToken × context} (the inter-token latency at concurrency 1),
 * and a long prefill costs about {@code perToken} per token plus its attention: the two figures
 * published benchmarks state, which {@link EngineProfile}s are fitted to.
 *
 * <p>Immutable and thread-safe; built by {@link #builder()}.
 */
public final class CostModel {
  private final long overheadNanos;
  private final long weightsReadNanos;
  private final double perTokenNanos;
  private final double attentionNanosPerPair;
  private final double kvReadNanosPerToken;

  private CostModel(Builder b) {
    this.overheadNanos = b.overheadNanos;
    this.weightsReadNanos = b.weightsReadNanos;
    this.perTokenNanos = b.perTokenNanos;
    this.attentionNanosPerPair = b.attentionNanosPerPair;
    this.kvReadNanosPerToken = b.kvReadNanosPerToken;
  }

  /** A builder with every coefficient 0. */
  public static Builder builder() {
    return new Builder();
  }

  /** Fixed cost of every step (scheduling, launches, sampling, collectives), nanoseconds. */
  public long overheadNanos() {
    return overheadNanos;
  }

  /** Time to stream the weights once (the memory floor of any step), nanoseconds. */
  public long weightsReadNanos() {
    return weightsReadNanos;
  }

  /** GEMM compute per batched token, nanoseconds. */
  public double perTokenNanos() {
    return perTokenNanos;
  }

  /** Prefill attention per (new token, context token) pair, nanoseconds. */
  public double attentionNanosPerPair() {
    return attentionNanosPerPair;
  }

  /** Decode attention per context token of a decoding sequence (reading its KV), nanoseconds. */
  public double kvReadNanosPerToken() {
    return kvReadNanosPerToken;
  }

  /**
   * The duration of one step.
   *
   * @param batchedTokens tokens computed in the step (prefill chunks + one per decoding sequence)
   * @param prefillAttentionPairs sum over prefill chunks of new tokens × attended context
   * @param decodeContextTokens sum of the context lengths of the decoding sequences
   * @return nanoseconds, at least 1
   */
  public long stepNanos(int batchedTokens, long prefillAttentionPairs, long decodeContextTokens) {
    double gemm = Math.max(weightsReadNanos, perTokenNanos * batchedTokens);
    double t =
        overheadNanos
            + gemm
            + attentionNanosPerPair * prefillAttentionPairs
            + kvReadNanosPerToken * decodeContextTokens;
    return Math.max(1, Math.round(t));
  }

  /** Attention pairs of a prefill chunk of {@code n} new tokens after {@code computed} tokens. */
  public static long attentionPairs(int n, int computed) {
    return (long) n * computed + (long) n * (n + 1) / 2;
  }

  /**
   * Time to the first token of a lone request: its uncached prompt tokens in chunks of at most
   * {@code chunkTokens}, each chunk one step.
   */
  public long prefillNanos(int promptTokens, int cachedTokens, int chunkTokens) {
    if (chunkTokens < 1) {
      throw new IllegalArgumentException("chunkTokens must be >= 1, was " + chunkTokens);
    }
    int computed = Math.max(0, Math.min(cachedTokens, promptTokens - 1));
    long total = 0;
    while (computed < promptTokens) {
      int n = Math.min(chunkTokens, promptTokens - computed);
      total += stepNanos(n, attentionPairs(n, computed), 0);
      computed += n;
    }
    return total;
  }

  /** One decode step of {@code sequences} sequences holding {@code totalContext} tokens in all. */
  public long decodeStepNanos(int sequences, long totalContext) {
    return stepNanos(sequences, 0, totalContext);
  }

  @Override
  public String toString() {
    return String.format(
        Locale.ROOT,
        "CostModel{overhead=%.2fms, weights=%.2fms, perToken=%.1fus, attention=%.2fns/pair,"
            + " kvRead=%.1fns/token}",
        overheadNanos / 1e6,
        weightsReadNanos / 1e6,
        perTokenNanos / 1e3,
        attentionNanosPerPair,
        kvReadNanosPerToken);
  }

  /** Validating builder of {@link CostModel}; not thread-safe. */
  public static final class Builder {
    private long overheadNanos;
    private long weightsReadNanos;
    private double perTokenNanos;
    private double attentionNanosPerPair;
    private double kvReadNanosPerToken;

    private Builder() {}

    /** Fixed cost per step, nanoseconds (default 0). */
    public Builder overheadNanos(long nanos) {
      this.overheadNanos = nanos;
      return this;
    }

    /** Time to stream the weights once, nanoseconds (default 0). */
    public Builder weightsReadNanos(long nanos) {
      this.weightsReadNanos = nanos;
      return this;
    }

    /** GEMM compute per batched token, nanoseconds (default 0). */
    public Builder perTokenNanos(double nanos) {
      this.perTokenNanos = nanos;
      return this;
    }

    /** Prefill attention per token pair, nanoseconds (default 0). */
    public Builder attentionNanosPerPair(double nanos) {
      this.attentionNanosPerPair = nanos;
      return this;
    }

    /** Decode KV read per context token, nanoseconds (default 0). */
    public Builder kvReadNanosPerToken(double nanos) {
      this.kvReadNanosPerToken = nanos;
      return this;
    }

    /**
     * Builds the model.
     *
     * @throws IllegalArgumentException naming a negative or non-finite coefficient
     */
    public CostModel build() {
      check(overheadNanos, "costModel.overheadNanos");
      check(weightsReadNanos, "costModel.weightsReadNanos");
      check(perTokenNanos, "costModel.perTokenNanos");
      check(attentionNanosPerPair, "costModel.attentionNanosPerPair");
      check(kvReadNanosPerToken, "costModel.kvReadNanosPerToken");
      return new CostModel(this);
    }

    private static void check(double v, String name) {
      if (!(v >= 0) || Double.isInfinite(v)) {
        throw new IllegalArgumentException(name + " must be finite and >= 0, was " + v);
      }
    }
  }
}
