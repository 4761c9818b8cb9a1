package io.kvroute.service.internal;

import io.kvroute.service.ServiceConfig.PodSpec;

/**
 * The source of KV events the service follows: subscribes to pods' publishers and applies their
 * events to the index it was created with. Implementations are thread-safe; {@link #addPod} and
 * {@link #removePod} may be called at any time after {@link #start()}.
 */
public interface EventFeed extends AutoCloseable {

  /** Starts receiving. */
  void start();

  /** Subscribes to a pod's events. */
  void addPod(PodSpec pod);

  /** Stops following a pod (its index entries are dropped by the caller). */
  void removePod(String podId);

  /** Sequence gaps seen for the pod so far. */
  long gaps(String podId);

  /** Replays requested for the pod so far. */
  long replays(String podId);

  /** Publisher restarts (sequence going backwards) seen for the pod so far. */
  long restarts(String podId);

  /** Stops receiving and releases sockets and threads. */
  @Override
  void close();

  /** A feed that receives nothing (an index filled by other means). */
  EventFeed NONE =
      new EventFeed() {
        @Override
        public void start() {}

        @Override
        public void addPod(PodSpec pod) {}

        @Override
        public void removePod(String podId) {}

        @Override
        public long gaps(String podId) {
          return 0;
        }

        @Override
        public long replays(String podId) {
          return 0;
        }

        @Override
        public long restarts(String podId) {
          return 0;
        }

        @Override
        public void close() {}
      };
}
