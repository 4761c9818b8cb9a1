package io.kvroute.kvindex.zmq.internal;

import io.kvroute.kvindex.zmq.PodEndpoint;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZEvent;
import org.zeromq.ZMQ;
import org.zeromq.ZMonitor;
import zmq.ZError;
import zmq.util.Errno;

/**
 * The I/O thread ({@code kvindex-zmq-io}): owns every SUB socket, receives {@code [topic, seq,
 * payload]} messages and hands them to the publishers' shards, runs the add/remove commands, and
 * turns socket events into stream inputs.
 *
 * <p>Connect mode: one SUB per stream (a pod's DP rank). Bind mode: one bound SUB; streams are
 * created per topic on first message (at most {@code maxPods} in all). A message without exactly 3
 * frames is counted and skipped. When a shard queue is full the message is dropped, counted, and
 * the stream told ({@link Sequencer#liveDropped}). A SUB's completed handshake is posted to its
 * stream ({@link Sequencer#connected}). After a protocol error (an oversized frame: JeroMQ refuses
 * it from its size header, unread, and ends the session) JeroMQ 0.6.0 does not reconnect a
 * connect-mode socket, so it is reopened here, with back-off if that repeats without a message in
 * between.
 *
 * <p><b>Only ready sockets are read.</b> Each SUB socket's JeroMQ mailbox descriptor ({@code
 * getFD()}: readable when the socket has commands, such as "messages arrived" after its pipe ran
 * empty) is registered once with this loop's own NIO {@link Selector}; a wake-up reads the sockets
 * whose descriptor fired, each until it has nothing more ({@code EAGAIN}, which processes its
 * commands and so re-arms the descriptor) or for at most {@value #BUDGET} messages (then it stays
 * on a ready list served before the next wait). The cost of a message therefore does not depend on
 * how many sockets there are (JeroMQ's {@code ZMQ.Poller}, used before, re-registers and checks
 * every socket on each call). After a wake-up that read messages the loop waits {@link
 * #LINGER_NANOS} before it looks again, so that busy sockets are read in batches. A slow sweep
 * ({@value #SWEEP_MS} ms) reads every socket as a safety net.
 *
 * <p>Thread-safety: {@link #command} and {@link #streamsOf} are thread-safe; everything else is
 * confined to the I/O thread.
 */
public final class SocketLoop {
  // JeroMQ keeps errno per thread; its event hooks run on the JeroMQ I/O thread that set it
  private static final Errno JEROMQ_ERRNO = new Errno();

  /** Messages read from one socket before the others get their turn. */
  static final int BUDGET = 256;

  /** Interval of the safety sweep over every socket. */
  static final long SWEEP_MS = 1000;

  /**
   * After a wake-up that read messages, the loop waits this long before it looks again, so that the
   * next wake-up finds several messages: fewer wake-ups, and fewer "messages arrived" signals from
   * JeroMQ's I/O thread, which only signals a pipe that was read empty (measured with {@code
   * SubscriberIoRun}: about half the CPU per message of both threads at 4,000 messages/s), for at
   * most this much latency.
   */
  static final long LINGER_NANOS = 500_000;

  private final SubscriberConfig config;
  private final ZContext context;
  private final Telemetry telemetry;
  private final Shard[] shards;
  private final ReplayClient replays;
  private final byte[] topicFilter;
  private final Thread thread;
  private final ConcurrentLinkedQueue<Runnable> commands = new ConcurrentLinkedQueue<>();
  private final Map<String, List<Stream>> pods = new ConcurrentHashMap<>();
  private final CompletableFuture<String> bound = new CompletableFuture<>();
  private volatile boolean running = true;

  private final Selector selector;

  // I/O thread only
  private final Map<ZMQ.Socket, Polled> polled = new HashMap<>();
  private final ArrayDeque<Polled> ready = new ArrayDeque<>();
  private final Map<String, Stream> streamByTopic = new HashMap<>();
  private final List<Stream> reopens = new ArrayList<>();
  private final ConcurrentLinkedQueue<Handshake> handshakes = new ConcurrentLinkedQueue<>();
  private final List<Handshake> watching = new ArrayList<>();
  private ZMQ.Socket boundSocket;
  private long lastSweep = System.nanoTime();

  SocketLoop(
      SubscriberConfig config,
      ZContext context,
      Telemetry telemetry,
      Shard[] shards,
      ReplayClient replays) {
    this.config = config;
    this.context = context;
    this.telemetry = telemetry;
    this.shards = shards;
    this.replays = replays;
    this.topicFilter = config.topic().getBytes(StandardCharsets.UTF_8);
    try {
      this.selector = Selector.open();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot open a selector for the KV event sockets", e);
    }
    this.thread = new Thread(this::loop, "kvindex-zmq-io");
    thread.setDaemon(true);
  }

  void start() {
    thread.start();
  }

  /** Completes with the bound endpoint (bind mode) or {@code null}, once the thread is up. */
  CompletableFuture<String> bound() {
    return bound;
  }

  void stop() {
    running = false;
    selector.wakeup();
  }

  void join(long millis) throws InterruptedException {
    thread.join(millis);
  }

  /** After the thread stopped: completes pending commands' futures and closes the sockets. */
  void closeAfterStop() {
    Runnable c;
    while ((c = commands.poll()) != null) {
      c.run(); // they see running == false and fail their futures
    }
    for (ZMQ.Socket s : polled.keySet()) {
      s.close();
    }
    polled.clear();
    try {
      selector.close();
    } catch (IOException e) {
      // nothing left to do with it
    }
    bound.completeExceptionally(new IllegalStateException("subscriber closed"));
  }

  /**
   * Runs {@code r} on the I/O thread; {@code done} fails if the loop is stopped or {@code r}
   * throws.
   */
  void command(Runnable r, CompletableFuture<?> done) {
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
    selector.wakeup();
  }

  /** Connect-mode pods. */
  Map<String, List<Stream>> pods() {
    return pods;
  }

  /** The streams of {@code podId} in connect mode, or {@code null}. */
  List<Stream> streamsOf(String podId) {
    return pods.get(podId);
  }

  Shard shardFor(String key) {
    int h = 0x811c9dc5; // FNV-1a-32, as llm-d shards pods
    for (int i = 0; i < key.length(); i++) {
      h ^= key.charAt(i);
      h *= 0x01000193;
    }
    return shards[Math.floorMod(h, shards.length)];
  }

  Stream newStream(String label, String identity, String endpoint, String replayEndpoint) {
    return new Stream(
        label,
        identity,
        endpoint,
        replayEndpoint,
        shardFor(identity != null ? identity : label),
        config,
        telemetry,
        replays);
  }

  // ------------------------------------------------------------------ pods (I/O thread)

  /** Opens the SUB sockets of {@code streams} (a new connect-mode pod). */
  void open(List<Stream> streams) {
    for (Stream s : streams) {
      if (s.removed) {
        continue;
      }
      connect(s);
    }
  }

  /** Opens and connects {@code s}'s SUB socket and polls it (connect mode). */
  private void connect(Stream s) {
    ZMQ.Socket sock = newSub(s);
    sock.connect(s.endpoint);
    s.socket = sock;
    watch(sock, s);
  }

  /** Registers {@code sock}'s mailbox descriptor; reads what may have arrived before. */
  private void watch(ZMQ.Socket sock, Stream s) {
    Polled p = new Polled(sock, s);
    try {
      p.key = sock.getFD().register(selector, SelectionKey.OP_READ, p);
    } catch (ClosedChannelException e) {
      throw new IllegalStateException("the socket's descriptor is closed", e);
    }
    polled.put(sock, p);
    p.queued = true;
    ready.add(p); // a message that arrived before the registration raised no event for it
  }

  /** Stops polling {@code sock} and closes it. */
  private void unwatch(ZMQ.Socket sock) {
    Polled p = polled.remove(sock);
    if (p != null) {
      p.closed = true;
      if (p.key != null) {
        p.key.cancel();
      }
    }
    sock.close();
  }

  /** Closes and forgets every stream of {@code podId}; returns them (connect and bind mode). */
  List<Stream> close(String podId) {
    List<Stream> streams = new ArrayList<>();
    List<Stream> connected = pods.remove(podId);
    if (connected != null) {
      streams.addAll(connected);
    }
    streamByTopic.values().removeIf(s -> s.label.equals(podId) && streams.add(s));
    for (Stream s : streams) {
      s.removed = true;
      if (s.socket != null) {
        unwatch(s.socket);
        s.socket = null;
      }
    }
    return streams;
  }

  /** Test hook: the max message size of every SUB socket. */
  List<Long> maxMsgSizes() {
    List<Long> sizes = new ArrayList<>();
    for (ZMQ.Socket sock : polled.keySet()) {
      sizes.add(sock.getMaxMsgSize());
    }
    return sizes;
  }

  // ------------------------------------------------------------------ loop

  private void loop() {
    try {
      if (config.bindEndpoint() != null) {
        try {
          boundSocket = newSub(null);
          boundSocket.bind(config.bindEndpoint());
          watch(boundSocket, null);
          bound.complete(boundSocket.getLastEndpoint());
        } catch (RuntimeException e) {
          bound.completeExceptionally(e);
          return;
        }
      } else {
        bound.complete(null);
      }
      while (running) {
        Runnable c;
        while ((c = commands.poll()) != null) {
          c.run();
        }
        if (!reopens.isEmpty()) {
          reopenDue();
        }
        watchHandshakes();
        if (ready.isEmpty()) {
          selector.select(config.pollIntervalMs());
        } else {
          selector.selectNow();
        }
        for (SelectionKey k : selector.selectedKeys()) {
          Polled p = (Polled) k.attachment();
          if (!p.queued) {
            p.queued = true;
            ready.add(p);
          }
        }
        selector.selectedKeys().clear();
        if (serveReady() > 0) {
          LockSupport.parkNanos(LINGER_NANOS);
        }
        if (System.nanoTime() - lastSweep >= TimeUnit.MILLISECONDS.toNanos(SWEEP_MS)) {
          sweep();
        }
      }
    } catch (IOException e) {
      if (running) {
        telemetry.error(
            "KV event subscriber I/O thread failed; no more events will be received",
            new UncheckedIOException(e));
      }
    } catch (RuntimeException e) {
      if (running) {
        telemetry.error(
            "KV event subscriber I/O thread failed; no more events will be received", e);
      }
    } finally {
      for (ZMQ.Socket s : polled.keySet()) {
        s.close();
      }
      polled.clear();
    }
  }

  /** Reads each ready socket once (up to {@link #BUDGET}); those with more stay ready. */
  private int serveReady() {
    int served = 0;
    for (int n = ready.size(); n > 0; n--) {
      Polled p = ready.poll();
      p.queued = false;
      if (p.closed) {
        continue;
      }
      served++;
      if (!drain(p.socket, p.stream)) {
        p.queued = true;
        ready.add(p);
      }
    }
    return served;
  }

  /** The safety net: reads every socket not already on the ready list. */
  private void sweep() {
    lastSweep = System.nanoTime();
    for (Polled p : List.copyOf(polled.values())) {
      if (!p.queued && !p.closed && !drain(p.socket, p.stream)) {
        p.queued = true;
        ready.add(p);
      }
    }
  }

  /** A polled socket: its stream ({@code null} for the bound socket) and selection key. */
  private static final class Polled {
    final ZMQ.Socket socket;
    final Stream stream;
    SelectionKey key;
    boolean queued; // on the ready list
    boolean closed;

    Polled(ZMQ.Socket socket, Stream stream) {
      this.socket = socket;
      this.stream = stream;
    }
  }

  /** A SUB socket; {@code s} is its stream in connect mode, {@code null} for the bound socket. */
  private ZMQ.Socket newSub(Stream s) {
    ZMQ.Socket sock = context.getContext().socket(SocketType.SUB);
    sock.setLinger(0);
    sock.setRcvHWM(config.receiveHwm());
    sock.setReconnectIVL((int) config.reconnectIntervalMs());
    sock.setReconnectIVLMax((int) config.reconnectIntervalMaxMs());
    sock.setHandshakeIvl(config.handshakeMs());
    // JeroMQ refuses a larger frame from its size header, before allocating it, and drops the
    // connection (see onDisconnected)
    sock.setMaxMsgSize(config.maxPayloadBytes());
    Handshake h = s == null ? null : new Handshake(s, sock);
    sock.setEventHook(
        ev -> onSocketEvent(s, sock, h, ev),
        ZMQ.EVENT_CONNECTED | ZMQ.EVENT_DISCONNECTED | ZMQ.EVENT_HANDSHAKE_PROTOCOL);
    sock.subscribe(topicFilter);
    return sock;
  }

  /**
   * Runs on a JeroMQ I/O thread, synchronously from the engine, before that connection delivers any
   * message: a completed handshake is posted to the stream's shard at once (so it precedes the
   * connection's messages there); a dropped connection goes to the I/O thread. JeroMQ's per-thread
   * errno tells why a connection dropped: {@code EMSGSIZE} for an oversized frame, {@code ENOTCONN}
   * for a peer that closed.
   */
  private void onSocketEvent(Stream s, ZMQ.Socket sock, Handshake h, ZEvent ev) {
    int errno = JEROMQ_ERRNO.get();
    if (ev.getEvent() == ZMonitor.Event.CONNECTED) {
      if (h != null && !s.removed) {
        h.handshaken = false;
        h.channel = ev.getValue() instanceof SelectableChannel ch ? ch : null;
        h.connectedAt = config.nanoClock().getAsLong();
        if (!h.queued.getAndSet(true)) {
          handshakes.add(h);
          selector.wakeup();
        }
      }
      return;
    }
    if (ev.getEvent() == ZMonitor.Event.HANDSHAKE_PROTOCOL) {
      if (h != null) {
        h.handshaken = true;
      }
      if (s != null && !s.removed) {
        s.shard.post(() -> s.connected(s.shard.now()));
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
    selector.wakeup();
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

  private void onDisconnected(
      Stream s, ZMQ.Socket sock, boolean oversized, boolean peerClosed, String peer) {
    if (oversized) {
      telemetry.dropped("oversized");
      if (s != null) {
        s.oversizedUnseen.incrementAndGet();
      }
      String pod = s != null ? s.label : peer;
      telemetry.warnOnce(
          s != null ? s.label : "bound to " + config.bindEndpoint(),
          "oversized",
          "a frame over maxPayloadBytes="
              + config.maxPayloadBytes()
              + " from "
              + peer
              + " was refused unread; the connection was dropped and is re-established, and the"
              + " sequence gap is repaired like any other");
      telemetry.listen(() -> telemetry.listener.onDropped(pod, -1, "oversized", null));
    }
    if (s == null || s.removed || s.socket != sock || peerClosed || s.reopenPending) {
      return;
    }
    s.reopenPending = true;
    s.reopenAt = config.nanoClock().getAsLong() + TimeUnit.MILLISECONDS.toNanos(s.reopenBackoffMs);
    reopens.add(s);
  }

  private void reopenDue() {
    long now = config.nanoClock().getAsLong();
    for (Iterator<Stream> it = reopens.iterator(); it.hasNext(); ) {
      Stream s = it.next();
      if (s.removed || s.socket == null) {
        s.reopenPending = false;
        it.remove();
      } else if (now - s.reopenAt >= 0) {
        s.reopenPending = false;
        it.remove();
        reopen(s);
        s.reopenBackoffMs =
            s.reopenBackoffMs == 0
                ? config.reconnectIntervalMs()
                : Math.min(config.reconnectIntervalMaxMs(), 2 * s.reopenBackoffMs);
        telemetry.reopen();
      }
    }
  }

  /** Closes {@code s}'s SUB socket (after taking what it holds) and connects a new one. */
  private void reopen(Stream s) {
    ZMQ.Socket old = s.socket;
    for (int n = 0; n < 16 && !drain(old, s); n++) {
      // what arrived complete before the drop (anything beyond is a gap, replayed)
    }
    unwatch(old);
    connect(s);
  }

  /**
   * Reopens connect-mode SUB sockets whose ZMTP handshake stalled: JeroMQ 0.6.0 can leave a
   * connection whose TCP connect completed asynchronously unregistered from its selector ({@code
   * Poller.run} handles the connecter's cancelled handle and the new engine's handle in one pass
   * over a hash set, and registers neither), so it never sends its greeting and the publisher waits
   * until {@code handshakeTimeout} ends it; every batch published meanwhile is lost live. A
   * connection still without its handshake {@value ReplayClient#STALL_FIRST_MS} ms after its TCP
   * connect (doubling per stall of the stream, up to {@code handshakeTimeout}) whose channel is not
   * registered with any selector (so JeroMQ will never read or write it: {@link
   * ReplayClient#stalled}) is replaced by a new socket ({@code
   * kvroute_kvindex_handshake_stalls{socket=sub}}). A handshake that is merely slow (a busy
   * machine) has its channel registered and is left alone.
   */
  private void watchHandshakes() {
    Handshake h;
    while ((h = handshakes.poll()) != null) {
      h.queued.set(false);
      if (!watching.contains(h)) {
        watching.add(h);
      }
    }
    if (watching.isEmpty()) {
      return;
    }
    long now = config.nanoClock().getAsLong();
    long max = TimeUnit.MILLISECONDS.toNanos(config.handshakeMs());
    for (Iterator<Handshake> it = watching.iterator(); it.hasNext(); ) {
      Handshake w = it.next();
      Stream s = w.stream;
      if (s.removed || s.socket != w.socket) {
        it.remove();
      } else if (w.handshaken) {
        s.stallNanos = 0;
        it.remove();
      } else {
        long limit =
            s.stallNanos == 0
                ? Math.min(max, TimeUnit.MILLISECONDS.toNanos(ReplayClient.STALL_FIRST_MS))
                : s.stallNanos;
        if (now - w.connectedAt - limit >= 0 && config.stallCheck().test(w.channel)) {
          it.remove();
          s.stallNanos = Math.min(max, 2 * limit);
          telemetry.handshakeStall("sub");
          telemetry.debug(s.label, "SUB handshake stalled; reopening the socket");
          reopen(s);
        }
      }
    }
  }

  /**
   * A connect-mode SUB socket's handshake state, written by its event hook (a JeroMQ I/O thread),
   * read by the I/O thread.
   */
  private static final class Handshake {
    final Stream stream;
    final ZMQ.Socket socket;
    final java.util.concurrent.atomic.AtomicBoolean queued =
        new java.util.concurrent.atomic.AtomicBoolean();
    volatile long connectedAt;
    volatile SelectableChannel channel; // the TCP connection JeroMQ reported
    volatile boolean handshaken;

    Handshake(Stream stream, ZMQ.Socket socket) {
      this.stream = stream;
      this.socket = socket;
    }
  }

  /**
   * Reads up to {@link #BUDGET} messages from {@code sock}; true when it has nothing more (the read
   * that found nothing processed its commands, so its descriptor fires for the next message).
   */
  private boolean drain(ZMQ.Socket sock, Stream fixed) {
    for (int n = 0; n < BUDGET; n++) {
      byte[] f0 = sock.recv(ZMQ.DONTWAIT);
      if (f0 == null) {
        return true;
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
      s.reopenBackoffMs = 0;
      if (count != 3 || f1.length != 8) {
        telemetry.dropped("frames");
        int got = count;
        telemetry.warnOnce(
            s.label, "frames", "expected 3 frames [topic, seq(8 bytes), payload], got " + got);
        telemetry.listen(() -> telemetry.listener.onDropped(s.label, -1, "frames", null));
        continue;
      }
      long seq = Endpoints.seqOf(f1);
      int size = f2.length;
      byte[] payload = size > config.maxPayloadBytes() ? null : f2;
      if (!s.shard.offer(new Shard.Live(s, topic, seq, payload, size))) {
        overflow(s, seq);
      }
    }
    return false;
  }

  /** A full shard queue: the message is dropped, counted, and the stream told (coalesced). */
  private void overflow(Stream s, long seq) {
    telemetry.dropped("overflow");
    s.droppedMax.accumulateAndGet(seq, (a, b) -> a == -1 || Long.compareUnsigned(b, a) > 0 ? b : a);
    if (s.dropReported.compareAndSet(false, true)) {
      s.shard.post(
          () -> {
            s.dropReported.set(false);
            long max = s.droppedMax.getAndSet(-1);
            if (max != -1 && !s.removed) {
              s.liveDropped(max, s.shard.now());
            }
          });
    }
    telemetry.warnOnce(s.label, "overflow", "shard queue full; the dropped batches are recovered");
    telemetry.listen(() -> telemetry.listener.onDropped(s.label, seq, "overflow", null));
  }

  private Stream boundStream(String topic) {
    Stream s = streamByTopic.get(topic);
    if (s == null) {
      if (streamByTopic.size() + pods.size() >= config.maxPods()) {
        telemetry.dropped("pod_limit");
        telemetry.warnOncePerSubscriber(
            "pod_limit",
            "KV events: more than maxPods={} publishers; new topics are ignored",
            config.maxPods());
        return null;
      }
      s = newStream(PodEndpoint.podIdFromTopic(topic), null, null, null);
      streamByTopic.put(topic, s);
    }
    return s;
  }
}
