package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.KvEventBatch;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** Records listener callbacks as strings. */
final class RecordingListener implements KvEventListener {
  final List<String> batches = new CopyOnWriteArrayList<>();
  final List<String> notes = new CopyOnWriteArrayList<>();

  @Override
  public void onBatch(String pod, String topic, long seq, KvEventBatch batch, boolean replayed) {
    batches.add(pod + ":" + seq + (replayed ? ":replayed" : ""));
  }

  @Override
  public void onGap(String pod, long expected, long received) {
    notes.add("gap " + pod + " " + expected + ".." + received);
  }

  @Override
  public void onReplay(String pod, long from, long to, int replayed, boolean complete) {
    notes.add(
        "replay " + pod + " " + from + ".." + to + " n=" + replayed + " complete=" + complete);
  }

  @Override
  public void onRestart(String pod, long last, long received) {
    notes.add("restart " + pod + " " + last + "->" + received);
  }

  @Override
  public void onResync(String pod, String reason) {
    notes.add("resync " + pod + " " + reason);
  }

  @Override
  public void onDropped(String pod, long seq, String reason, Exception cause) {
    notes.add("dropped " + pod + " " + seq + " " + reason);
  }

  /** The sequence numbers of {@code pod}'s batches from {@code from} on, in the order applied. */
  List<Long> seqs(String pod, long from) {
    return batchesFrom(pod, from).stream().map(b -> Long.parseLong(b.split(":")[1])).toList();
  }

  /** The batches of {@code pod} from sequence {@code from} on, in the order they were applied. */
  List<String> batchesFrom(String pod, long from) {
    List<String> out = new ArrayList<>();
    for (String b : batches) {
      String[] f = b.split(":");
      if (f[0].equals(pod) && Long.parseLong(f[1]) >= from) {
        out.add(b);
      }
    }
    return out;
  }

  boolean seen(String pod, long seq) {
    return batches.contains(pod + ":" + seq) || batches.contains(pod + ":" + seq + ":replayed");
  }

  /**
   * Whether a live (not replayed) batch of {@code pod} arrived: the subscriber has joined and its
   * catch-up replay on connect, which may still be running after the first replayed batch (and
   * would deliver later batches as catch-up, with no gap), has ended.
   */
  boolean anyBatch(String pod) {
    return batches.stream().anyMatch(b -> b.startsWith(pod + ":") && !b.endsWith(":replayed"));
  }
}
