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
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
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
import org.zeromq.ZEvent;
import org.zeromq.ZMQ;
import org.zeromq.ZMonitor;
import zmq.ZError;
import zmq.util.Errno;

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
 * misses whatever was published before it connected), counted in {@code kvindex_catchups}. The same
 * catch-up also runs as soon as a connect-mode SUB completes its handshake with a publisher nothing
 * has been heard from yet, so a pod that published before the subscription reached it and then
 * stays quiet is indexed without waiting for its next batch; live copies of batches that catch-up
 * fetched are skipped as duplicates.
 *
 * <p><b>Replays run off the shard threads</b>, on {@link Builder#replayThreads(int)} threads
 * ({@code kvindex-replay-<i>}), one replay per publisher at a time; further replays wait in a queue
 * of 1024 (beyond it: resync by clearing, {@code kvindex_replays{outcome=rejected}}). While a
 * publisher's replay runs, the shard holds back that publisher's live messages (the one that
 * revealed the gap first; at most {@link Builder#replayBufferCapacity(int)}; gauge {@code
 * kvindex_replay_buffered}) and goes on with its other pods; when the replay ends they are applied
 * after the replayed batches, in order. Messages beyond the capacity are dropped ({@code
 * kvindex_dropped{reason=replay_buffer}}) and recovered as after a queue overflow (below). A replay
 * lasts at most {@link Builder#replayTimeout(Duration)}; removing the pod ends it early.
 *
 * <p><b>Bad input never stops the stream.</b> Payloads that do not decode and messages without
 * exactly 3 frames are counted and skipped (their sequence number still counts, so no false gap);
 * later batches apply. Each problem kind is logged once per pod at WARN (never with payload
 * contents), then only counted.
 *
 * <p><b>Oversized frames are never allocated.</b> {@link Builder#maxPayloadBytes(int)} is set as
 * JeroMQ's max message size on every SUB and replay DEALER socket, so JeroMQ refuses a larger frame
 * from its size header. It then drops the whole connection (and the rest of what that connection
 * carried): the subscriber learns why from the disconnect event, counts {@code
 * kvindex_dropped{reason=oversized}} and calls {@code onDropped(pod, -1, "oversized", null)} (the
 * sequence number is unknown: the message was never read; in bind mode the pod is unknown too and
 * the peer's address is given instead). In connect mode JeroMQ 0.6.0 does not reconnect after such
 * a protocol error, so the subscriber reopens the socket itself ({@code kvindex_socket_reopens};
 * back-off from {@link Builder#reconnectInterval(Duration)} if it keeps happening without a message
 * in between); in bind mode the publisher reconnects. The batches lost meanwhile are a gap,
 * repaired like any other; in its replay the oversized batch is refused again, skipped (not counted
 * twice) and the rest fetched on a fresh DEALER.
 *
 * <p><b>Bounds and back-pressure.</b> One I/O thread ({@code kvindex-zmq-io}) owns every socket and
 * hands messages to N shard threads ({@code kvindex-shard-<i>}; pod → shard by hash) through
 * bounded queues ({@link Builder#queueCapacity(int)} each). When a shard queue is full the message
 * is dropped, counted ({@code kvindex_dropped{reason=overflow}}) and the pod marked for resync:
 * replay if it has a replay endpoint, else clear. SUB sockets reconnect by themselves with
 * exponential backoff ({@link Builder#reconnectInterval(Duration)} up to {@link
 * Builder#reconnectIntervalMax(Duration)}). A connection whose ZMTP handshake stalls (seen rarely
 * with JeroMQ 0.6.0 on loopback: TCP established, greeting never read) is dropped after {@link
 * Builder#handshakeTimeout(Duration)} and retried; a replay request that gets no answer at all is
 * retried on a fresh DEALER (3 attempts).
 *
 * <p><b>Metrics</b> (Micrometer): {@code kvindex_events{type}}, {@code kvindex_batches}, {@code
 * kvindex_decode_errors}, {@code kvindex_unknown_tags}, {@code kvindex_gaps}, {@code
 * kvindex_replays{outcome=complete|incomplete|rejected}}, {@code kvindex_catchups}, {@code
 * kvindex_restarts}, {@code kvindex_resyncs{reason=gap|overflow|restart}}, {@code
 * kvindex_dropped{reason=malformed|oversized|frames|overflow|replay_buffer|pod_limit|sink_error}},
 * {@code kvindex_socket_reopens}, gauges {@code kvindex_queue_depth{shard}}, {@code
 * kvindex_replay_queue_depth}, {@code kvindex_replay_buffered}.
 *
 * <p><b>Thread-safety.</b> Thread-safe. The sink and the listener are called from the pod's shard
 * thread, and from a replay thread while that pod's replay runs (it applies the replayed batches
 * and reports the replay); one pod's calls never overlap and come in sequence order, handed over
 * with happens-before edges. {@code onDropped(..., "overflow" | "frames" | "pod_limit" |
 * "oversized", ...)} for live messages come from the I/O thread.
 */
public final class KvEventSubscriber implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(KvEventSubscriber.class);
  private static final int REPLAY_ATTEMPTS = 3;

  /** The {@code to} of an open-ended catch-up: everything the replay buffer holds. */
  private static final long OPEN_END = -1L; // the largest unsigned sequence number

  private static final int REPLAY_QUEUE_CAPACITY = 1024;
  // JeroMQ keeps errno per thread; its event hooks run on the JeroMQ I/O thread that set it
  private static final Errno JEROMQ_ERRNO = new Errno();

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
  private final int replayBufferCapacity;
  private final long pollIntervalMs;
  private final int maxPods;
  private final KvEventCodec.Dialect dialect;
  private final LongSupplier nanoClock;
  private final ZContext context;
  private final boolean ownsContext;
  private final Metrics metrics;
  private final Shard[] shards;
  private final Thread ioThread;
  private final ThreadPoolExecutor replayExecutor;
  private final AtomicInteger replayBuffered = new AtomicInteger();
  private final List<Gauge> gauges = new ArrayList<>();
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
  private final List<Stream> ioReopens = new ArrayList<>();
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
    this.replayBufferCapacity = b.replayBufferCapacity;
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
    AtomicInteger replayThreadIndex = new AtomicInteger();
    this.replayExecutor =
        new ThreadPoolExecutor(
            b.replayThreads,
            b.replayThreads,
            0,
            TimeUnit.MILLISECONDS,
            new ArrayBlockingQueue<>(REPLAY_QUEUE_CAPACITY),
            r -> {
              Thread t = new Thread(r, "kvindex-replay-" + replayThreadIndex.getAndIncrement());
              t.setDaemon(true);
              return t;
            },
            new ThreadPoolExecutor.AbortPolicy());
    gauges.add(
        Gauge.builder("kvindex_replay_queue_depth", replayExecutor, e -> e.getQueue().size())
            .description("replays waiting for a replay thread")
            .register(metrics.registry));
    gauges.add(
        Gauge.builder("kvindex_replay_buffered", replayBuffered, AtomicInteger::get)
            .description("live KV event messages held back while their pod's replay runs")
            .register(metrics.registry));
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
            ZMQ.Socket sock = newSub(s);
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
            Runnable removal =
                () -> {
                  for (String id : s.identities) {
                    sink.removePod(id);
                  }
                  warned.removeIf(k -> k.startsWith(s.label + '\0'));
                  if (remaining.decrementAndGet() == 0) {
                    done.complete(null);
                  }
                };
            s.shard.control(
                () -> {
                  if (s.replaying) {
                    s.afterReplay = removal; // the replay thread may still be applying batches
                  } else {
                    removal.run();
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
    // replays see running == false within one receive slice; their DEALERs must be closed before
    // the context is
    replayExecutor.shutdown();
    try {
      if (!replayExecutor.awaitTermination(60, TimeUnit.SECONDS)) {
        LOG.warn("KV event replay threads did not stop within 60 s");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    for (Gauge g : gauges) {
      metrics.registry.remove(g);
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

  /** A SUB socket; {@code s} is its stream in connect mode, {@code null} for the bound socket. */
  private ZMQ.Socket newSub(Stream s) {
    ZMQ.Socket sock = context.getContext().socket(SocketType.SUB);
    sock.setLinger(0);
    sock.setRcvHWM(receiveHwm);
    sock.setReconnectIVL((int) reconnectIvlMs);
    sock.setReconnectIVLMax((int) reconnectIvlMaxMs);
    sock.setHandshakeIvl(handshakeMs);
    // JeroMQ refuses a larger frame from its size header, before allocating it, and drops the
    // connection (see onDisconnected)
    sock.setMaxMsgSize(maxPayloadBytes);
    sock.setEventHook(
        ev -> onSocketEvent(s, sock, ev), ZMQ.EVENT_DISCONNECTED | ZMQ.EVENT_HANDSHAKE_PROTOCOL);
    sock.subscribe(topicFilter);
    return sock;
  }

  /** A replay DEALER; {@code refused} is set when JeroMQ drops it for an oversized frame. */
  ZMQ.Socket newReplayDealer(AtomicBoolean refused) {
    ZMQ.Socket d = context.getContext().socket(SocketType.DEALER);
    d.setLinger(0);
    d.setReceiveTimeOut((int) Math.min(replayIdleMs, pollIntervalMs));
    d.setHandshakeIvl(handshakeMs);
    d.setMaxMsgSize(maxPayloadBytes);
    d.setEventHook(
        ev -> {
          if (JEROMQ_ERRNO.get() == ZError.EMSGSIZE
              && ev.getEvent() == ZMonitor.Event.DISCONNECTED) {
            refused.set(true);
          }
        },
        ZMQ.EVENT_DISCONNECTED);
    return d;
  }

  /** Test hook: the max message size of every SUB socket, read on the I/O thread. */
  CompletableFuture<List<Long>> subscriberMaxMsgSizes() {
    CompletableFuture<List<Long>> done = new CompletableFuture<>();
    command(
        () -> {
          List<Long> sizes = new ArrayList<>();
          for (ZMQ.Socket sock : ioSockets) {
            sizes.add(sock.getMaxMsgSize());
          }
          done.complete(sizes);
        },
        done);
    return done;
  }

  /**
   * Runs on a JeroMQ I/O thread, synchronously from the engine that dropped the connection, so
   * JeroMQ's per-thread errno still tells why: {@code EMSGSIZE} for a frame over the size limit,
   * {@code ENOTCONN} for a peer that closed. JeroMQ 0.6.0 gives no other reason with the event.
   */
  private void onSocketEvent(Stream s, ZMQ.Socket sock, ZEvent ev) {
    int errno = JEROMQ_ERRNO.get();
    if (ev.getEvent() == ZMonitor.Event.HANDSHAKE_PROTOCOL) {
      if (s != null) {
        s.shard.control(() -> onConnected(s));
      }
      return;
    }
    if (ev.getEvent() != ZMonitor.Event.DISCONNECTED) {
      return;
    }
    boolean oversized = errno == ZError.EMSGSIZE;
    boolean peerClosed = errno == ZError.ENOTCONN;
    String peer = peerOf(ev);
    commands.add(() -> onDisconnected(s, sock, oversized, peerClosed, peer));
    LockSupport.unpark(ioThread);
  }

  private static String peerOf(ZEvent ev) {
    Object v = ev.getValue();
    if (v instanceof java.nio.channels.SocketChannel ch) {
      try {
        return String.valueOf(ch.getRemoteAddress());
      } catch (java.io.IOException | RuntimeException e) {
        // closed already: fall back to the endpoint
      }
    }
    return ev.getAddress();
  }

  // ------------------------------------------------------------------ I/O thread

  private void ioLoop() {
    ZMQ.Poller poller = null;
    try {
      if (bindEndpoint != null) {
        try {
          ioBoundSocket = newSub(null);
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
        if (!ioReopens.isEmpty()) {
          reopenDue();
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

  /**
   * A connection of a SUB socket was dropped (I/O thread). After a peer close JeroMQ reconnects by
   * itself; after a protocol error (an oversized frame, a ZMTP violation) it ends a connect-mode
   * session for good, so the socket is reopened (with back-off if that keeps happening). In bind
   * mode the publisher's own socket reconnects.
   */
  private void onDisconnected(
      Stream s, ZMQ.Socket sock, boolean oversized, boolean peerClosed, String peer) {
    if (oversized) {
      oversizedFrame(s, peer);
    }
    if (s == null || s.removed || s.socket != sock || peerClosed || s.ioReopenPending) {
      return;
    }
    s.ioReopenPending = true;
    s.ioReopenAt = nanoClock.getAsLong() + TimeUnit.MILLISECONDS.toNanos(s.ioReopenBackoffMs);
    ioReopens.add(s);
  }

  private void oversizedFrame(Stream s, String peer) {
    metrics.dropped("oversized");
    String pod = s != null ? s.label : peer;
    if (s != null) {
      s.oversizedUnseen.incrementAndGet();
    }
    warnOnce(
        s != null ? s.label : "bound to " + bindEndpoint,
        "oversized",
        "a frame over maxPayloadBytes="
            + maxPayloadBytes
            + " from "
            + peer
            + " was refused unread; the connection was dropped and is re-established, and the"
            + " sequence gap is repaired like any other");
    safeListener(() -> listener.onDropped(pod, -1, "oversized", null));
  }

  private void reopenDue() {
    long now = nanoClock.getAsLong();
    for (Iterator<Stream> it = ioReopens.iterator(); it.hasNext(); ) {
      Stream s = it.next();
      if (s.removed || s.socket == null) {
        s.ioReopenPending = false;
        it.remove();
      } else if (now - s.ioReopenAt >= 0) {
        s.ioReopenPending = false;
        it.remove();
        ZMQ.Socket old = s.socket;
        drain(old, s); // what arrived complete before the drop
        ioSockets.remove(old);
        ioStreamBySocket.remove(old);
        old.close();
        ZMQ.Socket sock = newSub(s);
        sock.connect(s.endpoint);
        s.socket = sock;
        ioSockets.add(sock);
        ioStreamBySocket.put(sock, s);
        ioDirty = true;
        s.ioReopenBackoffMs =
            s.ioReopenBackoffMs == 0
                ? reconnectIvlMs
                : Math.min(reconnectIvlMaxMs, 2 * s.ioReopenBackoffMs);
        metrics.reopens.increment();
      }
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
      s.ioReopenBackoffMs = 0;
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
    if (s.replaying) {
      holdBack(s, m);
      return;
    }
    live(s, m);
  }

  /** Applies a live message in sequence order, or starts a replay that it then waits behind. */
  private void live(Stream s, Message m) {
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
        s.lastTopic = m.topic;
        if (recover(s, expected, m.seq, overflow ? "overflow" : "gap", m)) {
          return; // m waits behind the replay
        }
      }
    }
    if (!s.hasSeq && s.replayEndpoint != null && m.seq != 0) {
      // First contact with a publisher that already sent batches (ZMQ drops what a SUB socket
      // publishes before it connects): catch up on whatever its replay buffer still holds.
      s.lastTopic = m.topic;
      if (startReplay(s, 0, m.seq, true, "catch-up", m)) {
        return;
      }
    }
    s.lastSeq = m.seq;
    s.hasSeq = true;
    s.lastTopic = m.topic;
    process(s, m.topic, m.seq, m.payload, m.size, false);
    if (s.resyncPending.get()) {
      resyncIfTailDropped(s);
    }
  }

  /** A live message of a pod whose replay runs: kept, in order, up to replayBufferCapacity. */
  private void holdBack(Stream s, Message m) {
    if (s.replayBuffer.size() >= replayBufferCapacity) {
      metrics.dropped("replay_buffer");
      if (!s.resyncPending.get() || Long.compareUnsigned(s.droppedMax.get(), m.seq) < 0) {
        s.droppedMax.set(m.seq);
      }
      s.resyncPending.set(true); // recovered like a queue overflow once the replay ends
      warnOnce(
          s,
          "replay_buffer",
          "more than replayBufferCapacity="
              + replayBufferCapacity
              + " batches arrived during a replay; the pod will be resynchronised");
      safeListener(() -> listener.onDropped(s.label, m.seq, "replay_buffer", null));
      return;
    }
    s.replayBuffer.addLast(m);
    replayBuffered.incrementAndGet();
  }

  /**
   * After a queue overflow: if the dropped messages are not followed by a queued message of the
   * same stream (whose gap would trigger recovery), recover now rather than wait for the next one.
   */
  private void resyncIfTailDropped(Stream s) {
    if (s.removed || s.replaying || !s.resyncPending.get()) {
      return;
    }
    long max = s.droppedMax.get();
    if (s.hasSeq && Long.compareUnsigned(s.lastSeq, max) >= 0) {
      s.resyncPending.set(false); // a later message already covered the drop through its gap
      return;
    }
    if (!s.replayBuffer.isEmpty()) {
      return; // a held-back message's gap recovers the drop
    }
    for (Message q : s.shard.queue) {
      if (q.stream == s) {
        return; // that message's gap recovers the drop
      }
    }
    s.resyncPending.set(false);
    if (s.hasSeq) {
      recover(s, s.lastSeq + 1, max + 1, "overflow", null);
    } else {
      clearAll(s, "overflow");
    }
    s.lastSeq = max;
    s.hasSeq = true;
  }

  /**
   * Repairs a gap [from, to): starts a replay (then returns true; {@code trigger}, if any, waits
   * behind it) or clears the pod.
   */
  private boolean recover(Stream s, long from, long to, String reason, Message trigger) {
    if (s.replayEndpoint != null
        && (!s.replayCooling || nanoClock.getAsLong() - s.replayBlockedUntil >= 0)
        && startReplay(s, from, to, false, reason, trigger)) {
      return true;
    }
    clearAll(s, reason);
    return false;
  }

  /**
   * Shard thread: the SUB socket finished its handshake with the pod's publisher. A SUB misses what
   * is published before its subscription reaches the publisher, and a pod that publishes once and
   * then idles would stay unknown until its next batch; so when nothing has been heard from the pod
   * yet, everything its replay buffer holds is fetched now. The replay's DEALER connects after this
   * handshake, so its request reaches the publisher after the subscription did: a batch is either
   * in the replay or arrives live (held back, then skipped as a duplicate).
   */
  private void onConnected(Stream s) {
    if (s.removed || !running || s.hasSeq || s.replaying || s.replayEndpoint == null) {
      return;
    }
    startReplay(s, 0, OPEN_END, true, "connect", null);
  }

  /**
   * Hands a replay of [from, to) to the replay executor; until it ends, the pod's live messages are
   * held back ({@link #holdBack}) and the shard thread goes on with other pods.
   *
   * @return false if the executor's queue is full (counted; nothing started)
   */
  private boolean startReplay(
      Stream s, long from, long to, boolean catchUp, String reason, Message trigger) {
    try {
      replayExecutor.execute(() -> runReplay(s, from, to, catchUp, reason));
    } catch (RejectedExecutionException e) {
      metrics.replaysRejected.increment();
      warnOnce(
          s,
          "replay_rejected",
          "more than " + REPLAY_QUEUE_CAPACITY + " replays waiting; resynchronised instead");
      return false;
    }
    s.replaying = true;
    if (trigger != null) {
      s.replayBuffer.addFirst(trigger);
      replayBuffered.incrementAndGet();
    }
    return true;
  }

  /** Replay thread: fetches and applies the batches, then hands the pod back to its shard. */
  private void runReplay(Stream s, long from, long to, boolean catchUp, String reason) {
    boolean complete = false;
    try {
      complete = replay(s, from, to, catchUp);
    } catch (RuntimeException e) {
      LOG.warn("KV event replay for pod {} failed", s.label, e);
    } finally {
      boolean c = complete;
      s.shard.control(() -> finishReplay(s, to, catchUp, reason, c));
    }
  }

  /** Shard thread: the replay of [.., to) ended; apply the held-back messages in order. */
  private void finishReplay(Stream s, long to, boolean catchUp, String reason, boolean complete) {
    s.replaying = false;
    s.oversizedUnseen.set(0);
    if (s.removed || !running) {
      replayBuffered.addAndGet(-s.replayBuffer.size());
      s.replayBuffer.clear();
      Runnable r = s.afterReplay;
      s.afterReplay = null;
      if (r != null) {
        r.run();
      }
      return;
    }
    if (!catchUp && !complete) {
      s.replayCooling = true;
      s.replayBlockedUntil = nanoClock.getAsLong() + replayCooldownNanos;
      clearAll(s, reason);
    }
    if (to != OPEN_END) {
      s.lastSeq = to - 1;
      s.hasSeq = true;
    } else if (s.replayApplied > 0) {
      s.lastSeq = s.replayNext - 1;
      s.hasSeq = true;
    }
    // An open-ended catch-up may also have fetched batches that arrived live meanwhile: those
    // copies are duplicates, not a restart. (A publisher restarting during the catch-up is seen
    // at its next batch instead.)
    boolean dedupe = to == OPEN_END && s.replayApplied > 0;
    long covered = s.lastSeq;
    Message m;
    while (!s.replaying && (m = s.replayBuffer.pollFirst()) != null) {
      replayBuffered.decrementAndGet();
      if (dedupe && Long.compareUnsigned(m.seq, covered) <= 0) {
        continue;
      }
      live(s, m); // may start another replay: the rest stays held back
    }
    if (!s.replaying && s.resyncPending.get()) {
      resyncIfTailDropped(s);
    }
  }

  /**
   * Replay thread: fetches and applies batches [from, to) from the pod's replay endpoint. With
   * {@code catchUp}, the replay may start later than {@code from} (the buffer's oldest batch): used
   * on first contact, when nothing was known anyway. A batch over maxPayloadBytes makes JeroMQ drop
   * the DEALER's connection: when it was the first reply of a request, it is skipped (counted once
   * with the live drop that caused the gap) and the rest requested on a fresh DEALER.
   */
  private boolean replay(Stream s, long from, long to, boolean catchUp) {
    long expected = from;
    int applied = 0;
    int silentAttempts = 0;
    boolean answeredThisAttempt = false;
    long idleNanos = TimeUnit.MILLISECONDS.toNanos(replayIdleMs);
    long idleSince = 0;
    AtomicBoolean refused = null;
    ZMQ.Socket d = null;
    try {
      long deadline = nanoClock.getAsLong() + replayTimeoutNanos;
      while (running && !s.removed && nanoClock.getAsLong() - deadline < 0) {
        if (d == null) {
          refused = new AtomicBoolean();
          d = newReplayDealer(refused);
          d.connect(s.replayEndpoint);
          d.sendMore(new byte[0]);
          d.send(Endpoints.seqBytes(expected));
          answeredThisAttempt = false;
          idleSince = nanoClock.getAsLong();
        }
        List<byte[]> frames = receiveAll(d);
        if (frames == null) {
          if (refused.get()) {
            d.close();
            d = null;
            if (!answeredThisAttempt) {
              if (catchUp && applied == 0) {
                break; // which batch was refused is unknown; first contact: nothing was known
              }
              oversizedReplayed(s, expected);
              expected++;
              if (expected == to) {
                break;
              }
            }
            continue; // a fresh DEALER from `expected`
          }
          if (nanoClock.getAsLong() - idleSince < idleNanos) {
            continue;
          }
          if (answeredThisAttempt || ++silentAttempts >= REPLAY_ATTEMPTS) {
            break; // idle timeout
          }
          // a request that got no answer at all is retried on a fresh DEALER
          d.close();
          d = null;
          continue;
        }
        answeredThisAttempt = true;
        idleSince = nanoClock.getAsLong();
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
        if (expected == to) {
          break; // everything missed is here; later batches are held back or arrive live
        }
      }
    } catch (RuntimeException e) {
      warnOnce(s, "replay_error", String.valueOf(e));
    } finally {
      if (d != null) {
        d.close();
      }
    }
    boolean complete = expected == to;
    s.replayNext = expected;
    s.replayApplied = applied;
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

  /** A replayed batch refused for its size: counted unless its live copy already was. */
  private void oversizedReplayed(Stream s, long seq) {
    if (s.oversizedUnseen.getAndUpdate(v -> v > 0 ? v - 1 : 0) > 0) {
      return;
    }
    metrics.dropped("oversized");
    warnOnce(
        s,
        "oversized",
        "replayed batch "
            + Long.toUnsignedString(seq)
            + " is over maxPayloadBytes="
            + maxPayloadBytes
            + "; skipped");
    safeListener(() -> listener.onDropped(s.label, seq, "oversized", null));
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
    warnOnce(s.label, kind, detail);
  }

  private void warnOnce(String label, String kind, String detail) {
    if (warned.add(label + '\0' + kind)) {
      LOG.warn(
          "KV events from pod {}: {} ({}); further occurrences are only counted in kvindex_* metrics",
          label,
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

  /**
   * One publisher's stream. Sequence state is confined to its shard thread, except while a replay
   * runs ({@code replaying}): the replay thread then owns it, and the shard only holds back the
   * stream's live messages; the executor and the shard's control queue order the hand-overs.
   */
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
    boolean replaying; // shard thread only
    long replayNext; // written by the replay thread, read by the shard after the hand-back
    int replayApplied; // likewise
    final ArrayDeque<Message> replayBuffer = new ArrayDeque<>(); // shard thread only
    Runnable afterReplay; // shard thread only: a removal waiting for the replay to end
    // frames refused live for their size and not yet met again in a replay
    final AtomicInteger oversizedUnseen = new AtomicInteger();
    boolean ioReopenPending; // I/O thread only
    long ioReopenAt; // I/O thread only
    long ioReopenBackoffMs; // I/O thread only

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
    final Counter replaysRejected;
    final Counter reopens;
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
      replaysRejected = r.counter("kvindex_replays", "outcome", "rejected");
      reopens = r.counter("kvindex_socket_reopens");
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
    private int replayThreads = 2;
    private int replayBufferCapacity = 4096;
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

    /**
     * Largest accepted frame (default 32 MiB). Set as JeroMQ's max message size on every SUB and
     * replay DEALER socket: a larger frame is refused from its size header, never allocated, and
     * JeroMQ drops that connection; the subscriber counts it ({@code
     * kvindex_dropped{reason=oversized}}), reconnects, and repairs the resulting gap like any
     * other.
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

    /**
     * Threads running replays (default 2), each one replay at a time; further replays wait in a
     * queue of 1024 (beyond it the pod is resynchronised by clearing, counted in {@code
     * kvindex_replays{outcome=rejected}}).
     */
    public Builder replayThreads(int replayThreads) {
      this.replayThreads = replayThreads;
      return this;
    }

    /**
     * Live messages held back per publisher while its replay runs (default 4096); beyond it they
     * are dropped ({@code kvindex_dropped{reason=replay_buffer}}) and the pod is resynchronised
     * after the replay, as after a queue overflow.
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
