package io.kvroute.kvindex.event;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * One KV-cache event of a vLLM (or SGLang) {@code KVEventBatch}: {@link BlockStored}, {@link
 * BlockRemoved} or {@link AllBlocksCleared}.
 *
 * <p>Nullable components mirror vLLM's {@code None}; the encoder writes them as {@code nil} or
 * omits them as the chosen {@link EventSchema} requires. Array components are shared, not copied
 * (ingestion stays allocation-light): treat them as read-only. Instances are immutable by that
 * contract and thread-safe once published.
 */
public sealed interface KvEvent
    permits KvEvent.BlockStored, KvEvent.BlockRemoved, KvEvent.AllBlocksCleared {

  /** The wire tag: {@code "BlockStored"}, {@code "BlockRemoved"} or {@code "AllBlocksCleared"}. */
  String type();

  /**
   * Blocks became cached on a pod ({@code BlockPool.cache_full_blocks}).
   *
   * @param blockHashes one hash per newly cached block, parent to child
   * @param parentBlockHash hash of the block before the first one (one element), or {@code null} at
   *     the root
   * @param tokenIds the tokens of the span (may cover skipped blocks too)
   * @param blockSize block size in tokens (0 in old token-less offload events)
   * @param loraId LoRA adapter int id, or {@code null}
   * @param medium storage tier ({@code GPU}, {@code CPU}, ...), or {@code null} (A0 schema)
   * @param loraName LoRA adapter name, or {@code null}; wins over {@code loraId}
   * @param extraKeys per-block extra keys (msgpack values: {@code null}, {@code String}, {@code
   *     byte[]}, {@code Long}, {@code BigInteger}, {@code Double}, {@code Boolean}, {@code List},
   *     {@code Map}), or {@code null}
   * @param groupIdx KV-cache group index, or {@code null}
   * @param kvCacheSpecKind e.g. {@code full_attention}, {@code sliding_window}, or {@code null}
   * @param kvCacheSpecSlidingWindow sliding window size, or {@code null}
   * @param locality M1+ {@code locality} value as decoded, or {@code null}
   * @param ownership M2 {@code ownership} value as decoded, or {@code null}
   * @param sessionId M2 {@code session_id} value as decoded, or {@code null}
   */
  record BlockStored(
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
      Object sessionId)
      implements KvEvent {

    /** Validates non-null components. */
    public BlockStored {
      Objects.requireNonNull(blockHashes, "blockHashes");
      Objects.requireNonNull(tokenIds, "tokenIds");
      if (parentBlockHash != null && parentBlockHash.size() != 1) {
        throw new IllegalArgumentException(
            "parentBlockHash must hold exactly one hash, was " + parentBlockHash.size());
      }
    }

    /** A GPU store in vLLM's usual shape (no LoRA, no extra keys, group 0). */
    public static BlockStored of(
        EngineHashes blockHashes, EngineHashes parentBlockHash, int[] tokenIds, int blockSize) {
      return new BlockStored(
          blockHashes,
          parentBlockHash,
          tokenIds,
          blockSize,
          null,
          "GPU",
          null,
          null,
          0,
          "full_attention",
          null,
          null,
          null,
          null);
    }

    @Override
    public String type() {
      return "BlockStored";
    }

    /** Whether the event names a parent block. */
    public boolean hasParent() {
      return parentBlockHash != null;
    }

    /** The LoRA name, or the LoRA id as a string, or {@code null} for the base model. */
    public String effectiveLoraName() {
      return loraName != null ? loraName : (loraId != null ? String.valueOf(loraId) : null);
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
  }

  /**
   * Cached blocks were evicted (one event per evicted block in vLLM).
   *
   * @param blockHashes hashes of the removed blocks
   * @param medium storage tier, or {@code null} (A0 schema)
   * @param groupIdx KV-cache group index, or {@code null}
   * @param locality M1+ {@code locality} value, or {@code null}
   * @param ownership M2 {@code ownership} value, or {@code null}
   */
  record BlockRemoved(
      EngineHashes blockHashes, String medium, Integer groupIdx, Object locality, Object ownership)
      implements KvEvent {

    /** Validates non-null components. */
    public BlockRemoved {
      Objects.requireNonNull(blockHashes, "blockHashes");
    }

    /** A GPU removal in group 0. */
    public static BlockRemoved of(EngineHashes blockHashes) {
      return new BlockRemoved(blockHashes, "GPU", 0, null, null);
    }

    @Override
    public String type() {
      return "BlockRemoved";
    }
  }

  /** The pod's prefix cache was reset: every block on every tier and group is gone. */
  record AllBlocksCleared() implements KvEvent {

    /** The shared instance. */
    public static final AllBlocksCleared INSTANCE = new AllBlocksCleared();

    @Override
    public String type() {
      return "AllBlocksCleared";
    }
  }
}
