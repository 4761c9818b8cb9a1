package io.kvroute.kvindex.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.contract.BlockIndexContract;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Lookups made while a writer thread applies random stores, removals, clears and pod removals are
 * linearizable: each one answers (blocks matched and score, per pod) exactly what a sequential
 * model answers after some prefix of the writer's steps that overlaps the lookup: at least the
 * steps completed before it began, at most those begun before it ended. A step is one block of a
 * store or removal call (a call's blocks become visible one by one, in order), or one clear or pod
 * removal.
 *
 * <p>Two reader threads look up continuously (any interleaving the machine produces; every other
 * lookup asks about two of the five pods, so that other pods' clears happen beside it), and a third
 * checks exact answers at points the writer is paused at, holding the write lock (the index's test
 * hook): inside store and removal calls and halfway through reclaim steps. Few pods with a small
 * {@code maxPods} make clears retire ids often, so reclamation (and forced reclamation) run beside
 * the lookups too; a small table (82 slots for 42 keys, never full) makes probes long and deletions
 * shift keys back. No wall clock: readers run until the writer is done.
 */
class LinearizableLookupPropertyTest {
  private static final int BS = 4;
  private static final int BLOCKS = 16;
  private static final List<String> PODS = List.of("a", "b", "c", "d", "e");
  private static final List<String> TWO = List.of("a", "b");
  private static final String[] TIERS = {"GPU", "CPU"};
  private static final double[] WEIGHTS = {1.0, 0.8};
  private static final int[] MAX_PER_KEY = {2, 3, 256};
  private static final int[][] SEQS = new int[3][];
  private static final long[][] ENGINE = new long[3][];

  static {
    SEQS[0] = BlockIndexContract.tokens(1, BLOCKS * BS);
    SEQS[1] = SEQS[0].clone(); // shares its first 6 blocks with 0
    for (int i = 6 * BS; i < SEQS[1].length; i++) {
      SEQS[1][i] += 7;
    }
    SEQS[2] = BlockIndexContract.tokens(2, BLOCKS * BS);
    for (int s = 0; s < 3; s++) {
      ENGINE[s] = BlockIndexContract.engine(BS, SEQS[s], null);
    }
  }

  /** One write call of the writer. */
  private record Call(int kind, String pod, int seq, int from, int to, int tier) {}

  /** The model: engine hash -> entries "pod/tier" in insertion order; engine hashes mapped. */
  private static final class Model {
    final Map<Long, LinkedHashSet<String>> held = new HashMap<>();
    final Set<Long> mapped = new HashSet<>();
    final int maxPerKey;

    Model(int maxPerKey) {
      this.maxPerKey = maxPerKey;
    }

    void add(long h, String pod, int tier) {
      LinkedHashSet<String> es = held.computeIfAbsent(h, k -> new LinkedHashSet<>());
      String e = pod + "/" + tier;
      if (es.contains(e)) {
        return;
      }
      if (es.size() >= maxPerKey) {
        es.remove(es.iterator().next()); // the oldest
      }
      es.add(e);
    }

    void remove(long h, String pod, int tier) {
      LinkedHashSet<String> es = held.get(h);
      if (es != null) {
        es.remove(pod + "/" + tier);
      }
    }

    void clear(String pod) {
      held.values().forEach(es -> es.removeIf(e -> e.startsWith(pod + "/")));
    }

    /** The answer for sequence {@code s} over {@link #PODS}: blocks matched, then scores. */
    Answer answer(int s) {
      int[] matched = new int[PODS.size()];
      double[] scores = new double[PODS.size()];
      for (int p = 0; p < PODS.size(); p++) {
        String pod = PODS.get(p);
        int len = 0;
        double score = 0;
        while (len < BLOCKS) {
          Set<String> es = held.getOrDefault(ENGINE[s][len], new LinkedHashSet<>());
          double best = -1;
          for (int t = 0; t < TIERS.length; t++) {
            if (es.contains(pod + "/" + t)) {
              best = Math.max(best, WEIGHTS[t]);
            }
          }
          if (best < 0) {
            break;
          }
          score += best;
          len++;
        }
        matched[p] = len;
        scores[p] = score;
      }
      return new Answer(matched, scores);
    }
  }

  /** A lookup's answer over {@link #PODS}. */
  private record Answer(int[] matched, double[] scores) {
    static Answer of(PrefixMatch m) {
      int[] matched = new int[m.size()];
      double[] scores = new double[m.size()];
      for (int p = 0; p < m.size(); p++) {
        matched[p] = m.matchedBlocks(p);
        scores[p] = m.score(p);
      }
      return new Answer(matched, scores);
    }

    /** This answer for the first {@code n} pods of {@link #PODS}. */
    Answer first(int n) {
      return new Answer(Arrays.copyOf(matched, n), Arrays.copyOf(scores, n));
    }

    boolean same(Answer o) {
      if (!Arrays.equals(matched, o.matched)) {
        return false;
      }
      for (int p = 0; p < scores.length; p++) {
        if (Math.abs(scores[p] - o.scores[p]) > 1e-9) {
          return false;
        }
      }
      return true;
    }

    @Override
    public String toString() {
      return Arrays.toString(matched) + " " + Arrays.toString(scores);
    }
  }

  @Test
  void lookupsBesideAWriterAnswerAsTheModelAfterSomeOverlappingPrefixOfItsSteps() {
    qt().withExamples(60)
        .forAll(
            integers().between(0, MAX_PER_KEY.length - 1),
            lists().of(integers().between(0, Integer.MAX_VALUE)).ofSizeBetween(1, 60))
        .checkAssert((cfg, ops) -> run(MAX_PER_KEY[cfg], ops));
  }

  private static List<Call> calls(List<Integer> ops) {
    List<Call> calls = new ArrayList<>();
    for (int op : ops) {
      String pod = PODS.get((op & 0xFF) % PODS.size());
      int seq = (op >>> 8) % 3;
      int a = (op >>> 10) % BLOCKS;
      int b = (op >>> 14) % BLOCKS;
      calls.add(
          new Call((op >>> 19) % 8, pod, seq, Math.min(a, b), Math.max(a, b) + 1, (op >>> 18) & 1));
    }
    return calls;
  }

  /**
   * The model's answers after every step (index: steps done; per sequence), and the steps of each
   * call (0 for a store whose parent was never mapped: the index drops it whole).
   */
  private static List<Answer[]> answers(List<Call> calls, int maxPerKey, int[] stepsOf) {
    Model m = new Model(maxPerKey);
    List<Answer[]> out = new ArrayList<>();
    out.add(snapshot(m));
    for (int c = 0; c < calls.size(); c++) {
      Call call = calls.get(c);
      long[] e = ENGINE[call.seq()];
      int steps = 0;
      switch (call.kind()) {
        case 0, 1, 2 -> {
          if (call.from() == 0 || m.mapped.contains(e[call.from() - 1])) {
            for (int j = call.from(); j < call.to(); j++) {
              m.add(e[j], call.pod(), call.tier());
              m.mapped.add(e[j]);
              out.add(snapshot(m));
              steps++;
            }
          }
        }
        case 3, 4 -> {
          for (int j = call.from(); j < call.to(); j++) {
            m.remove(e[j], call.pod(), call.tier());
            out.add(snapshot(m));
            steps++;
          }
        }
        default -> {
          m.clear(call.pod());
          out.add(snapshot(m));
          steps++;
        }
      }
      stepsOf[c] = steps;
    }
    return out;
  }

  private static Answer[] snapshot(Model m) {
    Answer[] a = new Answer[3];
    for (int s = 0; s < 3; s++) {
      a[s] = m.answer(s);
    }
    return a;
  }

  private static void apply(InMemoryBlockIndex idx, Call call) {
    long[] e = ENGINE[call.seq()];
    int from = call.from();
    int to = call.to();
    switch (call.kind()) {
      case 0, 1, 2 -> {
        boolean hasParent = from > 0;
        idx.blockStored(
            call.pod(),
            Arrays.copyOfRange(e, from, to),
            hasParent,
            hasParent ? e[from - 1] : 0,
            Arrays.copyOfRange(SEQS[call.seq()], from * BS, to * BS),
            BS,
            null,
            TIERS[call.tier()],
            0);
      }
      case 3, 4 ->
          idx.blockRemoved(call.pod(), Arrays.copyOfRange(e, from, to), TIERS[call.tier()], 0);
      case 5, 6 -> idx.allBlocksCleared(call.pod());
      default -> idx.removePod(call.pod());
    }
  }

  private static void run(int maxPerKey, List<Integer> ops) {
    List<Call> calls = calls(ops);
    int[] stepsOf = new int[calls.size()];
    List<Answer[]> answers = answers(calls, maxPerKey, stepsOf);
    InMemoryBlockIndex idx =
        new InMemoryBlockIndex(
            IndexConfig.builder()
                .blockSize(BS)
                .maxPods(6)
                .maxPodsPerKey(maxPerKey)
                .maxKeys(64) // the 42 keys of the three sequences in 82 slots: long probes, shifts
                .build(),
            3);
    long[][] keys = new long[3][];
    for (int s = 0; s < 3; s++) {
      keys[s] = idx.requestKeys(SEQS[s], (String) null);
    }
    AtomicInteger done = new AtomicInteger(); // steps completed
    AtomicInteger started = new AtomicInteger(); // steps of completed calls + the current call's
    AtomicReference<String> failure = new AtomicReference<>();
    int[] inCall = new int[1]; // the current call's steps applied (writer thread only)
    int[] callStart = new int[1];
    Semaphore checkWanted = new Semaphore(0);
    Semaphore checkDone = new Semaphore(0);
    int[] checkAt =
        new int[1]; // the step the writer is paused at (a happens-before via semaphores)
    Thread writerThread = Thread.currentThread();
    // pause points: every third block of a call, and halfway through reclaim steps
    idx.testHook =
        (where, n) -> {
          if (Thread.currentThread() != writerThread) {
            return;
          }
          if (!where.equals("reclaim")) {
            inCall[0]++;
            if (inCall[0] % 3 != 1) {
              return;
            }
            checkAt[0] = callStart[0] + inCall[0];
          } else if ((callStart[0] & 1) != 0) {
            return;
          } else {
            checkAt[0] = started.get(); // reclaiming ends a call: its steps are applied
          }
          checkWanted.release();
          try {
            if (!checkDone.tryAcquire(120, TimeUnit.SECONDS)) {
              failure.compareAndSet(null, "the checker never answered");
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        };
    List<Thread> readers = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      int first = r;
      readers.add(
          new Thread(
              () -> {
                PrefixMatch into = new PrefixMatch();
                int s = first;
                int n = 0;
                while (failure.get() == null) {
                  // every other lookup asks about two pods only: the others' clears must not
                  // fail it, and must not hide its own pods' changes
                  List<String> asked = n++ % 2 == 0 ? PODS : TWO;
                  int lo = done.get();
                  idx.lookup(keys[s], keys[s].length, asked, into);
                  int hi = started.get();
                  Answer got = Answer.of(into);
                  boolean ok = false;
                  for (int k = lo; k <= hi && !ok; k++) {
                    ok = answers.get(k)[s].first(asked.size()).same(got);
                  }
                  if (!ok) {
                    failure.compareAndSet(
                        null, "seq " + s + " steps " + lo + ".." + hi + ": got " + got);
                  }
                  if (lo == answers.size() - 1) {
                    return; // the writer is done: this was a lookup of the final state
                  }
                  s = (s + 1) % 3;
                }
              },
              "reader-" + r));
    }
    Thread checker =
        new Thread(
            () -> {
              PrefixMatch into = new PrefixMatch();
              try {
                while (checkWanted.tryAcquire(120, TimeUnit.SECONDS)) {
                  int at = checkAt[0];
                  if (!idx.writeLocked()) {
                    failure.compareAndSet(null, "paused writer without the lock at step " + at);
                  }
                  for (int s = 0; s < 3; s++) {
                    idx.lookup(keys[s], keys[s].length, PODS, into);
                    Answer got = Answer.of(into);
                    if (!answers.get(at)[s].same(got)) {
                      failure.compareAndSet(
                          null,
                          "paused at step "
                              + at
                              + ", seq "
                              + s
                              + ": got "
                              + got
                              + ", want "
                              + answers.get(at)[s]);
                    }
                  }
                  checkDone.release();
                }
              } catch (InterruptedException stop) {
                // the example is over
              }
            },
            "checker");
    readers.forEach(Thread::start);
    checker.start();
    try {
      for (int c = 0; c < calls.size() && failure.get() == null; c++) {
        started.set(callStart[0] + stepsOf[c]);
        inCall[0] = 0;
        apply(idx, calls.get(c));
        callStart[0] += stepsOf[c];
        done.set(callStart[0]);
      }
    } finally {
      idx.testHook = null;
      checker.interrupt();
      for (Thread t : readers) {
        joinOrFail(t, failure);
      }
      joinOrFail(checker, failure);
    }
    assertThat(failure.get()).isNull();
    assertThat(done.get()).isEqualTo(answers.size() - 1);
    for (int s = 0; s < 3; s++) {
      Answer last = Answer.of(idx.lookup(keys[s], PODS));
      assertThat(last.same(answers.get(answers.size() - 1)[s])).as("final seq %d", s).isTrue();
    }
  }

  private static void joinOrFail(Thread t, AtomicReference<String> failure) {
    try {
      t.join(120_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (t.isAlive()) {
      failure.compareAndSet(null, t.getName() + " did not end");
      t.interrupt();
    }
  }
}
