package io.kvroute.kvindex.internal;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Clears and pod removals in the in-memory index are O(1) (the pod's id is retired, its entries
 * become stale and are reclaimed lazily), so a lookup never waits for the clear of a big pod. No
 * wall-clock: the clear's cost is shown by the slots it examined, and the concurrency by real
 * threads taking turns at a handshake while the reclamation is under way.
 */
class LazyClearTest {
  private static final int BS = 4;
  private static final int BIG = 1_000_000;
  private static final int CHUNK = 4096; // blocks per event

  /** The tokens of block i of the big pod's chain (block i has tokens 4i .. 4i + 3). */
  private static int[] tokens(int from, int n) {
    int[] t = new int[n * BS];
    for (int i = 0; i < t.length; i++) {
      t[i] = from * BS + i + 1;
    }
    return t;
  }

  private static long[] hashes(int from, int n, long salt) {
    long[] h = new long[n];
    for (int i = 0; i < n; i++) {
      h[i] = salt + from + i + 1;
    }
    return h;
  }

  /** Stores blocks [0, n) of the chain on {@code pod} (engine hashes salted by {@code salt}). */
  private static void storeChain(InMemoryBlockIndex idx, String pod, int n, long salt) {
    storeChain(idx, pod, 0, n, salt, CHUNK);
  }

  /**
   * Stores blocks [first, first + n) on {@code pod}, {@code chunk} per event: a chain rooted at
   * block {@code first} (its keys differ from those of the chain rooted at block 0).
   */
  private static void storeChain(
      InMemoryBlockIndex idx, String pod, int first, int n, long salt, int chunk) {
    for (int from = first; from < first + n; from += chunk) {
      int k = Math.min(chunk, first + n - from);
      idx.blockStored(
          pod,
          hashes(from, k, salt),
          from > first,
          from > first ? salt + from : 0,
          tokens(from, k),
          BS,
          null,
          null,
          0);
    }
  }

  private static InMemoryBlockIndex bigIndex() {
    InMemoryBlockIndex idx =
        new InMemoryBlockIndex(
            IndexConfig.builder().blockSize(BS).maxKeys(4 * BIG).maxEngineKeys(4 * BIG).build());
    storeChain(idx, "big", BIG, 0);
    // "small" holds the first 64 blocks of the same chain (same request keys)
    idx.blockStored("small", hashes(0, 64, 0), false, 0, tokens(0, 64), BS, null, null, 0);
    assertThat(idx.stats().entries()).isEqualTo(BIG + 64);
    return idx;
  }

  @Test
  void clearingAMillionEntryPodExaminesAtMostOneReclaimStep() {
    InMemoryBlockIndex idx = bigIndex();
    long keys = idx.stats().keys();
    long slotsBefore = idx.reclaimSlots();

    idx.allBlocksCleared("big");

    // O(1) plus one reclaim step: the clear examined at most RECLAIM_SLOTS slots of the table
    assertThat(idx.reclaimSlots() - slotsBefore)
        .isLessThanOrEqualTo(InMemoryBlockIndex.RECLAIM_SLOTS);
    assertThat(idx.staleEntries()).isGreaterThan(BIG - InMemoryBlockIndex.RECLAIM_SLOTS - 1);
    // the answers are those of a cleared pod at once
    assertThat(idx.stats().entries()).isEqualTo(64);
    assertThat(idx.podEntries("big")).isEmpty();
    assertThat(idx.pods()).containsExactlyInAnyOrder("big", "small");
    long[] keys64 = idx.requestKeys(tokens(0, 64), (String) null);
    PrefixMatch m = idx.lookup(keys64, List.of("big", "small"));
    assertThat(m.matchedBlocks(0)).isZero();
    assertThat(m.matchedBlocks(1)).isEqualTo(64);
    assertThat(idx.stats().keys()).isLessThanOrEqualTo(keys); // stale keys still occupy slots
  }

  @Test
  void aLookupCompletesWhileTheClearOfAMillionEntryPodIsUnderWay() throws Exception {
    InMemoryBlockIndex idx = bigIndex();
    long[] keys64 = idx.requestKeys(tokens(0, 64), (String) null);
    long[] keysBig = idx.requestKeys(tokens(0, 8192), (String) null);
    Semaphore lookupWanted = new Semaphore(0);
    Semaphore lookupDone = new Semaphore(0);
    AtomicReference<Throwable> lookupFailure = new AtomicReference<>();
    int[] lookupsDuringReclaim = new int[1];

    // the lookup thread: one lookup per request, checked against what a cleared pod answers
    Thread lookups =
        new Thread(
            () -> {
              PrefixMatch into = new PrefixMatch();
              List<String> pods = List.of("big", "small");
              try {
                while (lookupWanted.tryAcquire(120, TimeUnit.SECONDS)) {
                  idx.lookup(keysBig, keysBig.length, pods, into);
                  assertThat(into.matchedBlocks(0)).isZero();
                  assertThat(into.matchedBlocks(1)).isEqualTo(64);
                  idx.lookup(keys64, keys64.length, pods, into);
                  assertThat(into.matchedBlocks(1)).isEqualTo(64);
                  lookupsDuringReclaim[0]++;
                  lookupDone.release();
                }
              } catch (InterruptedException stop) {
                // the test is over
              } catch (Throwable t) {
                lookupFailure.set(t);
                lookupDone.release();
              }
            },
            "lookups");
    lookups.start();

    // the writer thread: clears the big pod, then ingests (each write runs one reclaim step) and
    // asks for a lookup after every write until the reclamation is done
    CompletableFuture<Integer> writer =
        CompletableFuture.supplyAsync(
            () -> {
              idx.allBlocksCleared("big");
              int writes = 0;
              try {
                while (idx.staleEntries() > 0) {
                  assertThat(idx.stats().entries()).isEqualTo(64 + (writes > 0 ? 1 : 0));
                  lookupWanted.release();
                  // the lookup ran (and completed) while the clear's reclamation is under way
                  assertThat(lookupDone.tryAcquire(120, TimeUnit.SECONDS)).isTrue();
                  assertThat(lookupFailure.get()).isNull();
                  idx.blockStored(
                      "other",
                      new long[] {7_000_000_000L},
                      false,
                      0,
                      new int[] {-1, -2, -3, -4},
                      BS,
                      null,
                      null,
                      0);
                  writes++;
                }
              } catch (InterruptedException e) {
                throw new IllegalStateException(e);
              }
              return writes;
            });
    int writes = writer.get(300, TimeUnit.SECONDS);
    lookups.interrupt();
    lookups.join(60_000);
    assertThat(lookupFailure.get()).isNull();
    // the reclamation took many steps, with a lookup completed between each two of them
    assertThat(writes).isGreaterThan(100);
    assertThat(lookupsDuringReclaim[0]).isEqualTo(writes);
    // reclaimed: only small's and other's keys are left; the retired id is free again
    assertThat(idx.staleEntries()).isZero();
    assertThat(idx.stats().keys()).isEqualTo(65);
    assertThat(idx.stats().entries()).isEqualTo(65);
    assertThat(idx.podIdHigh()).isEqualTo(4); // big's old id, small, big's new id, other
    idx.removePod("small");
    idx.blockStored("fresh", hashes(0, 1, 0), false, 0, tokens(0, 1), BS, null, null, 0);
    assertThat(idx.podIdHigh()).isEqualTo(4); // a freed id was reused
  }

  @Test
  void aLookupCompletesWhileTheClearOfAMillionEntryPodHoldsTheWriteLock() throws Exception {
    InMemoryBlockIndex idx = bigIndex();
    long[] keys64 = idx.requestKeys(tokens(0, 64), (String) null);
    long[] keysBig = idx.requestKeys(tokens(0, 8192), (String) null);
    Semaphore paused = new Semaphore(0);
    Semaphore resume = new Semaphore(0);
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Thread clearing =
        new Thread(
            () -> {
              try {
                idx.allBlocksCleared("big");
              } catch (Throwable t) {
                failure.set(t);
                paused.release();
              }
            },
            "clearing");
    // the clear's write call pauses halfway through its reclaim step, holding the write lock
    idx.testHook =
        (where, n) -> {
          if (Thread.currentThread() == clearing && where.equals("reclaim")) {
            paused.release();
            try {
              if (!resume.tryAcquire(120, TimeUnit.SECONDS)) {
                throw new IllegalStateException("never resumed");
              }
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
        };
    clearing.start();
    assertThat(paused.tryAcquire(120, TimeUnit.SECONDS)).isTrue();
    assertThat(failure.get()).isNull();

    // the clear holds the write lock: lookups complete and see the pod cleared
    assertThat(idx.writeLocked()).isTrue();
    List<String> pods = List.of("big", "small");
    PrefixMatch m = idx.lookup(keysBig, keysBig.length, pods, new PrefixMatch());
    assertThat(m.matchedBlocks(0)).isZero();
    assertThat(m.matchedBlocks(1)).isEqualTo(64);
    m = idx.lookup(keys64, keys64.length, pods, new PrefixMatch());
    assertThat(m.matchedBlocks(0)).isZero();
    assertThat(m.matchedBlocks(1)).isEqualTo(64);
    assertThat(idx.writeLocked()).isTrue(); // the lookups did not wait for the clear
    assertThat(idx.lockedLookups()).isZero();

    resume.release();
    clearing.join(120_000);
    assertThat(failure.get()).isNull();
    assertThat(idx.staleEntries()).isPositive(); // reclaimed lazily, by later writes
    assertThat(idx.lookup(keys64, pods).matchedBlocks(1)).isEqualTo(64);
  }

  @Test
  void theReclaimerPacesItselfByWhatAwaitsReclamation() {
    InMemoryBlockIndex idx = bigIndex();
    // a clear of 64 entries beside a million live ones: one id and 64 entries wait, little pressure
    long before = idx.reclaimSlots();
    idx.allBlocksCleared("small");
    assertThat(idx.reclaimSlots() - before).isLessThanOrEqualTo(InMemoryBlockIndex.RECLAIM_MIN);
    before = idx.reclaimSlots();
    idx.blockStored(
        "other",
        new long[] {7_000_000_001L},
        false,
        0,
        new int[] {-5, -6, -7, -8},
        BS,
        null,
        null,
        0);
    assertThat(idx.reclaimSlots() - before).isLessThanOrEqualTo(InMemoryBlockIndex.RECLAIM_MIN);
    // a clear of a million entries: the reclaimer goes at full speed
    idx.allBlocksCleared("big");
    before = idx.reclaimSlots();
    idx.blockStored(
        "other",
        new long[] {7_000_000_002L},
        false,
        0,
        new int[] {-9, -10, -11, -12},
        BS,
        null,
        null,
        0);
    assertThat(idx.reclaimSlots() - before).isEqualTo(InMemoryBlockIndex.RECLAIM_SLOTS);
  }

  @Test
  void moreClearsThanIdsWithinOneReclaimRoundForceTheReclamation() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    InMemoryBlockIndex idx =
        new InMemoryBlockIndex(
            IndexConfig.builder().blockSize(BS).maxPods(1).meterRegistry(registry).build());
    // ids go up to 2 * maxPods = 2: the second clear finds both ids awaiting reclamation
    storeChain(idx, "a", 20_000, 0);
    idx.allBlocksCleared("a");
    assertThat(idx.staleEntries()).isPositive();
    storeChain(idx, "a", 100, 0);
    assertThat(idx.staleEntries()).isPositive();
    idx.allBlocksCleared("a");
    assertThat(registry.get("kvroute.kvindex.reclaims.forced").functionCounter().count())
        .isEqualTo(1.0);
    assertThat(idx.staleEntries()).isZero();
    assertThat(registry.get("kvroute.kvindex.entries.stale").gauge().value()).isZero();
    assertThat(idx.stats().entries()).isZero();
    assertThat(idx.stats().keys()).isZero();
    storeChain(idx, "a", 10, 0);
    assertThat(idx.podEntries("a")).isEqualTo(Map.of("GPU", 10L));
    assertThat(
            idx.lookup(idx.requestKeys(tokens(0, 20), (String) null), List.of("a"))
                .matchedBlocks(0))
        .isEqualTo(10);
  }

  @Test
  void aFullTableEvictsKeysHoldingOnlyStaleEntriesFirst() {
    InMemoryBlockIndex idx =
        new InMemoryBlockIndex(IndexConfig.builder().blockSize(BS).maxKeys(4096).build());
    storeChain(idx, "gone", 4096, 0);
    idx.removePod("gone");
    // the table is full of stale keys: new keys take their slots, no live key is evicted
    storeChain(idx, "live", 10_000, 4096, 1L << 40, 16);
    assertThat(idx.stats().evictions().get("max_keys")).isZero();
    assertThat(idx.stats().entries()).isEqualTo(4096);
    assertThat(idx.staleEntries()).isZero();
  }
}
