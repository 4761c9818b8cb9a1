package io.kvroute.kvindex.event;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * One KV-cache event of a vLLM (or SGLang) {@code KVEventBatch}: {@link BlockStored}, {@link
 * BlockRemoved} or {@link AllBlocksCleared}.
 *
 * <p>Events are final classes built with static factories or builders (not records), so that fields
 * vLLM adds later can be added here without breaking callers. Nullable fields mirror vLLM's {@code
 * None}; the encoder writes them as {@code nil} or omits them as the chosen {@link EventSchema}
 * requires. Array fields are shared, not copied (ingestion stays allocation-light): treat them as
 * read-only. Instances are immutable by that contract and thread-safe once published.
 */
public sealed interface KvEvent
    permits KvEvent.BlockStored, KvEvent.BlockRemoved, KvEvent.AllBlocksCleared {

  /** The wire tag: {@code "BlockStored"}, {@code "BlockRemoved"} or {@code "AllBlocksCleared"}. */
  String type();

  /**
   * Blocks became cached on a pod ({@code BlockPool.cache_full_blocks}). Build with {@link
   * #builder()} or {@link #of(EngineHashes, EngineHashes, int[], int)}.
   */
  final class BlockStored implements KvEvent {
    private final EngineHashes blockHashes;
    private final EngineHashes parentBlockHash;
    private final int[] tokenIds;
    private final int blockSize;
    private final Long loraId;
    private final String medium;
    private final String loraName;
    private final List<Object> extraKeys;
    private final Integer groupIdx;
    private final String kvCacheSpecKind;
    private final Integer kvCacheSpecSlidingWindow;
    private final Object locality;
    private final Object ownership;
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
      this.blockHashes = blockHashes;
      this.parentBlockHash = parentBlockHash;
      this.tokenIds = tokenIds;
      this.blockSize = blockSize;
      this.loraId = loraId;
      this.medium = medium;
      this.loraName = loraName;
      this.extraKeys = extraKeys;
      this.groupIdx = groupIdx;
      this.kvCacheSpecKind = kvCacheSpecKind;
      this.kvCacheSpecSlidingWindow = kvCacheSpecSlidingWindow;
      this.locality = locality;
      this.ownership = ownership;
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
      Builder b = new Builder();
      b.blockHashes = blockHashes;
      b.parentBlockHash = parentBlockHash;
      b.tokenIds = tokenIds;
      b.blockSize = blockSize;
      b.loraId = loraId;
      b.medium = medium;
      b.loraName = loraName;
      b.extraKeys = extraKeys;
      b.groupIdx = groupIdx;
      b.kvCacheSpecKind = kvCacheSpecKind;
      b.kvCacheSpecSlidingWindow = kvCacheSpecSlidingWindow;
      b.locality = locality;
      b.ownership = ownership;
      b.sessionId = sessionId;
      return b;
    }

    @Override
    public String type() {
      return "BlockStored";
    }

    /** One hash per newly cached block, parent to child. */
    public EngineHashes blockHashes() {
      return blockHashes;
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

    /** Storage tier ({@code GPU}, {@code CPU}, ...), or {@code null} (A0 schema; means GPU). */
    public String medium() {
      return medium;
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

    /** KV-cache group index, or {@code null}. */
    public Integer groupIdx() {
      return groupIdx;
    }

    /** The KV-cache group index, 0 when absent. */
    public int groupIndex() {
      return groupIdx == null ? 0 : groupIdx;
    }

    /** E.g. {@code full_attention}, {@code sliding_window}, or {@code null}. */
    public String kvCacheSpecKind() {
      return kvCacheSpecKind;
    }

    /** Sliding window size, or {@code null}. */
    public Integer kvCacheSpecSlidingWindow() {
      return kvCacheSpecSlidingWindow;
    }

    /** M1+ {@code locality} value as decoded, or {@code null}. */
    public Object locality() {
      return locality;
    }

    /** M2 {@code ownership} value as decoded, or {@code null}. */
    public Object ownership() {
      return ownership;
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
      return blockHashes.equals(b.blockHashes)
          && Objects.equals(parentBlockHash, b.parentBlockHash)
          && Arrays.equals(tokenIds, b.tokenIds)
          && blockSize == b.blockSize
          && Objects.equals(loraId, b.loraId)
          && Objects.equals(medium, b.medium)
          && Objects.equals(loraName, b.loraName)
          && Objects.deepEquals(extraKeys, b.extraKeys)
          && Objects.equals(groupIdx, b.groupIdx)
          && Objects.equals(kvCacheSpecKind, b.kvCacheSpecKind)
          && Objects.equals(kvCacheSpecSlidingWindow, b.kvCacheSpecSlidingWindow)
          && Objects.deepEquals(locality, b.locality)
          && Objects.deepEquals(ownership, b.ownership)
          && Objects.deepEquals(sessionId, b.sessionId);
    }

    @Override
    public int hashCode() {
      return blockHashes.hashCode() * 31 + Arrays.hashCode(tokenIds);
    }

    @Override
    public String toString() {
      return "BlockStored[hashes="
          + blockHashes
          + ", parent="
          + parentBlockHash
          + ", tokens="
          + tokenIds.length
          + ", blockSize="
          + blockSize
          + ", lora="
          + effectiveLoraName()
          + ", medium="
          + medium
          + ", groupIdx="
          + groupIdx
          + "]";
    }

    /** Builds {@link BlockStored} events; validates at {@link #build()}. Not thread-safe. */
    public static final class Builder {
      private EngineHashes blockHashes;
      private EngineHashes parentBlockHash;
      private int[] tokenIds = new int[0];
      private int blockSize;
      private Long loraId;
      private String medium = "GPU";
      private String loraName;
      private List<Object> extraKeys;
      private Integer groupIdx = 0;
      private String kvCacheSpecKind = "full_attention";
      private Integer kvCacheSpecSlidingWindow;
      private Object locality;
      private Object ownership;
      private Object sessionId;

      private Builder() {}

      /** The hashes of the newly cached blocks, parent to child (required). */
      public Builder blockHashes(EngineHashes hashes) {
        this.blockHashes = Objects.requireNonNull(hashes, "blockHashes");
        return this;
      }

      /** Unsigned integer hashes (vLLM's default int mode); the array is shared, not copied. */
      public Builder blockHashes(long... hashes) {
        return blockHashes(EngineHashes.ofInts(hashes));
      }

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

      /** Storage tier (default {@code GPU}; {@code null} as in the A0 schema). */
      public Builder medium(String medium) {
        this.medium = medium;
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

      /** KV-cache group (default 0; {@code null} as before vLLM added it). */
      public Builder groupIdx(Integer groupIdx) {
        this.groupIdx = groupIdx;
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

      /** M1+ {@code locality} (default none). */
      public Builder locality(Object locality) {
        this.locality = locality;
        return this;
      }

      /** M2 {@code ownership} (default none). */
      public Builder ownership(Object ownership) {
        this.ownership = ownership;
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
        if (blockHashes == null) {
          throw new IllegalArgumentException("blockHashes is required");
        }
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
  final class BlockRemoved implements KvEvent {
    private final EngineHashes blockHashes;
    private final String medium;
    private final Integer groupIdx;
    private final Object locality;
    private final Object ownership;

    BlockRemoved(
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
      return builder()
          .blockHashes(blockHashes)
          .medium(medium)
          .groupIdx(groupIdx)
          .locality(locality)
          .ownership(ownership);
    }

    @Override
    public String type() {
      return "BlockRemoved";
    }

    /** Hashes of the removed blocks. */
    public EngineHashes blockHashes() {
      return blockHashes;
    }

    /** Storage tier, or {@code null} (A0 schema; means GPU). */
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

    /** M1+ {@code locality} value, or {@code null}. */
    public Object locality() {
      return locality;
    }

    /** M2 {@code ownership} value, or {@code null}. */
    public Object ownership() {
      return ownership;
    }

    @Override
    public boolean equals(Object o) {
      if (!(o instanceof BlockRemoved)) {
        return false;
      }
      BlockRemoved r = (BlockRemoved) o;
      return blockHashes.equals(r.blockHashes)
          && Objects.equals(medium, r.medium)
          && Objects.equals(groupIdx, r.groupIdx)
          && Objects.deepEquals(locality, r.locality)
          && Objects.deepEquals(ownership, r.ownership);
    }

    @Override
    public int hashCode() {
      return blockHashes.hashCode() * 31 + Objects.hashCode(medium);
    }

    @Override
    public String toString() {
      return "BlockRemoved[hashes="
          + blockHashes
          + ", medium="
          + medium
          + ", groupIdx="
          + groupIdx
          + "]";
    }

    /** Builds {@link BlockRemoved} events; validates at {@link #build()}. Not thread-safe. */
    public static final class Builder {
      private EngineHashes blockHashes;
      private String medium = "GPU";
      private Integer groupIdx = 0;
      private Object locality;
      private Object ownership;

      private Builder() {}

      /** The hashes of the removed blocks (required). */
      public Builder blockHashes(EngineHashes hashes) {
        this.blockHashes = Objects.requireNonNull(hashes, "blockHashes");
        return this;
      }

      /** Unsigned integer hashes; the array is shared, not copied. */
      public Builder blockHashes(long... hashes) {
        return blockHashes(EngineHashes.ofInts(hashes));
      }

      /** Storage tier (default {@code GPU}; {@code null} as in the A0 schema). */
      public Builder medium(String medium) {
        this.medium = medium;
        return this;
      }

      /** KV-cache group (default 0; {@code null} as before vLLM added it). */
      public Builder groupIdx(Integer groupIdx) {
        this.groupIdx = groupIdx;
        return this;
      }

      /** M1+ {@code locality} (default none). */
      public Builder locality(Object locality) {
        this.locality = locality;
        return this;
      }

      /** M2 {@code ownership} (default none). */
      public Builder ownership(Object ownership) {
        this.ownership = ownership;
        return this;
      }

      /**
       * Builds the event.
       *
       * @throws IllegalArgumentException if the hashes are missing
       */
      public BlockRemoved build() {
        if (blockHashes == null) {
          throw new IllegalArgumentException("blockHashes is required");
        }
        return new BlockRemoved(blockHashes, medium, groupIdx, locality, ownership);
      }
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
