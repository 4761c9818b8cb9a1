package io.kvroute.testkit.engine;

import io.kvroute.kvindex.hash.BlockHash;
import java.util.List;
import java.util.Objects;

/**
 * A request as an {@link EngineModel} receives it: prompt token ids, output length and, for
 * prefill/decode disaggregation, where its KV comes from.
 *
 * <p>Immutable by contract: the prompt array and the block-hash list are not copied (a replay makes
 * millions of tokens; copying them twice would double its memory traffic) and must not be changed
 * after {@link Builder#build()}. Thread-safe under that contract.
 */
public final class EngineRequest {
  private final long id;
  private final int[] prompt;
  private final int maxTokens;
  private final List<BlockHash> blockHashes;
  private final long remoteKvReadyAt;
  private final boolean holdKv;
  private final Object attachment;

  private EngineRequest(Builder b) {
    this.id = b.id;
    this.prompt = b.prompt;
    this.maxTokens = b.maxTokens;
    this.blockHashes = b.blockHashes;
    this.remoteKvReadyAt = b.remoteKvReadyAt;
    this.holdKv = b.holdKv;
    this.attachment = b.attachment;
  }

  /**
   * A builder.
   *
   * @param id the request id (seeds its generated tokens)
   * @param prompt prompt token ids (not copied)
   * @param maxTokens output tokens to generate (the request ends after exactly this many)
   */
  public static Builder builder(long id, int[] prompt, int maxTokens) {
    return new Builder(id, prompt, maxTokens);
  }

  /** The request id. */
  public long id() {
    return id;
  }

  /** Prompt token ids (the shared array: do not modify). */
  public int[] prompt() {
    return prompt;
  }

  /** Prompt length. */
  public int promptLength() {
    return prompt.length;
  }

  /** Output tokens to generate. */
  public int maxTokens() {
    return maxTokens;
  }

  /** Precomputed vLLM block hashes of the prompt's full blocks, or {@code null}. */
  public List<BlockHash> blockHashes() {
    return blockHashes;
  }

  /**
   * For a decode leg: when the prompt's KV (all but its last token) has arrived from the prefill
   * engine, in the engine's clock; -1 when the request computes its own prefill.
   */
  public long remoteKvReadyAt() {
    return remoteKvReadyAt;
  }

  /** For a prefill leg: keep the blocks after finishing, until {@link EngineModel#release}. */
  public boolean holdKv() {
    return holdKv;
  }

  /** The caller's object (for listeners), or {@code null}. */
  public Object attachment() {
    return attachment;
  }

  @Override
  public String toString() {
    return "EngineRequest{id="
        + id
        + ", prompt="
        + prompt.length
        + ", maxTokens="
        + maxTokens
        + "}";
  }

  /** Validating builder of {@link EngineRequest}; not thread-safe. */
  public static final class Builder {
    private final long id;
    private final int[] prompt;
    private final int maxTokens;
    private List<BlockHash> blockHashes;
    private long remoteKvReadyAt = -1;
    private boolean holdKv;
    private Object attachment;

    private Builder(long id, int[] prompt, int maxTokens) {
      this.id = id;
      this.prompt = Objects.requireNonNull(prompt, "prompt");
      this.maxTokens = maxTokens;
    }

    /**
     * Precomputed vLLM block hashes of the prompt's full blocks (from a hasher configured as the
     * engine's), shared rather than recomputed.
     */
    public Builder blockHashes(List<BlockHash> hashes) {
      this.blockHashes = hashes;
      return this;
    }

    /** A decode leg whose prompt KV arrives at {@code nanos} (see {@link #remoteKvReadyAt()}). */
    public Builder remoteKvReadyAt(long nanos) {
      this.remoteKvReadyAt = nanos;
      return this;
    }

    /** A prefill leg whose blocks stay held after it finishes (see {@link #holdKv()}). */
    public Builder holdKv(boolean hold) {
      this.holdKv = hold;
      return this;
    }

    /** The caller's object, handed back through listeners. */
    public Builder attachment(Object attachment) {
      this.attachment = attachment;
      return this;
    }

    /**
     * Builds the request.
     *
     * @throws IllegalArgumentException for an empty prompt or {@code maxTokens < 1}
     */
    public EngineRequest build() {
      if (prompt.length == 0) {
        throw new IllegalArgumentException("request " + id + ": the prompt is empty");
      }
      if (maxTokens < 1) {
        throw new IllegalArgumentException(
            "request " + id + ": maxTokens must be >= 1, was " + maxTokens);
      }
      return new EngineRequest(this);
    }
  }
}
