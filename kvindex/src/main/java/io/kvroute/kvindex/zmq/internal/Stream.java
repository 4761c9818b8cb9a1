package io.kvroute.kvindex.zmq.internal;

import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.zmq.PodEndpoint;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.zeromq.ZMQ;

/**
 * One publisher's stream: a connect-mode pod's data-parallel rank, or a bind-mode topic. Owns the
 * publisher's {@link Sequencer} and carries out what it asks: batches to the sink, clears, replays
 * (through {@link ReplayClient}), and reports to {@link Telemetry}.
 *
 * <p><b>Concurrency.</b> The sequencer and everything it calls run on the stream's shard thread
 * only: live batches, replay answers and socket events all reach it as shard tasks. The socket
 * fields are the I/O thread's. The volatile and atomic fields are read across threads: {@link
 * #activeReplay} tells a replay job whether it is still wanted; {@link #lastTopic} names legacy
 * replay replies; {@link #removed} stops everything.
 */
public final class Stream implements Sequencer.Output {
  /** Pod id (connect mode) or the pod id taken from the topic (bind mode). */
  public final String label;

  /** The index identity in connect mode; {@code null} in bind mode (taken from each batch). */
  final String fixedIdentity;

  final String endpoint;
  final String replayEndpoint;
  final Shard shard;
  final Set<String> identities = ConcurrentHashMap.newKeySet();
  final Sequencer sequencer;
  private final KvEventSink sink;
  private final Telemetry telemetry;
  private final ReplayClient replays;

  volatile boolean removed;
  volatile String lastTopic = "";
  volatile long activeReplay = -1;
  private Sequencer.ReplayKind replayKind;
  private int held; // shard thread: what the telemetry gauge last counted for this stream

  /** Frames refused live for their size, not yet met again in a replay. */
  final AtomicInteger oversizedUnseen = new AtomicInteger();

  /** The highest sequence number dropped by a full queue, not yet told to the sequencer. */
  final AtomicLong droppedMax = new AtomicLong(-1);

  final AtomicBoolean dropReported = new AtomicBoolean();

  // I/O thread only
  ZMQ.Socket socket;
  boolean reopenPending;
  long reopenAt;
  long reopenBackoffMs;
  long stallNanos; // the next handshake stall limit, 0 for the first

  Stream(
      String label,
      String fixedIdentity,
      String endpoint,
      String replayEndpoint,
      Shard shard,
      SubscriberConfig config,
      Telemetry telemetry,
      ReplayClient replays) {
    this.label = label;
    this.fixedIdentity = fixedIdentity;
    this.endpoint = endpoint;
    this.replayEndpoint = replayEndpoint;
    this.shard = shard;
    this.sink = config.sink();
    this.telemetry = telemetry;
    this.replays = replays;
    this.sequencer =
        new Sequencer(
            replayEndpoint != null,
            config.replayBufferCapacity(),
            config.replayCooldownNanos(),
            this);
    if (fixedIdentity != null) {
      identities.add(fixedIdentity);
    }
  }

  // ------------------------------------------------------------------ inputs (shard thread)

  void live(Received r, long now) {
    if (removed) {
      return;
    }
    lastTopic = r.topic;
    if (telemetry.debugging()) {
      telemetry.debug(label, "live " + r + " ts=" + r.ts() + " before: " + sequencer);
    }
    sequencer.live(r, now);
    syncHeld();
  }

  void liveDropped(long seq, long now) {
    if (removed) {
      return;
    }
    sequencer.liveDropped(seq, now);
    syncHeld();
  }

  void connected(long now) {
    if (removed) {
      return;
    }
    if (telemetry.debugging()) {
      telemetry.debug(label, "handshake; before: " + sequencer);
    }
    sequencer.connected(now);
    syncHeld();
  }

  void replayed(long id, Received r, long now) {
    if (removed) {
      return;
    }
    if (telemetry.debugging()) {
      telemetry.debug(label, "replay #" + id + " gave " + r + " ts=" + r.ts() + "; " + sequencer);
    }
    sequencer.replayed(id, r, now);
    syncHeld();
  }

  void replayEnded(long id, Sequencer.ReplayEnd end, long now) {
    if (removed) {
      return;
    }
    if (telemetry.debugging()) {
      telemetry.debug(label, "replay #" + id + " ended " + end + "; " + sequencer);
    }
    sequencer.replayEnded(id, end, now);
    syncHeld();
  }

  /** The stream was removed: its held-back batches no longer count. */
  void discard() {
    activeReplay = -1;
    telemetry.heldBack.addAndGet(-held);
    held = 0;
  }

  private void syncHeld() {
    int h = sequencer.held();
    if (h != held) {
      telemetry.heldBack.addAndGet(h - held);
      held = h;
    }
  }

  // ------------------------------------------------------------------ Sequencer.Output

  @Override
  public void deliver(Sequencer.Item item, boolean replayed) {
    Received r = (Received) item;
    long seq = r.seq;
    if (r.batch == null) {
      if (r.error != null) {
        telemetry.decodeError();
        telemetry.warnOnce(label, "malformed", r.error.getMessage());
        telemetry.listen(() -> telemetry.listener.onDropped(label, seq, "malformed", r.error));
      } else if (!replayed || oversizedUnseen.getAndUpdate(v -> v > 0 ? v - 1 : 0) == 0) {
        // refused for its size (counted once: a replay of a frame refused live is not counted)
        telemetry.dropped("oversized");
        telemetry.warnOnce(
            label, "oversized", "batch " + Long.toUnsignedString(seq) + " over maxPayloadBytes");
        telemetry.listen(() -> telemetry.listener.onDropped(label, seq, "oversized", null));
      }
      return;
    }
    KvEventBatch batch = r.batch;
    String identity =
        fixedIdentity != null ? fixedIdentity : PodEndpoint.identity(label, batch.dpRank());
    if (fixedIdentity == null && !identities.contains(identity)) {
      if (identities.size() >= 1024) {
        telemetry.dropped("pod_limit");
        telemetry.warnOnce(label, "pod_limit", "more than 1024 data-parallel ranks on one topic");
        return;
      }
      identities.add(identity);
    }
    if (batch.unknownEvents() > 0) {
      telemetry.warnOnce(
          label, "unknown_tag", batch.unknownEvents() + " event(s) with an unknown tag skipped");
    }
    telemetry.batch(batch.events(), batch.unknownEvents());
    try {
      sink.accept(identity, batch);
    } catch (RuntimeException e) {
      telemetry.dropped("sink_error");
      telemetry.warnOnce(label, "sink_error", String.valueOf(e));
    }
    telemetry.listen(() -> telemetry.listener.onBatch(identity, r.topic, seq, batch, replayed));
  }

  @Override
  public void replayStarted(long id, Sequencer.ReplayKind kind, long from, long until) {
    activeReplay = id;
    replayKind = kind;
    if (telemetry.debugging()) {
      telemetry.debug(
          label,
          "replay #"
              + id
              + " "
              + kind
              + " from "
              + Long.toUnsignedString(from)
              + (until == Sequencer.OPEN ? "" : " until " + Long.toUnsignedString(until)));
    }
    replays.start(this, id, from);
  }

  @Override
  public void replayCancelled(long id) {
    if (activeReplay == id) {
      activeReplay = -1;
    }
  }

  @Override
  public void replayEnded(long from, long until, int delivered, boolean complete) {
    activeReplay = -1;
    boolean catchUp =
        replayKind == Sequencer.ReplayKind.CATCH_UP || replayKind == Sequencer.ReplayKind.VERIFY;
    telemetry.replayEnded(catchUp, complete);
    if (!complete && until != Sequencer.OPEN) {
      telemetry.warnOnce(
          label,
          "replay_incomplete",
          "replay from "
              + replayEndpoint
              + " could not deliver all of "
              + Long.toUnsignedString(from)
              + ".."
              + Long.toUnsignedString(until - 1));
    }
    if (!catchUp) {
      telemetry.listen(() -> telemetry.listener.onReplay(label, from, until, delivered, complete));
    }
  }

  @Override
  public void gap(long expected, long received) {
    telemetry.gap();
    telemetry.warnOnce(
        label,
        "gap",
        "missed sequence numbers "
            + Long.toUnsignedString(expected)
            + ".."
            + Long.toUnsignedString(received - 1)
            + (replayEndpoint != null ? "; replaying" : "; no replay endpoint"));
    telemetry.listen(() -> telemetry.listener.onGap(label, expected, received));
  }

  @Override
  public void restart(long last, long received) {
    telemetry.restart();
    telemetry.warnOnce(
        label,
        "restart",
        "publisher restarted (sequence "
            + (last == -1 ? "none" : Long.toUnsignedString(last))
            + " consumed, new epoch seen at "
            + (received == -1 ? "a replay answer" : Long.toUnsignedString(received))
            + "); entries cleared");
    telemetry.listen(() -> telemetry.listener.onRestart(label, last, received));
  }

  @Override
  public void resync(String reason, boolean cleared, long lost) {
    telemetry.resync(reason);
    if (reason.equals("joined_late")) {
      telemetry.infoOnce(
          label,
          "joined late",
          "batches published before the subscription and no longer replayable are not indexed");
    } else if (!reason.equals("restart")) {
      telemetry.warnOnce(
          label,
          "resync_" + reason,
          (lost == -1 ? "batches" : lost + " batch(es)")
              + " could not be recovered; the pod's entries were resynchronised");
    }
    for (String id : identities.isEmpty() ? Set.of(label) : Set.copyOf(identities)) {
      if (cleared) {
        try {
          sink.allBlocksCleared(id);
        } catch (RuntimeException e) {
          telemetry.dropped("sink_error");
          telemetry.warnOnce(label, "sink_error", String.valueOf(e));
        }
      }
      telemetry.listen(() -> telemetry.listener.onResync(id, reason));
    }
  }

  @Override
  public void duplicate(long seq) {
    telemetry.duplicate();
    telemetry.listen(() -> telemetry.listener.onDuplicate(label, seq));
  }

  @Override
  public void heldBackDropped(long seq, int capacity) {
    telemetry.dropped("replay_buffer");
    telemetry.warnOnce(
        label,
        "replay_buffer",
        "more than replayBufferCapacity="
            + capacity
            + " batches arrived during a replay; they are fetched by another replay");
    telemetry.listen(() -> telemetry.listener.onDropped(label, seq, "replay_buffer", null));
  }

  @Override
  public String toString() {
    return "Stream{" + label + ", " + sequencer + "}";
  }
}
