package io.kvroute.kvindex.hash;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;

/**
 * The request-level inputs of vLLM's {@code generate_block_hash_extra_keys}: LoRA name, multimodal
 * items, cache salt and prompt embeddings. {@link #forBlock(int, int)} produces the per-block
 * extra-keys tuple in vLLM's order: LoRA, multimodal {@code (identifier, offset - blockStart)}
 * pairs, salt (block starting at token 0 only), {@code sha256(embeddings bytes)}.
 *
 * <p>Immutable and thread-safe.
 */
public final class BlockExtraKeys {
  /** No extra keys: every block's tuple is {@code None}. */
  public static final BlockExtraKeys NONE = new Builder().build();

  /**
   * A multimodal item's placeholder range in the prompt.
   *
   * @param identifier vLLM's {@code mm_feature.identifier} (the MM hash; vLLM prefixes it with the
   *     LoRA name when a LoRA is active - pass it exactly as vLLM has it)
   * @param offset first token of the placeholder range
   * @param length number of placeholder tokens
   */
  public record MultiModalItem(String identifier, int offset, int length) {
    /** Validates the fields. */
    public MultiModalItem {
      Objects.requireNonNull(identifier, "identifier");
      if (offset < 0 || length < 0) {
        throw new IllegalArgumentException(
            "multimodal offset and length must be >= 0, were " + offset + ", " + length);
      }
    }
  }

  private final String loraName;
  private final String cacheSalt;
  private final List<MultiModalItem> mmItems;
  private final byte[] promptEmbeds;
  private final int embedBytesPerToken;

  private BlockExtraKeys(Builder b) {
    this.loraName = b.loraName;
    this.cacheSalt = b.cacheSalt;
    List<MultiModalItem> items = new ArrayList<>(b.mmItems);
    items.sort(Comparator.comparingInt(MultiModalItem::offset));
    this.mmItems = List.copyOf(items);
    this.promptEmbeds = b.promptEmbeds;
    this.embedBytesPerToken = b.embedBytesPerToken;
  }

  /** A builder with nothing set. */
  public static Builder builder() {
    return new Builder();
  }

  /** Extra keys carrying only a LoRA name ({@code null} gives {@link #NONE}). */
  public static BlockExtraKeys lora(String loraName) {
    return loraName == null ? NONE : builder().loraName(loraName).build();
  }

  /** The LoRA adapter name, or {@code null}. */
  public String loraName() {
    return loraName;
  }

  /** The cache salt, or {@code null}. */
  public String cacheSalt() {
    return cacheSalt;
  }

  /** Multimodal items sorted by offset. */
  public List<MultiModalItem> multiModalItems() {
    return mmItems;
  }

  /** Whether every block's tuple is {@code None}. */
  public boolean isEmpty() {
    return loraName == null
        && (cacheSalt == null || cacheSalt.isEmpty())
        && mmItems.isEmpty()
        && promptEmbeds == null;
  }

  /**
   * The extra-keys tuple of the block covering tokens {@code [start, end)}, or {@code null} (Python
   * {@code None}) when it would be empty. Elements are {@code String}, {@code byte[]} or {@code
   * List} ({@code (identifier, relative offset)}).
   */
  public List<Object> forBlock(int start, int end) {
    List<Object> keys = null;
    if (loraName != null) {
      keys = new ArrayList<>(4);
      keys.add(loraName);
    }
    for (MultiModalItem mm : mmItems) {
      if (mm.offset() >= end) {
        break;
      }
      if (mm.offset() + mm.length() > start) {
        if (keys == null) {
          keys = new ArrayList<>(4);
        }
        keys.add(List.of(mm.identifier(), mm.offset() - start));
      }
    }
    if (start == 0 && cacheSalt != null && !cacheSalt.isEmpty()) {
      if (keys == null) {
        keys = new ArrayList<>(2);
      }
      keys.add(cacheSalt);
    }
    if (promptEmbeds != null) {
      int from = Math.min(promptEmbeds.length, start * embedBytesPerToken);
      int to = Math.min(promptEmbeds.length, end * embedBytesPerToken);
      if (keys == null) {
        keys = new ArrayList<>(1);
      }
      keys.add(sha256(promptEmbeds, from, to));
    }
    return keys;
  }

  private static byte[] sha256(byte[] b, int from, int to) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      md.update(b, from, to - from);
      return md.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 unavailable", e);
    }
  }

  @Override
  public String toString() {
    return "BlockExtraKeys{lora="
        + loraName
        + ", salt="
        + (cacheSalt == null ? null : "<set>")
        + ", mm="
        + mmItems
        + ", embeds="
        + (promptEmbeds == null ? "none" : promptEmbeds.length + "B")
        + "}";
  }

  /** Builder of {@link BlockExtraKeys}; not thread-safe. */
  public static final class Builder {
    private String loraName;
    private String cacheSalt;
    private final List<MultiModalItem> mmItems = new ArrayList<>();
    private byte[] promptEmbeds;
    private int embedBytesPerToken;

    private Builder() {}

    /** LoRA adapter name ({@code lora_request.lora_name}); added to every block. */
    public Builder loraName(String loraName) {
      this.loraName = loraName;
      return this;
    }

    /** Cache salt; added to the block starting at token 0 only (an empty salt is ignored). */
    public Builder cacheSalt(String cacheSalt) {
      this.cacheSalt = cacheSalt;
      return this;
    }

    /** Adds a multimodal item (identifier, placeholder offset and length). */
    public Builder multiModal(String identifier, int offset, int length) {
      mmItems.add(new MultiModalItem(identifier, offset, length));
      return this;
    }

    /**
     * Prompt embeddings: the raw tensor bytes of all prompt tokens, {@code bytesPerToken} per token
     * (vLLM hashes {@code sha256} of each block's slice).
     */
    public Builder promptEmbeds(byte[] tensorBytes, int bytesPerToken) {
      Objects.requireNonNull(tensorBytes, "tensorBytes");
      if (bytesPerToken <= 0) {
        throw new IllegalArgumentException(
            "promptEmbeds.bytesPerToken must be > 0, was " + bytesPerToken);
      }
      this.promptEmbeds = Arrays.copyOf(tensorBytes, tensorBytes.length);
      this.embedBytesPerToken = bytesPerToken;
      return this;
    }

    /** Builds the immutable extra keys. */
    public BlockExtraKeys build() {
      return new BlockExtraKeys(this);
    }
  }
}
