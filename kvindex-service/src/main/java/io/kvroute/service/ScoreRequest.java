package io.kvroute.service;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * A {@code POST /api/v1/score} request: a prompt as text, token ids or block keys, and the pods to
 * score. Block keys win over token ids, token ids over text. Immutable; build with {@link
 * #builder()}.
 */
public final class ScoreRequest {
  private final String prompt;
  private final int[] tokenIds;
  private final long[] promptBlocks;
  private final String model;
  private final String lora;
  private final List<String> candidatePods;

  private ScoreRequest(Builder b) {
    this.prompt = b.prompt;
    this.tokenIds = b.tokenIds == null ? null : b.tokenIds.clone();
    this.promptBlocks = b.promptBlocks == null ? null : b.promptBlocks.clone();
    this.model = b.model;
    this.lora = b.lora;
    this.candidatePods = b.candidatePods == null ? null : List.copyOf(b.candidatePods);
  }

  /** A builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** The prompt text (tokenized by the service's configured tokenizer). */
  public Optional<String> prompt() {
    return Optional.ofNullable(prompt);
  }

  /** The prompt's token ids (a copy). */
  public Optional<int[]> tokenIds() {
    return Optional.ofNullable(tokenIds).map(int[]::clone);
  }

  /**
   * The prompt's block keys: the index's 64-bit request keys (see {@code
   * io.kvroute.kvindex.hash.RequestKeyHasher}, with the service's block size, hash seed and model).
   */
  public Optional<long[]> promptBlocks() {
    return Optional.ofNullable(promptBlocks).map(long[]::clone);
  }

  /** The model (a LoRA adapter's name selects that adapter's keys). */
  public Optional<String> model() {
    return Optional.ofNullable(model);
  }

  /** The LoRA adapter. */
  public Optional<String> lora() {
    return Optional.ofNullable(lora);
  }

  /** The pods to score; absent means every configured pod. */
  public Optional<List<String>> candidatePods() {
    return Optional.ofNullable(candidatePods);
  }

  /** Validating builder of {@link ScoreRequest}; not thread-safe. */
  public static final class Builder {
    private String prompt;
    private int[] tokenIds;
    private long[] promptBlocks;
    private String model;
    private String lora;
    private List<String> candidatePods;

    private Builder() {}

    /** The prompt text. */
    public Builder prompt(String prompt) {
      this.prompt = Objects.requireNonNull(prompt, "prompt");
      return this;
    }

    /** The token ids. */
    public Builder tokenIds(int... tokenIds) {
      this.tokenIds = Objects.requireNonNull(tokenIds, "tokenIds").clone();
      return this;
    }

    /** The block keys (index request keys). */
    public Builder promptBlocks(long... keys) {
      this.promptBlocks = Objects.requireNonNull(keys, "promptBlocks").clone();
      return this;
    }

    /** The model name. */
    public Builder model(String model) {
      this.model = Objects.requireNonNull(model, "model");
      return this;
    }

    /** The LoRA adapter name. */
    public Builder lora(String lora) {
      this.lora = Objects.requireNonNull(lora, "lora");
      return this;
    }

    /** The candidate pods. */
    public Builder candidatePods(List<String> pods) {
      this.candidatePods = new ArrayList<>(Objects.requireNonNull(pods, "candidatePods"));
      return this;
    }

    /**
     * Builds the request.
     *
     * @throws IllegalArgumentException if none of prompt, token ids and block keys is set
     */
    public ScoreRequest build() {
      if (prompt == null && tokenIds == null && promptBlocks == null) {
        throw new IllegalArgumentException("one of prompt, tokenIds or promptBlocks is required");
      }
      return new ScoreRequest(this);
    }
  }
}
