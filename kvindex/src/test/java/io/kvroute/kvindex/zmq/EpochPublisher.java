package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.EventSchema;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.UnaryOperator;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;

/**
 * A pod's {@link KvEventPublisher} on loopback through its epochs (each {@link #restart()} binds a
 * new publisher on the same endpoints), and what it published: every batch stores one block whose
 * hash {@link #code(int, long) codes} its epoch and sequence number, so an {@link EventLogSink}
 * shows which batches were applied, in which order. It speaks one of the {@link Flavour}s of vLLM's
 * own publisher.
 *
 * <p>Public, in this module's test-jar: {@link KvEventSubscriberModelTest} and the benchmarks'
 * {@code KvEventSoakMain} drive their publishers with it. One thread at a time.
 */
public final class EpochPublisher implements AutoCloseable {
  /**
   * What vLLM's {@code ZmqEventPublisher} sends, by revision of {@code
   * vllm/distributed/kv_events.py}: the batch payload's shape, the replay reply's shape, and how
   * its {@code _publisher_thread} takes turns ({@link KvEventPublisher.Builder#vllmLoop}: one
   * replay request per turn, turns of up to 100 ms when idle; the same in all three).
   */
  public enum Flavour {
    /**
     * vllm-project/vllm 0181ea31: the batch a msgpack map {@code {ts, events, data_parallel_rank}},
     * events tagged maps; replies {@code [seq, payload]}, end {@code [END, ""]} (no topic frame).
     */
    MAP(KvEventPublisher.ReplyFormat.LEGACY),
    /**
     * vllm-project/vllm b4e69e0a (PR #16750): the batch {@code [ts, events]} (no DP rank), events
     * positional arrays (schema A0); replies without a topic frame.
     */
    ARRAY(KvEventPublisher.ReplyFormat.LEGACY),
    /**
     * local-inference-lab/vllm b6b82137 (upstream main with PR #45177): the batch {@code [ts,
     * events, dp_rank]}, events tagged maps (schema M2); replies {@code [topic, seq, payload]}, end
     * {@code ["", END, ""]}.
     */
    LATEST(KvEventPublisher.ReplyFormat.WITH_TOPIC),
    /** kvroute's own publisher as it was before: schema M0, topic replies, 5 ms turns. */
    KVROUTE(KvEventPublisher.ReplyFormat.WITH_TOPIC);

    final KvEventPublisher.ReplyFormat replies;

    Flavour(KvEventPublisher.ReplyFormat replies) {
      this.replies = replies;
    }
  }

  private static final long EPOCH = 100_000_000L;
  private static final AtomicLong TS = new AtomicLong(System.currentTimeMillis() * 1000);

  private final String pod;
  private final String topic;
  private final UnaryOperator<KvEventPublisher.Builder> options;
  private final Flavour flavour;
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
    this(pod, model, replay, Flavour.KVROUTE, options);
  }

  /**
   * As {@link #EpochPublisher(String, String, boolean, UnaryOperator)}, speaking {@code flavour}.
   */
  public EpochPublisher(
      String pod,
      String model,
      boolean replay,
      Flavour flavour,
      UnaryOperator<KvEventPublisher.Builder> options) {
    this.pod = pod;
    this.topic = "kv@" + pod + "@" + model;
    this.options = options;
    this.flavour = flavour;
    published.add(new ArrayList<>());
    pub = bind("tcp://127.0.0.1:0", replay ? "tcp://127.0.0.1:0" : null);
    endpoint = pub.endpoint();
    replayEndpoint = pub.replayEndpoint();
  }

  private KvEventPublisher bind(String ep, String replay) {
    return Publishers.rebind(
        () ->
            options
                .apply(
                    KvEventPublisher.builder()
                        .endpoint(ep)
                        .replayEndpoint(replay)
                        .bind(true)
                        .replyFormat(flavour.replies)
                        .vllmLoop(flavour != Flavour.KVROUTE))
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

  /** The flavour of vLLM publisher this pod speaks. */
  public Flavour flavour() {
    return flavour;
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
    long got =
        switch (flavour) {
          case MAP -> pub.publishPayload(mapBatch(b));
          case ARRAY -> pub.publish(b.withSchema(EventSchema.A0).withDataParallelRank(null));
          case LATEST -> pub.publish(b.withSchema(EventSchema.M2));
          case KVROUTE -> pub.publish(b);
        };
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

  /**
   * The batch as vLLM 0181ea31 encodes it: {@code EventBatch} without {@code array_like}, so a
   * msgpack map {@code {"ts", "events", "data_parallel_rank"}}, its events tagged maps.
   */
  static byte[] mapBatch(KvEventBatch b) {
    byte[] array = KvEventCodec.encode(b.withSchema(EventSchema.M0));
    try (MessageUnpacker in = MessagePack.newDefaultUnpacker(array);
        MessageBufferPacker out = MessagePack.newDefaultBufferPacker()) {
      int n = in.unpackArrayHeader();
      out.packMapHeader(n);
      String[] keys = {"ts", "events", "data_parallel_rank"};
      for (int i = 0; i < n; i++) {
        out.packString(keys[i]);
        out.packValue(in.unpackValue());
      }
      return out.toByteArray();
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
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
