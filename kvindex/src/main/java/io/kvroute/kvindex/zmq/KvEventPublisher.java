package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.zmq.internal.Endpoints;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * A KV-event publisher that behaves like vLLM's {@code ZmqEventPublisher} (spec §1.2–§1.4): a PUB
 * socket sending {@code [topic, seq (8 bytes big-endian), payload]} with sequence numbers from
 * {@link Builder#firstSequence(long)} (0 by default), and an optional ROUTER replay endpoint
 * answering {@code [identity, "", start_seq]} requests from a bounded ring buffer of the last
 * {@link Builder#bufferSteps(int)} batches, in the reply shape of {@link ReplyFormat}, ending with
 * the {@code ff×8} end marker. Requests that are not exactly 3 frames are ignored, as vLLM does.
 *
 * <p>Used by the testkit's vLLM simulator, by tests and by the soak run. Fault hooks (nothing a
 * real vLLM does on purpose, everything a subscriber must survive): {@link #dropSequence(long)}
 * (buffered for replay, not sent: a PUB high-water-mark drop), {@link #duplicateSequence(long)}
 * (sent twice), {@link #delaySequence(long)} (sent after the next batch: reordering), {@link
 * #pauseReplays(boolean)} (replay requests wait: a slow replay endpoint), {@link
 * #reconnectSubscribers()} (the PUB socket is closed and bound again: subscribers reconnect and
 * miss what is published meanwhile). A restart is closing the publisher and building a new one on
 * the same endpoints.
 *
 * <p><b>Thread-safety.</b> Thread-safe. {@code publish*} assigns the sequence number and enqueues
 * (blocking when the bounded queue is full, like vLLM); one daemon thread ({@code
 * kvindex-publisher}) owns both sockets, sends, and services replay requests.
 */
public final class KvEventPublisher implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(KvEventPublisher.class);
  private static final byte[] END_SEQ = Endpoints.seqBytes(-1L);

  /** The reply shape of the replay ROUTER (spec §1.4). */
  public enum ReplyFormat {
    /**
     * vLLM after PR #45177: {@code [id, "", topic, seq, payload]}, end {@code [id, "", "", END,
     * ""]}.
     */
    WITH_TOPIC,
    /** Older vLLM and SGLang: {@code [id, "", seq, payload]}, end {@code [id, "", END, ""]}. */
    LEGACY
  }

  private record Pending(long seq, byte[] payload) {}

  /** Wakes the thread waiting for a batch when the publisher closes (as vLLM's {@code None}). */
  private static final Pending STOP = new Pending(-1, new byte[0]);

  private final String topic;
  private final int bufferSteps;
  private final ReplyFormat replyFormat;
  private final Integer dpRank;
  private final ZContext context;
  private final boolean ownsContext;
  private final ZMQ.Socket router;
  private final String endpoint;
  private final String replayEndpoint;
  private final BlockingQueue<Pending> queue;
  private final ArrayDeque<Pending> buffer = new ArrayDeque<>();
  private final Set<Long> dropped = ConcurrentHashMap.newKeySet();
  private final Set<Long> duplicated = ConcurrentHashMap.newKeySet();
  private final Set<Long> delayed = ConcurrentHashMap.newKeySet();
  private final ConcurrentLinkedQueue<Runnable> commands = new ConcurrentLinkedQueue<>();
  private final int hwm;
  private final int handshakeMillis;
  private final boolean vllmLoop;
  private volatile boolean replaysPaused;
  private ZMQ.Socket pubSocket; // publisher thread (and the constructor)
  private final boolean bound;
  private Pending late; // a delayed batch, sent after the next one (publisher thread)
  private final Object publishLock = new Object();
  private final Thread thread;
  private volatile boolean running = true;
  private long nextSeq;

  private KvEventPublisher(Builder b) {
    this.topic = b.topic;
    this.hwm = b.hwm;
    this.handshakeMillis = b.handshakeMillis;
    this.bufferSteps = b.bufferSteps;
    this.replyFormat = b.replyFormat;
    this.vllmLoop = b.vllmLoop;
    this.dpRank = b.dataParallelRank;
    this.nextSeq = b.firstSequence;
    this.queue = new ArrayBlockingQueue<>(b.maxQueueSize);
    this.ownsContext = b.context == null;
    this.context = ownsContext ? new ZContext(1) : b.context;
    ZMQ.Socket p = null;
    ZMQ.Socket r = null;
    try {
      String ep = Endpoints.offset(b.endpoint, b.dataParallelRank);
      p = newPub();
      boolean bind = b.bind != null ? b.bind : Endpoints.vllmBinds(ep);
      this.bound = bind;
      if (bind) {
        p.bind(ep);
        this.endpoint = p.getLastEndpoint();
      } else {
        p.connect(ep);
        this.endpoint = ep;
      }
      if (b.replayEndpoint != null) {
        r = context.getContext().socket(SocketType.ROUTER);
        r.setLinger(0);
        r.setHandshakeIvl(b.handshakeMillis);
        r.bind(Endpoints.offset(b.replayEndpoint, b.dataParallelRank));
        this.replayEndpoint = r.getLastEndpoint();
      } else {
        this.replayEndpoint = null;
      }
    } catch (RuntimeException e) {
      if (p != null) {
        p.close();
      }
      if (r != null) {
        r.close();
      }
      if (ownsContext) {
        context.close();
      }
      throw e;
    }
    this.pubSocket = p;
    this.router = r;
    this.thread = new Thread(this::loop, "kvindex-publisher");
    thread.setDaemon(true);
    thread.start();
  }

  /** A new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Encodes {@code batch} in its schema and publishes it; a {@code null} DP rank is stamped with
   * this publisher's rank (as vLLM does) unless the schema has no rank field.
   *
   * @return the sequence number assigned
   */
  public long publish(KvEventBatch batch) {
    Objects.requireNonNull(batch, "batch");
    KvEventBatch b =
        batch.dataParallelRank() == null && batch.schema().batchFields() == 3
            ? batch.withDataParallelRank(dpRank)
            : batch;
    return publishPayload(KvEventCodec.encode(b));
  }

  /**
   * Publishes raw payload bytes as the third frame (fault injection: malformed or oversized
   * payloads). The array must not be modified afterwards (JeroMQ does not copy it).
   *
   * @return the sequence number assigned
   */
  public long publishPayload(byte[] payload) {
    Objects.requireNonNull(payload, "payload");
    if (!running) {
      throw new IllegalStateException("publisher is closed");
    }
    synchronized (publishLock) {
      long seq = nextSeq++;
      try {
        queue.put(new Pending(seq, payload));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while publishing seq " + seq, e);
      }
      return seq;
    }
  }

  /**
   * Fault hook: the batch with sequence {@code seq} is kept in the replay buffer but not sent on
   * the PUB socket (a subscriber sees a gap).
   */
  public void dropSequence(long seq) {
    dropped.add(seq);
  }

  /** Fault hook: the batch with sequence {@code seq} is sent twice in a row. */
  public void duplicateSequence(long seq) {
    duplicated.add(seq);
  }

  /**
   * Fault hook: the batch with sequence {@code seq} is buffered for replay at once but sent on the
   * PUB socket only after the next batch (or with {@link #close()}'s drain).
   */
  public void delaySequence(long seq) {
    delayed.add(seq);
  }

  /** Fault hook: while paused, replay requests wait unanswered (answered once resumed). */
  public void pauseReplays(boolean paused) {
    this.replaysPaused = paused;
  }

  /**
   * Fault hook: closes the PUB socket and binds a new one on the same endpoint (bind mode only):
   * connected subscribers see the connection drop and reconnect; batches published until they are
   * back are lost to them (a replay has them). Returns when the new socket is bound.
   *
   * @throws IllegalStateException if this publisher connects rather than binds, or the endpoint
   *     cannot be bound again within 10 s
   */
  public void reconnectSubscribers() {
    CompletableFuture<Void> done = new CompletableFuture<>();
    commands.add(
        () -> {
          try {
            rebindPub();
            done.complete(null);
          } catch (RuntimeException e) {
            done.completeExceptionally(e);
          }
        });
    try {
      done.get(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      throw new IllegalStateException("cannot rebind " + endpoint + ": " + e, e);
    }
  }

  private void rebindPub() {
    if (!bound) {
      throw new IllegalStateException("publisher " + endpoint + " connects; nothing to rebind");
    }
    pubSocket.close();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (true) {
      ZMQ.Socket p = newPub();
      try {
        p.bind(endpoint);
        pubSocket = p;
        return;
      } catch (RuntimeException e) {
        p.close();
        if (System.nanoTime() - deadline > 0) {
          throw e;
        }
        java.util.concurrent.locks.LockSupport.parkNanos(2_000_000); // the old socket is closing
      }
    }
  }

  private ZMQ.Socket newPub() {
    ZMQ.Socket p = context.getContext().socket(SocketType.PUB);
    p.setLinger(0);
    p.setSndHWM(hwm);
    p.setHandshakeIvl(handshakeMillis);
    return p;
  }

  /** The PUB endpoint (resolved when bound, e.g. {@code tcp://127.0.0.1:54321}). */
  public String endpoint() {
    return endpoint;
  }

  /** The resolved ROUTER replay endpoint, or {@code null} when replay is off. */
  public String replayEndpoint() {
    return replayEndpoint;
  }

  /** The topic (first frame). */
  public String topic() {
    return topic;
  }

  /** The sequence number the next publish will get. */
  public long nextSequence() {
    synchronized (publishLock) {
      return nextSeq;
    }
  }

  /** Stops the thread (queued batches are sent first, within 1 s) and closes the sockets. */
  @Override
  public void close() {
    if (!running) {
      return;
    }
    running = false;
    queue.offer(STOP); // a full queue wakes the thread anyway
    try {
      thread.join(2000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (ownsContext) {
      context.close();
    }
  }

  private void loop() {
    byte[] topicBytes = topic.getBytes(StandardCharsets.UTF_8);
    try {
      long drainDeadline = Long.MAX_VALUE;
      while (true) {
        if (!running) {
          if (drainDeadline == Long.MAX_VALUE) {
            drainDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
          }
          if (queue.isEmpty() || System.nanoTime() > drainDeadline) {
            break;
          }
        }
        Runnable c;
        while ((c = commands.poll()) != null) {
          c.run();
        }
        if (router != null && !replaysPaused) {
          serviceReplay(topicBytes, !vllmLoop);
        }
        Pending p = queue.poll(vllmLoop ? 100 : router != null ? 5 : 50, TimeUnit.MILLISECONDS);
        while (p != null) {
          if (p == STOP) {
            p = queue.poll();
            continue;
          }
          buffer.addLast(p);
          if (buffer.size() > bufferSteps) {
            buffer.removeFirst();
          }
          if (delayed.remove(p.seq)) {
            sendLate(topicBytes);
            late = p; // after the next batch
          } else {
            if (!dropped.remove(p.seq)) {
              send(topicBytes, p);
              if (duplicated.remove(p.seq)) {
                send(topicBytes, p);
              }
            }
            sendLate(topicBytes);
          }
          p = vllmLoop ? null : queue.poll(); // vLLM: one batch per turn, replays in between
        }
      }
      sendLate(topicBytes);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      LOG.warn("KV event publisher thread failed", e);
    } finally {
      pubSocket.close();
      if (router != null) {
        router.close();
      }
    }
  }

  private void send(byte[] topicBytes, Pending p) {
    // fresh arrays per frame: JeroMQ keeps references to sent arrays
    pubSocket.sendMore(topicBytes.clone());
    pubSocket.sendMore(Endpoints.seqBytes(p.seq));
    pubSocket.send(p.payload.clone());
  }

  private void sendLate(byte[] topicBytes) {
    Pending l = late;
    if (l != null) {
      late = null;
      if (!dropped.remove(l.seq)) {
        send(topicBytes, l);
      }
    }
  }

  /** Answers the waiting replay requests ({@code all}) or the first of them. */
  private void serviceReplay(byte[] topicBytes, boolean all) {
    for (boolean more = true; more; more = all) {
      byte[] first = router.recv(ZMQ.DONTWAIT);
      if (first == null) {
        return;
      }
      List<byte[]> frames = new ArrayList<>(3);
      frames.add(first);
      while (router.hasReceiveMore()) {
        frames.add(router.recv());
      }
      if (frames.size() != 3) {
        LOG.debug("Invalid replay request: {} frames", frames.size());
        continue;
      }
      byte[] id = frames.get(0);
      long start = Endpoints.seqOf(frames.get(2));
      for (Pending p : buffer) {
        if (Long.compareUnsigned(p.seq, start) >= 0) {
          router.sendMore(id.clone());
          router.sendMore(new byte[0]);
          if (replyFormat == ReplyFormat.WITH_TOPIC) {
            router.sendMore(topicBytes.clone());
          }
          router.sendMore(Endpoints.seqBytes(p.seq));
          router.send(p.payload.clone());
        }
      }
      router.sendMore(id.clone());
      router.sendMore(new byte[0]);
      if (replyFormat == ReplyFormat.WITH_TOPIC) {
        router.sendMore(new byte[0]);
      }
      router.sendMore(END_SEQ.clone());
      router.send(new byte[0]);
    }
  }

  /**
   * Builds a {@link KvEventPublisher}. Defaults follow vLLM's {@code KVEventsConfig}: topic {@code
   * ""}, {@code buffer_steps} 10 000, {@code hwm} 100 000, {@code max_queue_size} 100 000, no
   * replay endpoint, DP rank 0, bind-or-connect by vLLM's rule.
   *
   * <p>Not thread-safe.
   */
  public static final class Builder {
    private String endpoint;
    private String replayEndpoint;
    private String topic = "";
    private int bufferSteps = 10_000;
    private int hwm = 100_000;
    private int maxQueueSize = 100_000;
    private ReplyFormat replyFormat = ReplyFormat.WITH_TOPIC;
    private int dataParallelRank;
    private long firstSequence;
    private Boolean bind;
    private ZContext context;
    private int handshakeMillis = 5000;
    private boolean vllmLoop;

    private Builder() {}

    /** PUB endpoint (required), e.g. {@code tcp://127.0.0.1:0}; offset by the DP rank. */
    public Builder endpoint(String endpoint) {
      this.endpoint = endpoint;
      return this;
    }

    /** ROUTER replay endpoint (always bound; offset by the DP rank), or {@code null} for none. */
    public Builder replayEndpoint(String replayEndpoint) {
      this.replayEndpoint = replayEndpoint;
      return this;
    }

    /** Topic, the first frame (default {@code ""}). */
    public Builder topic(String topic) {
      this.topic = topic;
      return this;
    }

    /** Replay ring buffer size in batches (default 10 000). */
    public Builder bufferSteps(int bufferSteps) {
      this.bufferSteps = bufferSteps;
      return this;
    }

    /** PUB send high-water mark (default 100 000). */
    public Builder hwm(int hwm) {
      this.hwm = hwm;
      return this;
    }

    /** Bound of the publish queue (default 100 000); {@code publish} blocks when it is full. */
    public Builder maxQueueSize(int maxQueueSize) {
      this.maxQueueSize = maxQueueSize;
      return this;
    }

    /** Replay reply shape (default {@link ReplyFormat#WITH_TOPIC}). */
    public Builder replyFormat(ReplyFormat replyFormat) {
      this.replyFormat = replyFormat;
      return this;
    }

    /**
     * Turns as vLLM's {@code ZmqEventPublisher._publisher_thread} takes them (default {@code
     * false}): each turn answers at most one waiting replay request, then waits up to 100 ms for
     * one batch to publish; an idle publisher answers a request within about 100 ms, a busy one
     * between two batches, several requests one turn each. Otherwise every waiting request is
     * answered each turn and the turn waits up to 5 ms (50 ms without a replay endpoint).
     */
    public Builder vllmLoop(boolean vllmLoop) {
      this.vllmLoop = vllmLoop;
      return this;
    }

    /** Data-parallel rank: offsets both endpoints' ports and is stamped on batches (default 0). */
    public Builder dataParallelRank(int dataParallelRank) {
      this.dataParallelRank = dataParallelRank;
      return this;
    }

    /** The first sequence number (default 0, as vLLM; other values simulate long-running pods). */
    public Builder firstSequence(long firstSequence) {
      this.firstSequence = firstSequence;
      return this;
    }

    /** Forces bind ({@code true}) or connect ({@code false}) instead of vLLM's endpoint rule. */
    public Builder bind(boolean bind) {
      this.bind = bind;
      return this;
    }

    /**
     * Connections whose ZMTP handshake has not completed within this time are dropped and retried
     * (default 5 s; JeroMQ's own default is 30 s and a rare loopback handshake stall would
     * otherwise last that long).
     */
    public Builder handshakeTimeout(java.time.Duration timeout) {
      Objects.requireNonNull(timeout, "publisher.handshakeTimeout");
      this.handshakeMillis = (int) Math.min(Integer.MAX_VALUE, timeout.toMillis());
      return this;
    }

    /** A shared JeroMQ context (not closed by the publisher); default: a private one. */
    public Builder context(ZContext context) {
      this.context = context;
      return this;
    }

    /**
     * Validates, opens the sockets (binding synchronously) and starts the publisher thread.
     *
     * @throws IllegalArgumentException naming the invalid field
     */
    public KvEventPublisher build() {
      if (endpoint == null || endpoint.isEmpty()) {
        throw new IllegalArgumentException("publisher.endpoint must be set");
      }
      Objects.requireNonNull(topic, "publisher.topic");
      Objects.requireNonNull(replyFormat, "publisher.replyFormat");
      if (bufferSteps < 1) {
        throw new IllegalArgumentException(
            "publisher.bufferSteps must be >= 1, was " + bufferSteps);
      }
      if (handshakeMillis < 1) {
        throw new IllegalArgumentException(
            "publisher.handshakeTimeout must be >= 1 ms, was " + handshakeMillis + " ms");
      }
      if (hwm < 0) {
        throw new IllegalArgumentException("publisher.hwm must be >= 0, was " + hwm);
      }
      if (maxQueueSize < 1) {
        throw new IllegalArgumentException(
            "publisher.maxQueueSize must be >= 1, was " + maxQueueSize);
      }
      if (dataParallelRank < 0) {
        throw new IllegalArgumentException(
            "publisher.dataParallelRank must be >= 0, was " + dataParallelRank);
      }
      return new KvEventPublisher(this);
    }
  }
}
