package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.KvEventBatch;

/**
 * Observes a {@link KvEventSubscriber}: every applied batch and every stream problem. All methods
 * have no-op defaults; {@link #NONE} does nothing.
 *
 * <p>Called from the publisher's shard thread: one pod's callbacks never overlap and come in order,
 * {@link #onBatch} in sequence order, each batch at most once. Some {@link #onDropped} calls
 * ({@code overflow}, {@code frames}, {@code pod_limit}, {@code oversized}) come from the I/O
 * thread. Implementations must be thread-safe, fast, and must not throw (exceptions are logged and
 * ignored).
 *
 * <p>{@code pod} is the pod identity ({@link PodEndpoint#identity(String, int)}); before a payload
 * is decoded in bound mode it is the pod id taken from the topic.
 */
public interface KvEventListener {

  /** Does nothing. */
  KvEventListener NONE = new KvEventListener() {};

  /** A batch was decoded and applied to the sink (live, or {@code replayed}). */
  default void onBatch(String pod, String topic, long seq, KvEventBatch batch, boolean replayed) {}

  /** Sequence numbers {@code expected} .. {@code received - 1} were missed. */
  default void onGap(String pod, long expected, long received) {}

  /** A replay of {@code from} .. {@code to - 1} ended; {@code complete} if every batch arrived. */
  default void onReplay(String pod, long from, long to, int replayed, boolean complete) {}

  /**
   * The publisher restarted (a new epoch): {@code last} is the last sequence number applied (-1:
   * none), {@code received} the new epoch's batch that showed it (-1: a replay answer showed it).
   * The pod's entries were cleared (once per restart).
   */
  default void onRestart(String pod, long last, long received) {}

  /**
   * The pod's entries no longer follow every batch of its publisher ({@code reason}): {@code gap}
   * (batches missed, or dropped by a full queue, that could not be replayed), {@code restart} (the
   * entries were cleared for a new epoch), {@code joined_late} (batches published before the
   * subscription that the replay buffer no longer holds, or with no replay endpoint). The entries
   * were cleared if the pod had any since the last clear.
   */
  default void onResync(String pod, String reason) {}

  /** A batch already applied arrived again and was dropped (never taken for a restart). */
  default void onDuplicate(String pod, long seq) {}

  /**
   * A message was counted and skipped ({@code reason}: malformed, oversized, frames, overflow,
   * replay_buffer, pod_limit, sink_error); {@code cause} may be {@code null}. {@code seq} is -1
   * when unknown (an oversized frame is refused unread; in bind mode {@code pod} is then the peer's
   * address).
   */
  default void onDropped(String pod, long seq, String reason, Exception cause) {}
}
