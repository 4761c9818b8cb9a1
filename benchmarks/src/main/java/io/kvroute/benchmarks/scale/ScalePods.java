package io.kvroute.benchmarks.scale;

import static io.kvroute.benchmarks.scale.ScaleModelRun.BLOCK;
import static io.kvroute.benchmarks.scale.ScaleModelRun.DOC_BLOCKS;
import static io.kvroute.benchmarks.scale.ScaleModelRun.MODEL;
import static io.kvroute.benchmarks.scale.ScaleModelRun.nowMicros;

import io.kvroute.benchmarks.scale.ScaleModelRun.Options;
import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The simulated pods of {@link ScaleModelRun}: the request workload, the pods' block pools and the
 * publisher threads that emit their vLLM KV-event batches over JeroMQ.
 */
final class ScalePods {
  private ScalePods() {}

  /** The shared documents: token ids, engine hashes and (per replica) request keys. */
  static final class Workload {
    final Options o;
    final int[][] docTokens;
    final long[][] docHashes;
    final double[] zipfCdf;

    Workload(Options o) {
      this.o = o;
      SplittableRandom rnd = new SplittableRandom(o.seed);
      docTokens = new int[o.docs][DOC_BLOCKS * BLOCK];
      docHashes = new long[o.docs][DOC_BLOCKS];
      for (int d = 0; d < o.docs; d++) {
        for (int i = 0; i < docTokens[d].length; i++) {
          docTokens[d][i] = rnd.nextInt(151_000);
        }
        long parent = 0; // the first block has no parent (vLLM: parent_block_hash None)
        for (int b = 0; b < DOC_BLOCKS; b++) {
          parent = blockHash(parent, docTokens[d], b * BLOCK);
          docHashes[d][b] = parent;
        }
      }
      zipfCdf = new double[o.docs];
      double sum = 0;
      for (int d = 0; d < o.docs; d++) {
        sum += 1.0 / Math.pow(d + 1, 0.9);
        zipfCdf[d] = sum;
      }
      for (int d = 0; d < o.docs; d++) {
        zipfCdf[d] /= sum;
      }
    }

    int pickDoc(SplittableRandom rnd) {
      double u = rnd.nextDouble();
      int i = Arrays.binarySearch(zipfCdf, u);
      return Math.min(o.docs - 1, i >= 0 ? i : -i - 1);
    }

    /** A chained 64-bit hash of a block's tokens (a stand-in for vLLM's sha256_cbor_64bit). */
    static long blockHash(long parent, int[] tokens, int off) {
      long h = parent ^ 0x27D4EB2F165667C5L;
      for (int i = 0; i < BLOCK; i++) {
        h = (h ^ tokens[off + i]) * 0x9E3779B97F4A7C15L;
        h ^= h >>> 29;
      }
      h ^= h >>> 32;
      h *= 0xD6E8FEB86659FD93L;
      h ^= h >>> 32;
      return h == 0 ? 1 : h;
    }
  }

  /** A set of non-zero longs: open addressing, linear probing, backward-shift deletion. */
  static final class LongSet {
    final long[] slots;
    final int mask;

    LongSet(int capacity) {
      int n = Integer.highestOneBit(Math.max(4, capacity * 2 - 1)) << 1;
      slots = new long[n];
      mask = n - 1;
    }

    int slot(long v) {
      long h = v * 0x9E3779B97F4A7C15L;
      return (int) (h ^ (h >>> 32)) & mask;
    }

    boolean contains(long v) {
      for (int i = slot(v); ; i = (i + 1) & mask) {
        long s = slots[i];
        if (s == v) {
          return true;
        }
        if (s == 0) {
          return false;
        }
      }
    }

    boolean add(long v) {
      for (int i = slot(v); ; i = (i + 1) & mask) {
        long s = slots[i];
        if (s == v) {
          return false;
        }
        if (s == 0) {
          slots[i] = v;
          return true;
        }
      }
    }

    void remove(long v) {
      int i = slot(v);
      while (slots[i] != v) {
        if (slots[i] == 0) {
          return;
        }
        i = (i + 1) & mask;
      }
      int hole = i;
      for (int j = (hole + 1) & mask; slots[j] != 0; j = (j + 1) & mask) {
        int home = slot(slots[j]);
        // move j into the hole if its home is not in (hole, j]
        boolean between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!between) {
          slots[hole] = slots[j];
          hole = j;
        }
      }
      slots[hole] = 0;
    }
  }

  /** One simulated pod: its block pool and its current request. */
  static final class Pod {
    final int id;
    final String topic;
    final SplittableRandom rnd;
    final long[] fifo;
    final LongSet held;
    int head;
    int size;
    double phase; // when in each engine step it publishes, as a fraction of the step
    long seq;
    // the current request: doc blocks [0, docLen) then tail blocks
    int doc;
    int docLen;
    int tailLen;
    int pos;
    long parent;
    int[] tailTokens = new int[0];
    ZMQ.Socket socket;

    Pod(int id, Options o, long seed) {
      this.id = id;
      this.topic = "kv@pod-" + id + "@" + MODEL;
      this.rnd = new SplittableRandom(seed);
      this.fifo = new long[o.poolBlocks];
      this.held = new LongSet(o.poolBlocks);
    }

    void newRequest(Workload w) {
      doc = w.pickDoc(rnd);
      docLen = 32 + rnd.nextInt(DOC_BLOCKS - 32 + 1);
      tailLen = w.o.tailMin + rnd.nextInt(w.o.tailMax - w.o.tailMin + 1);
      pos = 0;
      parent = 0;
      // prefix-cache hit: skip the document blocks this pod still holds
      while (pos < docLen && held.contains(w.docHashes[doc][pos])) {
        parent = w.docHashes[doc][pos];
        pos++;
      }
      if (tailTokens.length < tailLen * BLOCK) {
        tailTokens = new int[w.o.tailMax * BLOCK];
      }
      for (int i = 0; i < tailLen * BLOCK; i++) {
        tailTokens[i] = rnd.nextInt(151_000);
      }
    }

    /** Stores a block in the pool; returns the evicted hash or 0. */
    long hold(long h) {
      if (!held.add(h)) {
        return 0;
      }
      long evicted = 0;
      if (size == fifo.length) {
        evicted = fifo[head];
        held.remove(evicted);
        head = (head + 1) % fifo.length;
        size--;
      }
      fifo[(head + size) % fifo.length] = h;
      size++;
      return evicted;
    }
  }

  /**
   * The publisher threads: each owns the PUB sockets of its pods (created on it, used only by it)
   * and builds, encodes and sends their batches.
   */
  static final class Publishers {
    final Options o;
    final Workload w;
    final ZContext context;
    final boolean ownsContext;
    final List<Pod> pods = new ArrayList<>();
    final List<String> endpoints;
    final List<Thread> threads = new ArrayList<>();
    final LongAdder batches = new LongAdder();
    final LongAdder stored = new LongAdder();
    final LongAdder removed = new LongAdder();
    final LongAdder bytes = new LongAdder();
    final LongAdder sendRefused = new LongAdder();
    volatile boolean running = true;
    volatile boolean go;

    /** The engine step (per-pod batch interval) now; taken up at each publisher's next cycle. */
    volatile long stepNanos;

    long b0;
    long s0;
    long r0;
    long y0;

    record Window(double batches, double stored, double removed, double bytes) {}

    Publishers(Options o, Workload w, ZContext shared) throws InterruptedException {
      this.o = o;
      this.w = w;
      this.ownsContext = shared == null;
      this.stepNanos = TimeUnit.MILLISECONDS.toNanos(o.stepMs);
      this.context = shared != null ? shared : new ZContext(1);
      String[] eps = new String[o.pods];
      for (int i = 0; i < o.pods; i++) {
        pods.add(new Pod(i, o, o.seed * 1_000_003L + i));
      }
      CountDownLatch bound = new CountDownLatch(o.publisherThreads);
      for (int t = 0; t < o.publisherThreads; t++) {
        int tt = t;
        Thread th = new Thread(() -> loop(tt, eps, bound), "scale-publisher-" + t);
        th.setDaemon(true);
        threads.add(th);
        th.start();
      }
      bound.await();
      this.endpoints = List.of(eps);
    }

    void start() {
      go = true;
    }

    void resetWindow() {
      b0 = batches.sum();
      s0 = stored.sum();
      r0 = removed.sum();
      y0 = bytes.sum();
    }

    Window window(double seconds) {
      return new Window(
          (batches.sum() - b0) / seconds,
          (stored.sum() - s0) / seconds,
          (removed.sum() - r0) / seconds,
          (bytes.sum() - y0) / seconds);
    }

    void loop(int t, String[] eps, CountDownLatch bound) {
      List<Pod> mine = new ArrayList<>();
      for (Pod p : pods) {
        if (p.id % o.publisherThreads == t) {
          ZMQ.Socket s = context.createSocket(SocketType.PUB);
          s.setLinger(0);
          s.setSndHWM(100_000);
          if (o.transport.equals("inproc")) {
            String ep = "inproc://scale-pod-" + p.id;
            s.bind(ep);
            eps[p.id] = ep;
          } else {
            s.bind("tcp://127.0.0.1:0");
            eps[p.id] = s.getLastEndpoint();
          }
          p.socket = s;
          mine.add(p);
        }
      }
      bound.countDown();
      while (!go && running) {
        LockSupport.parkNanos(10_000_000L);
      }
      // pods in phase order, a cursor walks them cycle after cycle: O(1) per batch; the step
      // (the load profile's interval) is read at each cycle's start
      for (Pod p : mine) {
        p.phase = p.rnd.nextDouble();
        p.newRequest(w);
      }
      mine.sort((a, b) -> Double.compare(a.phase, b.phase));
      long step = stepNanos;
      long cycleStart = System.nanoTime();
      int i = 0;
      while (running && !mine.isEmpty()) {
        Pod p = mine.get(i);
        long due = cycleStart + (long) (p.phase * step);
        long now = System.nanoTime();
        if (due - now > 0) {
          LockSupport.parkNanos(due - now);
          continue;
        }
        if (now - due > step) { // fell whole steps behind: skip them, do not burst
          cycleStart += (now - due) / step * step;
        }
        step(p);
        if (++i == mine.size()) {
          i = 0;
          cycleStart += step;
          step = stepNanos;
        }
      }
      for (Pod p : mine) {
        p.socket.close();
      }
    }

    /** One engine step of a pod: one batch. */
    void step(Pod p) {
      int k = o.blocksMin + p.rnd.nextInt(o.blocksMax - o.blocksMin + 1);
      List<KvEvent> events = new ArrayList<>(4);
      long[] evicted = new long[k];
      int nEvicted = 0;
      int storedBlocks = 0;
      while (k > 0) {
        int total = p.docLen + p.tailLen;
        if (p.pos >= total) {
          p.newRequest(w);
          continue;
        }
        int n = Math.min(k, total - p.pos);
        long[] hashes = new long[n];
        int[] tokens = new int[n * BLOCK];
        long parent = p.parent;
        boolean hasParent = p.parent != 0;
        for (int i = 0; i < n; i++) {
          int b = p.pos + i;
          long h;
          if (b < p.docLen) {
            System.arraycopy(w.docTokens[p.doc], b * BLOCK, tokens, i * BLOCK, BLOCK);
            h = w.docHashes[p.doc][b];
          } else {
            System.arraycopy(p.tailTokens, (b - p.docLen) * BLOCK, tokens, i * BLOCK, BLOCK);
            h = Workload.blockHash(p.parent, tokens, i * BLOCK);
          }
          hashes[i] = h;
          p.parent = h;
          long e = p.hold(h);
          if (e != 0) {
            if (nEvicted == evicted.length) {
              evicted = Arrays.copyOf(evicted, nEvicted * 2);
            }
            evicted[nEvicted++] = e;
          }
        }
        events.add(
            KvEvent.BlockStored.of(
                EngineHashes.ofInts(hashes),
                hasParent ? EngineHashes.ofInts(parent) : null,
                tokens,
                BLOCK));
        storedBlocks += n;
        p.pos += n;
        k -= n;
      }
      if (nEvicted > 0) {
        events.add(KvEvent.BlockRemoved.of(EngineHashes.ofInts(Arrays.copyOf(evicted, nEvicted))));
      }
      KvEventBatch batch = KvEventBatch.of(nowMicros() / 1e6, events).withDataParallelRank(0);
      byte[] payload = KvEventCodec.encode(batch);
      byte[] seq = new byte[8];
      long s = p.seq++;
      for (int i = 7; i >= 0; i--) {
        seq[i] = (byte) s;
        s >>>= 8;
      }
      boolean ok =
          p.socket.sendMore(p.topic) && p.socket.sendMore(seq) && p.socket.send(payload, 0);
      if (!ok) {
        sendRefused.increment();
      }
      batches.increment();
      stored.add(storedBlocks);
      removed.add(nEvicted);
      bytes.add(payload.length);
    }

    void stop() throws InterruptedException {
      running = false;
      for (Thread t : threads) {
        t.join(5000);
      }
      if (ownsContext) {
        context.close();
      }
    }
  }
}
