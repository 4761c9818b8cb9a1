package io.kvroute.benchmarks.scale;

import static io.kvroute.benchmarks.scale.ScaleModelRun.BLOCK;
import static io.kvroute.benchmarks.scale.ScaleModelRun.MODEL;
import static io.kvroute.benchmarks.scale.ScaleModelRun.NANO_BASE;
import static io.kvroute.benchmarks.scale.ScaleModelRun.nowMicros;

import io.kvroute.benchmarks.redis.RedisProcess;
import io.kvroute.benchmarks.scale.ScaleModelRun.Options;
import io.kvroute.benchmarks.scale.ScalePods.Workload;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import io.kvroute.kvindex.zmq.PodEndpoint;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.ZContext;

/**
 * The gateway replicas of {@link ScaleModelRun}: each subscribes to every pod and applies the
 * events to its index, timing the lag; and the histogram the run reports from.
 */
final class ScaleReplicas {
  /** The lookups' CPU time (a lookup's wall time beyond it was spent off the CPU). */
  static final ThreadMXBean CPU = java.lang.management.ManagementFactory.getThreadMXBean();

  private ScaleReplicas() {}

  /** A lock-free log-linear histogram of microsecond values (32 sub-buckets per power of 2). */
  static final class Histogram {
    static final int SUB = 32;
    final AtomicLongArray counts = new AtomicLongArray(64 * SUB);

    void record(long micros) {
      long v = Math.max(0, micros);
      int idx;
      if (v < SUB) {
        idx = (int) v;
      } else {
        int exp = 63 - Long.numberOfLeadingZeros(v); // >= 5
        int sub = (int) ((v >>> (exp - 5)) & (SUB - 1));
        idx = (exp - 4) * SUB + sub;
      }
      counts.incrementAndGet(Math.min(idx, counts.length() - 1));
    }

    long count() {
      long n = 0;
      for (int i = 0; i < counts.length(); i++) {
        n += counts.get(i);
      }
      return n;
    }

    /** The value at quantile {@code q} (bucket midpoint), NaN if empty. */
    double percentile(double q) {
      long n = count();
      if (n == 0) {
        return Double.NaN;
      }
      long rank = (long) Math.ceil(q * n);
      long seen = 0;
      for (int i = 0; i < counts.length(); i++) {
        seen += counts.get(i);
        if (seen >= Math.max(1, rank)) {
          if (i < SUB) {
            return i;
          }
          int exp = i / SUB + 4;
          int sub = i % SUB;
          double lo = (double) (SUB + sub) * (1L << (exp - 5));
          double width = 1L << (exp - 5);
          return lo + width / 2;
        }
      }
      return Double.NaN;
    }
  }

  /**
   * The control: the replicas' lookup (a document's 8,192 tokens over 100 pods, every {@code
   * --lookup-interval-ms}) on an index of its own that nothing writes to, in the same process. Its
   * latency is what the machine (CPU share, GC pauses, scheduling) adds to any lookup; a replica's
   * lookups beyond it are the index's.
   */
  static final class ControlLookups {
    final BlockIndex index =
        BlockIndex.inMemory(IndexConfig.builder().blockSize(BLOCK).modelName(MODEL).build());
    final long[][] docKeys;
    final List<String> pods = new ArrayList<>();
    final Options o;
    volatile Histogram phase = new Histogram();
    volatile Histogram phaseCpu = new Histogram();
    volatile boolean running = true;
    final Thread thread;

    ControlLookups(Options o, Workload w) {
      this.o = o;
      int docs = Math.min(8, w.docTokens.length);
      docKeys = new long[docs][];
      for (int p = 0; p < Math.min(100, o.pods); p++) {
        pods.add("control-" + p);
      }
      for (int d = 0; d < docs; d++) {
        docKeys[d] = index.requestKeys(w.docTokens[d], (String) null);
        for (String pod : pods) {
          index.blockStored(pod, w.docHashes[d], false, 0, w.docTokens[d], BLOCK, null, null, 0);
        }
      }
      thread = new Thread(this::run, "scale-control-lookups");
      thread.setDaemon(true);
    }

    void run() {
      PrefixMatch into = new PrefixMatch();
      long interval = TimeUnit.MILLISECONDS.toNanos(o.lookupIntervalMs);
      long next = System.nanoTime();
      int d = 0;
      while (running) {
        long[] keys = docKeys[d++ % docKeys.length];
        long c0 = CPU.getCurrentThreadCpuTime();
        long t0 = System.nanoTime();
        index.lookup(keys, keys.length, pods, into);
        phase.record((System.nanoTime() - t0) / 1000);
        phaseCpu.record((CPU.getCurrentThreadCpuTime() - c0) / 1000);
        next += interval;
        long wait = next - System.nanoTime();
        if (wait > 0) {
          LockSupport.parkNanos(wait);
        } else {
          next = System.nanoTime();
        }
      }
    }

    /** Starts the next phase: returns the last one's latencies (wall, then CPU time). */
    Histogram[] startPhase() {
      Histogram[] last = {phase, phaseCpu};
      phase = new Histogram();
      phaseCpu = new Histogram();
      return last;
    }
  }

  /** One gateway replica: a subscriber to every pod, an index, a lookup thread. */
  static final class Replica implements KvEventListener {
    final int n;
    final Options o;
    final Workload w;
    final BlockIndex index;
    final RedisBlockIndex redisIndex;
    final KvEventSubscriber subscriber;
    final Set<Long> threads = ConcurrentHashMap.newKeySet();
    final long[][] docKeys;
    final List<String> podNames = new ArrayList<>();
    final SimpleMeterRegistry meters = new SimpleMeterRegistry();
    volatile Histogram lag = new Histogram();
    volatile Histogram lookup = new Histogram();
    volatile Histogram phaseLag = new Histogram();
    volatile Histogram phaseLookup = new Histogram();
    volatile Histogram phaseLookupCpu = new Histogram();

    /** Per 100 ms slot of apply time since {@link #slotBase}: batches applied, and those late. */
    final AtomicIntegerArray slotBatches;

    final AtomicIntegerArray slotLate;
    volatile long slotBase = Long.MAX_VALUE;
    final LongAdder batches = new LongAdder();
    final LongAdder problems = new LongAdder();
    final StringBuffer problemKinds = new StringBuffer();
    final AtomicLong matchedSum = new AtomicLong();
    final AtomicLong lookups = new AtomicLong();
    final ConcurrentLinkedQueue<long[]> pendingTs = new ConcurrentLinkedQueue<>();
    final AtomicLong sampleCounter = new AtomicLong();
    volatile boolean running = true;
    Thread lookupThread;
    Thread prober;
    long batches0;

    record Window(
        Histogram lag,
        Histogram lookup,
        double batchesPerSecond,
        double meanMatched,
        String problems) {}

    Replica(
        int n, Options o, Workload w, List<String> endpoints, RedisProcess redis, ZContext ctx) {
      this.n = n;
      this.o = o;
      this.w = w;
      int slots = (int) Math.ceil(o.totalSeconds() * 10) + 600;
      slotBatches = new AtomicIntegerArray(slots);
      slotLate = new AtomicIntegerArray(slots);
      IndexConfig ic =
          IndexConfig.builder()
              .blockSize(BLOCK)
              .modelName(MODEL)
              .maxPodsPerKey(2048)
              .meterRegistry(meters)
              .build();
      if (redis != null) {
        redisIndex = redis.index(ic, b -> b.ingestMode(o.ingest).replicaId("replica-" + n));
        index = redisIndex;
      } else {
        redisIndex = null;
        index = BlockIndex.inMemory(ic);
      }
      KvEventSubscriber.Builder b =
          KvEventSubscriber.builder()
              .sink(index)
              .listener(this)
              .shards(o.shards)
              .maxPods(Math.max(10_000, o.pods + 1));
      if (ctx != null) {
        b.context(ctx);
      }
      subscriber = b.build().start();
      for (int i = 0; i < endpoints.size(); i++) {
        podNames.add("pod-" + i);
        subscriber.addPod(PodEndpoint.of("pod-" + i, endpoints.get(i))).join();
      }
      docKeys = new long[w.docTokens.length][];
      for (int d = 0; d < docKeys.length; d++) {
        docKeys[d] = index.requestKeys(w.docTokens[d], (String) null);
      }
    }

    @Override
    public void onBatch(String pod, String topic, long seq, KvEventBatch batch, boolean replayed) {
      batches.increment();
      long ts = (long) (batch.ts() * 1e6);
      if (redisIndex == null) {
        long now = nowMicros();
        recordLag(now, now - ts);
      } else if (sampleCounter.incrementAndGet() % o.redisLagSample == 0) {
        pendingTs.add(new long[] {ts, Long.parseLong(pod.substring(pod.indexOf('-') + 1))});
      }
    }

    @Override
    public void onGap(String pod, long expected, long received) {
      problem("gap");
    }

    @Override
    public void onResync(String pod, String reason) {
      if (!reason.equals("joined_late")) {
        problem("resync:" + reason);
      }
    }

    @Override
    public void onDropped(String pod, long seq, String reason, Exception cause) {
      problem("dropped:" + reason);
    }

    /** Records a batch's lag (applied at {@code now}, epoch micros). */
    void recordLag(long now, long lagMicros) {
      lag.record(lagMicros);
      phaseLag.record(lagMicros);
      long slot = (now - slotBase) / 100_000L;
      if (slot >= 0 && slot < slotBatches.length()) {
        slotBatches.incrementAndGet((int) slot);
        if (lagMicros >= ScaleModelRun.LATE_MICROS) {
          slotLate.incrementAndGet((int) slot);
        }
      }
    }

    /**
     * Starts a phase of the load profile: returns the last phase's lag, lookup (wall) and lookup
     * CPU-time histograms.
     */
    Histogram[] startPhase() {
      Histogram[] last = {phaseLag, phaseLookup, phaseLookupCpu};
      phaseLag = new Histogram();
      phaseLookup = new Histogram();
      phaseLookupCpu = new Histogram();
      return last;
    }

    /**
     * The in-memory index's counter {@code name} ({@code kvroute.kvindex.lookup.retries}, {@code
     * .locked}); 0 for Redis.
     */
    double counter(String name) {
      var c = meters.find(name).functionCounter();
      return c == null ? 0 : c.count();
    }

    void problem(String kind) {
      if (problems.sum() == 0) {
        System.out.printf(
            Locale.ROOT,
            "r%d: first problem (%s) %.1f s after start%n",
            n,
            kind,
            (System.nanoTime() - NANO_BASE) / 1e9);
      }
      problems.increment();
      if (problemKinds.length() < 200 && problemKinds.indexOf(kind) < 0) {
        problemKinds.append(problemKinds.length() == 0 ? "" : ",").append(kind);
      }
    }

    void startLookups() {
      lookupThread = new Thread(this::lookups, "scale-lookup-" + n);
      lookupThread.setDaemon(true);
      lookupThread.start();
      if (redisIndex != null) {
        prober = new Thread(this::probe, "scale-lag-prober-" + n);
        prober.setDaemon(true);
        prober.start();
      }
    }

    long lookupCpu(ThreadMXBean tmx) {
      long t = lookupThread == null ? 0 : tmx.getThreadCpuTime(lookupThread.getId());
      long p = prober == null ? 0 : tmx.getThreadCpuTime(prober.getId());
      return Math.max(0, t) + Math.max(0, p);
    }

    void lookups() {
      SplittableRandom rnd = new SplittableRandom(o.seed * 31 + n);
      PrefixMatch into = new PrefixMatch();
      List<String> chosen = new ArrayList<>(o.lookupPods);
      long interval = TimeUnit.MILLISECONDS.toNanos(o.lookupIntervalMs);
      long next = System.nanoTime();
      while (running) {
        chosen.clear();
        int first = rnd.nextInt(podNames.size());
        for (int i = 0; i < o.lookupPods; i++) { // a random window of pods
          chosen.add(podNames.get((first + i) % podNames.size()));
        }
        long[] keys = docKeys[w.pickDoc(rnd)];
        long c0 = CPU.getCurrentThreadCpuTime();
        long t0 = System.nanoTime();
        index.lookup(keys, keys.length, chosen, into);
        long took = (System.nanoTime() - t0) / 1000;
        lookup.record(took);
        phaseLookup.record(took);
        phaseLookupCpu.record((CPU.getCurrentThreadCpuTime() - c0) / 1000);
        matchedSum.addAndGet(into.maxMatchedBlocks());
        lookups.incrementAndGet();
        next += interval;
        long wait = next - System.nanoTime();
        if (wait > 0) {
          LockSupport.parkNanos(wait);
        } else {
          next = System.nanoTime();
        }
      }
    }

    void probe() {
      List<long[]> taken = new ArrayList<>();
      boolean[] owned = new boolean[podNames.size()];
      long ownedAt = 0;
      while (running) {
        if (System.nanoTime() - ownedAt > 1_000_000_000L) { // pods whose writes this replica makes
          Arrays.fill(owned, false);
          for (String p : redisIndex.ownedPods()) {
            owned[Integer.parseInt(p.substring(p.indexOf('-') + 1))] = true;
          }
          ownedAt = System.nanoTime();
        }
        long[] t;
        while ((t = pendingTs.poll()) != null) {
          taken.add(t);
        }
        if (taken.isEmpty()) {
          LockSupport.parkNanos(1_000_000L);
          continue;
        }
        redisIndex.flush();
        long now = nowMicros();
        for (long[] ts : taken) {
          if (owned[(int) ts[1]]) {
            recordLag(now, now - ts[0]);
          }
        }
        taken.clear();
      }
    }

    void resetWindow() {
      lag = new Histogram();
      lookup = new Histogram();
      batches0 = batches.sum();
      matchedSum.set(0);
      lookups.set(0);
    }

    Window window(double seconds) {
      long l = Math.max(1, lookups.get());
      return new Window(
          lag,
          lookup,
          (batches.sum() - batches0) / seconds,
          matchedSum.get() / (double) l,
          problems.sum() == 0 ? "none" : problems.sum() + " (" + problemKinds + ")");
    }

    void stopLookups() throws InterruptedException {
      running = false;
      lookupThread.join(5000);
      if (prober != null) {
        prober.join(15_000);
      }
    }

    IndexStats stats() {
      return index.stats();
    }

    /** The in-memory index's stale entries and forced reclamations ("" for Redis). */
    String reclamation() {
      var stale = meters.find("kvroute.kvindex.entries.stale").gauge();
      var forced = meters.find("kvroute.kvindex.reclaims.forced").functionCounter();
      if (stale == null || forced == null) {
        return "";
      }
      return String.format(
          Locale.ROOT,
          "; %.0f stale entries, %.0f forced reclamations",
          stale.value(),
          forced.count());
    }

    void close() {
      subscriber.close();
      if (redisIndex != null) {
        redisIndex.close();
      }
    }
  }
}
