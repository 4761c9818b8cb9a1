package io.kvroute.kvindex.zmq;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.quicktheories.core.Gen;

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
 * <p>Each pod's publisher speaks one of the {@link EpochPublisher.Flavour}s: the payload shape, the
 * replay reply shape and the turns of vLLM's own publisher in the three revisions of {@code
 * vllm/distributed/kv_events.py} the harness in {@code tools/vllm-events} runs (map: 0181ea31,
 * array: b4e69e0a, latest: local-inference-lab b6b82137), or kvroute's earlier one.
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
  private static final AtomicInteger PODS = new AtomicInteger();

  private static final EventLogSink SINK = new EventLogSink();
  private static final Map<String, AtomicInteger> STATS = new ConcurrentHashMap<>();
  private static final NoteListener LISTENER = new NoteListener();
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

    /** Which vLLM revision's publisher the pod runs (payload and replay shapes, turns). */
    EpochPublisher.Flavour flavour() {
      return EpochPublisher.Flavour.values()[
          (config / 1000) % EpochPublisher.Flavour.values().length];
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
      return "Schedule{flavour="
          + flavour()
          + ", replay="
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
    final EpochPublisher pub;
    final List<String> steps = new ArrayList<>();
    boolean added;

    PodRun(Schedule s) {
      this.s = s;
      pub =
          new EpochPublisher(
              "m" + PODS.incrementAndGet(),
              "m",
              s.replay(),
              s.flavour(),
              b -> b.bufferSteps(s.bufferSteps()).handshakeTimeout(Duration.ofSeconds(2)));
    }

    void step(int i) {
      if (i == s.addAt() && !added) {
        added = true;
        sub.addPod(pub.podEndpoint()).join();
        steps.add("subscribe");
      }
      if (i >= s.ops().size()) {
        return;
      }
      int op = s.ops().get(i);
      int kind = s.quiet() ? 0 : op % 16;
      KvEventPublisher p = pub.publisher();
      switch (kind) {
        case 5 -> {
          p.dropSequence(p.nextSequence());
          pub.publish();
          steps.add("drop");
        }
        case 6 -> {
          p.delaySequence(p.nextSequence());
          pub.publish();
          steps.add("delay");
        }
        case 7 -> {
          p.duplicateSequence(p.nextSequence());
          pub.publish();
          steps.add("duplicate");
        }
        case 8 -> {
          pub.restart();
          steps.add("restart");
        }
        case 9 -> {
          p.reconnectSubscribers();
          steps.add("bounce");
        }
        case 10 -> {
          p.pauseReplays(true);
          steps.add("pause replays");
        }
        case 11 -> {
          p.pauseReplays(false);
          steps.add("resume replays");
        }
        case 12 -> steps.add("quiet");
        case 13 -> {
          for (int k = 0; k < 5; k++) {
            pub.publish();
          }
          steps.add("burst");
        }
        default -> {
          pub.publish();
          steps.add("publish");
        }
      }
    }

    void finish() {
      if (!added) {
        step(s.addAt());
      }
      pub.publisher().pauseReplays(false); // slow replays answer now
    }

    /** Waits until the last batch is applied, publishing more while it is not (unless quiet). */
    void awaitLast(long deadline) {
      if (s.quiet()) {
        if (pub.lastEpoch().isEmpty()) {
          return;
        }
        while (!pub.lastApplied(SINK)) {
          if (System.nanoTime() - deadline > 0) {
            fail("quiet pod never caught up\n" + this + "\n" + sub.describe().join());
          }
          LockSupport.parkNanos(2_000_000);
        }
        return;
      }
      if (!pub.publishUntilApplied(SINK, deadline)) {
        fail("last batch never applied\n" + this + "\n" + sub.describe().join());
      }
    }

    void check() {
      String pod = pub.pod();
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
        if (c == EventLogSink.CLEAR) {
          lastClear = i;
          clears++;
        } else {
          assertThat(seen.add(c)).as("applied twice: " + EpochPublisher.decode(c) + why).isTrue();
        }
      }
      int restartsSeen = LISTENER.count(pod, "restart");
      int losses = LISTENER.losses(pod);
      assertThat(restartsSeen).as("restarts seen" + why).isLessThanOrEqualTo(pub.epoch());
      assertThat(clears).as("clears" + why).isLessThanOrEqualTo(restartsSeen + losses);
      List<Long> segment = events.subList(lastClear + 1, events.size());
      List<Long> finalEpoch = pub.lastEpoch();
      if (finalEpoch.isEmpty()) {
        return; // a quiet pod whose last epoch published nothing
      }
      assertThat(segment).as("applied since the last clear" + why).isNotEmpty();
      assertThat(segment.get(segment.size() - 1))
          .as("the last batch" + why)
          .isEqualTo(pub.lastCode());
      long r = EpochPublisher.seq(segment.get(0));
      stat(s.strict() ? "strict schedules" : "lossy schedules", 1);
      stat("flavour " + s.flavour(), 1);
      stat("restarts performed", pub.epoch());
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
          assertThat(EpochPublisher.seq(segment.get(i))).as("position " + i + why).isEqualTo(r + i);
        }
        if (r > 0) {
          assertThat(losses).as("batches before " + r + " lost: counted" + why).isPositive();
        }
      }
    }

    void close() {
      if (added) {
        sub.removePod(pub.pod()).orTimeout(60, TimeUnit.SECONDS).join();
      }
      pub.close();
    }

    @Override
    public String toString() {
      return pub.pod() + " " + s + "\nsteps " + steps + "\npublished " + pub.published();
    }
  }

  static void stat(String name, int n) {
    STATS.computeIfAbsent(name, k -> new AtomicInteger()).addAndGet(n);
  }
}
