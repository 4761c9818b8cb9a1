package io.kvroute.kvindex.zmq;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Per pod, the listener's gap, replay, restart, resync and duplicate notes, in order. Thread-safe.
 *
 * <p>Public, in this module's test-jar: the benchmarks' {@code KvEventSoakMain} counts its soak's
 * restarts and losses with the same listener as {@link KvEventSubscriberModelTest}.
 */
public final class NoteListener implements KvEventListener {
  private final Map<String, List<String>> notes = new ConcurrentHashMap<>();

  private void note(String pod, String n) {
    notes.computeIfAbsent(pod, k -> new CopyOnWriteArrayList<>()).add(n);
  }

  /** {@code pod}'s notes, in order. */
  public List<String> notes(String pod) {
    return notes.getOrDefault(pod, List.of());
  }

  /**
   * How many of {@code pod}'s notes start with {@code prefix} ({@code restart}, {@code gap}...).
   */
  public int count(String pod, String prefix) {
    return (int) notes(pod).stream().filter(n -> n.startsWith(prefix)).count();
  }

  /** Resyncs other than for a restart: batches that were lost (counted). */
  public int losses(String pod) {
    return (int)
        notes(pod).stream()
            .filter(n -> n.startsWith("resync ") && !n.equals("resync restart"))
            .count();
  }

  @Override
  public void onRestart(String pod, long last, long received) {
    note(pod, "restart " + last + "->" + received);
  }

  @Override
  public void onResync(String pod, String reason) {
    note(pod, "resync " + reason);
  }

  @Override
  public void onGap(String pod, long expected, long received) {
    note(pod, "gap " + expected + ".." + received);
  }

  @Override
  public void onReplay(String pod, long from, long to, int replayed, boolean complete) {
    note(pod, "replay " + from + ".." + to + " n=" + replayed + " " + complete);
  }

  @Override
  public void onDuplicate(String pod, long seq) {
    note(pod, "duplicate " + seq);
  }
}
