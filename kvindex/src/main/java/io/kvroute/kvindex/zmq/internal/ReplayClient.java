package io.kvroute.kvindex.zmq.internal;

import java.nio.channels.SelectableChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import zmq.ZError;
import zmq.util.Errno;

/**
 * Fetches replays from publishers' ROUTER endpoints (vLLM's replay protocol: a DEALER sends {@code
 * ["", start_seq]}; replies {@code [topic, seq, payload]} or, from older vLLM and SGLang, {@code
 * [seq, payload]}; the end marker has an empty last frame or the sequence {@code ff×8}) on {@code
 * replayThreads} threads ({@code kvindex-replay-<i>}). Jobs wait in a queue bounded by the number
 * of streams: a stream runs one replay at a time (two for a moment, while a cancelled job notices),
 * so a replica that fell behind on every pod queues one replay per pod and is never refused one
 * ({@code kvroute_kvindex_replay_queue_depth}).
 *
 * <p>A job only does I/O: it decodes each reply and posts it to the stream's shard, where the
 * {@link Sequencer} decides; it posts how the answer ended ({@link Sequencer.ReplayEnd#END_MARKER},
 * or {@link Sequencer.ReplayEnd#FAILED} after {@code replayIdleTimeout} without a reply, {@code
 * replayTimeout} in all, a dropped connection, or an error). It stops, posting nothing more, as
 * soon as the stream no longer waits for it. A reply over {@code maxPayloadBytes} makes JeroMQ drop
 * the connection unread: the job posts that sequence number as unreadable and asks again from the
 * next one on a fresh DEALER.
 *
 * <p>Thread-safe.
 */
public final class ReplayClient {
  /** How long a connection may wait for its ZMTP handshake before it is taken as stalled. */
  static final long STALL_FIRST_MS = 250;

  private static final long END = -1L;
  // JeroMQ keeps errno per thread; its event hooks run on the JeroMQ I/O thread that set it
  private static final Errno JEROMQ_ERRNO = new Errno();

  private final SubscriberConfig config;
  private final ZContext context;
  private final Telemetry telemetry;
  private final ThreadPoolExecutor executor;
  private volatile boolean running = true;

  ReplayClient(SubscriberConfig config, ZContext context, Telemetry telemetry) {
    this.config = config;
    this.context = context;
    this.telemetry = telemetry;
    AtomicInteger n = new AtomicInteger();
    this.executor =
        new ThreadPoolExecutor(
            config.replayThreads(),
            config.replayThreads(),
            0,
            TimeUnit.MILLISECONDS,
            new LinkedBlockingQueue<>(), // bounded by the streams: one replay each at a time
            r -> {
              Thread t = new Thread(r, "kvindex-replay-" + n.getAndIncrement());
              t.setDaemon(true);
              return t;
            },
            new ThreadPoolExecutor.AbortPolicy());
    telemetry.gauge(
        "kvroute.kvindex.replay.queue.depth",
        () -> executor.getQueue().size(),
        "replays waiting for a replay thread");
  }

  /** Starts replay {@code id} of {@code s} from {@code from} (called on the stream's shard). */
  void start(Stream s, long id, long from) {
    try {
      executor.execute(() -> run(s, id, from));
    } catch (RejectedExecutionException e) {
      // only once closed
      telemetry.replayRejected();
      s.shard.post(() -> s.replayEnded(id, Sequencer.ReplayEnd.FAILED, s.shard.now()));
    }
  }

  /** Stops the jobs (within one receive slice) and waits for them. */
  void close() {
    running = false;
    executor.shutdown();
    try {
      if (!executor.awaitTermination(60, TimeUnit.SECONDS)) {
        telemetry.warnOncePerSubscriber(
            "replay_stop", "KV event replay threads did not stop within {} s", 60);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * What a replay DEALER's event hook saw. Written on a JeroMQ I/O thread, read by the replay job.
   */
  static final class DealerEvents {
    /** JeroMQ dropped the connection for a frame over {@code maxPayloadBytes}. */
    final AtomicBoolean refused = new AtomicBoolean();

    /** The publisher closed the connection (a restart?). */
    final AtomicBoolean lost = new AtomicBoolean();

    /** A TCP connection is up (its handshake may not be). */
    volatile boolean connected;

    /** When the last TCP connection came up (the subscriber's clock). */
    volatile long connectedAt;

    /** The current TCP connection, as JeroMQ reported it. */
    volatile SelectableChannel channel;

    /** The ZMTP handshake of the current connection completed. */
    volatile boolean handshaken;
  }

  /**
   * Whether a connection whose handshake has not completed is stalled: its channel is open but no
   * selector watches it, so JeroMQ will never write its greeting nor read the peer's (JeroMQ
   * registers a healthy connection within one pass of its I/O thread). Unknown channels are not.
   */
  public static boolean stalled(SelectableChannel channel) {
    return channel != null && channel.isOpen() && !channel.isRegistered();
  }

  /**
   * A replay DEALER whose connection events land in {@code events} (JeroMQ reconnects by itself
   * after most drops; a stalled handshake is handled by the job, see {@link #run}).
   */
  ZMQ.Socket newDealer(DealerEvents events) {
    ZMQ.Socket d = context.getContext().socket(SocketType.DEALER);
    d.setLinger(0);
    d.setReceiveTimeOut((int) Math.min(config.replayIdleMs(), config.pollIntervalMs()));
    d.setHandshakeIvl(config.handshakeMs());
    d.setMaxMsgSize(config.maxPayloadBytes());
    boolean debugging = telemetry.debugging();
    d.setEventHook(
        ev -> {
          int errno = JEROMQ_ERRNO.get();
          if (debugging) {
            telemetry.debug(
                "(replay dealer)",
                "event " + ev.getEvent() + " " + ev.getAddress() + " errno " + errno);
          }
          switch (ev.getEvent()) {
            case CONNECTED -> {
              events.handshaken = false;
              events.channel = ev.getValue() instanceof SelectableChannel ch ? ch : null;
              events.connectedAt = config.nanoClock().getAsLong();
              events.connected = true;
            }
            case HANDSHAKE_PROTOCOL -> events.handshaken = true;
            case DISCONNECTED -> {
              events.connected = false;
              events.handshaken = false;
              if (errno == ZError.EMSGSIZE) {
                events.refused.set(true);
              } else if (errno == ZError.ENOTCONN) {
                events.lost.set(true); // the publisher closed (a restart?)
              }
            }
            default -> {}
          }
        },
        debugging
            ? ZMQ.EVENT_ALL
            : ZMQ.EVENT_CONNECTED | ZMQ.EVENT_HANDSHAKE_PROTOCOL | ZMQ.EVENT_DISCONNECTED);
    return d;
  }

  private boolean wanted(Stream s, long id) {
    return running && !s.removed && s.activeReplay == id;
  }

  /**
   * One replay attempt: connect a fresh DEALER, send {@code ["", from]} once its ZMTP handshake
   * completed, and post each reply to the stream's shard until the end marker.
   *
   * <p><b>Stalled handshakes.</b> JeroMQ 0.6.0 can leave a connect-side connection whose TCP
   * connect completed asynchronously without ever registering it with its selector ({@code
   * Poller.run} re-registers handles in one pass over a hash set: when {@code
   * TcpConnecter.connectEvent}'s cancelled handle and the new engine's handle are in the same pass,
   * the engine's handle is never registered). The connection is then up but JeroMQ never sends its
   * ZMTP greeting: the publisher waits, and nothing happens until {@code handshakeTimeout}. Seen
   * against vLLM's own publisher in a few percent of replay connections. A connection whose
   * handshake has not completed {@value #STALL_FIRST_MS} ms after its TCP connect (doubling per
   * stall, up to {@code handshakeTimeout}) and whose channel no selector watches ({@link #stalled})
   * is abandoned for a fresh DEALER: {@code kvroute_kvindex_handshake_stalls{socket=replay}}. The
   * request is only sent once the handshake completed, so an abandoned connection never carried it.
   */
  private void run(Stream s, long id, long from) {
    Sequencer.ReplayEnd end = Sequencer.ReplayEnd.FAILED;
    String failure = "timeout"; // why, if it fails
    long expected = from;
    ZMQ.Socket d = null;
    try {
      long idleNanos = TimeUnit.MILLISECONDS.toNanos(config.replayIdleMs());
      long handshakeNanos = TimeUnit.MILLISECONDS.toNanos(config.handshakeMs());
      long stallNanos = Math.min(handshakeNanos, TimeUnit.MILLISECONDS.toNanos(STALL_FIRST_MS));
      long deadline = config.nanoClock().getAsLong() + config.replayTimeoutNanos();
      DealerEvents events = null;
      boolean sent = false;
      long idleSince = config.nanoClock().getAsLong();
      while (wanted(s, id) && config.nanoClock().getAsLong() - deadline < 0) {
        if (d == null) {
          events = new DealerEvents(); // fresh flags: a closed DEALER may still report
          d = newDealer(events);
          d.connect(s.replayEndpoint);
          sent = false;
        }
        if (!sent) {
          if (events.handshaken) {
            d.sendMore(new byte[0]);
            d.send(Endpoints.seqBytes(expected));
            sent = true;
            idleSince = config.nanoClock().getAsLong();
            if (telemetry.debugging()) {
              telemetry.debug(
                  s.label,
                  "replay #" + id + " request from " + Long.toUnsignedString(expected) + " sent");
            }
          } else if (events.connected
              && config.nanoClock().getAsLong() - events.connectedAt - stallNanos >= 0
              && config.stallCheck().test(events.channel)) {
            telemetry.handshakeStall("replay");
            telemetry.debug(s.label, "replay #" + id + ": handshake stalled; reconnecting");
            d.close();
            d = null;
            stallNanos = Math.min(handshakeNanos, 2 * stallNanos);
            continue;
          }
        }
        List<byte[]> frames = receiveAll(d);
        if (frames == null) {
          if (events.refused.get()) {
            // the next reply was over maxPayloadBytes: skip it, ask again from the one after
            d.close();
            d = null;
            long skipped = expected++;
            long waited = postTimed(s, id, Received.unreadable(skipped, s.lastTopic));
            if (waited < 0) {
              return;
            }
            deadline += waited;
            continue;
          }
          if (events.lost.get()) {
            failure = "disconnected"; // the publisher went away (a restart?)
            end = Sequencer.ReplayEnd.DISCONNECTED;
            break;
          }
          if (config.nanoClock().getAsLong() - idleSince >= idleNanos) {
            failure = "idle";
            break;
          }
          continue;
        }
        idleSince = config.nanoClock().getAsLong();
        if (telemetry.debugging()) {
          telemetry.debug(s.label, "replay #" + id + " reply " + describe(frames));
        }
        if (!frames.isEmpty() && frames.get(0).length == 0) {
          frames.remove(0);
        }
        if (frames.isEmpty()
            || frames.get(frames.size() - 1).length == 0
            || (frames.size() >= 2 && isEnd(frames.get(frames.size() - 2)))) {
          end = Sequencer.ReplayEnd.END_MARKER;
          break;
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
        expected = seq + 1;
        int size = payload.length;
        Received r =
            Received.decode(
                seq,
                topic,
                size > config.maxPayloadBytes() ? null : payload,
                size,
                config.dialect());
        long waited = postTimed(s, id, r);
        if (waited < 0) {
          return;
        }
        deadline += waited; // a shard slow to take the answer is not the publisher failing
        idleSince += waited;
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    } catch (RuntimeException e) {
      failure = "error";
      telemetry.warnOnce(s.label, "replay_error", String.valueOf(e));
    } finally {
      if (d != null) {
        d.close();
      }
    }
    if (telemetry.debugging()) {
      telemetry.debug(
          s.label,
          "replay #"
              + id
              + (end == Sequencer.ReplayEnd.END_MARKER
                  ? " got its end marker"
                  : wanted(s, id) ? " failed: " + failure : " no longer wanted"));
    }
    if (end != Sequencer.ReplayEnd.END_MARKER && wanted(s, id)) {
      telemetry.replayAttemptFailed(failure);
    }
    // through the replay inbox, behind the batches posted before it
    Sequencer.ReplayEnd how = end;
    try {
      s.shard.postReplay(() -> s.replayEnded(id, how, s.shard.now()), () -> wanted(s, id));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private boolean post(Stream s, long id, Received r) throws InterruptedException {
    return s.shard.postReplay(() -> s.replayed(id, r, s.shard.now()), () -> wanted(s, id));
  }

  /**
   * Posts {@code r}; returns how long that waited for room in the shard's replay inbox (a busy
   * shard: time the replay's deadlines do not count), or -1 when the replay is no longer wanted.
   */
  private long postTimed(Stream s, long id, Received r) throws InterruptedException {
    long t0 = config.nanoClock().getAsLong();
    if (!post(s, id, r)) {
      return -1;
    }
    return config.nanoClock().getAsLong() - t0;
  }

  private static String describe(List<byte[]> frames) {
    StringBuilder sb = new StringBuilder().append(frames.size()).append(" frame(s) [");
    for (int i = 0; i < frames.size(); i++) {
      byte[] f = frames.get(i);
      sb.append(i == 0 ? "" : ", ")
          .append(f.length == 8 ? "seq " + Endpoints.seqOf(f) : f.length + " bytes");
    }
    return sb.append(']').toString();
  }

  private static boolean isEnd(byte[] seqFrame) {
    return seqFrame.length == 8 && Endpoints.seqOf(seqFrame) == END;
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
}
