package io.kvroute.kvindex.zmq.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import io.kvroute.kvindex.zmq.internal.SequencerWorld.B;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.quicktheories.core.Gen;

/**
 * The sequencing state machine on its own: one test per rule, every arrival order of small streams,
 * and random schedules of every fault against a reference (the simulated publisher).
 */
class SequencerTest {

  private static List<String> seqs(SequencerWorld w) {
    List<String> out = new ArrayList<>();
    for (SequencerWorld.Delivery d : w.delivered) {
      out.add(d.batch() + (d.replayed() ? "r" : ""));
    }
    return out;
  }

  // ------------------------------------------------------------------ one rule each

  @Test
  void inOrderBatchesAreDeliveredOnce() {
    SequencerWorld w = new SequencerWorld(false, 100, 16);
    for (int i = 0; i < 5; i++) {
      w.publishLive();
    }
    assertThat(seqs(w)).containsExactly("e0:0", "e0:1", "e0:2", "e0:3", "e0:4");
    w.checkConverged(true);
  }

  /** Issue 13, bug 2: a repeated sequence number (replay and live overlapping) wiped the pod. */
  @Test
  void aDuplicateIsDroppedAndCountedNeverARestart() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    w.publishLive();
    w.publishLive();
    w.duplicate(1); // e0:1 again
    w.duplicate(0); // e0:0 again
    w.publishLive();
    assertThat(seqs(w)).containsExactly("e0:0", "e0:1", "e0:2");
    assertThat(w.duplicates).isEqualTo(2);
    assertThat(w.restartsSeen).isZero();
    assertThat(w.clears).isZero();
  }

  @Test
  void anOldDuplicateBeyondTheRememberedWindowIsDroppedByItsTime() {
    SequencerWorld w = new SequencerWorld(false, 100, 16);
    for (int i = 0; i < 100; i++) {
      w.publishLive();
    }
    w.live(w.published.get(0).get(3)); // seq 3, 96 batches ago: not remembered, older ts
    assertThat(w.duplicates).isEqualTo(1);
    assertThat(w.restartsSeen).isZero();
  }

  /**
   * Found by the subscriber model test: a publisher restarts while the verification replay of a
   * reconnect runs; its seq 0 is held back, its seq 1 dropped (the hold is full), the replay never
   * answers. Seq 1's time must not make seq 0 look like a stale copy of the old epoch's seq 0: it
   * is the new epoch's, a restart.
   */
  @Test
  void aNewEpochsFirstBatchIsNotStaleBecauseALaterOneWasDroppedUnsequenced() {
    SequencerWorld w = new SequencerWorld(true, 100, 1);
    w.publishLive(); // e0:0
    w.disconnect();
    w.reconnect(); // verification replay from the anchor
    w.restart();
    w.reconnect();
    w.publishLive(); // e1:0, held back behind the replay
    w.publishLive(); // e1:1, dropped: the hold is full
    for (int i = 0; i < 20 && !w.requests.isEmpty(); i++) {
      w.answer(0); // the replay endpoint fails every attempt; the sequencer gives up
    }
    assertThat(w.restartsSeen).as(w.trace()).isEqualTo(1);
    assertThat(seqs(w)).as(w.trace()).contains("e1:0");
    w.checkSafety();
  }

  /** Issue 13, bug 1: the slow-joiner catch-up lost the batch that followed it. */
  @Test
  void batchesArrivingLiveDuringTheConnectCatchUpFollowIt() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    w.connected = false; // the SUB has not joined yet
    for (int i = 0; i < 5; i++) {
      w.publishLost(); // published before the subscription reached the publisher
    }
    w.reconnect(); // handshake: catch-up of everything buffered, open-ended
    assertThat(w.requests.peekLast().kind()).isEqualTo(Sequencer.ReplayKind.CATCH_UP);
    w.publishLive(); // e0:5 arrives live while the catch-up runs: held back
    w.answer(-1); // the answer holds 0..5
    assertThat(seqs(w)).containsExactly("e0:0r", "e0:1r", "e0:2r", "e0:3r", "e0:4r", "e0:5r");
    assertThat(w.duplicates).isEqualTo(1); // the live copy of 5
    w.publishLive();
    assertThat(seqs(w)).endsWith("e0:6");
    w.checkConverged(true);
  }

  @Test
  void theLiveBatchAfterACatchUpAnswerThatLacksItIsStillApplied() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    w.connected = false;
    for (int i = 0; i < 5; i++) {
      w.publishLost();
    }
    w.reconnect();
    w.answer(-1); // 0..4
    w.publishLive(); // 5, after the answer
    assertThat(seqs(w)).containsExactly("e0:0r", "e0:1r", "e0:2r", "e0:3r", "e0:4r", "e0:5");
  }

  @Test
  void aGapIsReplayedAndTheHeldBackBatchesFollow() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    w.publishLive();
    w.publishLost();
    w.publishLive(); // reveals the gap: replay from the anchor (0) proves the epoch
    w.publishLive(); // held back
    assertThat(w.requests.peekLast().from()).isZero();
    w.answer(-1);
    assertThat(seqs(w)).containsExactly("e0:0", "e0:1r", "e0:2", "e0:3");
    w.checkConverged(true);
  }

  @Test
  void aLiveBatchTheReplayAlreadyDeliveredIsDroppedAsADuplicate() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    w.publishLive();
    w.publishLost();
    w.publishLive(); // gap 1..2: replay, 2 held
    w.publishLost(); // 3 lost live
    w.publishLive(); // 4 held
    w.answer(-1); // delivers 1 only (until 2), then 2 from the held ones, then 4 reveals 3
    w.answer(-1);
    assertThat(seqs(w)).containsExactly("e0:0", "e0:1r", "e0:2", "e0:3r", "e0:4");
    assertThat(w.duplicates).isZero();
    w.checkConverged(true);
  }

  @Test
  void aGapWithoutReplayIsACountedResyncThatClearsOnce() {
    SequencerWorld w = new SequencerWorld(false, 100, 16);
    w.publishLive();
    w.publishLost();
    w.publishLost();
    w.publishLive();
    assertThat(seqs(w)).containsExactly("e0:0", "e0:3");
    assertThat(w.lossResyncs).isEqualTo(1);
    assertThat(w.clears).isEqualTo(1);
    w.checkConverged(false);
  }

  @Test
  void aRestartSeenAtSequenceZeroClearsOnceAndStartsTheNewEpoch() {
    SequencerWorld w = new SequencerWorld(false, 100, 16);
    for (int i = 0; i < 4; i++) {
      w.publishLive();
    }
    w.restart();
    w.reconnect(); // without replay, nothing to verify
    w.publishLive(); // e1:0
    w.publishLive();
    assertThat(seqs(w)).endsWith("e0:3", "e1:0", "e1:1");
    assertThat(w.restartsSeen).isEqualTo(1);
    assertThat(w.clears).isEqualTo(1);
    assertThat(w.lossResyncs).isZero();
    w.checkConverged(true);
  }

  /** Issue 13, bug 3: a restarted publisher first seen at a higher sequence number. */
  @Test
  void aRestartFirstSeenAtAHigherSequenceIsProvenByTheReplayAndFilledFromZero() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    for (int i = 0; i < 3; i++) {
      w.publishLive(); // e0:0..2
    }
    w.restart();
    for (int i = 0; i < 5; i++) {
      w.publishLost(); // e1:0..4 go out before the SUB reconnects
    }
    w.reconnect(); // handshake: verify from the anchor e0:2
    w.publishLive(); // e1:5, held back
    Sequencer.ReplayKind k = w.requests.peekLast().kind();
    assertThat(k).isEqualTo(Sequencer.ReplayKind.VERIFY);
    assertThat(w.requests.peekLast().from()).isEqualTo(2);
    w.answer(-1); // e1:2 differs from e0:2: restart; clear; fill e1 from 0
    w.answer(-1);
    assertThat(seqs(w))
        .containsExactly(
            "e0:0", "e0:1", "e0:2", "e1:0r", "e1:1r", "e1:2r", "e1:3r", "e1:4r", "e1:5r");
    assertThat(w.restartsSeen).isEqualTo(1);
    assertThat(w.clears).isEqualTo(1);
    assertThat(w.lossResyncs).isZero();
    w.checkConverged(true);
  }

  @Test
  void aRestartedPublisherWithFewerBatchesThanTheAnchorIsProvenByAnEmptyAnswer() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    for (int i = 0; i < 6; i++) {
      w.publishLive(); // e0:0..5
    }
    w.restart();
    w.publishLost(); // e1:0
    w.reconnect(); // verify from e0:5: the new publisher has nothing at or after 5
    w.answer(-1);
    w.answer(-1); // fill from 0
    assertThat(seqs(w)).endsWith("e0:5", "e1:0r");
    assertThat(w.restartsSeen).isEqualTo(1);
    assertThat(w.clears).isEqualTo(1);
    w.checkConverged(true);
  }

  @Test
  void aReconnectToTheSamePublisherFetchesWhatWasMissedWithoutClearing() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    w.publishLive();
    w.disconnect();
    w.publishLost();
    w.publishLost(); // then the publisher stays quiet
    w.reconnect();
    w.answer(-1);
    assertThat(seqs(w)).containsExactly("e0:0", "e0:1r", "e0:2r");
    assertThat(w.clears).isZero();
    assertThat(w.restartsSeen).isZero();
  }

  @Test
  void aFailedReplayIsRetriedFromTheAnchorThenTheLossIsCounted() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    w.publishLive();
    w.publishLost();
    w.publishLive();
    w.answer(0); // attempt 1 fails
    assertThat(w.requests.peekLast().from()).isZero();
    w.answer(0); // attempt 2 fails
    w.answer(0); // attempt 3 fails: loss counted, the held-back batch applies
    assertThat(w.requests).isEmpty();
    assertThat(seqs(w)).containsExactly("e0:0", "e0:2");
    assertThat(w.lossResyncs).isEqualTo(1);
    // cooling down: the next gap resynchronises at once
    w.publishLost();
    w.publishLive();
    assertThat(w.requests).isEmpty();
    assertThat(w.lossResyncs).isEqualTo(2);
    w.now += 10_000; // cooldown over
    w.publishLost();
    w.publishLive();
    assertThat(w.requests).hasSize(1);
  }

  @Test
  void aPartialAnswerIsContinuedByTheRetry() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    w.publishLive();
    for (int i = 0; i < 4; i++) {
      w.publishLost();
    }
    w.publishLive(); // gap 1..4
    w.answer(3); // verify 0, then 1 and 2, then the connection fails
    w.answer(-1); // retry from the anchor 2
    assertThat(seqs(w)).containsExactly("e0:0", "e0:1r", "e0:2r", "e0:3r", "e0:4r", "e0:5");
    w.checkConverged(true);
  }

  @Test
  void batchesBeyondTheHoldCapacityAreDroppedAndFetchedByAnotherReplay() {
    SequencerWorld w = new SequencerWorld(true, 100, 2);
    w.publishLive();
    w.publishLost();
    w.publishLive(); // gap: held [2]
    for (int i = 0; i < 4; i++) {
      w.publishLive(); // 3, 4 held (capacity 2 with the trigger counted first), 5, 6 dropped
    }
    assertThat(w.heldDropped).isPositive();
    w.drainReplays();
    assertThat(seqs(w)).hasSize(7);
    w.checkConverged(true);
  }

  @Test
  void aBatchDroppedByAFullQueueAtTheTailIsFetched() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    w.publishLive();
    w.publishOverflow(); // the last batch, dropped by the subscriber itself
    assertThat(w.requests).hasSize(1);
    w.answer(-1);
    assertThat(seqs(w)).containsExactly("e0:0", "e0:1r");
  }

  @Test
  void anEarlierEpochsBatchHeldBackAcrossARestartIsNeverApplied() {
    SequencerWorld w = new SequencerWorld(true, 100, 16);
    w.publishLive(); // e0:0
    w.publishLost(); // e0:1
    B late = w.publish(); // e0:2, to arrive after the restart (a stalled socket buffer)
    w.publishLive(); // e0:3: gap, replay #0 pending
    w.restart(); // the replay will reach the new publisher
    w.publishLost(); // e1:0
    w.publishLost(); // e1:1
    w.reconnect(); // while recovering: verify afterwards
    w.live(late); // held back
    w.drainReplays();
    w.publishLive(); // e1:2
    w.drainReplays();
    assertThat(seqs(w)).doesNotContain("e0:2", "e0:3").endsWith("e1:0r", "e1:1r", "e1:2");
    w.checkConverged(true);
  }

  // ------------------------------------------------------------------ every arrival order

  /**
   * Every order in which 5 batches can arrive, each with one duplicate inserted anywhere, with and
   * without replay: with replay nothing is lost; without it only counted losses.
   */
  @Test
  void everyArrivalOrderOfFiveBatchesWithADuplicate() {
    int[] perm = {0, 1, 2, 3, 4};
    int runs = 0;
    do {
      for (int dupOf = 0; dupOf < 5; dupOf++) {
        for (int dupAt = 0; dupAt <= 5; dupAt++) {
          for (boolean replay : new boolean[] {true, false}) {
            SequencerWorld w = new SequencerWorld(replay, 100, 16);
            for (int i = 0; i < 5; i++) {
              w.publish();
            }
            List<B> e0 = w.published.get(0);
            List<B> arrivals = new ArrayList<>();
            for (int p : perm) {
              arrivals.add(e0.get(p));
            }
            arrivals.add(dupAt, e0.get(dupOf));
            for (B b : arrivals) {
              w.live(b);
              w.checkSafety();
            }
            w.quiesce();
            w.checkConverged(replay);
            assertThat(w.restartsSeen).isZero();
            assertThat(w.clears).isLessThanOrEqualTo(replay ? 0 : 5);
            runs++;
          }
        }
      }
    } while (nextPermutation(perm));
    assertThat(runs).isEqualTo(120 * 5 * 6 * 2);
  }

  private static boolean nextPermutation(int[] a) {
    int i = a.length - 2;
    while (i >= 0 && a[i] >= a[i + 1]) {
      i--;
    }
    if (i < 0) {
      return false;
    }
    int j = a.length - 1;
    while (a[j] <= a[i]) {
      j--;
    }
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int l = i + 1, r = a.length - 1; l < r; l++, r--) {
      t = a[l];
      a[l] = a[r];
      a[r] = t;
    }
    return true;
  }

  // ------------------------------------------------------------------ random schedules

  /** Schedules; {@code -Dkvroute.sequencer.examples=N} runs more. */
  private static final int EXAMPLES = Integer.getInteger("kvroute.sequencer.examples", 1500);

  @Test
  void randomSchedulesWithReplayLoseNothingAndClearOnlyForRestarts() {
    qt().withExamples(EXAMPLES)
        .withShrinkCycles(200)
        .forAll(ops(), integers().between(1, 6))
        .checkAssert(
            (ops, hold) -> {
              run(ops, true, 1_000, hold, true);
              RUNS.incrementAndGet();
            });
  }

  @Test
  void randomSchedulesWithFaultyOrMissingReplayCountEveryLoss() {
    qt().withExamples(EXAMPLES)
        .withShrinkCycles(200)
        .forAll(ops(), integers().between(0, 5))
        .checkAssert(
            (ops, variant) -> {
              run(ops, variant != 0, variant == 1 ? 3 : 1_000, 1 + variant, false);
              RUNS.incrementAndGet();
            });
  }

  private static final java.util.concurrent.atomic.AtomicInteger RUNS =
      new java.util.concurrent.atomic.AtomicInteger();

  @org.junit.jupiter.api.AfterAll
  static void report() {
    System.out.println("SequencerTest: " + RUNS + " random schedules run");
  }

  private static Gen<List<Integer>> ops() {
    return lists().of(integers().between(0, 1_000_000)).ofSizeBetween(0, 60);
  }

  /**
   * Replays a schedule. {@code strict}: replay answers every request (slowly perhaps) from a buffer
   * holding everything, so nothing may be lost.
   */
  private static void run(List<Integer> ops, boolean replay, int buffer, int hold, boolean strict) {
    SequencerWorld w = new SequencerWorld(replay, buffer, hold);
    for (int op : ops) {
      int kind = op % 16;
      int arg = op / 16;
      switch (kind) {
        case 0, 1, 2, 3 -> w.publishLive();
        case 4 -> w.publishLost();
        case 5 -> w.publishDelayed();
        case 6 -> w.deliverDelayed(arg);
        case 7 -> w.duplicate(arg);
        case 8 -> {
          if (arg % 3 == 0) {
            w.restart();
          } else {
            w.disconnect();
          }
        }
        case 9 -> w.reconnect();
        case 10, 11 -> w.answer(-1);
        case 12 -> {
          if (!strict) {
            w.answer(arg % 4); // partial then failed; retried
          }
        }
        case 13 -> w.publishOverflow();
        case 14 -> w.now += 500 * (arg % 4);
        default -> {
          // a quiet step: slow replays stay pending
        }
      }
      w.checkSafety();
    }
    w.quiesce();
    w.checkConverged(strict);
  }
}
