package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventSink;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;

/** A thread-safe sink keeping, per pod, the set of stored engine hashes and a call log. */
final class RecordingSink implements KvEventSink {
  private final Map<String, Set<Long>> blocks = new HashMap<>();
  private final List<String> calls = new ArrayList<>();

  private volatile Consumer<KvEvent.BlockStored> beforeStored = e -> {};

  /**
   * Runs {@code hook} before each stored event is recorded, on the subscriber's shard thread and
   * outside this sink's lock: a test holds the shard in it.
   */
  void beforeStored(Consumer<KvEvent.BlockStored> hook) {
    beforeStored = hook;
  }

  @Override
  public void blockStored(String podId, KvEvent.BlockStored event) {
    beforeStored.accept(event);
    stored(podId, event);
  }

  private synchronized void stored(String podId, KvEvent.BlockStored event) {
    Set<Long> s = blocks.computeIfAbsent(podId, k -> new TreeSet<>());
    for (long h : event.blockHashes().values()) {
      s.add(h);
    }
    calls.add("stored " + podId);
  }

  @Override
  public synchronized void blockRemoved(String podId, KvEvent.BlockRemoved event) {
    Set<Long> s = blocks.computeIfAbsent(podId, k -> new TreeSet<>());
    for (long h : event.blockHashes().values()) {
      s.remove(h);
    }
    calls.add("removed " + podId);
  }

  @Override
  public synchronized void allBlocksCleared(String podId) {
    blocks.computeIfAbsent(podId, k -> new TreeSet<>()).clear();
    calls.add("cleared " + podId);
  }

  @Override
  public synchronized void removePod(String podId) {
    blocks.remove(podId);
    calls.add("removePod " + podId);
  }

  synchronized Set<Long> blocks(String pod) {
    return new TreeSet<>(blocks.getOrDefault(pod, Set.of()));
  }

  synchronized Set<String> pods() {
    return new TreeSet<>(blocks.keySet());
  }

  synchronized List<String> calls() {
    return new ArrayList<>(calls);
  }
}
