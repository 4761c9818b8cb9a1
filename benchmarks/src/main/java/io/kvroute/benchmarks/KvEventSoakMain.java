package io.kvroute.benchmarks;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.kvindex.zmq.KvEventPublisher;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import io.kvroute.kvindex.zmq.PodEndpoint;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
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
 */
public final class KvEventSoakMain {
  private static final AtomicLong TS = new AtomicLong(System.currentTimeMillis() * 1000);

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
    Sink sink = new Sink();
    Listener listener = new Listener();
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
        sub.addPod(p.endpoint()).join();
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

  /** One publisher through its epochs. */
  static final class Pod {
    final String id;
    final boolean replay;
    final Sink sink;
    final Listener listener;
    final List<List<Long>> published = new ArrayList<>();
    KvEventPublisher pub;
    String endpoint;
    String replayEndpoint;
    int restarts;
    int checkedRestarts;
    int checkedPublished;
    boolean paused;
    int pausedSteps;

    Pod(String id, boolean replay, Sink sink, Listener listener) {
      this.id = id;
      this.replay = replay;
      this.sink = sink;
      this.listener = listener;
      published.add(new ArrayList<>());
      pub = bind("tcp://127.0.0.1:0", replay ? "tcp://127.0.0.1:0" : null);
      endpoint = pub.endpoint();
      replayEndpoint = pub.replayEndpoint();
    }

    PodEndpoint endpoint() {
      PodEndpoint p = PodEndpoint.of(id, endpoint);
      return replay ? p.withReplay(replayEndpoint) : p;
    }

    private KvEventPublisher bind(String ep, String rep) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (true) {
        try {
          return KvEventPublisher.builder()
              .endpoint(ep)
              .replayEndpoint(rep)
              .bind(true)
              .topic("kv@" + id + "@soak")
              .build();
        } catch (RuntimeException e) {
          if (System.nanoTime() - deadline > 0) {
            throw e;
          }
          LockSupport.parkNanos(5_000_000); // the restarted publisher's port is being released
        }
      }
    }

    int epoch() {
      return published.size() - 1;
    }

    void publish() {
      long seq = pub.nextSequence();
      long code = epoch() * 100_000_000L + seq + 1;
      KvEventBatch b =
          KvEventBatch.of(
              TS.incrementAndGet() / 1e6,
              List.of(KvEvent.BlockStored.of(EngineHashes.ofInts(code), null, new int[16], 16)));
      pub.publish(b);
      published.get(epoch()).add(code);
    }

    void step(SplittableRandom rnd) {
      if (paused && --pausedSteps <= 0) {
        pub.pauseReplays(false);
        paused = false;
      }
      int r = rnd.nextInt(1000);
      if (r < 20) {
        pub.dropSequence(pub.nextSequence());
      } else if (r < 40) {
        pub.duplicateSequence(pub.nextSequence());
      } else if (r < 60) {
        pub.delaySequence(pub.nextSequence());
      } else if (r < 63) {
        pub.close();
        published.add(new ArrayList<>());
        pub = bind(endpoint, replayEndpoint);
        paused = false;
        restarts++;
        return;
      } else if (r < 68) {
        pub.reconnectSubscribers();
        return;
      } else if (r < 73 && replay && !paused) {
        pub.pauseReplays(true);
        paused = true;
        pausedSteps = 5 + rnd.nextInt(50);
      }
      publish();
    }

    /** Resumes replays and publishes until the last batch is applied. */
    void converge() {
      if (paused) {
        pub.pauseReplays(false);
        paused = false;
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
      do {
        publish();
        long until = System.nanoTime() + 50_000_000;
        while (System.nanoTime() < until && !lastApplied()) {
          LockSupport.parkNanos(1_000_000);
        }
      } while (!lastApplied() && System.nanoTime() < deadline);
    }

    boolean lastApplied() {
      List<Long> e = published.get(epoch());
      return !e.isEmpty() && sink.events(id).contains(e.get(e.size() - 1));
    }

    void check(Totals t) {
      List<Long> events = sink.events(id);
      int lastClear = events.lastIndexOf(Sink.CLEAR);
      int clears = 0;
      Set<Long> applied = new HashSet<>();
      for (long e : events) {
        if (e == Sink.CLEAR) {
          clears++;
        } else {
          applied.add(e);
        }
      }
      List<Long> segment = events.subList(lastClear + 1, events.size());
      List<Long> current = published.get(epoch());
      int missing = 0;
      Set<Long> inSegment = new HashSet<>(segment);
      for (long code : current) {
        if (!inSegment.contains(code)) {
          missing++;
        }
      }
      int seen = listener.count(id, "restart");
      int losses = listener.losses(id);
      int total = published.stream().mapToInt(List::size).sum();
      t.published += total - checkedPublished;
      checkedPublished = total;
      t.applied += applied.size() - sink.checkedApplied(id, applied.size());
      t.lost += replay ? missing : Math.max(0, losses == 0 ? missing : 0);
      t.spuriousClears += sink.newClears(id, Math.max(0, clears - seen - losses));
      int newLosses = listener.newLosses(id, losses);
      t.resyncs += newLosses;
      if (replay) {
        t.resyncsWithReplay += newLosses;
      }
      t.restartsPerformed += restarts - checkedRestarts;
      checkedRestarts = restarts;
      t.restartsSeen += listener.newCount(id, "restart", seen);
      t.duplicates += listener.newCount(id, "duplicate", listener.count(id, "duplicate"));
    }

    void close() {
      pub.close();
    }
  }

  /** Per pod: the applied block codes and the clears, in order. */
  static final class Sink implements KvEventSink {
    static final long CLEAR = -1;
    private final Map<String, List<Long>> events = new ConcurrentHashMap<>();
    private final Map<String, Integer> checked = new ConcurrentHashMap<>();

    List<Long> events(String pod) {
      return new ArrayList<>(events.getOrDefault(pod, List.of()));
    }

    int checkedApplied(String pod, int now) {
      Integer before = checked.put(pod + "/applied", now);
      return before == null ? 0 : before;
    }

    int newClears(String pod, int spurious) {
      Integer before = checked.put(pod + "/spurious", spurious);
      return Math.max(0, spurious - (before == null ? 0 : before));
    }

    private List<Long> of(String pod) {
      return events.computeIfAbsent(pod, k -> new CopyOnWriteArrayList<>());
    }

    @Override
    public void blockStored(String podId, KvEvent.BlockStored event) {
      for (long h : event.blockHashes().values()) {
        of(podId).add(h);
      }
    }

    @Override
    public void blockRemoved(String podId, KvEvent.BlockRemoved event) {}

    @Override
    public void allBlocksCleared(String podId) {
      of(podId).add(CLEAR);
    }

    @Override
    public void removePod(String podId) {
      events.remove(podId);
    }
  }

  /** Per pod: restarts, resyncs (losses), duplicates. */
  static final class Listener implements KvEventListener {
    private final Map<String, List<String>> notes = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> reported = new ConcurrentHashMap<>();

    private void note(String pod, String n) {
      notes.computeIfAbsent(pod, k -> new CopyOnWriteArrayList<>()).add(n);
    }

    int count(String pod, String prefix) {
      return (int)
          notes.getOrDefault(pod, List.of()).stream().filter(n -> n.startsWith(prefix)).count();
    }

    int losses(String pod) {
      return (int)
          notes.getOrDefault(pod, List.of()).stream()
              .filter(n -> n.startsWith("resync ") && !n.equals("resync restart"))
              .count();
    }

    int newLosses(String pod, int now) {
      return newCount(pod, "losses", now);
    }

    int newCount(String pod, String what, int now) {
      AtomicInteger r = reported.computeIfAbsent(pod + "/" + what, k -> new AtomicInteger());
      return now - r.getAndSet(now);
    }

    @Override
    public void onRestart(String pod, long last, long received) {
      note(pod, "restart");
    }

    @Override
    public void onResync(String pod, String reason) {
      note(pod, "resync " + reason);
    }

    @Override
    public void onDuplicate(String pod, long seq) {
      note(pod, "duplicate");
    }
  }
}
