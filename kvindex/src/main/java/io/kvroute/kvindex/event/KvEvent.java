package io.kvroute.kvindex.event;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * One KV-cache event of a vLLM (or SGLang) {@code KVEventBatch}: {@link BlockStored}, {@link
 * BlockRemoved} (both a {@link BlockEvent}) or {@link AllBlocksCleared}.
 *
 * <p>Events are final classes built with static factories or builders (not records), so that fields
 * vLLM adds later can be added here without breaking callers. Nullable fields mirror vLLM's {@code
 * None}; the encoder writes them as {@code nil} or omits them as the chosen {@link EventSchema}
 * requires. Array fields are shared, not copied (ingestion stays allocation-light): treat them as
 * read-only. Instances are immutable by that contract and thread-safe once published.
 */
public sealed interface KvEvent permits KvEvent.BlockEvent, KvEvent.AllBlocksCleared {

  /** The wire tag: {@code "BlockStored"}, {@code "BlockRemoved"} or {@code "AllBlocksCleared"}. */
  String type();

  /**
   * An event about some blocks, {@link BlockStored} or {@link BlockRemoved}: their hashes and the
   * fields both carry (where the blocks are: medium and KV-cache group; locality, ownership).
   */
  abstract sealed class BlockEvent implements KvEvent permits BlockStored, BlockRemoved {
    private final EngineHashes blockHashes;
    private final String medium;
    private final Integer groupIdx;
    private final Object locality;
    private final Object ownership;

    BlockEvent(
        EngineHashes blockHashes,
        String medium,
        Integer groupIdx,
        Object locality,
        Object ownership) {
      this.blockHashes = blockHashes;
      this.medium = medium;
      this.groupIdx = groupIdx;
      this.locality = locality;
      this.ownership = ownership;
    }

    /**
     * The blocks' hashes: for a store one per newly cached block, parent to child; for a removal,
     * the removed blocks.
     */
    public EngineHashes blockHashes() {
      return blockHashes;
    }

    /** Storage tier ({@code GPU}, {@code CPU}, ...), or {@code null} (A0 schema; means GPU). */
    public String medium() {
      return medium;
    }

    /** KV-cache group index, or {@code null}. */
    public Integer groupIdx() {
      return groupIdx;
    }

    /** The KV-cache group index, 0 when absent. */
    public int groupIndex() {
      return groupIdx == null ? 0 : groupIdx;
    }

    /** M1+ {@code locality} value as decoded, or {@code null}. */
    public Object locality() {
      return locality;
    }

    /** M2 {@code ownership} value as decoded, or {@code null}. */
    public Object ownership() {
      return ownership;
    }

    @Override
    public String toString() {
      return type()
          + "[hashes="
          + blockHashes
          + details()
          + ", medium="
          + medium
          + ", groupIdx="
          + groupIdx
          + "]";
    }

    /** What {@link #toString()} shows between the hashes and the medium. */
    String details() {
      return "";
    }

    /** Whether {@code o}'s shared fields equal this event's (the subclass compares the rest). */
    final boolean sameBlockFields(BlockEvent o) {
      return blockHashes.equals(o.blockHashes)
          && Objects.equals(medium, o.medium)
          && Objects.equals(groupIdx, o.groupIdx)
          && Objects.deepEquals(locality, o.locality)
          && Objects.deepEquals(ownership, o.ownership);
    }
  }

  /**
   * Blocks became cached on a pod ({@code BlockPool.cache_full_blocks}). Build with {@link
   * #builder()} or {@link #of(EngineHashes, EngineHashes, int[], int)}.
   */
  final class BlockStored extends BlockEvent {
    private final EngineHashes parentBlockHash;
    private final int[] tokenIds;
    private final int blockSize;
    private final Long loraId;
    private final String loraName;
    private final List<Object> extraKeys;
    private final String kvCacheSpecKind;
    private final Integer kvCacheSpecSlidingWindow;
    private final Object sessionId;

    // the decoder's constructor: validated by the decoder, no builder allocated
    BlockStored(
        EngineHashes blockHashes,
        EngineHashes parentBlockHash,
        int[] tokenIds,
        int blockSize,
        Long loraId,
        String medium,
        String loraName,
        List<Object> extraKeys,
        Integer groupIdx,
        String kvCacheSpecKind,
        Integer kvCacheSpecSlidingWindow,
        Object locality,
        Object ownership,
        Object sessionId) {
      super(blockHashes, medium, groupIdx, locality, ownership);
      this.parentBlockHash = parentBlockHash;
      this.tokenIds = tokenIds;
      this.blockSize = blockSize;
      this.loraId = loraId;
      this.loraName = loraName;
      this.extraKeys = extraKeys;
      this.kvCacheSpecKind = kvCacheSpecKind;
      this.kvCacheSpecSlidingWindow = kvCacheSpecSlidingWindow;
      this.sessionId = sessionId;
    }

    /** A builder with vLLM's usual values (GPU, group 0, {@code full_attention}, no parent). */
    public static Builder builder() {
      return new Builder();
    }

    /** A GPU store in vLLM's usual shape (no LoRA, no extra keys, group 0). */
    public static BlockStored of(
        EngineHashes blockHashes, EngineHashes parentBlockHash, int[] tokenIds, int blockSize) {
      return builder()
          .blockHashes(blockHashes)
          .parentBlockHash(parentBlockHash)
          .tokenIds(tokenIds)
          .blockSize(blockSize)
          .build();
    }

    /** A builder holding this event's values. */
    public Builder toBuilder() {
      Builder b = new Builder().from(this);
      b.parentBlockHash = parentBlockHash;
      b.tokenIds = tokenIds;
      b.blockSize = blockSize;
      b.loraId = loraId;
      b.loraName = loraName;
      b.extraKeys = extraKeys;
      b.kvCacheSpecKind = kvCacheSpecKind;
      b.kvCacheSpecSlidingWindow = kvCacheSpecSlidingWindow;
      b.sessionId = sessionId;
      return b;
    }

    @Override
    public String type() {
      return "BlockStored";
    }

    /** Hash of the block before the first one (one element), or {@code null} at the root. */
    public EngineHashes parentBlockHash() {
      return parentBlockHash;
    }

    /** Whether the event names a parent block. */
    public boolean hasParent() {
      return parentBlockHash != null;
    }

    /** The parent's hash as u64 bits, 0 when there is none ({@link #hasParent()}). */
    public long parentHash() {
      return parentBlockHash == null ? 0L : parentBlockHash.get(0);
    }

    /** The tokens of the span (may cover skipped blocks too; shared array, do not modify). */
    public int[] tokenIds() {
      return tokenIds;
    }

    /** Block size in tokens (0 in old token-less offload events). */
    public int blockSize() {
      return blockSize;
    }

    /** LoRA adapter int id, or {@code null}. */
    public Long loraId() {
      return loraId;
    }

    /** LoRA adapter name, or {@code null}; wins over {@link #loraId()}. */
    public String loraName() {
      return loraName;
    }

    /** The LoRA name, or the LoRA id as a string, or {@code null} for the base model. */
    public String effectiveLoraName() {
      return loraName != null ? loraName : (loraId != null ? String.valueOf(loraId) : null);
    }

    /**
     * Per-block extra keys (one {@code null} or tuple per block; tuple elements are msgpack values:
     * {@code null}, {@code String}, {@code byte[]}, {@code Long}, {@code BigInteger}, {@code
     * Double}, {@code Boolean}, {@code List}, {@code Map}), or {@code null}.
     */
    public List<Object> extraKeys() {
      return extraKeys;
    }

    /** E.g. {@code full_attention}, {@code sliding_window}, or {@code null}. */
    public String kvCacheSpecKind() {
      return kvCacheSpecKind;
    }

    /** Sliding window size, or {@code null}. */
    public Integer kvCacheSpecSlidingWindow() {
      return kvCacheSpecSlidingWindow;
    }

    /** M2 {@code session_id} value as decoded, or {@code null}. */
    public Object sessionId() {
      return sessionId;
    }

    @Override
    public boolean equals(Object o) {
      if (!(o instanceof BlockStored)) {
        return false;
      }
      BlockStored b = (BlockStored) o;
      return sameBlockFields(b)
          && Objects.equals(parentBlockHash, b.parentBlockHash)
          && Arrays.equals(tokenIds, b.tokenIds)
          && blockSize == b.blockSize
          && Objects.equals(loraId, b.loraId)
          && Objects.equals(loraName, b.loraName)
          && Objects.deepEquals(extraKeys, b.extraKeys)
          && Objects.equals(kvCacheSpecKind, b.kvCacheSpecKind)
          && Objects.equals(kvCacheSpecSlidingWindow, b.kvCacheSpecSlidingWindow)
          && Objects.deepEquals(sessionId, b.sessionId);
    }

    @Override
    public int hashCode() {
      return blockHashes().hashCode() * 31 + Arrays.hashCode(tokenIds);
    }

    @Override
    String details() {
      return ", parent="
          + parentBlockHash
          + ", tokens="
          + tokenIds.length
          + ", blockSize="
          + blockSize
          + ", lora="
          + effectiveLoraName();
    }

    /**
     * Builds {@link BlockStored} events (the block hashes are those of the newly cached blocks,
     * parent to child); validates at {@link #build()}. Not thread-safe.
     */
    public static final class Builder extends BlockEventBuilder<Builder> {
      private EngineHashes parentBlockHash;
      private int[] tokenIds = new int[0];
      private int blockSize;
      private Long loraId;
      private String loraName;
      private List<Object> extraKeys;
      private String kvCacheSpecKind = "full_attention";
      private Integer kvCacheSpecSlidingWindow;
      private Object sessionId;

      private Builder() {}

      /** The parent's hash (one element), or {@code null} for a chain starting at the root. */
      public Builder parentBlockHash(EngineHashes parent) {
        this.parentBlockHash = parent;
        return this;
      }

      /** The parent's hash as an unsigned integer. */
      public Builder parentBlockHash(long parent) {
        return parentBlockHash(EngineHashes.ofInts(parent));
      }

      /** The tokens of the span (default none); shared, not copied. */
      public Builder tokenIds(int[] tokens) {
        this.tokenIds = Objects.requireNonNull(tokens, "tokenIds");
        return this;
      }

      /** Block size in tokens (default 0: token-less). */
      public Builder blockSize(int blockSize) {
        this.blockSize = blockSize;
        return this;
      }

      /** LoRA adapter id (default none). */
      public Builder loraId(Long loraId) {
        this.loraId = loraId;
        return this;
      }

      /** LoRA adapter name (default none). */
      public Builder loraName(String loraName) {
        this.loraName = loraName;
        return this;
      }

      /** Per-block extra keys (default none); kept as given. */
      @SuppressWarnings("unchecked")
      public Builder extraKeys(List<?> extraKeys) {
        this.extraKeys = (List<Object>) extraKeys;
        return this;
      }

      /** KV-cache spec kind (default {@code full_attention}). */
      public Builder kvCacheSpecKind(String kind) {
        this.kvCacheSpecKind = kind;
        return this;
      }

      /** Sliding window size (default none). */
      public Builder kvCacheSpecSlidingWindow(Integer window) {
        this.kvCacheSpecSlidingWindow = window;
        return this;
      }

      /** M2 {@code session_id} (default none). */
      public Builder sessionId(Object sessionId) {
        this.sessionId = sessionId;
        return this;
      }

      /**
       * Builds the event.
       *
       * @throws IllegalArgumentException if the hashes are missing, the parent does not hold
       *     exactly one hash, or the block size is negative
       */
      public BlockStored build() {
        EngineHashes blockHashes = requiredHashes();
        if (parentBlockHash != null && parentBlockHash.size() != 1) {
          throw new IllegalArgumentException(
              "parentBlockHash must hold exactly one hash, was " + parentBlockHash.size());
        }
        if (blockSize < 0) {
          throw new IllegalArgumentException("blockSize must be >= 0, was " + blockSize);
        }
        return new BlockStored(
            blockHashes,
            parentBlockHash,
            tokenIds,
            blockSize,
            loraId,
            medium,
            loraName,
            extraKeys,
            groupIdx,
            kvCacheSpecKind,
            kvCacheSpecSlidingWindow,
            locality,
            ownership,
            sessionId);
      }
    }
  }

  /**
   * Cached blocks were evicted (one event per evicted block in vLLM). Build with {@link #builder()}
   * or {@link #of(EngineHashes)}.
   */
  final class BlockRemoved extends BlockEvent {
    BlockRemoved(
        EngineHashes blockHashes,
        String medium,
        Integer groupIdx,
        Object locality,
        Object ownership) {
      super(blockHashes, medium, groupIdx, locality, ownership);
    }

    /** A builder with vLLM's usual values (GPU, group 0). */
    public static Builder builder() {
      return new Builder();
    }

    /** A GPU removal in group 0. */
    public static BlockRemoved of(EngineHashes blockHashes) {
      return builder().blockHashes(blockHashes).build();
    }

    /** A builder holding this event's values. */
    public Builder toBuilder() {
      return new Builder().from(this);
    }

    @Override
    public String type() {
      return "BlockRemoved";
    }

    @Override
    public boolean equals(Object o) {
      if (!(o instanceof BlockRemoved)) {
        return false;
      }
      return sameBlockFields((BlockRemoved) o);
    }

    @Override
    public int hashCode() {
      return blockHashes().hashCode() * 31 + Objects.hashCode(medium());
    }

    /**
     * Builds {@link BlockRemoved} events (the block hashes are those of the removed blocks);
     * validates at {@link #build()}. Not thread-safe.
     */
    public static final class Builder extends BlockEventBuilder<Builder> {
      private Builder() {}

      /**
       * Builds the event.
       *
       * @throws IllegalArgumentException if the hashes are missing
       */
      public BlockRemoved build() {
        return new BlockRemoved(requiredHashes(), medium, groupIdx, locality, ownership);
      }
    }
  }

  /**
   * What the builders of {@link BlockStored} and {@link BlockRemoved} share: the block hashes and
   * the fields both events carry (medium, group, locality, ownership), with vLLM's usual defaults
   * (GPU, group 0). Each setter returns the concrete builder. Not thread-safe.
   *
   * @param <B> the concrete builder
   */
  abstract sealed class BlockEventBuilder<B extends BlockEventBuilder<B>>
      permits BlockStored.Builder, BlockRemoved.Builder {
    EngineHashes blockHashes;
    String medium = "GPU";
    Integer groupIdx = 0;
    Object locality;
    Object ownership;

    BlockEventBuilder() {}

    @SuppressWarnings("unchecked") // B is the class of this (sealed: only the two builders)
    private B self() {
      return (B) this;
    }

    /** The block hashes (required). */
    public B blockHashes(EngineHashes hashes) {
      this.blockHashes = Objects.requireNonNull(hashes, "blockHashes");
      return self();
    }

    /** Unsigned integer hashes (vLLM's default int mode); the array is shared, not copied. */
    public B blockHashes(long... hashes) {
      return blockHashes(EngineHashes.ofInts(hashes));
    }

    /** Storage tier (default {@code GPU}; {@code null} as in the A0 schema). */
    public B medium(String medium) {
      this.medium = medium;
      return self();
    }

    /** KV-cache group (default 0; {@code null} as before vLLM added it). */
    public B groupIdx(Integer groupIdx) {
      this.groupIdx = groupIdx;
      return self();
    }

    /** M1+ {@code locality} (default none). */
    public B locality(Object locality) {
      this.locality = locality;
      return self();
    }

    /** M2 {@code ownership} (default none). */
    public B ownership(Object ownership) {
      this.ownership = ownership;
      return self();
    }

    /** This builder with {@code e}'s shared fields. */
    B from(BlockEvent e) {
      blockHashes = e.blockHashes();
      medium = e.medium();
      groupIdx = e.groupIdx();
      locality = e.locality();
      ownership = e.ownership();
      return self();
    }

    /** The block hashes, checked at {@code build()}. */
    EngineHashes requiredHashes() {
      if (blockHashes == null) {
        throw new IllegalArgumentException("blockHashes is required");
      }
      return blockHashes;
    }
  }

  /** The pod's prefix cache was reset: every block on every tier and group is gone. */
  final class AllBlocksCleared implements KvEvent {

    /** The shared instance. */
    public static final AllBlocksCleared INSTANCE = new AllBlocksCleared();

    private AllBlocksCleared() {}

    @Override
    public String type() {
      return "AllBlocksCleared";
    }

    @Override
    public String toString() {
      return "AllBlocksCleared[]";
    }
  }
}
