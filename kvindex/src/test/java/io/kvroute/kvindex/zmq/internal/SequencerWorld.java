package io.kvroute.kvindex.zmq.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * A simulated publisher (epochs, sequence numbers, a replay ring buffer, a connection that drops)
 * driving one {@link Sequencer}, and recording what the sequencer asks for. Everything is
 * synchronous and in memory: the test decides when the network delivers and when replays answer.
 * Not thread-safe.
 */
final class SequencerWorld implements Sequencer.Output {

  /** A published batch: its fingerprint tells the epoch apart; ts grows across epochs. */
  record B(int epoch, long seq, double ts, boolean readable) implements Sequencer.Item {
    @Override
    public boolean hasFingerprint() {
      return readable;
    }

    @Override
    public long fingerprint() {
      return epoch * 1_000_003L + seq * 31 + 7;
    }

    @Override
    public String toString() {
      return "e" + epoch + ":" + seq;
    }
  }

  record Delivery(B batch, boolean replayed) {}

  record Request(long id, Sequencer.ReplayKind kind, long from, long until, int epoch) {}

  final boolean canReplay;
  final int bufferSteps;
  final Sequencer seq;
  long now;

  // publisher
  int epoch;
  long nextSeq;
  double clock = 1_700_000_000.0;
  final List<List<B>> published = new ArrayList<>();
  boolean connected = true;
  int restartsPerformed;
  final List<B> inFlight = new ArrayList<>(); // published, not yet delivered (reordering)

  // observations
  final List<Delivery> delivered = new ArrayList<>();
  final List<String> log = new ArrayList<>();
  final ArrayDeque<Request> requests = new ArrayDeque<>();
  int clears;
  int restartsSeen;
  int restartClears;
  int lossResyncs;
  int duplicates;
  int heldDropped;
  int lastClearIndex; // index into delivered where the current segment starts

  SequencerWorld(boolean canReplay, int bufferSteps, int holdCapacity) {
    this.canReplay = canReplay;
    this.bufferSteps = bufferSteps;
    this.seq = new Sequencer(canReplay, holdCapacity, 1_000, this);
    published.add(new ArrayList<>());
  }

  // ------------------------------------------------------------------ publisher side

  B publish() {
    B b = new B(epoch, nextSeq++, clock += 1.0, true);
    published.get(epoch).add(b);
    return b;
  }

  /** Publishes and delivers live (unless the connection is down). */
  void publishLive() {
    B b = publish();
    if (connected) {
      live(b);
    }
  }

  /** Publishes; the network loses it (a PUB high-water mark, a slow joiner). */
  void publishLost() {
    publish();
  }

  /** Publishes; the subscriber drops it itself (a full queue) and says so. */
  void publishOverflow() {
    B b = publish();
    log.add("overflow " + b);
    if (connected) {
      seq.liveDropped(b.seq(), now);
    }
  }

  /** Publishes; delivered later (reordering within the high-water mark). */
  void publishDelayed() {
    B b = publish();
    if (connected) {
      inFlight.add(b);
    }
  }

  void deliverDelayed(int pick) {
    if (!inFlight.isEmpty()) {
      live(inFlight.remove(Math.floorMod(pick, inFlight.size())));
    }
  }

  /**
   * The same frame again, on the current connection (a connection only carries frames published
   * while it is up).
   */
  void duplicate(int pick) {
    List<B> mine = published.get(epoch);
    List<B> onThisConnection = mine.subList(Math.min(connectedFrom, mine.size()), mine.size());
    if (connected && !onThisConnection.isEmpty()) {
      live(onThisConnection.get(Math.floorMod(pick, onThisConnection.size())));
    }
  }

  private int connectedFrom; // index into this epoch's batches where the connection came up

  void live(B b) {
    log.add("live " + b);
    seq.live(b, now);
  }

  /**
   * Frames in flight on a connection arrive before it drops (TCP delivers in order up to the close;
   * ZMQ reorders nothing within one connection, so "reordering" here is within it).
   */
  private void flushInFlight() {
    while (!inFlight.isEmpty()) {
      deliverDelayed(0);
    }
  }

  /** The publisher process restarts: new epoch from 0, the connection drops. */
  void restart() {
    flushInFlight();
    epoch++;
    nextSeq = 0;
    restartsPerformed++;
    published.add(new ArrayList<>());
    connected = false;
    log.add("restart -> e" + epoch);
  }

  /** The connection drops (same publisher). */
  void disconnect() {
    flushInFlight();
    connected = false;
  }

  void reconnect() {
    if (!connected) {
      connected = true;
      connectedFrom = published.get(epoch).size();
      log.add("connected");
      seq.connected(now);
    }
  }

  // ------------------------------------------------------------------ replay endpoint

  /** What the replay ROUTER holds now: the current epoch's last bufferSteps batches. */
  List<B> buffer() {
    List<B> all = published.get(epoch);
    return all.subList(Math.max(0, all.size() - bufferSteps), all.size());
  }

  /** Answers the latest request; {@code failAfter} >= 0 stops after that many batches, FAILED. */
  void answer(int failAfter) {
    Request r = requests.pollLast();
    requests.clear();
    if (r == null) {
      return;
    }
    if (r.epoch() != epoch) {
      // the request went to a publisher that has restarted since: its connection closed
      log.add("answer #" + r.id() + ": disconnected");
      seq.replayEnded(r.id(), Sequencer.ReplayEnd.DISCONNECTED, now);
      return;
    }
    log.add("answer #" + r.id() + (failAfter >= 0 ? " fail after " + failAfter : ""));
    int sent = 0;
    for (B b : new ArrayList<>(buffer())) {
      if (Long.compareUnsigned(b.seq(), r.from()) < 0) {
        continue;
      }
      if (failAfter >= 0 && sent >= failAfter) {
        break;
      }
      if (cancelled.contains(r.id())) {
        return;
      }
      seq.replayed(r.id(), b, now);
      sent++;
    }
    if (cancelled.contains(r.id())) {
      return;
    }
    seq.replayEnded(
        r.id(), failAfter >= 0 ? Sequencer.ReplayEnd.FAILED : Sequencer.ReplayEnd.END_MARKER, now);
  }

  private final Set<Long> cancelled = new HashSet<>();

  // ------------------------------------------------------------------ Output

  @Override
  public void deliver(Sequencer.Item item, boolean replayed) {
    delivered.add(new Delivery((B) item, replayed));
    log.add("deliver " + item + (replayed ? " (replayed)" : ""));
  }

  @Override
  public void replayStarted(long id, Sequencer.ReplayKind kind, long from, long until) {
    assertThat(canReplay).as("replay without an endpoint").isTrue();
    requests.add(new Request(id, kind, from, until, epoch));
    log.add("replay #" + id + " " + kind + " from " + from + " until " + until);
  }

  @Override
  public void replayCancelled(long id) {
    cancelled.add(id);
  }

  @Override
  public void replayEnded(long from, long until, int n, boolean complete) {
    log.add("replay ended n=" + n + " complete=" + complete);
  }

  @Override
  public void gap(long expected, long received) {
    log.add("gap " + expected + ".." + received);
  }

  @Override
  public void restart(long last, long received) {
    restartsSeen++;
    log.add("restart seen " + last + " -> " + received);
  }

  @Override
  public void resync(String reason, boolean cleared, long lost) {
    log.add("resync " + reason + " cleared=" + cleared + " lost=" + lost);
    if (cleared) {
      clears++;
      lastClearIndex = delivered.size();
      if (reason.equals("restart")) {
        restartClears++;
      }
    }
    if (!reason.equals("restart")) {
      lossResyncs++;
    }
  }

  @Override
  public void duplicate(long s) {
    duplicates++;
    log.add("duplicate " + s);
  }

  @Override
  public void heldBackDropped(long s, int capacity) {
    heldDropped++;
    log.add("held-back dropped " + s);
  }

  // ------------------------------------------------------------------ checks

  /** Safety, at any time: per epoch strictly increasing, never twice; epochs never go back. */
  void checkSafety() {
    Set<String> seen = new HashSet<>();
    int lastEpoch = -1;
    long lastSeq = -1;
    for (Delivery d : delivered) {
      B b = d.batch();
      assertThat(seen.add(b.toString())).as("delivered twice: %s\n%s", b, trace()).isTrue();
      assertThat(b.epoch())
          .as("epoch went back at %s\n%s", b, trace())
          .isGreaterThanOrEqualTo(lastEpoch);
      if (b.epoch() == lastEpoch) {
        assertThat(b.seq()).as("order at %s\n%s", b, trace()).isGreaterThan(lastSeq);
      }
      lastEpoch = b.epoch();
      lastSeq = b.seq();
    }
    assertThat(clears).as("clears").isLessThanOrEqualTo(restartsSeen + lossResyncs);
    assertThat(restartsSeen)
        .as("restarts seen\n%s", trace())
        .isLessThanOrEqualTo(restartsPerformed);
  }

  /** Brings everything in flight home: delayed frames, a reconnect, every replay answered. */
  void quiesce() {
    while (!inFlight.isEmpty()) {
      deliverDelayed(0);
    }
    reconnect();
    drainReplays();
    publishLive(); // a last batch reveals any loss at the tail
    drainReplays();
  }

  void drainReplays() {
    for (int i = 0; i < 1000 && !requests.isEmpty(); i++) {
      answer(-1);
    }
    assertThat(seq.recovering()).as("still recovering\n%s", trace()).isFalse();
  }

  /**
   * Liveness after {@link #quiesce()}: the segment since the last clear is the final epoch from R
   * to its last batch, contiguous; R > 0 only with a counted loss. With {@code recoverable},
   * nothing is lost and nothing is cleared but for real restarts.
   */
  void checkConverged(boolean recoverable) {
    checkSafety();
    List<B> finalEpoch = published.get(epoch);
    List<Delivery> segment = delivered.subList(lastClearIndex, delivered.size());
    assertThat(segment).as("nothing delivered since the last clear\n%s", trace()).isNotEmpty();
    long r = segment.get(0).batch().seq();
    for (int i = 0; i < segment.size(); i++) {
      B got = segment.get(i).batch();
      if (recoverable) {
        assertThat(got)
            .as("segment position %d\n%s", i, trace())
            .isEqualTo(finalEpoch.get((int) r + i));
      } else {
        // Without a working replay a restart whose first batch seen is exactly the next expected
        // sequence number cannot be told from a continuation: epochs may change mid-segment.
        assertThat(got.seq()).as("segment position %d\n%s", i, trace()).isEqualTo(r + i);
      }
    }
    assertThat(segment.get(segment.size() - 1).batch())
        .as("the last batch\n%s", trace())
        .isEqualTo(finalEpoch.get(finalEpoch.size() - 1));
    if (r > 0) {
      assertThat(lossResyncs).as("a loss must be counted\n%s", trace()).isPositive();
    }
    if (recoverable) {
      assertThat(lossResyncs).as("no loss when replay can recover\n%s", trace()).isZero();
      assertThat(r).as("whole final epoch\n%s", trace()).isZero();
      assertThat(clears).as("only restarts clear\n%s", trace()).isEqualTo(restartClears);
    }
  }

  String trace() {
    List<String> tail = log.subList(Math.max(0, log.size() - 80), log.size());
    return String.join("\n", tail);
  }
}
