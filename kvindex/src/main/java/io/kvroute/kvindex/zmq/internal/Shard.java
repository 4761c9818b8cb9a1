package io.kvroute.kvindex.zmq.internal;

import io.kvroute.kvindex.event.KvEventCodec;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * One shard thread ({@code kvindex-shard-<i>}) applying the events of the publishers hashed to it,
 * each publisher in order. Three inboxes, taken in this order: control tasks (socket events, pod
 * removal, dropped-batch notices), replay answers, live messages.
 *
 * <p>A socket's handshake event is posted before any message of that connection can be queued, and
 * the control tasks are run again after a live message is taken and before it is handled, so a
 * stream's {@code connected} always precedes the messages of the connection it reports.
 *
 * <p><b>Bounds.</b> Live messages: {@code queueCapacity} (a full queue drops, and the stream is
 * told; {@code kvroute_kvindex_queue_depth}); replay answers: {@value #REPLAY_INBOX} (a replay job
 * waits, so replays slow down instead of dropping, and their deadlines do not count the wait;
 * {@code kvroute_kvindex_replay_inbox_depth}); control tasks: a few per stream (a handshake per
 * connection, one coalesced drop notice, removal; {@code kvroute_kvindex_control_depth}).
 * <b>Thread-safety:</b> the offer/post methods are thread-safe; everything else runs on the shard
 * thread.
 */
public final class Shard {
  static final int REPLAY_INBOX = 256;

  /** A live message as the I/O thread received it. */
  record Live(Stream stream, String topic, long seq, byte[] payload, int size) {}

  final int index;
  private final ArrayBlockingQueue<Live> live;
  private final ArrayBlockingQueue<Runnable> replayInbox = new ArrayBlockingQueue<>(REPLAY_INBOX);
  private final ConcurrentLinkedQueue<Runnable> control = new ConcurrentLinkedQueue<>();
  private final java.util.concurrent.atomic.AtomicInteger controlDepth =
      new java.util.concurrent.atomic.AtomicInteger();
  private final Thread thread;
  private final long parkNanos;
  private final KvEventCodec.Dialect dialect;
  private final LongSupplier clock;
  private final Telemetry telemetry;
  private volatile boolean running = true;

  Shard(int index, SubscriberConfig config, Telemetry telemetry) {
    this.index = index;
    this.live = new ArrayBlockingQueue<>(config.queueCapacity());
    this.parkNanos = TimeUnit.MILLISECONDS.toNanos(config.pollIntervalMs());
    this.dialect = config.dialect();
    this.clock = config.nanoClock();
    this.telemetry = telemetry;
    this.thread = new Thread(this::loop, "kvindex-shard-" + index);
    thread.setDaemon(true);
    telemetry.gauge(
        "kvroute.kvindex.queue.depth",
        live::size,
        "KV event messages waiting in a shard queue",
        "shard",
        String.valueOf(index));
    telemetry.gauge(
        "kvroute.kvindex.replay.inbox.depth",
        replayInbox::size,
        "replay answers waiting for their shard (at most " + REPLAY_INBOX + ")",
        "shard",
        String.valueOf(index));
    telemetry.gauge(
        "kvroute.kvindex.control.depth",
        controlDepth::get,
        "socket events and commands waiting for their shard",
        "shard",
        String.valueOf(index));
  }

  void start() {
    thread.start();
  }

  /** Stops the thread (the pending tasks are run by {@link #drainAfterStop()}). */
  void stop() {
    running = false;
    LockSupport.unpark(thread);
  }

  void join(long millis) throws InterruptedException {
    thread.join(millis);
  }

  /** After {@link #stop()} and the join: runs what is left in the control inbox. */
  void drainAfterStop() {
    runControl();
  }

  /** Queues a live message; false when the queue is full. */
  boolean offer(Live m) {
    if (!live.offer(m)) {
      return false;
    }
    LockSupport.unpark(thread);
    return true;
  }

  /** Runs {@code task} on the shard thread, before any live message taken after this call. */
  void post(Runnable task) {
    controlDepth.incrementAndGet();
    control.add(task);
    LockSupport.unpark(thread);
  }

  /**
   * Queues a replay event, waiting while the inbox is full; gives up (false) when {@code wanted}
   * turns false or the shard stops.
   */
  boolean postReplay(Runnable task, java.util.function.BooleanSupplier wanted)
      throws InterruptedException {
    while (running && wanted.getAsBoolean()) {
      if (replayInbox.offer(task, parkNanos, TimeUnit.NANOSECONDS)) {
        LockSupport.unpark(thread);
        return true;
      }
    }
    return false;
  }

  /** Live messages waiting. */
  int queued() {
    return live.size();
  }

  /** Whether this shard has nothing waiting (tests; racy by nature). */
  boolean idle() {
    return live.isEmpty() && replayInbox.isEmpty() && control.isEmpty();
  }

  long now() {
    return clock.getAsLong();
  }

  private void loop() {
    while (running) {
      runControl();
      boolean worked = false;
      Runnable r;
      for (int n = 0; n < 64 && (r = replayInbox.poll()) != null; n++) {
        safely(r);
        worked = true;
      }
      Live m = live.poll();
      if (m != null) {
        runControl(); // the handshake of m's connection first
        safely(() -> handle(m));
        continue;
      }
      if (!worked && control.isEmpty() && replayInbox.isEmpty() && live.isEmpty()) {
        LockSupport.parkNanos(this, parkNanos);
      }
    }
  }

  private void handle(Live m) {
    Stream s = m.stream();
    if (s.removed) {
      return;
    }
    s.live(Received.decode(m.seq(), m.topic(), m.payload(), m.size(), dialect), now());
  }

  private void runControl() {
    Runnable c;
    while ((c = control.poll()) != null) {
      controlDepth.decrementAndGet();
      safely(c);
    }
  }

  private void safely(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      telemetry.warn("KV event shard {} task failed; continuing", index, e);
    }
  }
}
