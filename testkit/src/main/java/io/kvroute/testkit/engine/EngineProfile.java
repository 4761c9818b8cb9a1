package io.kvroute.testkit.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * A model on given hardware as an {@link EngineModel} sees it: its step {@link CostModel}, KV-cache
 * capacity and vLLM scheduler limits, with the public source the figures come from.
 *
 * <p>Two profiles ship, each fitted to the figures its source states (see {@link #sourceFigures()}
 * and {@code docs/routing-quality.md}); a test checks the fit to ±20%:
 *
 * <ul>
 *   <li>{@link #LLAMA_70B_FP8_2XH100} — Llama-3.3-70B-Instruct, FP8, tensor parallel 2 on two H100
 *       80 GB; NVIDIA's published NIM benchmark (NIM 1.8.0): TTFT 406.77 ms for 5,000 input tokens
 *       and 47.77 ms for 500, inter-token latency 18.58 ms, at concurrency 1.
 *   <li>{@link #LLAMA_8B_FP8_H200} — Llama-3.1-8B-Instruct-FP8 on one H200; NVIDIA Dynamo's
 *       pre-deployment profiling of vLLM ({@code tests/planner/README.md}): at ISL/OSL 3000/150,
 *       40k tokens/s/GPU prefill with 80 ms TTFT and 10k tokens/s/GPU decode at 10 ms ITL.
 * </ul>
 *
 * <p>Immutable and thread-safe; custom profiles are built with {@link #builder(String)}.
 */
public final class EngineProfile {

  /** Kinds of figures a source states. */
  public enum FigureKind {
    /** Time to first token of a lone request, milliseconds. */
    TTFT_MS,
    /** Prefill throughput, tokens per second. */
    PREFILL_TOKENS_PER_SECOND,
    /** Inter-token latency of a decode step, milliseconds. */
    ITL_MS
  }

  /**
   * One figure a profile's source states, with the shape it was measured at.
   *
   * @param kind what the value is
   * @param promptTokens input tokens of the measured requests
   * @param batch concurrent sequences (decode) or 1
   * @param contextTokens mean context length per sequence during decode (0 for prefill figures)
   * @param value the stated value (milliseconds or tokens per second, per {@code kind})
   * @param statement where and how the source states it
   */
  public record Figure(
      FigureKind kind,
      int promptTokens,
      int batch,
      int contextTokens,
      double value,
      String statement) {
    /** Validates. */
    public Figure {
      Objects.requireNonNull(kind, "kind");
      Objects.requireNonNull(statement, "statement");
    }
  }

  /**
   * Llama-3.3-70B-Instruct, FP8 weights, TP=2 on 2 × H100 80 GB SXM.
   *
   * <p>Source: NVIDIA NIM LLM benchmarking, "Performance" (docs.nvidia.com/nim/benchmarking/llm,
   * version 1.0.0 docs), Llama-3.3-70b-instruct, NIM 1.8.0, 2 × H100 80G, fp8 TP2, concurrency 1:
   * 5000 input / 500 output tokens: TTFT 406.77 ms, ITL 18.58 ms; 500 input / 2000 output: TTFT
   * 47.77 ms, ITL 18.91 ms.
   *
   * <p>Fit: weights 70.6 GB FP8, 35.3 GB per GPU at 3.35 TB/s ≈ 10.5 ms, taken as 12 ms (85 % of
   * peak); decode KV read 160 KiB per token per GPU (80 layers × 8 KV heads × 128 × K,V × BF16 / 2)
   * ≈ 60 ns; attention 2 × 2 × 80 × 8192 FLOP per token pair / 2 GPUs at ~50 % of BF16 peak ≈ 2.65
   * ns; per-token GEMM 76 µs (≈ 47 % FP8 MFU) and overhead 6.27 ms solve the two TTFTs and the ITL.
   * KV capacity: 0.9 × 80 GB − 35.3 GB weights − ~2 GB activations ≈ 34.7 GB per GPU / 160 KiB ≈
   * 211,800 tokens → 13,200 blocks of 16. vLLM V1 defaults on ≥ 70 GiB GPUs: 8,192 batched tokens,
   * 1,024 sequences.
   */
  public static final EngineProfile LLAMA_70B_FP8_2XH100 =
      builder("llama-3.3-70b-fp8-2xh100")
          .model("meta-llama/Llama-3.3-70B-Instruct (FP8)")
          .hardware("2 x H100 80GB SXM, tensor parallel 2")
          .costModel(
              CostModel.builder()
                  .overheadNanos(6_270_000)
                  .weightsReadNanos(12_000_000)
                  .perTokenNanos(76_000)
                  .attentionNanosPerPair(2.65)
                  .kvReadNanosPerToken(60)
                  .build())
          .kvBlocks(13_200)
          .kvBytesPerToken(327_680)
          .source(
              "NVIDIA NIM LLM benchmarking, Performance (docs.nvidia.com/nim/benchmarking/llm/1.0.0/"
                  + "performance), Llama-3.3-70b-instruct NIM 1.8.0, 2 x H100 80G, fp8 TP2")
          .figure(
              FigureKind.TTFT_MS,
              5000,
              1,
              0,
              406.77,
              "5000 input / 500 output tokens, concurrency 1: TTFT 406.77 ms")
          .figure(
              FigureKind.PREFILL_TOKENS_PER_SECOND,
              5000,
              1,
              0,
              5000 / 0.40677,
              "5000 input tokens in a TTFT of 406.77 ms at concurrency 1 (12,292 tokens/s)")
          .figure(
              FigureKind.TTFT_MS,
              500,
              1,
              0,
              47.77,
              "500 input / 2000 output tokens, concurrency 1: TTFT 47.77 ms")
          .figure(
              FigureKind.ITL_MS,
              5000,
              1,
              5250,
              18.58,
              "5000 input / 500 output tokens, concurrency 1: ITL 18.58 ms")
          .figure(
              FigureKind.ITL_MS,
              500,
              1,
              1500,
              18.91,
              "500 input / 2000 output tokens, concurrency 1: ITL 18.91 ms")
          .build();

  /**
   * Llama-3.1-8B-Instruct-FP8 on 1 × H200 141 GB (vLLM).
   *
   * <p>Source: NVIDIA Dynamo, {@code tests/planner/README.md} (ai-dynamo/dynamo, commit
   * 01657c2ca10a632f91465807eaad2ed74d902b92, Apache-2.0), describing its pre-deployment profiling
   * data {@code profiling_results/H200_TP1P_TP1D}: "nvidia/Llama-3.1-8B-Instruct-FP8 on H200 ... At
   * ISL/OSL 3000/150, it achieves 40k tokens/s/gpu prefill with 80ms TTFT and 10k tokens/s/gpu
   * decode with 10ms ITL".
   *
   * <p>Fit: weights ≈ 8.5 GB FP8 at 4.8 TB/s ≈ 1.8 ms → 2 ms; per-token GEMM 24.5 µs (16 GFLOP per
   * token at ~33 % of FP8 peak); attention 2 × 2 × 32 × 4096 FLOP per pair at ~50 % of BF16 peak ≈
   * 1.06 ns; KV read 16 ns per context token, which the stated 10 ms ITL at 100 sequences of ~3,075
   * tokens implies (an FP8 KV cache: 64 KiB per token at 4.8 TB/s ≈ 14 ns); overhead 2 ms. KV
   * capacity: 0.9 × 141 GB − 8.5 GB − ~3 GB ≈ 115 GB / 64 KiB ≈ 1.75 M tokens → 109,000 blocks of
   * 16.
   */
  public static final EngineProfile LLAMA_8B_FP8_H200 =
      builder("llama-3.1-8b-fp8-h200")
          .model("nvidia/Llama-3.1-8B-Instruct-FP8")
          .hardware("1 x H200 141GB")
          .costModel(
              CostModel.builder()
                  .overheadNanos(2_000_000)
                  .weightsReadNanos(2_000_000)
                  .perTokenNanos(24_500)
                  .attentionNanosPerPair(1.06)
                  .kvReadNanosPerToken(16)
                  .build())
          .kvBlocks(109_000)
          .kvBytesPerToken(65_536)
          .source(
              "NVIDIA Dynamo tests/planner/README.md (ai-dynamo/dynamo@01657c2c), profiling of"
                  + " nvidia/Llama-3.1-8B-Instruct-FP8 on H200, TP1 prefill and decode")
          .figure(
              FigureKind.TTFT_MS, 3000, 1, 0, 80, "ISL 3000: 80 ms TTFT (40k tokens/s/gpu prefill)")
          .figure(
              FigureKind.PREFILL_TOKENS_PER_SECOND,
              3000,
              1,
              0,
              40_000,
              "ISL 3000: 40k tokens/s/gpu prefill")
          .figure(
              FigureKind.ITL_MS,
              3000,
              100,
              3075,
              10,
              "ISL/OSL 3000/150: 10k tokens/s/gpu decode with 10 ms ITL (100 sequences of ~3,075)")
          .build();

  private final String name;
  private final String model;
  private final String hardware;
  private final String source;
  private final CostModel costModel;
  private final int blockSize;
  private final int kvBlocks;
  private final long kvBytesPerToken;
  private final int maxNumBatchedTokens;
  private final int maxNumSeqs;
  private final int maxModelLen;
  private final List<Figure> figures;

  private EngineProfile(Builder b) {
    this.name = b.name;
    this.model = b.model;
    this.hardware = b.hardware;
    this.source = b.source;
    this.costModel = b.costModel;
    this.blockSize = b.blockSize;
    this.kvBlocks = b.kvBlocks;
    this.kvBytesPerToken = b.kvBytesPerToken;
    this.maxNumBatchedTokens = b.maxNumBatchedTokens;
    this.maxNumSeqs = b.maxNumSeqs;
    this.maxModelLen = b.maxModelLen;
    this.figures = List.copyOf(b.figures);
  }

  /** The shipped profiles. */
  public static List<EngineProfile> all() {
    return List.of(LLAMA_70B_FP8_2XH100, LLAMA_8B_FP8_H200);
  }

  /**
   * The shipped profile named {@code name}.
   *
   * @throws IllegalArgumentException naming the known profiles
   */
  public static EngineProfile named(String name) {
    for (EngineProfile p : all()) {
      if (p.name.equals(name)) {
        return p;
      }
    }
    List<String> known = new ArrayList<>();
    all().forEach(p -> known.add(p.name));
    throw new IllegalArgumentException(
        "unknown engine profile \"" + name + "\"; known: " + String.join(", ", known));
  }

  /** A builder with vLLM V1's defaults on large GPUs (block 16, 8,192 tokens, 1,024 seqs). */
  public static Builder builder(String name) {
    return new Builder(name);
  }

  /** A builder starting from this profile. */
  public Builder toBuilder() {
    Builder b = new Builder(name);
    b.model = model;
    b.hardware = hardware;
    b.source = source;
    b.costModel = costModel;
    b.blockSize = blockSize;
    b.kvBlocks = kvBlocks;
    b.kvBytesPerToken = kvBytesPerToken;
    b.maxNumBatchedTokens = maxNumBatchedTokens;
    b.maxNumSeqs = maxNumSeqs;
    b.maxModelLen = maxModelLen;
    b.figures.addAll(figures);
    return b;
  }

  /** Profile name. */
  public String name() {
    return name;
  }

  /** The model. */
  public String model() {
    return model;
  }

  /** The hardware. */
  public String hardware() {
    return hardware;
  }

  /** Where the figures come from. */
  public String source() {
    return source;
  }

  /** The step cost model. */
  public CostModel costModel() {
    return costModel;
  }

  /** Tokens per KV block. */
  public int blockSize() {
    return blockSize;
  }

  /** GPU KV blocks. */
  public int kvBlocks() {
    return kvBlocks;
  }

  /** KV-cache bytes per token of the whole model (for transfer times). */
  public long kvBytesPerToken() {
    return kvBytesPerToken;
  }

  /** vLLM {@code max_num_batched_tokens}: the token budget of a step. */
  public int maxNumBatchedTokens() {
    return maxNumBatchedTokens;
  }

  /** vLLM {@code max_num_seqs}: running sequences at most. */
  public int maxNumSeqs() {
    return maxNumSeqs;
  }

  /** vLLM {@code max_model_len}: prompt + output tokens at most. */
  public int maxModelLen() {
    return maxModelLen;
  }

  /** The figures the source states, which the cost model is fitted to. */
  public List<Figure> sourceFigures() {
    return figures;
  }

  /**
   * What this profile predicts for the shape of {@code figure} (same unit as its value): a lone
   * request's TTFT or prefill rate, or one decode step of {@code batch} sequences.
   */
  public double predict(Figure figure) {
    switch (figure.kind()) {
      case TTFT_MS:
        return costModel.prefillNanos(figure.promptTokens(), 0, maxNumBatchedTokens) / 1e6;
      case PREFILL_TOKENS_PER_SECOND:
        {
          // a saturated engine: full steps of requests of this size
          int n = maxNumBatchedTokens;
          int per = Math.max(1, figure.promptTokens());
          long pairs = 0;
          int left = n;
          while (left > 0) {
            int chunk = Math.min(per, left);
            pairs += CostModel.attentionPairs(chunk, 0);
            left -= chunk;
          }
          double lone = figure.promptTokens() / (costModel.prefillNanos(per, 0, n) / 1e9);
          double saturated = n / (costModel.stepNanos(n, pairs, 0) / 1e9);
          return figure.batch() <= 1 && figure.promptTokens() <= n
              ? Math.max(lone, saturated)
              : saturated;
        }
      default:
        return costModel.decodeStepNanos(
                figure.batch(), (long) figure.batch() * figure.contextTokens())
            / 1e6;
    }
  }

  @Override
  public String toString() {
    return String.format(
        Locale.ROOT,
        "%s (%s on %s; %d KV blocks of %d; %s)",
        name,
        model,
        hardware,
        kvBlocks,
        blockSize,
        costModel);
  }

  /** Validating builder of {@link EngineProfile}; not thread-safe. */
  public static final class Builder {
    private final String name;
    private String model = "";
    private String hardware = "";
    private String source = "";
    private CostModel costModel;
    private int blockSize = 16;
    private int kvBlocks = 10_000;
    private long kvBytesPerToken = 131_072;
    private int maxNumBatchedTokens = 8192;
    private int maxNumSeqs = 1024;
    private int maxModelLen = 131_072;
    private final List<Figure> figures = new ArrayList<>();

    private Builder(String name) {
      this.name = Objects.requireNonNull(name, "name");
    }

    /** The model served. */
    public Builder model(String model) {
      this.model = Objects.requireNonNull(model, "model");
      return this;
    }

    /** The hardware. */
    public Builder hardware(String hardware) {
      this.hardware = Objects.requireNonNull(hardware, "hardware");
      return this;
    }

    /** Where the figures come from. */
    public Builder source(String source) {
      this.source = Objects.requireNonNull(source, "source");
      return this;
    }

    /** The step cost model (required). */
    public Builder costModel(CostModel costModel) {
      this.costModel = Objects.requireNonNull(costModel, "costModel");
      return this;
    }

    /** Tokens per KV block (default 16). */
    public Builder blockSize(int blockSize) {
      this.blockSize = blockSize;
      return this;
    }

    /** GPU KV blocks (default 10,000). */
    public Builder kvBlocks(int kvBlocks) {
      this.kvBlocks = kvBlocks;
      return this;
    }

    /** KV bytes per token of the whole model (default 131,072, Llama-3-8B in BF16). */
    public Builder kvBytesPerToken(long bytes) {
      this.kvBytesPerToken = bytes;
      return this;
    }

    /** Token budget per step (default 8,192). */
    public Builder maxNumBatchedTokens(int tokens) {
      this.maxNumBatchedTokens = tokens;
      return this;
    }

    /** Running sequences at most (default 1,024). */
    public Builder maxNumSeqs(int seqs) {
      this.maxNumSeqs = seqs;
      return this;
    }

    /** Prompt + output tokens at most (default 131,072). */
    public Builder maxModelLen(int tokens) {
      this.maxModelLen = tokens;
      return this;
    }

    /** Adds a figure the source states. */
    public Builder figure(
        FigureKind kind,
        int promptTokens,
        int batch,
        int contextTokens,
        double value,
        String statement) {
      figures.add(new Figure(kind, promptTokens, batch, contextTokens, value, statement));
      return this;
    }

    /**
     * Builds the profile.
     *
     * @throws IllegalArgumentException naming the first invalid field
     */
    public EngineProfile build() {
      if (costModel == null) {
        throw new IllegalArgumentException("profile " + name + ": costModel is required");
      }
      positive(blockSize, "blockSize");
      positive(kvBlocks, "kvBlocks");
      positive(maxNumBatchedTokens, "maxNumBatchedTokens");
      positive(maxNumSeqs, "maxNumSeqs");
      positive(maxModelLen, "maxModelLen");
      if (kvBytesPerToken < 1) {
        throw new IllegalArgumentException(
            "profile " + name + ": kvBytesPerToken must be > 0, was " + kvBytesPerToken);
      }
      return new EngineProfile(this);
    }

    private void positive(int v, String field) {
      if (v < 1) {
        throw new IllegalArgumentException(
            "profile " + name + ": " + field + " must be > 0, was " + v);
      }
    }
  }
}
