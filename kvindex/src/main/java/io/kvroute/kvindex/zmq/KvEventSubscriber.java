package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.zmq.internal.Endpoints;
import io.kvroute.kvindex.zmq.internal.ReplayClient;
import io.kvroute.kvindex.zmq.internal.SubscriberConfig;
import io.kvroute.kvindex.zmq.internal.SubscriberCore;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.channels.SelectableChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Subscribes to vLLM/SGLang KV-event streams over ZMQ (JeroMQ), decodes them and applies them, per
 * pod and in order, to a {@link KvEventSink} (e.g. {@code KvEventSink.of(blockIndex)}).
 *
 * <p><b>Delivery modes.</b> <em>Connect</em>: {@link #addPod(PodEndpoint)} connects one SUB socket
 * per pod and data-parallel rank (ports offset by the rank); pods are added and removed at run
 * time. <em>Bind</em>: {@link Builder#bind(String)} binds one SUB socket many publishers connect
 * to; the pod is then taken from the topic ({@link PodEndpoint#podIdFromTopic(String)}) and the
 * rank from the batch, and each publisher must use its own topic (sequence numbers are tracked per
 * topic). Both modes can be used at once.
 *
 * <p><b>Delivery guarantee.</b> Every batch of a publisher reaches the sink at most once and in
 * sequence order; with a replay endpoint every batch the publisher's replay buffer still holds
 * reaches it. Sequencing is one state machine per publisher (rules in {@code
 * kvindex/SEQUENCING.md}):
 *
 * <ul>
 *   <li>A <b>gap</b> in the sequence numbers is repaired by a replay ({@code ["", start_seq]} to
 *       the ROUTER, both reply shapes, the end marker) that starts at the last batch applied, so
 *       the answer also proves the publisher is the same; live batches meanwhile are held back and
 *       applied after it, those it delivered dropped.
 *   <li>A <b>duplicate</b> (a sequence number already applied, with the same payload, or an older
 *       {@code ts}) is dropped and counted ({@code kvroute_kvindex_duplicates}); it is never a
 *       restart.
 *   <li>A <b>restart</b> is recognised when a sequence number already applied comes with another
 *       payload or a newer {@code ts} after a reconnect, or when a replay answer does not hold the
 *       last batch applied; the pod is cleared once and the new epoch fetched from sequence 0.
 *   <li><b>Catch-up</b>: on a connection's first handshake everything the replay buffer holds is
 *       fetched (a SUB misses what was published before it joined); on every later handshake a
 *       replay from the last batch applied verifies the publisher and fetches what was published
 *       while disconnected.
 *   <li>What cannot be recovered (no replay endpoint; a replay that cannot deliver; 3 failed
 *       attempts, after which replays pause for {@link Builder#replayCooldown(Duration)}) is
 *       counted as a resync ({@code kvroute_kvindex_resyncs{reason}}) and the pod cleared if it had
 *       entries.
 * </ul>
 *
 * <p><b>Bad input never stops the stream.</b> Payloads that do not decode and messages without
 * exactly 3 frames are counted and skipped (their sequence number still counts, so no false gap).
 * Each problem kind is logged once per pod at WARN (never with payload contents), then only
 * counted.
 *
 * <p><b>Oversized frames are never allocated.</b> {@link Builder#maxPayloadBytes(int)} is set as
 * JeroMQ's max message size on every SUB and replay DEALER socket, so JeroMQ refuses a larger frame
 * from its size header and drops that connection: the subscriber counts {@code
 * kvroute_kvindex_dropped{reason=oversized}} and calls {@code onDropped(pod, -1, "oversized",
 * null)} (in bind mode with the peer's address). A connect-mode socket is reopened ({@code
 * kvroute_kvindex_socket_reopens}); the batches lost meanwhile are a gap, repaired like any other,
 * and the oversized batch is skipped in the replay (counted once).
 *
 * <p><b>Threads and bounds.</b> One I/O thread ({@code kvindex-zmq-io}) owns every SUB socket and
 * reads only those with messages waiting (their JeroMQ descriptors on its own selector), so the
 * cost of a message does not grow with the number of pods; it hands messages to N shard threads
 * ({@code kvindex-shard-<i>}; publisher → shard by hash) through bounded queues ({@link
 * Builder#queueCapacity(int)} each); a full queue drops the message, counts it ({@code
 * kvroute_kvindex_dropped{reason=overflow}}) and the publisher's sequencing recovers it by replay
 * when the publisher has a replay endpoint (a clear only without one). Replays run on {@link
 * Builder#replayThreads(int)} threads ({@code kvindex-replay-<i>}) that only do I/O: their answers
 * go back to the shard, waiting while it is busy (that wait does not count against the replay
 * timeouts). Live messages held back per publisher during a replay: {@link
 * Builder#replayBufferCapacity(int)}. SUB sockets reconnect by themselves with exponential
 * back-off; a ZMTP handshake that has not completed is dropped after {@link
 * Builder#handshakeTimeout(Duration)}, and at once (250 ms, doubling per repeat) when JeroMQ lost
 * the connection (JeroMQ 0.6.0 sometimes stops watching a connection it just made: {@code
 * kvroute_kvindex_handshake_stalls}). A replay request is sent once its DEALER's handshake is done.
 *
 * <p><b>Metrics</b> (Micrometer): {@code kvroute_kvindex_events{type}}, {@code
 * kvroute_kvindex_batches}, {@code kvroute_kvindex_decode_errors}, {@code
 * kvroute_kvindex_unknown_tags}, {@code kvroute_kvindex_gaps}, {@code kvroute_kvindex_duplicates},
 * {@code kvroute_kvindex_replays{outcome=complete|incomplete|rejected}}, {@code
 * kvroute_kvindex_replay_attempts_failed{reason=idle|timeout|disconnected|error}}, {@code
 * kvroute_kvindex_catchups}, {@code kvroute_kvindex_restarts}, {@code
 * kvroute_kvindex_resyncs{reason=gap|restart|joined_late}}, {@code
 * kvroute_kvindex_dropped{reason=malformed|oversized|frames|overflow|replay_buffer|pod_limit|sink_error}},
 * {@code kvroute_kvindex_socket_reopens}, {@code
 * kvroute_kvindex_handshake_stalls{socket=sub|replay}}, gauges {@code
 * kvroute_kvindex_queue_depth{shard}}, {@code kvroute_kvindex_replay_inbox_depth{shard}}, {@code
 * kvroute_kvindex_control_depth{shard}}, {@code kvroute_kvindex_replay_queue_depth}, {@code
 * kvroute_kvindex_replay_buffered}.
 *
 * <p><b>Thread-safety.</b> Thread-safe. The sink and the listener are called from the publisher's
 * shard thread only, so one pod's calls never overlap and come in sequence order; some {@code
 * onDropped} calls ({@code overflow}, {@code frames}, {@code pod_limit}, {@code oversized}) come
 * from the I/O thread.
 */
public final class KvEventSubscriber implements AutoCloseable {

  private final SubscriberCore core;
  private final AtomicBoolean started = new AtomicBoolean();
  private final AtomicBoolean closed = new AtomicBoolean();

  private KvEventSubscriber(SubscriberConfig config) {
    this.core = new SubscriberCore(config);
  }

  /** A new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Starts the threads; in bind mode, returns once the SUB socket is bound.
   *
   * @return this
   * @throws IllegalStateException if binding failed or the subscriber was closed
   */
  public KvEventSubscriber start() {
    if (closed.get()) {
      throw new IllegalStateException("subscriber is closed");
    }
    if (started.compareAndSet(false, true)) {
      core.start();
    }
    core.awaitBound();
    return this;
  }

  /** The resolved bound endpoint in bind mode (after {@link #start()}), else empty. */
  public Optional<String> boundEndpoint() {
    return core.boundEndpoint();
  }

  /**
   * Subscribes to a pod (connect mode): one SUB socket per DP rank.
   *
   * @return completes when the sockets are connecting (ZMQ connects asynchronously)
   * @throws IllegalArgumentException if the pod id is already subscribed, or the endpoint cannot be
   *     offset for its DP ranks
   * @throws IllegalStateException if there are already {@code maxPods} pods, or the subscriber is
   *     closed
   */
  public CompletableFuture<Void> addPod(PodEndpoint pod) {
    Objects.requireNonNull(pod, "pod");
    if (closed.get()) {
      throw new IllegalStateException("subscriber is closed");
    }
    List<String[]> ranks = new ArrayList<>();
    for (int r = 0; r < pod.dataParallelSize(); r++) {
      ranks.add(
          new String[] {
            PodEndpoint.identity(pod.podId(), r),
            Endpoints.offset(pod.endpoint(), r),
            pod.replayEndpoint() == null ? null : Endpoints.offset(pod.replayEndpoint(), r)
          });
    }
    return core.addPod(pod.podId(), ranks);
  }

  /**
   * Unsubscribes a pod (its sockets are closed, its replays end) and calls {@link
   * KvEventSink#removePod} for each of its identities after the events already applied. In bind
   * mode this forgets the topic's state (new messages on the topic start it again).
   *
   * @return completes when the sink has been told
   */
  public CompletableFuture<Void> removePod(String podId) {
    Objects.requireNonNull(podId, "podId");
    return core.removePod(podId);
  }

  /** Pod ids currently subscribed in connect mode. */
  public Set<String> pods() {
    return core.pods();
  }

  /** Stops every thread and closes every socket (and the context, unless it was supplied). */
  @Override
  public void close() {
    if (closed.compareAndSet(false, true)) {
      core.close(started.get());
    }
  }

  /** Test hook: the max message size of every SUB socket, read on the I/O thread. */
  CompletableFuture<List<Long>> subscriberMaxMsgSizes() {
    return core.maxMsgSizes();
  }

  /** Test hook: a replay DEALER as replays use them. */
  ZMQ.Socket newReplayDealer() {
    return core.newReplayDealer();
  }

  /**
   * Test hook: true once nothing is queued, replaying or held back for the connect-mode pods (a
   * snapshot; racy by nature, for polling).
   */
  CompletableFuture<Boolean> quiescent() {
    return core.quiescent();
  }

  /** Test hook: each connect-mode stream's sequencing state, for failure messages. */
  CompletableFuture<String> describe() {
    return core.describe();
  }

  public static final class Builder {
    private KvEventSink sink;
    private KvEventListener listener = KvEventListener.NONE;
    private String topic = "";
    private String bindEndpoint;
    private int shards = 2;
    private int queueCapacity = 4096;
    private int maxPayloadBytes = 32 << 20;
    private int receiveHwm = 100_000;
    private Duration reconnectInterval = Duration.ofMillis(100);
    private Duration reconnectIntervalMax = Duration.ofSeconds(10);
    private Duration handshakeTimeout = Duration.ofSeconds(5);
    private Duration replayIdleTimeout = Duration.ofSeconds(2);
    private Duration replayTimeout = Duration.ofSeconds(30);
    private Duration replayCooldown = Duration.ofSeconds(30);
    private int replayThreads = 2;
    private int replayBufferCapacity = 4096;
    private Duration pollInterval = Duration.ofMillis(50);
    private int maxPods = 10_000;
    private KvEventCodec.Dialect dialect = KvEventCodec.Dialect.VLLM;
    private MeterRegistry meterRegistry;
    private LongSupplier nanoClock = System::nanoTime;
    private ZContext context;
    private Predicate<SelectableChannel> stallCheck = ReplayClient::stalled;

    private Builder() {}

    /** Where decoded events go (required), e.g. {@code KvEventSink.of(blockIndex)}. */
    public Builder sink(KvEventSink sink) {
      this.sink = sink;
      return this;
    }

    /** Observer of batches and stream problems (default {@link KvEventListener#NONE}). */
    public Builder listener(KvEventListener listener) {
      this.listener = listener;
      return this;
    }

    /** SUB topic prefix filter (default {@code ""}: everything; llm-d uses {@code "kv@"}). */
    public Builder topic(String topic) {
      this.topic = topic;
      return this;
    }

    /**
     * Bind mode: bind one SUB socket here (e.g. {@code tcp://0.0.0.0:5557}); publishers connect.
     */
    public Builder bind(String endpoint) {
      this.bindEndpoint = endpoint;
      return this;
    }

    /** Number of shard threads applying events (default 2). */
    public Builder shards(int shards) {
      this.shards = shards;
      return this;
    }

    /** Capacity of each shard queue, in messages (default 4096). */
    public Builder queueCapacity(int queueCapacity) {
      this.queueCapacity = queueCapacity;
      return this;
    }

    /**
     * Largest accepted frame (default 32 MiB). Set as JeroMQ's max message size on every SUB and
     * replay DEALER socket: a larger frame is refused from its size header, never allocated, and
     * JeroMQ drops that connection; the subscriber counts it ({@code
     * kvroute_kvindex_dropped{reason=oversized}}), reconnects, and repairs the resulting gap like
     * any other.
     */
    public Builder maxPayloadBytes(int maxPayloadBytes) {
      this.maxPayloadBytes = maxPayloadBytes;
      return this;
    }

    /** ZMQ receive high-water mark of each SUB socket (default 100 000 messages). */
    public Builder receiveHwm(int receiveHwm) {
      this.receiveHwm = receiveHwm;
      return this;
    }

    /** First reconnect delay of SUB sockets (default 100 ms). */
    public Builder reconnectInterval(Duration d) {
      this.reconnectInterval = d;
      return this;
    }

    /** Maximum reconnect delay; the delay doubles up to it (default 10 s). */
    public Builder reconnectIntervalMax(Duration d) {
      this.reconnectIntervalMax = d;
      return this;
    }

    /**
     * A connection whose ZMTP handshake has not completed within this time is dropped and retried
     * (default 5 s; JeroMQ's own default is 30 s).
     */
    public Builder handshakeTimeout(Duration d) {
      this.handshakeTimeout = d;
      return this;
    }

    /**
     * How long a replay waits for each reply before the attempt fails and is retried (default 2 s;
     * vLLM answers within ~100 ms).
     */
    public Builder replayIdleTimeout(Duration d) {
      this.replayIdleTimeout = d;
      return this;
    }

    /** Overall bound of one replay (default 30 s). */
    public Builder replayTimeout(Duration d) {
      this.replayTimeout = d;
      return this;
    }

    /**
     * After a replay failed its 3 attempts (no answer, a dropped connection), that pod's gaps are
     * resynchronised without replay for this long (default 30 s).
     */
    public Builder replayCooldown(Duration d) {
      this.replayCooldown = d;
      return this;
    }

    /**
     * Threads running replays (default 2), each one replay at a time; further replays wait in a
     * queue ({@code kvroute_kvindex_replay_queue_depth}) that holds at most one per publisher (a
     * publisher runs one replay at a time).
     */
    public Builder replayThreads(int replayThreads) {
      this.replayThreads = replayThreads;
      return this;
    }

    /**
     * Live messages held back per publisher while its replay runs (default 4096); beyond it they
     * are dropped ({@code kvroute_kvindex_dropped{reason=replay_buffer}}) and fetched by another
     * replay once this one ends.
     */
    public Builder replayBufferCapacity(int replayBufferCapacity) {
      this.replayBufferCapacity = replayBufferCapacity;
      return this;
    }

    /** How often idle threads look for commands and shutdown (default 50 ms). */
    public Builder pollInterval(Duration d) {
      this.pollInterval = d;
      return this;
    }

    /** Maximum publishers tracked (connect-mode pods plus bind-mode topics; default 10 000). */
    public Builder maxPods(int maxPods) {
      this.maxPods = maxPods;
      return this;
    }

    /** Payload dialect (default {@link KvEventCodec.Dialect#VLLM}). */
    public Builder dialect(KvEventCodec.Dialect dialect) {
      this.dialect = dialect;
      return this;
    }

    /**
     * Registry for {@code kvroute_kvindex_*} metrics (default: a private {@code
     * SimpleMeterRegistry}).
     */
    public Builder meterRegistry(MeterRegistry meterRegistry) {
      this.meterRegistry = meterRegistry;
      return this;
    }

    /**
     * Clock for replay deadlines, the replay cooldown and socket re-open back-off (default {@code
     * System::nanoTime}); tests drive it.
     */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = nanoClock;
      return this;
    }

    /** A shared JeroMQ context (not closed by the subscriber); default: a private one. */
    public Builder context(ZContext context) {
      this.context = context;
      return this;
    }

    /**
     * Test hook: what tells a connection whose ZMTP handshake has not completed is stalled (default
     * {@link ReplayClient#stalled}: JeroMQ no longer watches its channel). Tests use it to mark a
     * connection a publisher double holds open without answering as such.
     */
    Builder stallCheck(Predicate<SelectableChannel> stallCheck) {
      this.stallCheck = Objects.requireNonNull(stallCheck, "stallCheck");
      return this;
    }

    /**
     * Validates and creates the subscriber (call {@link KvEventSubscriber#start()}).
     *
     * @throws IllegalArgumentException naming the invalid field
     */
    public KvEventSubscriber build() {
      if (sink == null) {
        throw new IllegalArgumentException("subscriber.sink must be set");
      }
      Objects.requireNonNull(listener, "subscriber.listener");
      Objects.requireNonNull(topic, "subscriber.topic");
      Objects.requireNonNull(dialect, "subscriber.dialect");
      Objects.requireNonNull(nanoClock, "subscriber.nanoClock");
      positive("subscriber.shards", shards);
      positive("subscriber.queueCapacity", queueCapacity);
      positive("subscriber.maxPayloadBytes", maxPayloadBytes);
      positive("subscriber.maxPods", maxPods);
      positive("subscriber.replayThreads", replayThreads);
      positive("subscriber.replayBufferCapacity", replayBufferCapacity);
      if (receiveHwm < 0) {
        throw new IllegalArgumentException("subscriber.receiveHwm must be >= 0, was " + receiveHwm);
      }
      positive("subscriber.reconnectInterval", reconnectInterval);
      positive("subscriber.reconnectIntervalMax", reconnectIntervalMax);
      positive("subscriber.replayIdleTimeout", replayIdleTimeout);
      positive("subscriber.handshakeTimeout", handshakeTimeout);
      positive("subscriber.replayTimeout", replayTimeout);
      if (replayCooldown == null || replayCooldown.isNegative()) {
        throw new IllegalArgumentException(
            "subscriber.replayCooldown must be >= 0, was " + replayCooldown);
      }
      positive("subscriber.pollInterval", pollInterval);
      if (reconnectIntervalMax.compareTo(reconnectInterval) < 0) {
        throw new IllegalArgumentException(
            "subscriber.reconnectIntervalMax must be >= reconnectInterval, was "
                + reconnectIntervalMax);
      }
      return new KvEventSubscriber(
          new SubscriberConfig(
              sink,
              listener,
              topic,
              bindEndpoint,
              shards,
              queueCapacity,
              maxPayloadBytes,
              receiveHwm,
              reconnectInterval.toMillis(),
              reconnectIntervalMax.toMillis(),
              (int) Math.min(Integer.MAX_VALUE, handshakeTimeout.toMillis()),
              (int) Math.min(Integer.MAX_VALUE, replayIdleTimeout.toMillis()),
              replayTimeout.toNanos(),
              replayCooldown.toNanos(),
              replayThreads,
              replayBufferCapacity,
              Math.max(1, pollInterval.toMillis()),
              maxPods,
              dialect,
              meterRegistry != null ? meterRegistry : new SimpleMeterRegistry(),
              nanoClock,
              context,
              stallCheck));
    }

    private static void positive(String name, int v) {
      if (v < 1) {
        throw new IllegalArgumentException(name + " must be >= 1, was " + v);
      }
    }

    private static void positive(String name, Duration d) {
      if (d == null || d.isZero() || d.isNegative()) {
        throw new IllegalArgumentException(name + " must be > 0, was " + d);
      }
    }
  }
}
