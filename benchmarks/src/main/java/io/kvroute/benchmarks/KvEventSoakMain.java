package io.kvroute.benchmarks;

import io.kvroute.kvindex.zmq.EpochPublisher;
import io.kvroute.kvindex.zmq.EventLogSink;
import io.kvroute.kvindex.zmq.KvEventPublisher;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import io.kvroute.kvindex.zmq.NoteListener;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A soak run of the KV-event subscriber (not a test): N real JeroMQ publishers ({@link
 * KvEventPublisher}) publish for M minutes while faults are injected — dropped batches, duplicates,
 * reordering, publisher restarts, subscriber reconnects, slow (paused) replay endpoints — and one
 * {@link KvEventSubscriber} indexes them. Every round (30 s) each publisher publishes until its
 * last batch is applied, the subscriber is let settle, and each pod is checked against what its
 * publisher published: batches of the current epoch missing since the last clear (<b>lost</b>),
 * clears not explained by a restart the subscriber saw or a loss it counted (<b>spurious
 * clears</b>), and counted losses (<b>resyncs</b>; expected only for the pods without a replay
 * endpoint, see {@code --no-replay-every}). All but the counted resyncs must stay 0.
 *
 * <p>Usage: {@code java -cp benchmarks/target/benchmarks.jar io.kvroute.benchmarks.KvEventSoakMain
 * [--publishers 8] [--minutes 5] [--seed 1] [--no-replay-every 0] [--rate 200]} ({@code rate}:
 * batches per second per publisher, roughly; {@code no-replay-every K}: every K-th pod has no
 * replay endpoint). Exits 1 if anything was lost or cleared spuriously.
 *
 * <p>The publishers, the sink and the listener are {@code KvEventSubscriberModelTest}'s ({@link
 * EpochPublisher}, {@link EventLogSink}, {@link NoteListener}, from kvindex's test-jar): the soak
 * checks for longer, with wall-clock pacing, what the model test checks per schedule.
 */
public final class KvEventSoakMain {
  private KvEventSoakMain() {}

  /** Runs the soak. */
  public static void main(String[] args) throws Exception {
    int publishers = 8;
    double minutes = 5;
    long seed = 1;
    int noReplayEvery = 0;
    int rate = 200;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--publishers" -> publishers = Integer.parseInt(args[i + 1]);
        case "--minutes" -> minutes = Double.parseDouble(args[i + 1]);
        case "--seed" -> seed = Long.parseLong(args[i + 1]);
        case "--no-replay-every" -> noReplayEvery = Integer.parseInt(args[i + 1]);
        case "--rate" -> rate = Integer.parseInt(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    System.out.printf(
        "soak: %d publishers, %.1f min, seed %d, ~%d batches/s each, faults per batch: drop 2%%,"
            + " duplicate 2%%, reorder 2%%, restart 0.3%%, reconnect 0.5%%, slow replay 0.5%%%s%n",
        publishers,
        minutes,
        seed,
        rate,
        noReplayEvery > 0 ? ", every " + noReplayEvery + "th pod without replay" : "");
    EventLogSink sink = new EventLogSink();
    NoteListener listener = new NoteListener();
    SplittableRandom rnd = new SplittableRandom(seed);
    int failures = 0;
    try (KvEventSubscriber sub =
        KvEventSubscriber.builder()
            .sink(sink)
            .listener(listener)
            .reconnectInterval(Duration.ofMillis(20))
            .reconnectIntervalMax(Duration.ofMillis(200))
            .replayIdleTimeout(Duration.ofSeconds(5))
            .build()
            .start()) {
      List<Pod> pods = new ArrayList<>();
      for (int i = 0; i < publishers; i++) {
        boolean replay = noReplayEvery <= 0 || (i + 1) % noReplayEvery != 0;
        Pod p = new Pod("soak-" + i, replay, sink, listener);
        sub.addPod(p.pub.podEndpoint()).join();
        pods.add(p);
      }
      long end = System.nanoTime() + (long) (minutes * 60e9);
      Totals all = new Totals();
      int round = 0;
      while (System.nanoTime() < end) {
        round++;
        long roundEnd = Math.min(end, System.nanoTime() + TimeUnit.SECONDS.toNanos(30));
        long pace = TimeUnit.SECONDS.toNanos(1) / Math.max(1, rate);
        while (System.nanoTime() < roundEnd) {
          for (Pod p : pods) {
            p.step(rnd);
          }
          LockSupport.parkNanos(pace);
        }
        Totals t = new Totals();
        for (Pod p : pods) {
          p.converge();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (!settled(pods) && System.nanoTime() < deadline) {
          LockSupport.parkNanos(10_000_000);
        }
        for (Pod p : pods) {
          p.check(t);
        }
        all.add(t);
        System.out.printf("round %d: %s%n", round, t);
      }
      System.out.printf("TOTAL (%d rounds): %s%n", round, all);
      failures = all.lost + all.spuriousClears;
      for (Pod p : pods) {
        p.close();
      }
    }
    System.exit(failures == 0 ? 0 : 1);
  }

  private static boolean settled(List<Pod> pods) {
    for (Pod p : pods) {
      if (!p.lastApplied()) {
        return false;
      }
    }
    return true;
  }

  /** Per-round figures. */
  static final class Totals {
    int published;
    int applied;
    int lost;
    int spuriousClears;
    int resyncs;
    int resyncsWithReplay;
    int restartsPerformed;
    int restartsSeen;
    int duplicates;

    void add(Totals t) {
      published += t.published;
      applied += t.applied;
      lost = Math.max(lost, t.lost); // a snapshot per round: a batch missing stays missing
      spuriousClears += t.spuriousClears;
      resyncs += t.resyncs;
      resyncsWithReplay += t.resyncsWithReplay;
      restartsPerformed += t.restartsPerformed;
      restartsSeen += t.restartsSeen;
      duplicates += t.duplicates;
    }

    @Override
    public String toString() {
      return String.format(
          "published %d, applied %d, lost %d (current epoch, missing since the last clear),"
              + " spurious clears %d, resyncs %d (counted losses; %d of them on pods with replay),"
              + " restarts %d performed / %d seen, duplicates dropped %d",
          published,
          applied,
          lost,
          spuriousClears,
          resyncs,
          resyncsWithReplay,
          restartsPerformed,
          restartsSeen,
          duplicates);
    }
  }

  /** One publisher through its epochs, and what was already counted in earlier rounds. */
  static final class Pod {
    final boolean replay;
    final EventLogSink sink;
    final NoteListener listener;
    final EpochPublisher pub;
    boolean paused;
    int pausedSteps;
    int checkedPublished;
    int checkedApplied;
    int checkedSpurious;
    int checkedLosses;
    int checkedRestarts;
    int checkedRestartsSeen;
    int checkedDuplicates;

    Pod(String id, boolean replay, EventLogSink sink, NoteListener listener) {
      this.replay = replay;
      this.sink = sink;
      this.listener = listener;
      pub = new EpochPublisher(id, "soak", replay, b -> b);
    }

    void step(SplittableRandom rnd) {
      KvEventPublisher p = pub.publisher();
      if (paused && --pausedSteps <= 0) {
        p.pauseReplays(false);
        paused = false;
      }
      int r = rnd.nextInt(1000);
      if (r < 20) {
        p.dropSequence(p.nextSequence());
      } else if (r < 40) {
        p.duplicateSequence(p.nextSequence());
      } else if (r < 60) {
        p.delaySequence(p.nextSequence());
      } else if (r < 63) {
        pub.restart();
        paused = false;
        return;
      } else if (r < 68) {
        p.reconnectSubscribers();
        return;
      } else if (r < 73 && replay && !paused) {
        p.pauseReplays(true);
        paused = true;
        pausedSteps = 5 + rnd.nextInt(50);
      }
      pub.publish();
    }

    /** Resumes replays and publishes until the last batch is applied (or 120 s passed). */
    void converge() {
      if (paused) {
        pub.publisher().pauseReplays(false);
        paused = false;
      }
      pub.publishUntilApplied(sink, System.nanoTime() + TimeUnit.SECONDS.toNanos(120));
    }

    boolean lastApplied() {
      return pub.lastApplied(sink);
    }

    void check(Totals t) {
      String id = pub.pod();
      List<Long> events = sink.events(id);
      int lastClear = events.lastIndexOf(EventLogSink.CLEAR);
      int clears = 0;
      Set<Long> applied = new HashSet<>();
      for (long e : events) {
        if (e == EventLogSink.CLEAR) {
          clears++;
        } else {
          applied.add(e);
        }
      }
      List<Long> segment = events.subList(lastClear + 1, events.size());
      int missing = 0;
      Set<Long> inSegment = new HashSet<>(segment);
      for (long code : pub.lastEpoch()) {
        if (!inSegment.contains(code)) {
          missing++;
        }
      }
      int seen = listener.count(id, "restart");
      int losses = listener.losses(id);
      int total = pub.published().stream().mapToInt(List::size).sum();
      t.published += total - checkedPublished;
      checkedPublished = total;
      t.applied += applied.size() - checkedApplied;
      checkedApplied = applied.size();
      t.lost += replay ? missing : Math.max(0, losses == 0 ? missing : 0);
      int spurious = Math.max(0, clears - seen - losses);
      t.spuriousClears += Math.max(0, spurious - checkedSpurious);
      checkedSpurious = spurious;
      t.resyncs += losses - checkedLosses;
      if (replay) {
        t.resyncsWithReplay += losses - checkedLosses;
      }
      checkedLosses = losses;
      t.restartsPerformed += pub.epoch() - checkedRestarts;
      checkedRestarts = pub.epoch();
      t.restartsSeen += seen - checkedRestartsSeen;
      checkedRestartsSeen = seen;
      int duplicates = listener.count(id, "duplicate");
      t.duplicates += duplicates - checkedDuplicates;
      checkedDuplicates = duplicates;
    }

    void close() {
      pub.close();
    }
  }
}
