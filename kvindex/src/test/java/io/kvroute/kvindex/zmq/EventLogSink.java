package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventSink;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Per pod, the stored block hashes (an {@link EpochPublisher}'s codes) and the clears ({@link
 * #CLEAR}), in the order they were applied. Thread-safe.
 *
 * <p>Public, in this module's test-jar: the benchmarks' {@code KvEventSoakMain} checks its soak
 * with the same sink as {@link KvEventSubscriberModelTest}.
 */
public final class EventLogSink implements KvEventSink {
  /** Stands for {@link #allBlocksCleared(String)} in {@link #events(String)}. */
  public static final long CLEAR = -1;

  private final Map<String, List<Long>> events = new ConcurrentHashMap<>();

  /** A snapshot of {@code pod}'s stored hashes and clears, in order. */
  public List<Long> events(String pod) {
    return new ArrayList<>(events.getOrDefault(pod, List.of()));
  }

  /** Whether {@code pod} has stored {@code code} (since it was last added). */
  public boolean applied(String pod, long code) {
    return events.getOrDefault(pod, List.of()).contains(code);
  }

  private List<Long> of(String pod) {
    return events.computeIfAbsent(pod, k -> new CopyOnWriteArrayList<>());
  }

  @Override
  public void blockStored(String podId, KvEvent.BlockStored event) {
    for (long h : event.blockHashes().values()) {
      of(podId).add(h);
    }
  }

  @Override
  public void blockRemoved(String podId, KvEvent.BlockRemoved event) {}

  @Override
  public void allBlocksCleared(String podId) {
    of(podId).add(CLEAR);
  }

  @Override
  public void removePod(String podId) {
    events.remove(podId);
  }
}
