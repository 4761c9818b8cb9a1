package io.kvroute.kvindex.zmq;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventSink;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.quicktheories.core.Gen;
import org.zeromq.ZMQException;

/**
 * The whole subscriber against a reference model: real JeroMQ publishers ({@link KvEventPublisher}
 * with its fault hooks) driven through random schedules — drops, duplicates, reordering, restarts
 * (first seen at sequence 0 or later), subscriber reconnects, slow replay endpoints (paused, then
 * answering), partial ones (a small buffer) and absent ones, pods subscribed late, quiet periods
 * right after connecting — while one subscriber indexes them all. At the end of each schedule the
 * sink must hold exactly what the publisher's last epoch published, each batch once and in order;
 * where the replay endpoint could not recover a batch the loss must have been counted; clears only
 * for real restarts.
 *
 * <p>{@code -Dkvroute.model.schedules=N} (default 512) schedules, {@code
 * -Dkvroute.model.parallel=P} (default 8) of them at a time. Nothing waits on a timeout of the
 * subscriber: its clock is frozen, so replays only end by their end marker or a dropped connection;
 * waits are conditions polled with generous deadlines.
 */
class KvEventSubscriberModelTest {
  static final int SCHEDULES = Integer.getInteger("kvroute.model.schedules", 512);
  static final int PARALLEL = Integer.getInteger("kvroute.model.parallel", 8);
  private static final Duration CONVERGE = Duration.ofSeconds(120);
  private static final AtomicLong TS = new AtomicLong(System.currentTimeMillis() * 1000);
  private static final AtomicInteger PODS = new AtomicInteger();

  private static final ModelSink SINK = new ModelSink();
  private static final Map<String, AtomicInteger> STATS = new ConcurrentHashMap<>();
  private static final ModelListener LISTENER = new ModelListener();
  private static final io.micrometer.core.instrument.simple.SimpleMeterRegistry REGISTRY =
      new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
  private static KvEventSubscriber sub;

  @BeforeAll
  static void start() {
    AtomicLong frozen = new AtomicLong();
    sub =
        KvEventSubscriber.builder()
            .sink(SINK)
            .listener(LISTENER)
            .meterRegistry(REGISTRY)
            .shards(2)
            .pollInterval(Duration.ofMillis(5))
            .reconnectInterval(Duration.ofMillis(10))
            .reconnectIntervalMax(Duration.ofMillis(40))
            .handshakeTimeout(Duration.ofSeconds(2))
            .replayBufferCapacity(8) // small: held-back overflow is part of the schedules
            .replayIdleTimeout(Duration.ofSeconds(30))
            .nanoClock(frozen::get) // replays never time out: they end by marker or disconnect
            .build()
            .start();
  }

  @AfterAll
  static void stop() {
    sub.close();
  }

  /** One pod's schedule: its replay endpoint and buffer, when it is subscribed, its steps. */
  record Schedule(int config, List<Integer> ops) {
    boolean replay() {
      return config % 4 != 0;
    }

    int bufferSteps() {
      return config % 4 == 1 ? 3 : 10_000; // 1: partial (a small buffer)
    }

    boolean quiet() {
      return replay() && config % 7 == 3; // publish, subscribe, then nothing more
    }

    int addAt() {
      return quiet() ? ops.size() : Math.floorMod(config / 4, ops.size() + 1);
    }

    /** Replay present with a buffer holding everything: nothing may be lost. */
    boolean strict() {
      return replay() && bufferSteps() >= 10_000;
    }

    @Override
    public String toString() {
      return "Schedule{replay="
          + replay()
          + ", buffer="
          + bufferSteps()
          + ", quiet="
          + quiet()
          + ", addAt="
          + addAt()
          + ", ops="
          + ops
          + "}";
    }
  }

  private static Gen<Schedule> schedules() {
    return integers()
        .between(0, 1_000_000)
        .zip(
            lists().of(integers().between(0, 1_000_000)).ofSizeBetween(0, 40),
            (c, ops) -> new Schedule(c, ops));
  }

  @Test
  void randomSchedulesEndInTheStateTheirPublishersPublished() {
    AtomicInteger ran = new AtomicInteger();
    long t0 = System.nanoTime();
    qt().withExamples(SCHEDULES / PARALLEL + 1) // QuickTheories runs one fewer than asked
        .withShrinkCycles(0) // real sockets: a failure prints its schedules instead
        .forAll(lists().of(schedules()).ofSize(PARALLEL))
        .checkAssert(
            batch -> {
              runTogether(batch);
              ran.addAndGet(batch.size());
            });
    System.out.printf(
        "KvEventSubscriberModelTest: %d schedules in %.1f s; %s%n",
        ran.get(), (System.nanoTime() - t0) / 1e9, new java.util.TreeMap<>(STATS));
    assertThat(ran.get()).isGreaterThanOrEqualTo(SCHEDULES);
  }

  private static void runTogether(List<Schedule> batch) {
    List<PodRun> runs = new ArrayList<>();
    try {
      for (Schedule s : batch) {
        runs.add(new PodRun(s));
      }
      int longest = batch.stream().mapToInt(s -> s.ops().size()).max().orElse(0);
      for (int i = 0; i <= longest; i++) {
        for (PodRun r : runs) {
          r.step(i);
        }
      }
      for (PodRun r : runs) {
        r.finish();
      }
      long deadline = System.nanoTime() + CONVERGE.toNanos();
      for (PodRun r : runs) {
        r.awaitLast(deadline);
      }
      awaitQuiet(deadline, runs);
      for (PodRun r : runs) {
        r.check();
      }
    } finally {
      for (PodRun r : runs) {
        r.close();
      }
    }
  }

  private static void awaitQuiet(long deadline, List<PodRun> runs) {
    while (!sub.quiescent().join()) {
      if (System.nanoTime() - deadline > 0) {
        fail("subscriber not quiescent\n" + sub.describe().join() + "\n" + runs);
      }
      LockSupport.parkNanos(2_000_000);
    }
  }

  // ------------------------------------------------------------------ one pod

  /** A pod's publisher through its epochs, and what it published. */
  static final class PodRun {
    final Schedule s;
    final String pod = "m" + PODS.incrementAndGet();
    final List<List<Long>> published = new ArrayList<>(); // per epoch, the codes by sequence
    final List<String> steps = new ArrayList<>();
    KvEventPublisher pub;
    String endpoint;
    String replayEndpoint;
    boolean added;
    int restarts;

    PodRun(Schedule s) {
      this.s = s;
      published.add(new ArrayList<>());
      pub = bind("tcp://127.0.0.1:0", s.replay() ? "tcp://127.0.0.1:0" : null);
      endpoint = pub.endpoint();
      replayEndpoint = pub.replayEndpoint();
    }

    private KvEventPublisher bind(String ep, String replay) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (true) {
        try {
          return KvEventPublisher.builder()
              .endpoint(ep)
              .replayEndpoint(replay)
              .bind(true)
              .bufferSteps(s.bufferSteps())
              .handshakeTimeout(Duration.ofSeconds(2))
              .topic("kv@" + pod + "@m")
              .build();
        } catch (ZMQException e) {
          if (System.nanoTime() - deadline > 0) {
            throw e; // the restarted publisher's port was never released
          }
          LockSupport.parkNanos(2_000_000);
        }
      }
    }

    int epoch() {
      return published.size() - 1;
    }

    long publish() {
      int epoch = epoch();
      long seq = pub.nextSequence();
      long code = code(epoch, seq);
      int[] tokens = new int[16];
      KvEventBatch b =
          KvEventBatch.of(
              TS.incrementAndGet() / 1e6,
              List.of(KvEvent.BlockStored.of(EngineHashes.ofInts(code), null, tokens, 16)));
      long got = pub.publish(b);
      assertThat(got).isEqualTo(seq);
      published.get(epoch).add(code);
      return seq;
    }

    void step(int i) {
      if (i == s.addAt() && !added) {
        added = true;
        PodEndpoint pe = PodEndpoint.of(pod, endpoint);
        sub.addPod(s.replay() ? pe.withReplay(replayEndpoint) : pe).join();
        steps.add("subscribe");
      }
      if (i >= s.ops().size()) {
        return;
      }
      int op = s.ops().get(i);
      int kind = s.quiet() ? 0 : op % 16;
      switch (kind) {
        case 5 -> {
          pub.dropSequence(pub.nextSequence());
          publish();
          steps.add("drop");
        }
        case 6 -> {
          pub.delaySequence(pub.nextSequence());
          publish();
          steps.add("delay");
        }
        case 7 -> {
          pub.duplicateSequence(pub.nextSequence());
          publish();
          steps.add("duplicate");
        }
        case 8 -> {
          pub.close();
          published.add(new ArrayList<>());
          pub = bind(endpoint, replayEndpoint);
          restarts++;
          steps.add("restart");
        }
        case 9 -> {
          pub.reconnectSubscribers();
          steps.add("bounce");
        }
        case 10 -> {
          pub.pauseReplays(true);
          steps.add("pause replays");
        }
        case 11 -> {
          pub.pauseReplays(false);
          steps.add("resume replays");
        }
        case 12 -> steps.add("quiet");
        case 13 -> {
          for (int k = 0; k < 5; k++) {
            publish();
          }
          steps.add("burst");
        }
        default -> {
          publish();
          steps.add("publish");
        }
      }
    }

    void finish() {
      if (!added) {
        step(s.addAt());
      }
      pub.pauseReplays(false); // slow replays answer now
    }

    /** Waits until the last batch is applied, publishing more while it is not (unless quiet). */
    void awaitLast(long deadline) {
      if (s.quiet()) {
        if (published.get(epoch()).isEmpty()) {
          return;
        }
        while (!applied(lastCode())) {
          if (System.nanoTime() - deadline > 0) {
            fail("quiet pod never caught up\n" + this + "\n" + sub.describe().join());
          }
          LockSupport.parkNanos(2_000_000);
        }
        return;
      }
      while (true) {
        publish(); // also flushes a delayed frame; a lost one is recovered or counted
        long until = System.nanoTime() + 50_000_000;
        while (System.nanoTime() < until) {
          if (applied(lastCode())) {
            return;
          }
          LockSupport.parkNanos(1_000_000);
        }
        if (System.nanoTime() - deadline > 0) {
          fail("last batch never applied\n" + this + "\n" + sub.describe().join());
        }
      }
    }

    long lastCode() {
      List<Long> e = published.get(epoch());
      return e.get(e.size() - 1);
    }

    boolean applied(long code) {
      return SINK.events(pod).contains(code);
    }

    void check() {
      List<Long> events = SINK.events(pod);
      String why =
          "\n"
              + this
              + "\nsink "
              + events
              + "\nlistener "
              + LISTENER.notes(pod)
              + "\nfailed replay attempts (all pods) "
              + REGISTRY.find("kvroute.kvindex.replay.attempts.failed").counters().stream()
                  .map(c -> c.getId().getTag("reason") + "=" + c.count())
                  .toList();
      // safety: never twice
      Set<Long> seen = new HashSet<>();
      int lastClear = -1;
      int clears = 0;
      for (int i = 0; i < events.size(); i++) {
        long c = events.get(i);
        if (c == ModelSink.CLEAR) {
          lastClear = i;
          clears++;
        } else {
          assertThat(seen.add(c)).as("applied twice: " + decode(c) + why).isTrue();
        }
      }
      int restartsSeen = LISTENER.count(pod, "restart");
      int losses = LISTENER.losses(pod);
      assertThat(restartsSeen).as("restarts seen" + why).isLessThanOrEqualTo(restarts);
      assertThat(clears).as("clears" + why).isLessThanOrEqualTo(restartsSeen + losses);
      List<Long> segment = events.subList(lastClear + 1, events.size());
      List<Long> finalEpoch = published.get(epoch());
      if (finalEpoch.isEmpty()) {
        return; // a quiet pod whose last epoch published nothing
      }
      assertThat(segment).as("applied since the last clear" + why).isNotEmpty();
      assertThat(segment.get(segment.size() - 1)).as("the last batch" + why).isEqualTo(lastCode());
      long r = seq(segment.get(0));
      stat(s.strict() ? "strict schedules" : "lossy schedules", 1);
      stat("restarts performed", restarts);
      stat("restarts seen", restartsSeen);
      stat("losses counted", losses);
      stat("clears", clears);
      stat("duplicates dropped", LISTENER.count(pod, "duplicate"));
      stat("gaps", LISTENER.count(pod, "gap"));
      stat("batches applied", seen.size());
      if (s.strict()) {
        assertThat(segment).as("the whole last epoch, in order" + why).isEqualTo(finalEpoch);
        assertThat(losses).as("nothing lost: the replay could recover everything" + why).isZero();
        assertThat(clears).as("clears only for restarts" + why).isLessThanOrEqualTo(restartsSeen);
      } else {
        for (int i = 0; i < segment.size(); i++) {
          // without a working replay, a restart first seen at exactly the next sequence number
          // cannot be told from a continuation: only sequence numbers are checked
          assertThat(seq(segment.get(i))).as("position " + i + why).isEqualTo(r + i);
        }
        if (r > 0) {
          assertThat(losses).as("batches before " + r + " lost: counted" + why).isPositive();
        }
      }
    }

    void close() {
      if (added) {
        sub.removePod(pod).orTimeout(60, TimeUnit.SECONDS).join();
      }
      pub.close();
    }

    @Override
    public String toString() {
      return pod + " " + s + "\nsteps " + steps + "\npublished " + published;
    }
  }

  static void stat(String name, int n) {
    STATS.computeIfAbsent(name, k -> new AtomicInteger()).addAndGet(n);
  }

  static long code(int epoch, long seq) {
    return epoch * 1_000_000L + seq + 1;
  }

  static long seq(long code) {
    return code % 1_000_000L - 1;
  }

  static String decode(long code) {
    return "e" + code / 1_000_000L + ":" + seq(code);
  }

  // ------------------------------------------------------------------ recording

  /** Per pod, the stored block codes and the clears ({@link #CLEAR}), in order. */
  static final class ModelSink implements KvEventSink {
    static final long CLEAR = -1;
    private final Map<String, List<Long>> events = new ConcurrentHashMap<>();

    List<Long> events(String pod) {
      return new ArrayList<>(events.getOrDefault(pod, List.of()));
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

  /** Per pod, the listener's restart / resync / duplicate notes. */
  static final class ModelListener implements KvEventListener {
    private final Map<String, List<String>> notes = new ConcurrentHashMap<>();

    private void note(String pod, String n) {
      notes.computeIfAbsent(pod, k -> new CopyOnWriteArrayList<>()).add(n);
    }

    List<String> notes(String pod) {
      return notes.getOrDefault(pod, List.of());
    }

    int count(String pod, String prefix) {
      return (int) notes(pod).stream().filter(n -> n.startsWith(prefix)).count();
    }

    /** Resyncs other than for a restart: batches that were lost. */
    int losses(String pod) {
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
}
