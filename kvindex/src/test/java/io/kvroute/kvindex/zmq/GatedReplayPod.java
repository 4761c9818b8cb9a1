package io.kvroute.kvindex.zmq;

import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.zmq.internal.Endpoints;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * A vLLM-like pod on real sockets (PUB + replay ROUTER, WITH_TOPIC replies) whose replay endpoint
 * can be held: a request for {@link #holdFrom(long)} or later (the subscriber asks from the batch
 * before the first one it misses, to prove the epoch) counts down {@link #held} and is answered
 * only after {@link #release} (or never, until {@link #close()}).
 *
 * <p>{@code publish}/{@code drop} from one test thread; the ROUTER has its own thread.
 */
final class GatedReplayPod implements AutoCloseable {
  private static final byte[] END = Endpoints.seqBytes(-1L);

  final CountDownLatch held = new CountDownLatch(1);
  final CountDownLatch release = new CountDownLatch(1);
  private final ZContext ctx = new ZContext(1);
  private final ZMQ.Socket pub;
  private final String endpoint;
  private final String replayEndpoint;
  private final byte[] topic;
  private final Map<Long, byte[]> sent = new ConcurrentHashMap<>();
  private final Thread router;
  private volatile long holdFrom = Long.MAX_VALUE;
  private volatile boolean running = true;
  private long nextSeq;

  GatedReplayPod(String topic) {
    this.topic = topic.getBytes(StandardCharsets.UTF_8);
    pub = ctx.getContext().socket(SocketType.PUB);
    pub.setLinger(0);
    pub.bind("tcp://127.0.0.1:0");
    endpoint = pub.getLastEndpoint();
    ZMQ.Socket r = ctx.getContext().socket(SocketType.ROUTER);
    r.setLinger(0);
    r.setReceiveTimeOut(10);
    r.bind("tcp://127.0.0.1:0");
    replayEndpoint = r.getLastEndpoint();
    router = new Thread(() -> serve(r), "gated-replay");
    router.setDaemon(true);
    router.start();
  }

  String endpoint() {
    return endpoint;
  }

  String replayEndpoint() {
    return replayEndpoint;
  }

  long nextSequence() {
    return nextSeq;
  }

  /** Replay requests for {@code seq} or later (starting at {@code seq - 1} or later) wait. */
  void holdFrom(long seq) {
    holdFrom = seq;
  }

  long publish(KvEventBatch batch) {
    long seq = drop(batch);
    pub.sendMore(topic);
    pub.sendMore(Endpoints.seqBytes(seq));
    pub.send(sent.get(seq).clone());
    return seq;
  }

  /** Buffers the batch for replay without publishing it. */
  long drop(KvEventBatch batch) {
    long seq = nextSeq++;
    sent.put(seq, KvEventCodec.encode(batch));
    return seq;
  }

  private void serve(ZMQ.Socket r) {
    try {
      while (running) {
        byte[] id = r.recv();
        if (id == null) {
          continue;
        }
        byte[][] rest = new byte[2][];
        int n = 0;
        while (r.hasReceiveMore()) {
          byte[] f = r.recv();
          if (n < 2) {
            rest[n] = f;
          }
          n++;
        }
        if (n != 2 || rest[1].length != 8) {
          continue;
        }
        long start = Endpoints.seqOf(rest[1]);
        if (start + 1 >= holdFrom) {
          held.countDown();
          while (running && !release.await(10, TimeUnit.MILLISECONDS)) {
            // held
          }
        }
        for (long seq = start; sent.containsKey(seq); seq++) {
          r.sendMore(id);
          r.sendMore(new byte[0]);
          r.sendMore(topic);
          r.sendMore(Endpoints.seqBytes(seq));
          r.send(sent.get(seq).clone());
        }
        r.sendMore(id);
        r.sendMore(new byte[0]);
        r.sendMore(new byte[0]);
        r.sendMore(END);
        r.send(new byte[0]);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      r.close();
    }
  }

  @Override
  public void close() {
    running = false;
    try {
      router.join(TimeUnit.SECONDS.toMillis(10));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    pub.close();
    ctx.close();
  }
}
