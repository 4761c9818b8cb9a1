package io.kvroute.kvindex.event;

import io.kvroute.kvindex.BlockIndex;
import java.util.Objects;

/**
 * The write side of a block index, per pod identity: where decoded KV events go. {@link BlockIndex}
 * extends it, so an index is a sink; wrappers (tracking, filtering, fan-out) implement the four
 * abstract methods only.
 *
 * <p>The abstract methods take the event objects ({@link KvEvent.BlockStored}, {@link
 * KvEvent.BlockRemoved}), so fields vLLM adds later reach implementations without a new overload.
 * {@link #accept(String, KvEventBatch)} applies a batch in order. The positional {@code
 * blockStored}/{@code blockRemoved} overloads are conveniences that build an event and call the
 * abstract method; implementations should not override them.
 *
 * <p><b>Thread-safety.</b> Implementations must be thread-safe: the subscriber calls them from its
 * shard threads (one per publisher, so one pod's calls never overlap and come in sequence order;
 * different pods' calls may run concurrently).
 *
 * <p><b>Delivery guarantee</b> (from {@code KvEventSubscriber}): each batch of a publisher is
 * applied at most once and in sequence order; with a replay endpoint, every batch its replay buffer
 * still holds is applied. When batches are lost for good the pod is resynchronised: {@link
 * #allBlocksCleared(String)} is called if the pod had entries, then later batches apply. A
 * publisher restart clears the pod once.
 */
public interface KvEventSink {

  /** Discards everything. */
  KvEventSink NOOP =
      new KvEventSink() {
        @Override
        public void blockStored(String podId, KvEvent.BlockStored event) {}

        @Override
        public void blockRemoved(String podId, KvEvent.BlockRemoved event) {}

        @Override
        public void allBlocksCleared(String podId) {}

        @Override
        public void removePod(String podId) {}

        @Override
        public String toString() {
          return "KvEventSink.NOOP";
        }
      };

  /**
   * {@code podId} stored blocks (vLLM {@code BlockStored}): its hashes, parent, tokens, block size,
   * LoRA ({@link KvEvent.BlockStored#effectiveLoraName()}), medium ({@code null} means GPU), group,
   * and per-block extra keys.
   */
  void blockStored(String podId, KvEvent.BlockStored event);

  /** {@code podId} removed blocks (vLLM {@code BlockRemoved}; {@code medium} null means GPU). */
  void blockRemoved(String podId, KvEvent.BlockRemoved event);

  /** An {@code AllBlocksCleared} event, or a resynchronisation (restart, unrecoverable loss). */
  void allBlocksCleared(String podId);

  /** The pod is gone (removed from the subscriber, or deleted). */
  void removePod(String podId);

  /**
   * Convenience: a {@code BlockStored} event from positional values (hashes are u64 bits, shared
   * not copied; {@code medium} null means GPU).
   *
   * @param hasParent whether {@code parentEngineHash} is meaningful (false: the chain starts at the
   *     root)
   * @param loraName LoRA adapter name, or {@code null} for the base model
   */
  default void blockStored(
      String podId,
      long[] engineHashes,
      boolean hasParent,
      long parentEngineHash,
      int[] tokenIds,
      int blockSize,
      String loraName,
      String medium,
      int groupIdx) {
    blockStored(
        podId,
        new KvEvent.BlockStored(
            EngineHashes.ofInts(engineHashes),
            hasParent ? EngineHashes.ofInts(parentEngineHash) : null,
            Objects.requireNonNull(tokenIds, "tokenIds"),
            blockSize,
            null,
            medium,
            loraName,
            null,
            groupIdx,
            null,
            null,
            null,
            null,
            null));
  }

  /** Convenience: a {@code BlockRemoved} event from positional values. */
  default void blockRemoved(String podId, long[] engineHashes, String medium, int groupIdx) {
    blockRemoved(
        podId,
        new KvEvent.BlockRemoved(EngineHashes.ofInts(engineHashes), medium, groupIdx, null, null));
  }

  /** Applies every event of {@code batch}, in order, for pod identity {@code podId}. */
  default void accept(String podId, KvEventBatch batch) {
    for (KvEvent e : batch.events()) {
      if (e instanceof KvEvent.BlockStored s) {
        blockStored(podId, s);
      } else if (e instanceof KvEvent.BlockRemoved r) {
        blockRemoved(podId, r);
      } else {
        allBlocksCleared(podId);
      }
    }
  }

  /**
   * The sink feeding {@code index}: the index itself (a {@link BlockIndex} is a sink). Kept so that
   * {@code KvEventSink.of(index)} reads as before.
   */
  static KvEventSink of(BlockIndex index) {
    return Objects.requireNonNull(index, "index");
  }
}
