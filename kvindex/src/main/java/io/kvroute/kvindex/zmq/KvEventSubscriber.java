package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.event.KvEventDecodeException;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.zmq.internal.Endpoints;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
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
 * <p><b>Sequence numbers</b> (frame 2, unsigned 64-bit big-endian) are tracked per publisher. A
 * jump is a gap: if the pod has a replay endpoint the missing batches are fetched through a DEALER
 * ({@code ["", start_seq]}; both reply shapes; the end marker), otherwise — or if the replay is
 * incomplete — the pod's entries are cleared (resync). A decrease (or repeat) is a publisher
 * restart: the pod's entries are cleared and the batch applied. The first batch seen from a
 * publisher starts tracking; when the pod has a replay endpoint and that batch is not sequence 0,
 * the subscriber first catches up on what the publisher's replay buffer still holds (a SUB socket
 * misses whatever was published before it connected), counted in {@code kvindex_catchups}.
 *
 * <p><b>Bad input never stops the stream.</b> Payloads larger than {@link
 * Builder#maxPayloadBytes(int)}, payloads that do not decode, and messages without exactly 3 frames
 * are counted and skipped (their sequence number still counts, so no false gap); later batches
 * apply. Each problem kind is logged once per pod at WARN, then only counted.
 *
 * <p><b>Bounds and back-pressure.</b> One I/O thread ({@code kvindex-zmq-io}) owns every socket and
 * hands messages to N shard threads ({@code kvindex-shard-<i>}; pod → shard by hash) through
 * bounded queues ({@link Builder#queueCapacity(int)} each). When a shard queue is full the message
 * is dropped, counted ({@code kvindex_dropped{reason=overflow}}) and the pod marked for resync:
 * replay if it has a replay endpoint, else clear. Replays run on the pod's shard thread and delay
 * the other pods of that shard while they last (bounded by {@link
 * Builder#replayTimeout(Duration)}). SUB sockets reconnect by themselves with exponential backoff
 * ({@link Builder#reconnectInterval(Duration)} up to {@link
 * Builder#reconnectIntervalMax(Duration)}). A connection whose ZMTP handshake stalls (seen rarely
 * with JeroMQ 0.6.0 on loopback: TCP established, greeting never read) is dropped after {@link
 * Builder#handshakeTimeout(Duration)} and retried; a replay request that gets no answer at all is
 * retried on a fresh DEALER (3 attempts).
 *
 * <p><b>Metrics</b> (Micrometer): {@code kvindex_events{type}}, {@code kvindex_batches}, {@code
 * kvindex_decode_errors}, {@code kvindex_unknown_tags}, {@code kvindex_gaps}, {@code
 * kvindex_replays{outcome=complete|incomplete}}, {@code kvindex_restarts}, {@code
 * kvindex_resyncs{reason=gap|overflow|restart}}, {@code kvindex_dropped{reason=malformed|
 * oversized|frames|overflow|pod_limit|sink_error}}, gauge {@code kvindex_queue_depth{shard}}.
 *
 * <p><b>Thread-safety.</b> Thread-safe. The sink and the listener are called from shard threads
 * (one pod always from the same thread, in order), except {@code onDropped(..., "overflow" |
 * "frames" | "pod_limit", ...)} which come from the I/O thread.
 */
public final class KvEventSubscriber implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(KvEventSubscriber.class);
  private static final int REPLAY_ATTEMPTS = 3;

  private final KvEventSink sink;
  private final KvEventListener listener;
  private final byte[] topicFilter;
  private final String bindEndpoint;
  private final int maxPayloadBytes;
  private final int receiveHwm;
  private final long reconnectIvlMs;
  private final long reconnectIvlMaxMs;
  private final int handshakeMs;
  private final int replayIdleMs;
  private final long replayTimeoutNanos;
  private final long replayCooldownNanos;
  private final long pollIntervalMs;
  private final int maxPods;
  private final KvEventCodec.Dialect dialect;
  private final LongSupplier nanoClock;
  private final ZContext context;
  private final boolean ownsContext;
  private final Metrics metrics;
  private final Shard[] shards;
  private final Thread ioThread;
  private final ConcurrentLinkedQueue<Runnable> commands = new ConcurrentLinkedQueue<>();
  private final Map<String, List<Stream>> podsById = new ConcurrentHashMap<>();
  private final Set<String> warned = ConcurrentHashMap.newKeySet();
  private final CompletableFuture<String> bound = new CompletableFuture<>();
  private final AtomicBoolean started = new AtomicBoolean();
  private final AtomicBoolean closed = new AtomicBoolean();
  private volatile boolean running = true;

  // I/O-thread state
  private final List<ZMQ.Socket> ioSockets = new ArrayList<>();
  private final Map<ZMQ.Socket, Stream> ioStreamBySocket = new HashMap<>();
  private final Map<String, Stream> ioStreamByTopic = new HashMap<>();
  private ZMQ.Socket ioBoundSocket;
  private boolean ioDirty = true;

  private KvEventSubscriber(Builder b) {
    this.sink = b.sink;
    this.listener = b.listener;
    this.topicFilter = b.topic.getBytes(StandardCharsets.UTF_8);
    this.bindEndpoint = b.bindEndpoint;
    this.maxPayloadBytes = b.maxPayloadBytes;
    this.receiveHwm = b.receiveHwm;
    this.reconnectIvlMs = b.reconnectInterval.toMillis();
    this.reconnectIvlMaxMs = b.reconnectIntervalMax.toMillis();
    this.handshakeMs = (int) Math.min(Integer.MAX_VALUE, b.handshakeTimeout.toMillis());
    this.replayIdleMs = (int) Math.min(Integer.MAX_VALUE, b.replayIdleTimeout.toMillis());
    this.replayTimeoutNanos = b.replayTimeout.toNanos();
    this.replayCooldownNanos = b.replayCooldown.toNanos();
    this.pollIntervalMs = Math.max(1, b.pollInterval.toMillis());
    this.maxPods = b.maxPods;
    this.dialect = b.dialect;
    this.nanoClock = b.nanoClock;
    this.ownsContext = b.context == null;
    this.context = ownsContext ? new ZContext(1) : b.context;
    this.metrics = new Metrics(b.meterRegistry);
    this.shards = new Shard[b.shards];
    for (int i = 0; i < shards.length; i++) {
      shards[i] = new Shard(i, b.queueCapacity);
    }
    this.ioThread = new Thread(this::ioLoop, "kvindex-zmq-io");
    ioThread.setDaemon(true);
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
    if (!running) {
      throw new IllegalStateException("subscriber is closed");
    }
    if (started.compareAndSet(false, true)) {
      for (Shard s : shards) {
        s.thread.start();
      }
      ioThread.start();
    }
    try {
      bound.join();
    } catch (RuntimeException e) {
      throw new IllegalStateException("cannot bind " + bindEndpoint + ": " + e.getMessage(), e);
    }
    return this;
  }

  /** The resolved bound endpoint in bind mode (after {@link #start()}), else empty. */
  public Optional<String> boundEndpoint() {
    return bound.isDone() && !bound.isCompletedExceptionally()
        ? Optional.ofNullable(bound.join())
        : Optional.empty();
  }

  /**
   * Subscribes to a pod (connect mode): one SUB socket per DP rank.
   *
   * @return completes when the sockets are connecting (ZMQ connects asynchronously)
   * @throws IllegalArgumentException if the pod id is already subscribed, or the endpoint cannot be
   *     offset for its DP ranks
   * @throws IllegalStateException if there are already {@code maxPods} pods
   */
  public CompletableFuture<Void> addPod(PodEndpoint pod) {
    Objects.requireNonNull(pod, "pod");
    if (!running) {
      throw new IllegalStateException("subscriber is closed");
    }
    if (podsById.size() >= maxPods) {
      throw new IllegalStateException("subscriber already has maxPods=" + maxPods + " pods");
    }
    List<Stream> streams = new ArrayList<>();
    for (int r = 0; r < pod.dataParallelSize(); r++) {
      String identity = PodEndpoint.identity(pod.podId(), r);
      streams.add(
          new Stream(
              pod.podId(),
              identity,
              Endpoints.offset(pod.endpoint(), r),
              pod.replayEndpoint() == null ? null : Endpoints.offset(pod.replayEndpoint(), r),
              shardFor(identity)));
    }
    if (podsById.putIfAbsent(pod.podId(), streams) != null) {
      throw new IllegalArgumentException("pod " + pod.podId() + " is already subscribed");
    }
    CompletableFuture<Void> done = new CompletableFuture<>();
    command(
        () -> {
          for (Stream s : streams) {
            if (s.removed) {
              continue;
            }
            ZMQ.Socket sock = newSub();
            sock.connect(s.endpoint);
            s.socket = sock;
            ioSockets.add(sock);
            ioStreamBySocket.put(sock, s);
          }
          ioDirty = true;
          done.complete(null);
        },
        done);
    return done;
  }

  /**
   * Unsubscribes a pod (its sockets are closed) and calls {@link KvEventSink#removePod} for each of
   * its identities after the events already queued. In bind mode this forgets the topic's state
   * (new messages on the topic start it again).
   *
   * @return completes when the sink has been told
   */
  public CompletableFuture<Void> removePod(String podId) {
    Objects.requireNonNull(podId, "podId");
    CompletableFuture<Void> done = new CompletableFuture<>();
    command(
        () -> {
          List<Stream> streams = new ArrayList<>();
          List<Stream> connected = podsById.remove(podId);
          if (connected != null) {
            streams.addAll(connected);
          }
          ioStreamByTopic.values().removeIf(s -> s.label.equals(podId) && streams.add(s));
          if (streams.isEmpty()) {
            done.complete(null);
            return;
          }
          AtomicInteger remaining = new AtomicInteger(streams.size());
          for (Stream s : streams) {
            s.removed = true;
            if (s.socket != null) {
              ioSockets.remove(s.socket);
              ioStreamBySocket.remove(s.socket);
              s.socket.close();
              s.socket = null;
              ioDirty = true;
            }
            s.shard.control(
                () -> {
                  for (String id : s.identities) {
                    sink.removePod(id);
                  }
                  warned.removeIf(k -> k.startsWith(s.label + '\0'));
                  if (remaining.decrementAndGet() == 0) {
                    done.complete(null);
                  }
                });
          }
        },
        done);
    return done;
  }

  /** Pod ids currently subscribed in connect mode. */
  public Set<String> pods() {
    return Set.copyOf(podsById.keySet());
  }

  /** Stops every thread and closes every socket (and the context, unless it was supplied). */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    running = false;
    if (started.get()) {
      LockSupport.unpark(ioThread);
      join(ioThread);
      for (Shard s : shards) {
        join(s.thread);
      }
    }
    for (Shard s : shards) {
      Runnable c;
      while ((c = s.control.poll()) != null) {
        safely(c);
      }
      metrics.registry.remove(s.gauge);
    }
    Runnable c;
    while ((c = commands.poll()) != null) {
      // pending add/remove commands: run them so their futures complete; sockets are not opened
      safely(c);
    }
    for (ZMQ.Socket sock : ioSockets) {
      sock.close();
    }
    ioSockets.clear();
    if (ownsContext) {
      context.close();
    }
    bound.completeExceptionally(new IllegalStateException("subscriber closed"));
  }

  private static void join(Thread t) {
    try {
      t.join(TimeUnit.SECONDS.toMillis(60));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void safely(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      LOG.warn("KV event subscriber task failed", e);
    }
  }

  private void command(Runnable r, CompletableFuture<?> done) {
    commands.add(
        () -> {
          if (!running) {
            done.completeExceptionally(new IllegalStateException("subscriber closed"));
            return;
          }
          try {
            r.run();
          } catch (RuntimeException e) {
            done.completeExceptionally(e);
          }
        });
    LockSupport.unpark(ioThread);
  }

  private Shard shardFor(String key) {
    // FNV-1a-32, as llm-d shards pods
    int h = 0x811c9dc5;
    for (int i = 0; i < key.length(); i++) {
      h ^= key.charAt(i);
      h *= 0x01000193;
    }
    return shards[Math.floorMod(h, shards.length)];
  }

  private ZMQ.Socket newSub() {
    ZMQ.Socket sock = context.getContext().socket(SocketType.SUB);
    sock.setLinger(0);
    sock.setRcvHWM(receiveHwm);
    sock.setReconnectIVL((int) reconnectIvlMs);
    sock.setReconnectIVLMax((int) reconnectIvlMaxMs);
    sock.setHandshakeIvl(handshakeMs);
    sock.subscribe(topicFilter);
    return sock;
  }

  // ------------------------------------------------------------------ I/O thread

  private void ioLoop() {
    ZMQ.Poller poller = null;
    try {
      if (bindEndpoint != null) {
        try {
          ioBoundSocket = newSub();
          ioBoundSocket.bind(bindEndpoint);
          ioSockets.add(ioBoundSocket);
          bound.complete(ioBoundSocket.getLastEndpoint());
        } catch (RuntimeException e) {
          bound.completeExceptionally(e);
          return;
        }
      } else {
        bound.complete(null);
      }
      List<ZMQ.Socket> polled = new ArrayList<>();
      while (running) {
        Runnable c;
        while ((c = commands.poll()) != null) {
          c.run();
        }
        if (ioDirty) {
          if (poller != null) {
            poller.close();
          }
          poller = context.createPoller(Math.max(1, ioSockets.size()));
          polled.clear();
          for (ZMQ.Socket s : ioSockets) {
            poller.register(s, ZMQ.Poller.POLLIN);
            polled.add(s);
          }
          ioDirty = false;
        }
        if (polled.isEmpty()) {
          LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(pollIntervalMs));
          continue;
        }
        int ready = poller.poll(pollIntervalMs);
        for (int i = 0; i < polled.size(); i++) {
          // on a timeout every socket is tried too: a missed wake-up costs at most pollInterval
          if (ready <= 0 || poller.pollin(i)) {
            ZMQ.Socket sock = polled.get(i);
            drain(sock, sock == ioBoundSocket ? null : ioStreamBySocket.get(sock));
          }
        }
      }
    } catch (RuntimeException e) {
      if (running) {
        LOG.error("KV event subscriber I/O thread failed; no more events will be received", e);
      }
    } finally {
      if (poller != null) {
        poller.close();
      }
      for (ZMQ.Socket s : ioSockets) {
        s.close();
      }
      ioSockets.clear();
    }
  }

  private int drain(ZMQ.Socket sock, Stream fixed) {
    int n = 0;
    for (; n < 1024; n++) {
      byte[] f0 = sock.recv(ZMQ.DONTWAIT);
      if (f0 == null) {
        return n;
      }
      byte[] f1 = null;
      byte[] f2 = null;
      int count = 1;
      while (sock.hasReceiveMore()) {
        byte[] f = sock.recv();
        count++;
        if (count == 2) {
          f1 = f;
        } else if (count == 3) {
          f2 = f;
        }
      }
      String topic = new String(f0, StandardCharsets.UTF_8);
      Stream s = fixed != null ? fixed : boundStream(topic);
      if (s == null || s.removed) {
        continue;
      }
      if (count != 3 || f1.length != 8) {
        metrics.dropped("frames");
        warnOnce(s, "frames", "expected 3 frames [topic, seq(8 bytes), payload], got " + count);
        safeListener(() -> listener.onDropped(s.label, -1, "frames", null));
        continue;
      }
      long seq = Endpoints.seqOf(f1);
      Message m = new Message(s, topic, seq, f2.length > maxPayloadBytes ? null : f2, f2.length);
      if (!s.shard.queue.offer(m)) {
        metrics.dropped("overflow");
        s.droppedMax.set(seq);
        s.resyncPending.set(true);
        if (s.resyncScheduled.compareAndSet(false, true)) {
          s.shard.control(
              () -> {
                s.resyncScheduled.set(false);
                resyncIfTailDropped(s);
              });
        }
        warnOnce(s, "overflow", "shard queue full; the pod will be resynchronised");
        safeListener(() -> listener.onDropped(s.label, seq, "overflow", null));
      }
    }
    return n;
  }

  private Stream boundStream(String topic) {
    Stream s = ioStreamByTopic.get(topic);
    if (s == null) {
      if (ioStreamByTopic.size() + podsById.size() >= maxPods) {
        metrics.dropped("pod_limit");
        if (warned.add("\0pod_limit")) {
          LOG.warn("KV events: more than maxPods={} publishers; new topics are ignored", maxPods);
        }
        return null;
      }
      String pod = PodEndpoint.podIdFromTopic(topic);
      s = new Stream(pod, null, null, null, shardFor(pod));
      ioStreamByTopic.put(topic, s);
    }
    return s;
  }

  // ------------------------------------------------------------------ shard threads

  private void handle(Message m) {
    Stream s = m.stream;
    if (s.removed) {
      return;
    }
    if (s.hasSeq) {
      long expected = s.lastSeq + 1;
      if (Long.compareUnsigned(m.seq, s.lastSeq) <= 0) {
        metrics.restarts.increment();
        warnOnce(
            s,
            "restart",
            "sequence went from "
                + Long.toUnsignedString(s.lastSeq)
                + " to "
                + Long.toUnsignedString(m.seq)
                + "; publisher restarted, entries cleared");
        long last = s.lastSeq;
        safeListener(() -> listener.onRestart(s.label, last, m.seq));
        clearAll(s, "restart");
      } else if (m.seq != expected) {
        metrics.gaps.increment();
        boolean overflow =
            s.resyncPending.get() && Long.compareUnsigned(s.droppedMax.get(), m.seq) < 0;
        if (!overflow) {
          warnOnce(
              s,
              "gap",
              "missed sequence numbers "
                  + Long.toUnsignedString(expected)
                  + ".."
                  + Long.toUnsignedString(m.seq - 1));
        }
        safeListener(() -> listener.onGap(s.label, expected, m.seq));
        recover(s, expected, m.seq, overflow ? "overflow" : "gap");
      }
    }
    if (!s.hasSeq && s.replayEndpoint != null && m.seq != 0) {
      // First contact with a publisher that already sent batches (ZMQ drops what a SUB socket
      // publishes before it connects): catch up on whatever its replay buffer still holds.
      s.lastTopic = m.topic;
      replay(s, 0, m.seq, true);
    }
    s.lastSeq = m.seq;
    s.hasSeq = true;
    s.lastTopic = m.topic;
    process(s, m.topic, m.seq, m.payload, m.size, false);
    if (s.resyncPending.get()) {
      resyncIfTailDropped(s);
    }
  }

  /**
   * After a queue overflow: if the dropped messages are not followed by a queued message of the
   * same stream (whose gap would trigger recovery), recover now rather than wait for the next one.
   */
  private void resyncIfTailDropped(Stream s) {
    if (s.removed || !s.resyncPending.get()) {
      return;
    }
    long max = s.droppedMax.get();
    if (s.hasSeq && Long.compareUnsigned(s.lastSeq, max) >= 0) {
      s.resyncPending.set(false); // a later message already covered the drop through its gap
      return;
    }
    for (Message q : s.shard.queue) {
      if (q.stream == s) {
        return; // that message's gap recovers the drop
      }
    }
    s.resyncPending.set(false);
    if (s.hasSeq) {
      recover(s, s.lastSeq + 1, max + 1, "overflow");
    } else {
      clearAll(s, "overflow");
    }
    s.lastSeq = max;
    s.hasSeq = true;
  }

  private void recover(Stream s, long from, long to, String reason) {
    if (s.replayEndpoint != null
        && (!s.replayCooling || nanoClock.getAsLong() - s.replayBlockedUntil >= 0)) {
      if (replay(s, from, to, false)) {
        return;
      }
      s.replayCooling = true;
      s.replayBlockedUntil = nanoClock.getAsLong() + replayCooldownNanos;
    }
    clearAll(s, reason);
  }

  /**
   * Fetches and applies batches [from, to) from the pod's replay endpoint. With {@code catchUp},
   * the replay may start later than {@code from} (the buffer's oldest batch): used on first
   * contact, when nothing was known anyway.
   */
  private boolean replay(Stream s, long from, long to, boolean catchUp) {
    long expected = from;
    int applied = 0;
    int attempt = 0;
    boolean answered = false;
    ZMQ.Socket d = null;
    try {
      long deadline = nanoClock.getAsLong() + replayTimeoutNanos;
      while (running && nanoClock.getAsLong() - deadline < 0) {
        if (d == null) {
          // a fresh DEALER per attempt; a request that got no answer at all is retried
          attempt++;
          d = context.getContext().socket(SocketType.DEALER);
          d.setLinger(0);
          d.setReceiveTimeOut(replayIdleMs);
          d.setHandshakeIvl(handshakeMs);
          d.connect(s.replayEndpoint);
          d.sendMore(new byte[0]);
          d.send(Endpoints.seqBytes(expected));
        }
        List<byte[]> frames = receiveAll(d);
        if (frames == null) {
          if (answered || attempt >= REPLAY_ATTEMPTS) {
            break; // idle timeout
          }
          d.close();
          d = null;
          continue;
        }
        answered = true;
        if (!frames.isEmpty() && frames.get(0).length == 0) {
          frames.remove(0);
        }
        if (frames.isEmpty() || frames.get(frames.size() - 1).length == 0) {
          break; // end marker
        }
        String topic;
        byte[] seqFrame;
        byte[] payload;
        if (frames.size() == 3) {
          topic = new String(frames.get(0), StandardCharsets.UTF_8);
          seqFrame = frames.get(1);
          payload = frames.get(2);
        } else if (frames.size() == 2) {
          topic = s.lastTopic; // legacy replies carry no topic
          seqFrame = frames.get(0);
          payload = frames.get(1);
        } else {
          continue;
        }
        if (seqFrame.length != 8) {
          continue;
        }
        long seq = Endpoints.seqOf(seqFrame);
        if (Long.compareUnsigned(seq, expected) < 0 || Long.compareUnsigned(seq, to) >= 0) {
          continue; // already applied, or will arrive live
        }
        if (seq != expected && catchUp && applied == 0) {
          expected = seq; // first contact: start from the oldest batch the buffer still holds
        }
        if (seq != expected) {
          break; // not contiguous: the buffer no longer holds what we missed
        }
        process(
            s, topic, seq, payload.length > maxPayloadBytes ? null : payload, payload.length, true);
        expected++;
        applied++;
      }
    } catch (RuntimeException e) {
      warnOnce(s, "replay_error", String.valueOf(e));
    } finally {
      if (d != null) {
        d.close();
      }
    }
    boolean complete = expected == to;
    if (catchUp) {
      metrics.catchUps.increment();
      return complete;
    }
    (complete ? metrics.replaysComplete : metrics.replaysIncomplete).increment();
    if (!complete) {
      warnOnce(
          s,
          "replay_incomplete",
          "replay from "
              + s.replayEndpoint
              + " ended at "
              + Long.toUnsignedString(expected)
              + ", needed up to "
              + Long.toUnsignedString(to - 1));
    }
    long start = from;
    int n = applied;
    safeListener(() -> listener.onReplay(s.label, start, to, n, complete));
    return complete;
  }

  private static List<byte[]> receiveAll(ZMQ.Socket d) {
    byte[] first = d.recv();
    if (first == null) {
      return null;
    }
    List<byte[]> frames = new ArrayList<>(5);
    frames.add(first);
    while (d.hasReceiveMore()) {
      frames.add(d.recv());
    }
    return frames;
  }

  private void process(
      Stream s, String topic, long seq, byte[] payload, int size, boolean replayed) {
    if (payload == null) {
      metrics.dropped("oversized");
      warnOnce(
          s,
          "oversized",
          "payload of " + size + " bytes exceeds maxPayloadBytes=" + maxPayloadBytes);
      safeListener(() -> listener.onDropped(s.label, seq, "oversized", null));
      return;
    }
    KvEventBatch batch;
    try {
      batch = KvEventCodec.decode(payload, 0, payload.length, dialect);
    } catch (KvEventDecodeException e) {
      metrics.decodeErrors.increment();
      metrics.dropped("malformed");
      warnOnce(s, "malformed", e.getMessage());
      safeListener(() -> listener.onDropped(s.label, seq, "malformed", e));
      return;
    }
    String identity =
        s.fixedIdentity != null ? s.fixedIdentity : PodEndpoint.identity(s.label, batch.dpRank());
    if (s.fixedIdentity == null && !s.identities.contains(identity)) {
      if (s.identities.size() >= 1024) {
        metrics.dropped("pod_limit");
        warnOnce(s, "pod_limit", "more than 1024 data-parallel ranks on one topic");
        return;
      }
      s.identities.add(identity);
    }
    if (batch.unknownEvents() > 0) {
      metrics.unknownTags.increment(batch.unknownEvents());
      warnOnce(s, "unknown_tag", batch.unknownEvents() + " event(s) with an unknown tag skipped");
    }
    for (KvEvent e : batch.events()) {
      metrics.events(e);
    }
    try {
      sink.accept(identity, batch);
    } catch (RuntimeException e) {
      metrics.dropped("sink_error");
      warnOnce(s, "sink_error", String.valueOf(e));
    }
    metrics.batches.increment();
    safeListener(() -> listener.onBatch(identity, topic, seq, batch, replayed));
  }

  private void clearAll(Stream s, String reason) {
    metrics.resyncs(reason);
    for (String id : s.identities) {
      try {
        sink.allBlocksCleared(id);
      } catch (RuntimeException e) {
        metrics.dropped("sink_error");
        warnOnce(s, "sink_error", String.valueOf(e));
      }
      safeListener(() -> listener.onResync(id, reason));
    }
  }

  private void warnOnce(Stream s, String kind, String detail) {
    if (warned.add(s.label + '\0' + kind)) {
      LOG.warn(
          "KV events from pod {}: {} ({}); further occurrences are only counted in kvindex_* metrics",
          s.label,
          kind,
          detail);
    }
  }

  private static void safeListener(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      LOG.warn("KvEventListener threw; ignored", e);
    }
  }

  // ------------------------------------------------------------------ internals

  /** One publisher's stream. Sequence state is confined to its shard thread. */
  private static final class Stream {
    final String label;
    final String fixedIdentity;
    final String endpoint;
    final String replayEndpoint;
    final Shard shard;
    final Set<String> identities = ConcurrentHashMap.newKeySet();
    final AtomicBoolean resyncPending = new AtomicBoolean();
    final AtomicBoolean resyncScheduled = new AtomicBoolean();
    final AtomicLong droppedMax = new AtomicLong();
    volatile boolean removed;
    ZMQ.Socket socket; // I/O thread only
    String lastTopic = ""; // shard thread only
    long lastSeq; // shard thread only
    boolean hasSeq;
    boolean replayCooling;
    long replayBlockedUntil;

    Stream(
        String label, String fixedIdentity, String endpoint, String replayEndpoint, Shard shard) {
      this.label = label;
      this.fixedIdentity = fixedIdentity;
      this.endpoint = endpoint;
      this.replayEndpoint = replayEndpoint;
      this.shard = shard;
      if (fixedIdentity != null) {
        identities.add(fixedIdentity);
      }
    }
  }

  private record Message(Stream stream, String topic, long seq, byte[] payload, int size) {}

  private final class Shard {
    final ArrayBlockingQueue<Message> queue;
    final ConcurrentLinkedQueue<Runnable> control = new ConcurrentLinkedQueue<>();
    final Thread thread;
    final Gauge gauge;

    Shard(int index, int capacity) {
      this.queue = new ArrayBlockingQueue<>(capacity);
      this.thread = new Thread(this::loop, "kvindex-shard-" + index);
      thread.setDaemon(true);
      this.gauge =
          Gauge.builder("kvindex_queue_depth", queue, ArrayBlockingQueue::size)
              .tag("shard", String.valueOf(index))
              .description("KV event messages waiting in a shard queue")
              .register(metrics.registry);
    }

    void control(Runnable r) {
      control.add(r);
    }

    void loop() {
      while (running) {
        Runnable c;
        while ((c = control.poll()) != null) {
          safely(c);
        }
        Message m;
        try {
          m = queue.poll(pollIntervalMs, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
        if (m != null) {
          try {
            handle(m);
          } catch (RuntimeException e) {
            LOG.warn("KV event shard failed on a message; continuing", e);
          }
        }
      }
    }
  }

  private static final class Metrics {
    final MeterRegistry registry;
    final Counter stored;
    final Counter removed;
    final Counter cleared;
    final Counter batches;
    final Counter decodeErrors;
    final Counter unknownTags;
    final Counter gaps;
    final Counter replaysComplete;
    final Counter replaysIncomplete;
    final Counter restarts;
    final Counter catchUps;
    final Map<String, Counter> resyncs = new ConcurrentHashMap<>();
    final Map<String, Counter> dropped = new ConcurrentHashMap<>();

    Metrics(MeterRegistry r) {
      this.registry = r;
      stored = Counter.builder("kvindex_events").tag("type", "BlockStored").register(r);
      removed = Counter.builder("kvindex_events").tag("type", "BlockRemoved").register(r);
      cleared = Counter.builder("kvindex_events").tag("type", "AllBlocksCleared").register(r);
      batches = r.counter("kvindex_batches");
      decodeErrors = r.counter("kvindex_decode_errors");
      unknownTags = r.counter("kvindex_unknown_tags");
      gaps = r.counter("kvindex_gaps");
      replaysComplete = r.counter("kvindex_replays", "outcome", "complete");
      replaysIncomplete = r.counter("kvindex_replays", "outcome", "incomplete");
      restarts = r.counter("kvindex_restarts");
      catchUps = r.counter("kvindex_catchups");
    }

    void events(KvEvent e) {
      (e instanceof KvEvent.BlockStored
              ? stored
              : e instanceof KvEvent.BlockRemoved ? removed : cleared)
          .increment();
    }

    void resyncs(String reason) {
      resyncs
          .computeIfAbsent(reason, k -> registry.counter("kvindex_resyncs", "reason", k))
          .increment();
    }

    void dropped(String reason) {
      dropped
          .computeIfAbsent(reason, k -> registry.counter("kvindex_dropped", "reason", k))
          .increment();
    }
  }

  /**
   * Builds a {@link KvEventSubscriber}. Only {@link #sink(KvEventSink)} is required.
   *
   * <p>Not thread-safe.
   */
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
    private Duration pollInterval = Duration.ofMillis(50);
    private int maxPods = 10_000;
    private KvEventCodec.Dialect dialect = KvEventCodec.Dialect.VLLM;
    private MeterRegistry meterRegistry;
    private LongSupplier nanoClock = System::nanoTime;
    private ZContext context;

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

    /** Larger payloads are counted and skipped (default 32 MiB). */
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

    /** How long a replay waits for each reply (default 2 s; vLLM answers within ~100 ms). */
    public Builder replayIdleTimeout(Duration d) {
      this.replayIdleTimeout = d;
      return this;
    }

    /** Overall bound of one replay (default 30 s). */
    public Builder replayTimeout(Duration d) {
      this.replayTimeout = d;
      return this;
    }

    /** After an incomplete replay, further gaps of that pod clear instead (default 30 s). */
    public Builder replayCooldown(Duration d) {
      this.replayCooldown = d;
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

    /** Registry for {@code kvindex_*} metrics (default: a private {@code SimpleMeterRegistry}). */
    public Builder meterRegistry(MeterRegistry meterRegistry) {
      this.meterRegistry = meterRegistry;
      return this;
    }

    /** Clock for replay deadlines and cooldowns (default {@code System::nanoTime}). */
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
      if (meterRegistry == null) {
        meterRegistry = new SimpleMeterRegistry();
      }
      return new KvEventSubscriber(this);
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
