package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.KvEventBatch;

/**
 * Observes a {@link KvEventSubscriber}: every applied batch and every stream problem. All methods
 * have no-op defaults; {@link #NONE} does nothing.
 *
 * <p>Called from the subscriber's shard threads and its replay threads (while that pod's replay
 * runs): one pod's callbacks from these never overlap and come in order. Some {@link #onDropped}
 * calls come from its I/O thread. Implementations must be thread-safe, fast, and must not throw
 * (exceptions are logged and ignored).
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

  /** The sequence went from {@code last} down to {@code received}: the publisher restarted. */
  default void onRestart(String pod, long last, long received) {}

  /** The pod's entries were cleared to resynchronise ({@code reason}: gap, overflow, restart). */
  default void onResync(String pod, String reason) {}

  /**
   * A message was counted and skipped ({@code reason}: malformed, oversized, frames, overflow,
   * replay_buffer, pod_limit, sink_error); {@code cause} may be {@code null}. {@code seq} is -1
   * when unknown (an oversized frame is refused unread; in bind mode {@code pod} is then the peer's
   * address).
   */
  default void onDropped(String pod, long seq, String reason, Exception cause) {}
}
