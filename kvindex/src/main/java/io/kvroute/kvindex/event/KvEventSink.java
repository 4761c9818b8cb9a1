package io.kvroute.kvindex.event;

import io.kvroute.kvindex.BlockIndex;
import java.util.Objects;

/**
 * Where decoded KV events go: the write path of a block index, per pod identity.
 *
 * <p>{@link #accept(String, KvEventBatch)} is the applier: it maps each event of a batch, in order,
 * onto the four write methods. {@link #of(BlockIndex)} adapts a {@link BlockIndex} (extra keys are
 * forwarded to it).
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
        public void blockStored(
            String podId,
            long[] engineHashes,
            boolean hasParent,
            long parentEngineHash,
            int[] tokenIds,
            int blockSize,
            String loraName,
            String medium,
            int groupIdx) {}

        @Override
        public void blockRemoved(String podId, long[] engineHashes, String medium, int groupIdx) {}

        @Override
        public void allBlocksCleared(String podId) {}

        @Override
        public void removePod(String podId) {}
      };

  /** A {@code BlockStored} event (hashes are u64 bits; {@code medium} null means GPU). */
  void blockStored(
      String podId,
      long[] engineHashes,
      boolean hasParent,
      long parentEngineHash,
      int[] tokenIds,
      int blockSize,
      String loraName,
      String medium,
      int groupIdx);

  /** A {@code BlockRemoved} event ({@code medium} null means GPU). */
  void blockRemoved(String podId, long[] engineHashes, String medium, int groupIdx);

  /** An {@code AllBlocksCleared} event, or a resynchronisation (restart, unrecoverable loss). */
  void allBlocksCleared(String podId);

  /** The pod is gone (removed from the subscriber). */
  void removePod(String podId);

  /**
   * Applies one stored event; the default calls {@link #blockStored(String, long[], boolean, long,
   * int[], int, String, String, int)} with the LoRA name ({@code lora_name}, else {@code lora_id}
   * as a string) and group 0 when absent.
   */
  default void blockStored(String podId, KvEvent.BlockStored e) {
    blockStored(
        podId,
        e.blockHashes().values(),
        e.hasParent(),
        e.hasParent() ? e.parentBlockHash().get(0) : 0L,
        e.tokenIds(),
        e.blockSize(),
        e.effectiveLoraName(),
        e.medium(),
        e.groupIdx() == null ? 0 : e.groupIdx());
  }

  /** Applies every event of {@code batch}, in order, for pod identity {@code podId}. */
  default void accept(String podId, KvEventBatch batch) {
    for (KvEvent e : batch.events()) {
      if (e instanceof KvEvent.BlockStored) {
        blockStored(podId, (KvEvent.BlockStored) e);
      } else if (e instanceof KvEvent.BlockRemoved) {
        KvEvent.BlockRemoved r = (KvEvent.BlockRemoved) e;
        blockRemoved(
            podId, r.blockHashes().values(), r.medium(), r.groupIdx() == null ? 0 : r.groupIdx());
      } else {
        allBlocksCleared(podId);
      }
    }
  }

  /** A sink feeding {@code index} (per-block extra keys included). */
  static KvEventSink of(BlockIndex index) {
    Objects.requireNonNull(index, "index");
    return new KvEventSink() {
      @Override
      public void blockStored(
          String podId,
          long[] engineHashes,
          boolean hasParent,
          long parentEngineHash,
          int[] tokenIds,
          int blockSize,
          String loraName,
          String medium,
          int groupIdx) {
        index.blockStored(
            podId,
            engineHashes,
            hasParent,
            parentEngineHash,
            tokenIds,
            blockSize,
            loraName,
            medium,
            groupIdx);
      }

      @Override
      public void blockStored(String podId, KvEvent.BlockStored e) {
        if (e.extraKeys() == null) {
          KvEventSink.super.blockStored(podId, e);
          return;
        }
        index.blockStored(
            podId,
            e.blockHashes().values(),
            e.hasParent(),
            e.hasParent() ? e.parentBlockHash().get(0) : 0L,
            e.tokenIds(),
            e.blockSize(),
            e.effectiveLoraName(),
            e.medium(),
            e.groupIdx() == null ? 0 : e.groupIdx(),
            e.extraKeys());
      }

      @Override
      public void blockRemoved(String podId, long[] engineHashes, String medium, int groupIdx) {
        index.blockRemoved(podId, engineHashes, medium, groupIdx);
      }

      @Override
      public void allBlocksCleared(String podId) {
        index.allBlocksCleared(podId);
      }

      @Override
      public void removePod(String podId) {
        index.removePod(podId);
      }

      @Override
      public String toString() {
        return "KvEventSink.of(" + index + ")";
      }
    };
  }
}
