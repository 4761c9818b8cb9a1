package io.kvroute.benchmarks;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import io.kvroute.kvindex.zmq.PodEndpoint;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The KV-event subscriber's receive cost per message against the number of SUB sockets (connect
 * mode: one per pod): P JeroMQ PUB sockets on loopback, driven by one thread at a fixed total rate
 * (round robin, one small vLLM batch per message), and one {@link KvEventSubscriber} subscribed to
 * every pod with a no-op sink. Over the measurement window it reports the CPU time ({@link
 * ThreadMXBean#getThreadCpuTime}) per message received of the subscriber's I/O thread ({@code
 * kvindex-zmq-io*}), of the JeroMQ threads of its context (TCP reads) and of its shard threads,
 * and, as the floor measured in the same run with the same publishers, the CPU per message of one
 * plain JeroMQ SUB socket connected to every publisher and read with blocking receives.
 *
 * <p>Run: {@code java -cp benchmarks/target/benchmarks.jar io.kvroute.benchmarks.SubscriberIoRun
 * --sockets 200,1000 --rate 4000 --seconds 20}. The class only uses {@code kvindex}'s public API,
 * so it can be compiled against an older kvindex jar to measure the code before a change (the
 * before/after figures in {@code docs/benchmarks.md} were made that way). Needs about 4 file
 * descriptors per socket ({@code ulimit -n}).
 */
public final class SubscriberIoRun {
  private SubscriberIoRun() {}

  /** Runs the measurement for each socket count. */
  public static void main(String[] args) throws Exception {
    List<Integer> counts = List.of(200, 1000);
    int rate = 4000;
    int seconds = 20;
    int warmup = 5;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--sockets" ->
            counts = java.util.Arrays.stream(args[i + 1].split(",")).map(Integer::valueOf).toList();
        case "--rate" -> rate = Integer.parseInt(args[i + 1]);
        case "--seconds" -> seconds = Integer.parseInt(args[i + 1]);
        case "--warmup" -> warmup = Integer.parseInt(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    System.out.printf(
        "subscriber I/O: %s sockets, %d messages/s in all, %d s warm-up, %d s window; %s, %d"
            + " cores, load %s%n",
        counts,
        rate,
        warmup,
        seconds,
        Machine.cpuModel(),
        Runtime.getRuntime().availableProcessors(),
        load());
    for (int n : counts) {
      run(n, rate, warmup, seconds);
    }
  }

  private static void run(int pods, int rate, int warmup, int seconds) throws Exception {
    ThreadMXBean tmx = ManagementFactory.getThreadMXBean();
    byte[] payload =
        KvEventCodec.encode(
            KvEventBatch.of(
                1.0,
                List.of(KvEvent.BlockStored.of(EngineHashes.ofInts(1, 2), null, new int[32], 16))));
    AtomicLongArray perPod = new AtomicLongArray(pods);
    AtomicLong received = new AtomicLong();
    KvEventListener counting =
        new KvEventListener() {
          @Override
          public void onBatch(
              String podId, String topic, long seq, KvEventBatch batch, boolean replayed) {
            received.incrementAndGet();
            perPod.incrementAndGet(Integer.parseInt(podId.substring(1)));
          }
        };
    try (ZContext pubCtx = new ZContext(1)) {
      List<ZMQ.Socket> pubs = new ArrayList<>();
      for (int p = 0; p < pods; p++) {
        ZMQ.Socket s = pubCtx.createSocket(SocketType.PUB);
        s.setLinger(0);
        s.setSndHWM(100_000);
        s.bind("tcp://127.0.0.1:0");
        pubs.add(s);
      }
      Set<Long> before = threadIds(tmx);
      KvEventSubscriber sub =
          KvEventSubscriber.builder()
              .sink(KvEventSink.NOOP)
              .listener(counting)
              .topic("kv@")
              .build()
              .start();
      try {
        for (int p = 0; p < pods; p++) {
          sub.addPod(PodEndpoint.of("p" + p, pubs.get(p).getLastEndpoint())).join();
        }
        Set<Long> mine = threadIds(tmx);
        mine.removeAll(before);
        long[] seq = new long[pods];
        // every pod delivers (slow joiners: publish until each SUB has seen one message)
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        for (boolean all = false; !all; ) {
          all = true;
          for (int p = 0; p < pods; p++) {
            if (perPod.get(p) == 0) {
              all = false;
              send(pubs.get(p), p, seq[p]++, payload);
            }
          }
          if (System.nanoTime() - deadline > 0) {
            throw new IllegalStateException("not every SUB connected within 120 s");
          }
          LockSupport.parkNanos(20_000_000);
        }
        Window w = drive(pubs, seq, payload, rate, warmup, seconds, received, () -> cpu(tmx, mine));
        sub.close();
        Window f = floor(pubs, seq, payload, rate, warmup, seconds, tmx);
        System.out.printf(
            "sockets=%d sent/s=%.0f received/s=%.0f io_us_per_msg=%.2f zmq_io_us_per_msg=%.2f"
                + " shard_us_per_msg=%.2f io_cores=%.3f | floor (one JeroMQ SUB, blocking recv):"
                + " received/s=%.0f recv_us_per_msg=%.2f zmq_io_us_per_msg=%.2f | io/floor=%.2f"
                + " load=%s%n",
            pods,
            w.sent / w.secs,
            w.got / w.secs,
            w.us(0),
            w.us(1),
            w.us(2),
            w.cpu[0] / 1e9 / w.secs,
            f.got / f.secs,
            f.us(0),
            f.us(1),
            w.us(0) / f.us(0),
            load());
      } finally {
        sub.close(); // idempotent
        for (ZMQ.Socket s : pubs) {
          s.close();
        }
      }
    }
  }

  /** What one measurement window saw: messages sent and received, CPU nanoseconds by group. */
  private record Window(long sent, long got, double secs, long[] cpu) {
    double us(int group) {
      return cpu[group] / 1e3 / Math.max(1, got);
    }
  }

  /** Publishes at {@code rate} round robin; measures the window after the warm-up. */
  private static Window drive(
      List<ZMQ.Socket> pubs,
      long[] seq,
      byte[] payload,
      int rate,
      int warmup,
      int seconds,
      AtomicLong received,
      java.util.function.Supplier<long[]> cpu) {
    int pods = pubs.size();
    long intervalNanos = TimeUnit.SECONDS.toNanos(1) / rate;
    long next = System.nanoTime();
    int cursor = 0;
    long warmEnd = next + TimeUnit.SECONDS.toNanos(warmup);
    long end = warmEnd + TimeUnit.SECONDS.toNanos(seconds);
    boolean measuring = false;
    long r0 = 0;
    long sent0 = 0;
    long sent = 0;
    long[] cpu0 = null;
    long t0 = 0;
    while (true) {
      long now = System.nanoTime();
      if (!measuring && now - warmEnd >= 0) {
        measuring = true;
        t0 = now;
        r0 = received.get();
        sent0 = sent;
        cpu0 = cpu.get();
      }
      if (now - end >= 0) {
        break;
      }
      while (next - now <= 0) {
        send(pubs.get(cursor), cursor, seq[cursor]++, payload);
        sent++;
        cursor = (cursor + 1) % pods;
        next += intervalNanos;
      }
      LockSupport.parkNanos(Math.max(50_000, next - now));
    }
    long t1 = System.nanoTime();
    long[] cpu1 = cpu.get();
    long[] d = new long[cpu1.length];
    for (int i = 0; i < d.length; i++) {
      d[i] = cpu1[i] - cpu0[i];
    }
    return new Window(sent - sent0, received.get() - r0, (t1 - t0) / 1e9, d);
  }

  /**
   * The floor: one plain JeroMQ SUB socket connected to every publisher, read by one thread with
   * blocking receives (no sequencing, no hand-off): JeroMQ's own cost of a message.
   */
  private static Window floor(
      List<ZMQ.Socket> pubs,
      long[] seq,
      byte[] payload,
      int rate,
      int warmup,
      int seconds,
      ThreadMXBean tmx)
      throws InterruptedException {
    Set<Long> before = threadIds(tmx);
    AtomicLong received = new AtomicLong();
    try (ZContext ctx = new ZContext(1)) {
      ZMQ.Socket sub = ctx.createSocket(SocketType.SUB);
      sub.setLinger(0);
      sub.setRcvHWM(100_000);
      sub.setReceiveTimeOut(100);
      sub.subscribe("kv@".getBytes(StandardCharsets.UTF_8));
      for (ZMQ.Socket p : pubs) {
        sub.connect(p.getLastEndpoint());
      }
      Thread reader =
          new Thread(
              () -> {
                while (!Thread.currentThread().isInterrupted()) {
                  byte[] f = sub.recv();
                  if (f == null) {
                    continue;
                  }
                  while (sub.hasReceiveMore()) {
                    sub.recv();
                  }
                  received.incrementAndGet();
                }
              },
              "floor-recv");
      reader.start();
      Set<Long> mine = threadIds(tmx);
      mine.removeAll(before);
      long id = reader.getId();
      // every connection joined: publish to each until its message count grew past the pod count
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (received.get() < 3L * pubs.size() && System.nanoTime() - deadline < 0) {
        for (int p = 0; p < pubs.size(); p++) {
          send(pubs.get(p), p, seq[p]++, payload);
        }
        LockSupport.parkNanos(20_000_000);
      }
      Window w =
          drive(
              pubs,
              seq,
              payload,
              rate,
              warmup,
              seconds,
              received,
              () -> {
                long r = tmx.getThreadCpuTime(id);
                long others = 0;
                for (long t : mine) {
                  if (t != id) {
                    long c = tmx.getThreadCpuTime(t);
                    others += Math.max(0, c);
                  }
                }
                return new long[] {r, others};
              });
      reader.interrupt();
      reader.join(5000);
      sub.close();
      return w;
    }
  }

  private static void send(ZMQ.Socket pub, int pod, long seq, byte[] payload) {
    pub.sendMore(("kv@p" + pod + "@m").getBytes(StandardCharsets.UTF_8));
    pub.sendMore(ByteBuffer.allocate(8).putLong(seq).array());
    pub.send(payload.clone());
  }

  private static Set<Long> threadIds(ThreadMXBean tmx) {
    Set<Long> ids = new HashSet<>();
    for (long id : tmx.getAllThreadIds()) {
      ids.add(id);
    }
    return ids;
  }

  /** CPU nanoseconds of the subscriber's threads: I/O, JeroMQ (its context), shards. */
  private static long[] cpu(ThreadMXBean tmx, Set<Long> ids) {
    long[] c = new long[3];
    for (long id : ids) {
      java.lang.management.ThreadInfo info = tmx.getThreadInfo(id);
      long t = tmx.getThreadCpuTime(id);
      if (info == null || t < 0) {
        continue;
      }
      String name = info.getThreadName();
      if (name.startsWith("kvindex-zmq-io")) {
        c[0] += t;
      } else if (name.startsWith("kvindex-shard")) {
        c[2] += t;
      } else if (!name.startsWith("kvindex-replay")) {
        c[1] += t; // JeroMQ's I/O and reaper threads of the subscriber's context
      }
    }
    return c;
  }

  private static String load() {
    return String.format(
        "%.2f", ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
  }
}
