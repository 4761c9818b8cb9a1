package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.UnaryOperator;

/**
 * A pod's {@link KvEventPublisher} on loopback through its epochs (each {@link #restart()} binds a
 * new publisher on the same endpoints), and what it published: every batch stores one block whose
 * hash {@link #code(int, long) codes} its epoch and sequence number, so an {@link EventLogSink}
 * shows which batches were applied, in which order.
 *
 * <p>Public, in this module's test-jar: {@link KvEventSubscriberModelTest} and the benchmarks'
 * {@code KvEventSoakMain} drive their publishers with it. One thread at a time.
 */
public final class EpochPublisher implements AutoCloseable {
  private static final long EPOCH = 100_000_000L;
  private static final AtomicLong TS = new AtomicLong(System.currentTimeMillis() * 1000);

  private final String pod;
  private final String topic;
  private final UnaryOperator<KvEventPublisher.Builder> options;
  private final String endpoint;
  private final String replayEndpoint;
  private final List<List<Long>> published = new ArrayList<>();
  private KvEventPublisher pub;

  /**
   * Binds the publisher of {@code pod} (topic {@code kv@pod@model}) on ephemeral loopback ports,
   * with a replay endpoint if {@code replay}; {@code options} adds to its builder (each epoch).
   */
  public EpochPublisher(
      String pod, String model, boolean replay, UnaryOperator<KvEventPublisher.Builder> options) {
    this.pod = pod;
    this.topic = "kv@" + pod + "@" + model;
    this.options = options;
    published.add(new ArrayList<>());
    pub = bind("tcp://127.0.0.1:0", replay ? "tcp://127.0.0.1:0" : null);
    endpoint = pub.endpoint();
    replayEndpoint = pub.replayEndpoint();
  }

  private KvEventPublisher bind(String ep, String replay) {
    return Publishers.rebind(
        () ->
            options
                .apply(KvEventPublisher.builder().endpoint(ep).replayEndpoint(replay).bind(true))
                .topic(topic)
                .build());
  }

  /** The pod's id. */
  public String pod() {
    return pod;
  }

  /** Where a subscriber finds this pod (with its replay endpoint, if it has one). */
  public PodEndpoint podEndpoint() {
    PodEndpoint p = PodEndpoint.of(pod, endpoint);
    return replayEndpoint == null ? p : p.withReplay(replayEndpoint);
  }

  /** The current epoch's publisher, for its fault hooks. */
  public KvEventPublisher publisher() {
    return pub;
  }

  /** The current epoch: how many restarts there were. */
  public int epoch() {
    return published.size() - 1;
  }

  /** Per epoch, the codes published, by sequence number (live or not). */
  public List<List<Long>> published() {
    return published;
  }

  /** The codes the current epoch published. */
  public List<Long> lastEpoch() {
    return published.get(epoch());
  }

  /** The code of the current epoch's last batch. */
  public long lastCode() {
    List<Long> e = lastEpoch();
    return e.get(e.size() - 1);
  }

  /** Whether the current epoch's last batch is in {@code sink} (false if it published none). */
  public boolean lastApplied(EventLogSink sink) {
    return !lastEpoch().isEmpty() && sink.applied(pod, lastCode());
  }

  /** Publishes the next batch (one block, its code); returns its sequence number. */
  public long publish() {
    int epoch = epoch();
    long seq = pub.nextSequence();
    long code = code(epoch, seq);
    KvEventBatch b =
        KvEventBatch.of(
            TS.incrementAndGet() / 1e6,
            List.of(KvEvent.BlockStored.of(EngineHashes.ofInts(code), null, new int[16], 16)));
    long got = pub.publish(b);
    if (got != seq) {
      throw new IllegalStateException("published " + got + ", expected " + seq);
    }
    published.get(epoch).add(code);
    return seq;
  }

  /**
   * Publishes until the last batch is in {@code sink} (each batch also flushes a delayed frame and
   * shows a lost one, to be recovered or counted), each waited for 50 ms; false if {@code
   * deadlineNanos} passed first.
   */
  public boolean publishUntilApplied(EventLogSink sink, long deadlineNanos) {
    while (true) {
      publish();
      long until = System.nanoTime() + 50_000_000;
      while (System.nanoTime() - until < 0) {
        if (lastApplied(sink)) {
          return true;
        }
        LockSupport.parkNanos(1_000_000);
      }
      if (System.nanoTime() - deadlineNanos > 0) {
        return false;
      }
    }
  }

  /** Closes the publisher and binds a new one (sequence numbers from 0) on the same endpoints. */
  public void restart() {
    pub.close();
    published.add(new ArrayList<>());
    pub = bind(endpoint, replayEndpoint);
  }

  @Override
  public void close() {
    pub.close();
  }

  /** The block hash of the batch {@code seq} of {@code epoch}. */
  public static long code(int epoch, long seq) {
    return epoch * EPOCH + seq + 1;
  }

  /** The sequence number a {@link #code(int, long) code} stands for. */
  public static long seq(long code) {
    return code % EPOCH - 1;
  }

  /** {@code e<epoch>:<seq>}. */
  public static String decode(long code) {
    return "e" + code / EPOCH + ":" + seq(code);
  }

  @Override
  public String toString() {
    return pod + " published " + published;
  }
}
