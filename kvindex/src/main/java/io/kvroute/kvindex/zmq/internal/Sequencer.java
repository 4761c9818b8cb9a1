package io.kvroute.kvindex.zmq.internal;

import java.util.ArrayDeque;
import java.util.Objects;

/**
 * The per-publisher sequencing state machine of the KV-event subscriber: pure, no I/O, no clock, no
 * threads. The socket code feeds it what it observes (live batches, live batches it had to drop,
 * connection handshakes, replay answers) and carries out what it asks through {@link Output}
 * (deliver a batch, clear the pod, start or cancel a replay, report). The rules are written out as
 * prose in {@code kvindex/SEQUENCING.md}; in short:
 *
 * <ol>
 *   <li><b>Exactly once, in order.</b> Batches reach {@link Output#deliver} in strictly increasing
 *       sequence order, each at most once per publisher epoch; a sequence number below the next
 *       expected one is never delivered.
 *   <li><b>Duplicates are dropped, never a restart.</b> A batch with a sequence number already
 *       consumed is a duplicate when its payload fingerprint equals the one remembered for that
 *       number, or, when none is remembered, when its {@code ts} is not newer than every {@code ts}
 *       delivered in the epoch. It is counted ({@link Output#duplicate}) and dropped.
 *   <li><b>A restart</b> (a new publisher epoch) is detected from: a consumed sequence number
 *       carrying a different fingerprint, or a {@code ts} newer than anything delivered; a replay
 *       answer whose batch at the anchor (the last consumed batch with a known fingerprint)
 *       differs; a replay answer that ends without any batch at or after the anchor (the same epoch
 *       always still holds its latest batch). The pod is cleared once (when anything was delivered
 *       since the last clear) and the new epoch is fetched from sequence 0 by replay.
 *   <li><b>Gaps</b> are repaired by a replay that starts at the anchor, so that the answer also
 *       proves the epoch (rule 3), and delivers the missing batches; live batches meanwhile are
 *       held back (bounded) and applied after it, dropping those the replay already delivered.
 *       Without a replay endpoint, or when the replay cannot deliver them, the missing batches are
 *       lost: the pod is resynchronised (cleared if anything was delivered since the last clear)
 *       and counted.
 *   <li><b>Catch-up and verification.</b> On the first handshake (and on the first live batch when
 *       it is not sequence 0) everything the publisher's replay buffer holds is fetched. On every
 *       later handshake (a reconnect: batches may have been published meanwhile, or the publisher
 *       may have restarted) a replay from the anchor verifies the epoch and fetches what was
 *       missed.
 *   <li>A replay that fails (no end marker: timeout, error) is retried from the anchor up to 3
 *       times, then the loss is accepted (rule 4) and replays are not attempted for the cooldown.
 *       One cut short by the publisher closing the connection (a restart, most likely) is retried
 *       without using up those attempts (up to 10 times): the retry reaches the new publisher, and
 *       rule 3 shows the restart.
 * </ol>
 *
 * <p>Sequence numbers are unsigned 64-bit values, compared as such.
 *
 * <p>Not thread-safe: one instance per publisher stream, driven by one thread at a time.
 */
public final class Sequencer {

  /** The {@code until} of a replay that takes everything the publisher's buffer holds. */
  public static final long OPEN = -1L;

  /** Failed replay attempts per recovery before the loss is accepted. */
  public static final int MAX_ATTEMPTS = 3;

  /** Replay attempts per recovery cut short by the publisher closing its end. */
  public static final int MAX_DISCONNECTS = 10;

  private static final int WINDOW = 32; // remembered fingerprints (a power of two)

  /** A batch as the sequencer sees it; the rest of it is opaque here. */
  public interface Item {
    /** The sequence number. */
    long seq();

    /** Whether {@link #fingerprint()} is known (false for a payload never read). */
    boolean hasFingerprint();

    /** A 64-bit hash of the payload bytes. */
    long fingerprint();

    /** The batch {@code ts} (epoch seconds), NaN when unknown. */
    double ts();
  }

  /** How a replay ended. */
  public enum ReplayEnd {
    /** The publisher's end marker arrived: the answer is whole. */
    END_MARKER,
    /** No end marker: no reply within the idle timeout, the overall timeout, an error. */
    FAILED,
    /**
     * The publisher closed the connection before the end marker (it may have restarted: the retry
     * will show). Retried without using up {@link #MAX_ATTEMPTS}, up to {@link #MAX_DISCONNECTS}
     * times.
     */
    DISCONNECTED
  }

  /** Why a replay was started (reported to {@link Output#replayStarted}). */
  public enum ReplayKind {
    /** First contact: whatever the buffer holds. */
    CATCH_UP,
    /** A handshake after the first one: verify the epoch, fetch what was missed. */
    VERIFY,
    /** Missing sequence numbers. */
    GAP,
    /** A new epoch was detected: its batches from 0. */
    RESTART_FILL
  }

  /** What the sequencer asks for. Called synchronously from the input methods. */
  public interface Output {
    /** Apply {@code item} (live or {@code replayed}), in order. */
    void deliver(Item item, boolean replayed);

    /** Ask the publisher's replay endpoint for {@code from..} (stop before {@code until}). */
    void replayStarted(long replayId, ReplayKind kind, long from, long until);

    /** Stop replay {@code replayId}; anything it still reports is ignored. */
    void replayCancelled(long replayId);

    /**
     * The replay for {@code from..until-1} ended ({@code until} {@link #OPEN} for open-ended ones;
     * {@code complete}: every batch needed arrived).
     */
    void replayEnded(long from, long until, int delivered, boolean complete);

    /** Sequence numbers {@code expected..received-1} were not received live. */
    void gap(long expected, long received);

    /** A new publisher epoch: {@code last} consumed, {@code received} (-1 if unknown) seen. */
    void restart(long last, long received);

    /**
     * The pod's entries no longer follow every batch: {@code cleared} when {@link #deliver} had
     * been called since the last clear (the caller clears the pod), {@code lost} batches (-1 if
     * unknown).
     */
    void resync(String reason, boolean cleared, long lost);

    /** A duplicate of an already consumed batch was dropped. */
    void duplicate(long seq);

    /** A live batch was dropped because {@code capacity} batches were held back already. */
    void heldBackDropped(long seq, int capacity);
  }

  private final boolean canReplay;
  private final int holdCapacity;
  private final long cooldownNanos;
  private final Output out;

  // the epoch
  private boolean started;
  private long next;
  private boolean anchored;
  private long anchorSeq;
  private long anchorFp;
  private final long[] ringSeq = new long[WINDOW];
  private final long[] ringFp = new long[WINDOW];
  private final boolean[] ringSet = new boolean[WINDOW];
  private double maxTs = Double.NaN; // the newest ts consumed, or held back and dropped, this epoch
  private double consumedMaxTs = Double.NaN; // the newest ts consumed this epoch
  private double epochStartTs = Double.NaN; // ts of the epoch's first consumed batch
  private double staleUpTo = Double.NaN; // the newest ts delivered in an earlier epoch
  private boolean dirty;
  private boolean suspect; // reconnected since the last consumed batch
  private boolean seenAny; // a live batch arrived (or was dropped) at some point
  private boolean consumedInEpoch; // a batch was consumed since the epoch began
  private boolean tailKnown;
  private long tail;
  private double tailTs = Double.NaN;

  // recovery
  /** A held-back batch and the connection generation it arrived on. */
  private record Held(Item item, long generation) {}

  private final ArrayDeque<Held> held = new ArrayDeque<>();
  private long generation; // counts handshakes: which connection a live batch came on
  private boolean recovering;
  private boolean verifyPending;
  private long replayIds;
  private long replayId = -1;
  private ReplayKind kind;
  private long rFrom;
  private long rNeed; // the first sequence number the replay is for
  private long rUntil;
  private boolean rVerified;
  private boolean rAcceptFirst;
  private boolean rHole;
  private int heldAtStart; // held back before the running attempt was requested
  private long rExpect;
  private int rDelivered;
  private int attempts;
  private int disconnects;
  private boolean cooling;
  private long coolUntil;

  /**
   * A sequencer for one publisher.
   *
   * @param canReplay whether the publisher has a replay endpoint
   * @param holdCapacity live batches held back while a replay runs
   * @param cooldownNanos after a replay failed {@link #MAX_ATTEMPTS} times, gaps resynchronise
   *     without replay for this long
   */
  public Sequencer(boolean canReplay, int holdCapacity, long cooldownNanos, Output out) {
    if (holdCapacity < 1) {
      throw new IllegalArgumentException("holdCapacity must be >= 1, was " + holdCapacity);
    }
    this.canReplay = canReplay;
    this.holdCapacity = holdCapacity;
    this.cooldownNanos = cooldownNanos;
    this.out = Objects.requireNonNull(out, "out");
  }

  // ------------------------------------------------------------------ inputs

  /** A live batch arrived. */
  public void live(Item item, long now) {
    seenAny = true;
    if (recovering) {
      hold(item);
    } else {
      process(item, generation, now);
    }
  }

  /** A live batch was lost before reaching the sequencer (a full queue). */
  public void liveDropped(long seq, long now) {
    seenAny = true;
    if (started && Long.compareUnsigned(seq, next) >= 0) {
      suspect = false; // the connection carries the stream onwards
    }
    noteTail(seq, Double.NaN);
    if (recovering) {
      return; // recovered after the replay
    }
    if (!started) {
      if (canReplay && !cooling(now)) {
        startReplay(ReplayKind.CATCH_UP, 0, seq + 1, null, 0, true);
        return;
      }
      return; // no replay: the first batch that arrives starts the stream
    }
    recoverTail(now);
  }

  /** The subscription completed a handshake with the publisher. */
  public void connected(long now) {
    generation++;
    suspect = seenAny || started; // a reconnect: the publisher may have restarted
    if (!canReplay || cooling(now)) {
      return;
    }
    if (recovering) {
      verifyPending = true; // after the running replay
    } else if (!started) {
      startReplay(ReplayKind.CATCH_UP, 0, OPEN, null, 0, true);
    } else {
      startReplay(ReplayKind.VERIFY, next, OPEN, null, 0, false);
    }
  }

  /** One batch of the answer to replay {@code id}. */
  public void replayed(long id, Item item, long now) {
    if (!recovering || id != replayId) {
      return;
    }
    long seq = item.seq();
    if (!rVerified) {
      int c = Long.compareUnsigned(seq, anchorSeq);
      if (c < 0) {
        return;
      }
      if (c == 0 && item.hasFingerprint() && item.fingerprint() == anchorFp) {
        rVerified = true; // the same epoch: deliver from the next expected batch
        return;
      }
      if (c == 0 && item.hasFingerprint()) {
        restartFromReplay(item, now);
        return;
      }
      // the anchor is gone from the buffer (or unreadable): the epoch cannot be proven
      rVerified = true;
      resync("gap", -1);
      forgetEpoch();
      rExpect = maxUnsigned(seq, next);
      next = rExpect;
      if (Long.compareUnsigned(seq, rExpect) < 0) {
        return;
      }
    }
    if (rAcceptFirst) {
      rAcceptFirst = false;
      if (Long.compareUnsigned(seq, rExpect) > 0) {
        // the buffer no longer reaches back: the first batches are gone
        resync(kind == ReplayKind.RESTART_FILL ? "gap" : "joined_late", seq - rExpect);
        rExpect = seq;
        next = seq; // the start of what can be known, not a gap in it
      }
    }
    int c = Long.compareUnsigned(seq, rExpect);
    if (c < 0) {
      return; // consumed already
    }
    if (c > 0) {
      // a hole in the publisher's buffer (vLLM skips a batch it failed to encode): gone for good
      rHole = true;
      resync("gap", seq - rExpect);
      next = seq;
    }
    consume(item, true, generation);
    rExpect = next;
    rDelivered++;
    if (rUntil != OPEN && Long.compareUnsigned(rExpect, rUntil) >= 0) {
      out.replayCancelled(replayId);
      finishReplay(true, now);
    }
  }

  /** Replay {@code id} ended. */
  public void replayEnded(long id, ReplayEnd end, long now) {
    if (!recovering || id != replayId) {
      return;
    }
    if (end == ReplayEnd.END_MARKER) {
      if (!rVerified) {
        // Nothing at or after the anchor: a publisher's buffer always keeps its newest batch, so
        // the one answering is not the one whose batches were consumed.
        restartFromReplay(null, now);
        return;
      }
      if (rUntil != OPEN && Long.compareUnsigned(rExpect, rUntil) < 0) {
        // The answering publisher (the current one; it holds the anchor, or nothing was anchored)
        // ends before batches received before the request: those came from an earlier epoch.
        dropStale(rExpect);
      }
      finishReplay(true, now);
      return;
    }
    boolean retry =
        end == ReplayEnd.DISCONNECTED ? ++disconnects <= MAX_DISCONNECTS : attempts < MAX_ATTEMPTS;
    if (retry) {
      if (end == ReplayEnd.DISCONNECTED) {
        attempts--; // a closed connection is not the endpoint failing to answer
      }
      // a fresh request from the anchor, proving the epoch again (it may be a new publisher)
      requestReplay(rAcceptFirst ? rFrom : next);
      return;
    }
    cooling = true;
    coolUntil = now + cooldownNanos;
    finishReplay(false, now);
  }

  // ------------------------------------------------------------------ state, for callers and tests

  /** Whether a replay is in flight (live batches are held back). */
  public boolean recovering() {
    return recovering;
  }

  /** Live batches held back behind the running replay. */
  public int held() {
    return held.size();
  }

  /** The next sequence number to deliver, once anything is known. */
  public long next() {
    return next;
  }

  /** Whether the sequencer knows where the stream is (a batch was consumed or placed). */
  public boolean started() {
    return started;
  }

  @Override
  public String toString() {
    return "Sequencer{"
        + (recovering ? "recovering " + kind + " #" + replayId : started ? "live" : "new")
        + ", next="
        + Long.toUnsignedString(next)
        + ", held="
        + held.size()
        + "}";
  }

  // ------------------------------------------------------------------ rules

  private void process(Item item, long gen, long now) {
    long seq = item.seq();
    if (!started) {
      if (canReplay && seq != 0 && !cooling(now)) {
        // first contact mid-stream: a SUB misses what was published before it joined
        startReplay(ReplayKind.CATCH_UP, 0, seq, item, gen, true);
        return;
      }
      if (seq != 0) {
        out.resync("joined_late", false, seq); // 0..seq-1 went out before we joined
      }
      started = true;
      next = seq;
      consume(item, false, gen);
      return;
    }
    if (olderThanEpoch(item)) {
      out.duplicate(seq); // a batch of an earlier epoch, held back or late
      return;
    }
    int c = Long.compareUnsigned(seq, next);
    if (c == 0) {
      consume(item, false, gen);
    } else if (c > 0) {
      out.gap(next, seq);
      if (canReplay && !cooling(now)) {
        startReplay(ReplayKind.GAP, next, seq, item, gen, false);
        return;
      }
      resync("gap", seq - next);
      next = seq;
      consume(item, false, gen);
    } else if (isDuplicate(item, gen)) {
      out.duplicate(seq);
    } else {
      restart(item, gen, now);
    }
  }

  /**
   * A batch below {@code next}: a duplicate unless its content or time says otherwise. A restart
   * needs a different fingerprint for a remembered sequence number (unless its {@code ts} is not
   * newer than the newest batch consumed in the epoch: a stale batch), or, with none remembered, a
   * newer {@code ts} after a reconnect.
   */
  private boolean isDuplicate(Item item, long gen) {
    if (!consumedInEpoch) {
      return false; // nothing to be a duplicate of: (re)start tracking with it
    }
    long seq = item.seq();
    double ts = item.ts();
    boolean tsKnown = !Double.isNaN(ts) && !Double.isNaN(maxTs);
    int slot = (int) (seq & (WINDOW - 1));
    if (ringSet[slot] && ringSeq[slot] == seq && item.hasFingerprint()) {
      if (ringFp[slot] == item.fingerprint()) {
        return true;
      }
      // Another payload at a consumed sequence number: stale (an earlier epoch's) unless newer
      // than every batch consumed in this epoch. Held-back batches dropped unsequenced do not
      // count here: they may be the new epoch's own (its seq 1 dropped behind a replay must not
      // make its seq 0 look stale).
      if (!Double.isNaN(ts) && !Double.isNaN(consumedMaxTs)) {
        return !(ts > consumedMaxTs);
      }
      return tsKnown && !(ts > maxTs);
    }
    // Nothing remembered: a newer ts means a new epoch if the batch came on a connection made
    // after the last batch consumed (a publisher restart drops the connection). Otherwise a newer
    // ts is only possible above the last consumed batch, in a range given up: a late batch.
    return !(suspect && gen == generation) || !tsKnown || !(ts > maxTs);
  }

  /**
   * Whether the batch belongs to an earlier epoch: its {@code ts} is not newer than what an earlier
   * epoch delivered, or older than the current epoch's first batch (publisher clocks go forward).
   */
  private boolean olderThanEpoch(Item item) {
    return olderThanEpoch(item.ts());
  }

  private boolean olderThanEpoch(double ts) {
    return !Double.isNaN(ts)
        && ((!Double.isNaN(epochStartTs) && ts < epochStartTs)
            || (!Double.isNaN(staleUpTo) && ts <= staleUpTo));
  }

  private void restart(Item item, long gen, long now) {
    long seq = item.seq();
    newEpoch(seq);
    started = true;
    next = 0;
    if (seq == 0) {
      consume(item, false, gen);
    } else if (canReplay && !cooling(now)) {
      startReplay(ReplayKind.RESTART_FILL, 0, seq, item, gen, true);
    } else {
      resync("gap", seq);
      next = seq;
      consume(item, false, gen);
    }
  }

  /** The replay answer proved a new epoch ({@code evidence}: its batch at the anchor, if any). */
  private void restartFromReplay(Item evidence, long now) {
    out.replayCancelled(replayId);
    for (Held h : held) {
      noteStale(h.item().ts()); // whatever epoch they are of, the fill below brings the new one's
    }
    newEpoch(evidence == null ? -1 : evidence.seq());
    started = true;
    next = 0;
    recovering = false;
    attempts = 0;
    // Held-back batches are of either epoch; the open-ended fill fetches every batch the new
    // publisher has, theirs included.
    held.clear();
    startReplay(ReplayKind.RESTART_FILL, 0, OPEN, null, 0, true);
  }

  private void recoverTail(long now) {
    if (!tailKnown || Long.compareUnsigned(tail, next) < 0 || olderThanEpoch(tailTs)) {
      tailKnown = false;
      return;
    }
    if (canReplay && !cooling(now)) {
      startReplay(ReplayKind.GAP, next, tail + 1, null, 0, false);
      return;
    }
    // No replay: the next batch shows the gap and the loss is counted then. (Moving on to the
    // dropped batch's number here could be wrong: its epoch is unknown.)
    tailKnown = false;
  }

  /**
   * Drops the batches held back before the running replay was requested (and the dropped tail) from
   * {@code from} on: the publisher that answered does not have them.
   */
  private void dropStale(long from) {
    int n = 0;
    for (java.util.Iterator<Held> it = held.iterator(); it.hasNext() && n < heldAtStart; n++) {
      Item h = it.next().item();
      if (Long.compareUnsigned(h.seq(), from) >= 0) {
        it.remove();
        out.duplicate(h.seq());
      }
    }
    if (tailKnown && Long.compareUnsigned(tail, from) >= 0) {
      tailKnown = false;
    }
  }

  private void hold(Item item) {
    if (held.size() >= holdCapacity) {
      noteTail(item.seq(), item.ts());
      noteTs(item.ts()); // a batch of this connection not older than this one is not a restart
      out.heldBackDropped(item.seq(), holdCapacity);
      return;
    }
    held.addLast(new Held(item, generation));
  }

  private void startReplay(
      ReplayKind k, long from, long until, Item trigger, long triggerGen, boolean acceptFirst) {
    recovering = true;
    kind = k;
    rUntil = until;
    rAcceptFirst = acceptFirst;
    rHole = false;
    rDelivered = 0;
    attempts = 0;
    disconnects = 0;
    if (trigger != null) {
      held.addFirst(new Held(trigger, triggerGen)); // waits behind the replay, ahead of later ones
    }
    rNeed = from;
    requestReplay(from);
  }

  /** Sends (or re-sends) the request: from the anchor when the epoch must be proven. */
  private void requestReplay(long from) {
    attempts++;
    heldAtStart = held.size(); // received before this request
    replayId = replayIds++;
    rExpect = from;
    boolean verify = !rAcceptFirst && anchored;
    rVerified = !verify;
    rFrom = verify ? anchorSeq : from;
    out.replayStarted(replayId, kind, rFrom, rUntil);
  }

  private void finishReplay(boolean complete, long now) {
    recovering = false;
    attempts = 0;
    disconnects = 0;
    if (!complete && rUntil != OPEN && Long.compareUnsigned(rExpect, rUntil) < 0) {
      resync("gap", rUntil - rExpect);
      next = rUntil;
    }
    if (!started && rDelivered == 0 && complete) {
      started = true; // an empty buffer: the publisher has published nothing yet
      next = 0;
    }
    out.replayEnded(rNeed, rUntil, rDelivered, complete && !rHole);
    replayId = -1;
    if (verifyPending && canReplay && !cooling(now)) {
      verifyPending = false;
      if (started) {
        startReplay(ReplayKind.VERIFY, next, OPEN, null, 0, false);
      } else {
        startReplay(ReplayKind.CATCH_UP, 0, OPEN, null, 0, true);
      }
      return;
    }
    verifyPending = false;
    Held h;
    while (!recovering && (h = held.pollFirst()) != null) {
      process(h.item(), h.generation(), now);
    }
    if (!recovering && started) {
      recoverTail(now);
    }
  }

  private void consume(Item item, boolean replayed, long gen) {
    long seq = item.seq();
    out.deliver(item, replayed);
    started = true;
    dirty = true;
    if (replayed || gen == generation) {
      suspect = false; // the current connection (or a replay answer) carries the epoch on
    }
    consumedInEpoch = true;
    next = seq + 1;
    int slot = (int) (seq & (WINDOW - 1));
    ringSeq[slot] = seq;
    ringSet[slot] = item.hasFingerprint();
    if (item.hasFingerprint()) {
      ringFp[slot] = item.fingerprint();
      anchored = true;
      anchorSeq = seq;
      anchorFp = item.fingerprint();
    }
    double ts = item.ts();
    noteTs(ts);
    if (!Double.isNaN(ts) && (Double.isNaN(consumedMaxTs) || ts > consumedMaxTs)) {
      consumedMaxTs = ts;
    }
    if (Double.isNaN(epochStartTs)) {
      epochStartTs = ts;
    }
  }

  private void resync(String reason, long lost) {
    out.resync(reason, dirty, lost);
    dirty = false;
  }

  /**
   * A restart: reported and the pod cleared once; a second piece of evidence before anything of the
   * new epoch was consumed is the same restart (or one more that changes nothing).
   */
  private void newEpoch(long received) {
    if (consumedInEpoch) {
      out.restart(next - 1, received);
      resync("restart", 0);
    }
    forgetEpoch();
    consumedInEpoch = false;
    suspect = false;
  }

  private void noteTs(double ts) {
    if (!Double.isNaN(ts) && (Double.isNaN(maxTs) || ts > maxTs)) {
      maxTs = ts;
    }
  }

  private void noteStale(double ts) {
    if (!Double.isNaN(ts) && (Double.isNaN(staleUpTo) || ts > staleUpTo)) {
      staleUpTo = ts;
    }
  }

  /** Forgets what identified the epoch (after a restart or an unprovable replay answer). */
  private void forgetEpoch() {
    noteStale(maxTs);
    anchored = false;
    java.util.Arrays.fill(ringSet, false);
    maxTs = Double.NaN;
    consumedMaxTs = Double.NaN;
    epochStartTs = Double.NaN;
    tailKnown = false;
  }

  /** A batch that exists but was dropped before it could be sequenced ({@code ts} if known). */
  private void noteTail(long seq, double ts) {
    if (!tailKnown || Long.compareUnsigned(seq, tail) > 0) {
      tail = seq;
      tailTs = ts;
      tailKnown = true;
    }
  }

  private boolean cooling(long now) {
    if (cooling && now - coolUntil >= 0) {
      cooling = false;
    }
    return cooling;
  }

  private static long maxUnsigned(long a, long b) {
    return Long.compareUnsigned(a, b) >= 0 ? a : b;
  }
}
