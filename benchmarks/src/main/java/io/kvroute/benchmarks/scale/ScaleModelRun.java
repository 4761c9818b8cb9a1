package io.kvroute.benchmarks.scale;

import io.kvroute.benchmarks.redis.RedisProcess;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import io.kvroute.kvindex.zmq.PodEndpoint;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The scale model (issue 17): one JVM hosting N simulated vLLM pods that publish real KV-event
 * batches (vLLM's msgpack {@code KVEventBatch}, 3-frame messages on one JeroMQ PUB socket per pod)
 * and R gateway replicas, each with its own {@link KvEventSubscriber} subscribed to every pod and
 * its own index ({@code --backend memory}: {@link BlockIndex#inMemory}), or all of them sharing one
 * Redis index ({@code --backend redis}: {@link RedisBlockIndex}, {@code --ingest leased|all}) on a
 * {@code redis-server} this run starts. It prints, per replica: CPU cores used, heap, the
 * event-to-index lag p50/p99, the latency of 8,192-token lookups over 100 pods made while
 * ingesting; and the publishers' cost, the process total and, for Redis, the server's CPU and
 * memory.
 *
 * <p><b>The pods.</b> {@code --publisher-threads} threads (default 2) drive every pod. Each pod
 * emits one batch per engine step ({@code --step-ms}, default 50; phases spread at random): a
 * {@code BlockStored} chain of {@code --blocks-min}..{@code --blocks-max} blocks (default 8..40, 16
 * tokens each) and, once its block pool ({@code --pool-blocks}, default 2,048) is full, a {@code
 * BlockRemoved} of the blocks it evicts (FIFO). A request is a shared document prefix ({@code
 * --docs} documents of 512 blocks, Zipf-chosen, a random prefix of 32..512 blocks) followed by a
 * private tail of 4..64 blocks; the document blocks a pod still holds are prefix-cache hits and are
 * not stored again, the rest are emitted over as many steps as their size needs (chunked prefill).
 * Engine block hashes are a chained 64-bit hash of the parent hash and the block's token ids
 * (uniform over u64, as vLLM's {@code sha256_cbor_64bit}); the index keys blocks by its own request
 * keys computed from the tokens the events carry.
 *
 * <p><b>Measurements.</b> <em>CPU</em>: the CPU time ({@link ThreadMXBean#getThreadCpuTime}) of the
 * threads each replica started (the thread set before and after building it: its subscriber's I/O,
 * shard and replay threads, JeroMQ's threads of its context, and for Redis its Lettuce/Netty and
 * writer threads), over the measurement window, divided by the window; the lookup thread is
 * reported apart, GC and JIT are in the process line only. <em>Lag</em>: each batch's {@code ts}
 * (epoch seconds, a float as vLLM sends it) is stamped at publication; in memory, {@link
 * KvEventListener#onBatch} runs after the index applied the batch, and the lag is the clock then
 * minus {@code ts}; on Redis the index queues writes, so a prober thread per replica takes the
 * batches seen by {@code onBatch} (one in {@code --redis-lag-sample}), waits for {@link
 * RedisBlockIndex#flush()} (it returns once every write queued before the call was applied in
 * Redis) and records the clock then minus each {@code ts}: an upper bound, by at most one flush.
 * Both clocks are the same monotonic clock anchored to the epoch once. <em>Heap</em>: heap used
 * after {@code System.gc()} at the end of the run, minus the same after the replicas were closed,
 * divided by R. <em>Lookups</em>: one thread per replica every {@code --lookup-interval-ms} (10)
 * looks up a document's 8,192 tokens (keys precomputed) for 100 random pods.
 *
 * <p>Run: {@code java -Xmx4g -cp benchmarks/target/benchmarks.jar
 * io.kvroute.benchmarks.scale.ScaleModelRun --pods 1000 --replicas 2 --backend memory --seconds 30}
 * ({@code --help} lists every option). Needs about 6 file descriptors per pod and 6 more per pod
 * and replica over TCP ({@code ulimit -n}); {@code --transport inproc} uses in-process ZMQ pipes
 * instead (one shared context, no TCP).
 */
public final class ScaleModelRun {
  private static final int BLOCK = 16;
  private static final int DOC_BLOCKS = 512;
  private static final String MODEL = "scale-model";
  private static final long EPOCH_MICROS = System.currentTimeMillis() * 1000L;
  private static final long NANO_BASE = System.nanoTime();

  private ScaleModelRun() {}

  /** The shared clock of publishers and replicas: epoch microseconds, monotonic. */
  static long nowMicros() {
    return EPOCH_MICROS + (System.nanoTime() - NANO_BASE) / 1000L;
  }

  /** Options, all with defaults. */
  static final class Options {
    int pods = 1000;
    int replicas = 1;
    String backend = "memory";
    IngestMode ingest = IngestMode.LEASED;
    double seconds = 30;
    double warmup = 10;
    int stepMs = 50;
    int blocksMin = 8;
    int blocksMax = 40;
    int poolBlocks = 2048;
    int docs = 128;
    int tailMin = 4;
    int tailMax = 64;
    int publisherThreads = 2;
    String transport = "tcp";
    int lookupPods = 100;
    int lookupIntervalMs = 10;
    int shards = 2;
    int redisLagSample = 4;
    long seed = 1;

    static Options parse(String[] args) {
      Options o = new Options();
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (a.equals("--help") || a.equals("-h")) {
          System.out.println(
              "options: --pods 1000 --replicas 1 --backend memory|redis --ingest leased|all"
                  + " --seconds 30 --warmup 10 --step-ms 50 --blocks-min 8 --blocks-max 40"
                  + " --pool-blocks 2048 --docs 128 --tail-min 4 --tail-max 64"
                  + " --publisher-threads 2 --transport tcp|inproc --lookup-pods 100"
                  + " --lookup-interval-ms 10 --shards 2 --redis-lag-sample 4 --seed 1");
          System.exit(0);
        }
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException("option " + a + " needs a value");
        }
        String v = args[++i];
        switch (a) {
          case "--pods" -> o.pods = Integer.parseInt(v);
          case "--replicas" -> o.replicas = Integer.parseInt(v);
          case "--backend" -> o.backend = v;
          case "--ingest" ->
              o.ingest = v.startsWith("all") ? IngestMode.ALL_REPLICAS : IngestMode.LEASED;
          case "--seconds" -> o.seconds = Double.parseDouble(v);
          case "--warmup" -> o.warmup = Double.parseDouble(v);
          case "--step-ms" -> o.stepMs = Integer.parseInt(v);
          case "--blocks-min" -> o.blocksMin = Integer.parseInt(v);
          case "--blocks-max" -> o.blocksMax = Integer.parseInt(v);
          case "--pool-blocks" -> o.poolBlocks = Integer.parseInt(v);
          case "--docs" -> o.docs = Integer.parseInt(v);
          case "--tail-min" -> o.tailMin = Integer.parseInt(v);
          case "--tail-max" -> o.tailMax = Integer.parseInt(v);
          case "--publisher-threads" -> o.publisherThreads = Integer.parseInt(v);
          case "--transport" -> o.transport = v;
          case "--lookup-pods" -> o.lookupPods = Integer.parseInt(v);
          case "--lookup-interval-ms" -> o.lookupIntervalMs = Integer.parseInt(v);
          case "--shards" -> o.shards = Integer.parseInt(v);
          case "--redis-lag-sample" -> o.redisLagSample = Integer.parseInt(v);
          case "--seed" -> o.seed = Long.parseLong(v);
          default -> throw new IllegalArgumentException("unknown option " + a + " (--help)");
        }
      }
      if (!o.backend.equals("memory") && !o.backend.equals("redis")) {
        throw new IllegalArgumentException("--backend must be memory or redis, was " + o.backend);
      }
      if (!o.transport.equals("tcp") && !o.transport.equals("inproc")) {
        throw new IllegalArgumentException("--transport must be tcp or inproc, was " + o.transport);
      }
      if (o.blocksMin < 1 || o.blocksMax < o.blocksMin || o.poolBlocks < 4 * o.blocksMax) {
        throw new IllegalArgumentException(
            "need 1 <= blocks-min <= blocks-max and pool-blocks >= 4 x blocks-max");
      }
      o.lookupPods = Math.min(o.lookupPods, o.pods);
      return o;
    }

    String describe() {
      return String.format(
          Locale.ROOT,
          "%d pods x %d replicas, backend %s%s, %s; step %d ms, %d..%d blocks/batch, pool %d"
              + " blocks/pod, %d docs; %d publisher threads, %d shards/replica; warm-up %.0f s,"
              + " measured %.0f s",
          pods,
          replicas,
          backend,
          backend.equals("redis") ? " (" + ingest + ")" : "",
          transport,
          stepMs,
          blocksMin,
          blocksMax,
          poolBlocks,
          docs,
          publisherThreads,
          shards,
          warmup,
          seconds);
    }
  }

  /** Runs one configuration and prints its table. */
  public static void main(String[] args) throws Exception {
    Options o = Options.parse(args);
    System.out.println("== scale model: " + o.describe());
    System.out.println("== machine: " + machine());
    System.out.println("== load before: " + loadAverage());
    ThreadMXBean tmx = ManagementFactory.getThreadMXBean();
    tmx.setThreadCpuTimeEnabled(true);
    Workload workload = new Workload(o);
    RedisProcess redis =
        o.backend.equals("redis") ? RedisProcess.start("--maxmemory", "8gb") : null;
    ZContext shared = o.transport.equals("inproc") ? new ZContext(1) : null;
    if (shared != null) { // JeroMQ's default is 1,024 sockets per context
      shared.getContext().setMaxSockets(4 * o.pods * (o.replicas + 1) + 64);
    }
    Set<Long> before = threadIds();
    Publishers publishers = new Publishers(o, workload, shared);
    Set<Long> pubThreads = newThreads(before);
    List<Replica> replicas = new ArrayList<>();
    for (int r = 0; r < o.replicas; r++) {
      Set<Long> b = threadIds();
      Replica rep = new Replica(r, o, workload, publishers.endpoints, redis, shared);
      LockSupport.parkNanos(200_000_000L); // Lettuce/JeroMQ threads start lazily
      rep.threads.addAll(newThreads(b));
      replicas.add(rep);
    }
    publishers.start();
    for (Replica rep : replicas) {
      rep.startLookups();
    }
    System.out.printf(Locale.ROOT, "warming up %.0f s ...%n", o.warmup);
    LockSupport.parkNanos((long) (o.warmup * 1e9));
    // the measurement window
    var osb =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    for (Replica rep : replicas) {
      System.out.printf(
          Locale.ROOT,
          "after warm-up r%d: %d batches applied, problems %s%n",
          rep.n,
          rep.batches.sum(),
          rep.problems.sum() == 0 ? "none" : rep.problems.sum() + " (" + rep.problemKinds + ")");
      rep.resetWindow();
    }
    publishers.resetWindow();
    long redisCpu0 = redis == null ? 0 : procCpuNanos(redis.pid());
    long proc0 = osb.getProcessCpuTime();
    long pubCpu0 = cpu(tmx, pubThreads);
    java.util.Map<Long, Long> perThread0 = perThread(tmx, replicas);
    long[] repCpu0 = new long[replicas.size()];
    long[] lookCpu0 = new long[replicas.size()];
    for (int r = 0; r < replicas.size(); r++) {
      repCpu0[r] = cpu(tmx, replicas.get(r).threads);
      lookCpu0[r] = replicas.get(r).lookupCpu(tmx);
    }
    long t0 = System.nanoTime();
    String loadStart = loadAverage();
    LockSupport.parkNanos((long) (o.seconds * 1e9));
    double wall = (System.nanoTime() - t0) / 1e9;
    long proc1 = osb.getProcessCpuTime();
    long redisCpu1 = redis == null ? 0 : procCpuNanos(redis.pid());
    double pubCores = (cpu(tmx, pubThreads) - pubCpu0) / 1e9 / wall;
    double[] repCores = new double[replicas.size()];
    double[] lookCores = new double[replicas.size()];
    for (int r = 0; r < replicas.size(); r++) {
      repCores[r] = (cpu(tmx, replicas.get(r).threads) - repCpu0[r]) / 1e9 / wall;
      lookCores[r] = (replicas.get(r).lookupCpu(tmx) - lookCpu0[r]) / 1e9 / wall;
    }
    java.util.Map<String, Double> byName = new java.util.TreeMap<>();
    perThread(tmx, replicas)
        .forEach(
            (id, t) -> {
              var info = tmx.getThreadInfo(id);
              if (info != null) {
                String name = info.getThreadName().replaceAll("[0-9]+", "#");
                byName.merge(name, (t - perThread0.getOrDefault(id, 0L)) / 1e9 / wall, Double::sum);
              }
            });
    Publishers.Window pw = publishers.window(wall);
    List<Replica.Window> rw = new ArrayList<>();
    for (Replica rep : replicas) {
      rw.add(rep.window(wall));
    }
    String loadEnd = loadAverage();
    StringBuilder threadLine = new StringBuilder("replica threads (all replicas, cores):");
    byName.forEach(
        (name, c) -> {
          if (c >= 0.005) {
            threadLine.append(String.format(Locale.ROOT, " %s %.3f;", name, c));
          }
        });
    publishers.stop();
    for (Replica rep : replicas) {
      rep.stopLookups();
    }
    // heap: with the replicas, then without them
    long heapAll = heapAfterGc();
    List<IndexStats> stats = new ArrayList<>();
    for (Replica rep : replicas) {
      stats.add(rep.stats());
    }
    double redisMem = redis == null ? 0 : redis.info("memory", "used_memory");
    double redisKeys = redis == null ? 0 : dbsize(redis);
    for (Replica rep : replicas) {
      rep.close();
    }
    replicas.clear();
    long heapNone = heapAfterGc();
    double heapPerReplica = Math.max(0, heapAll - heapNone) / (double) o.replicas;

    System.out.printf(
        Locale.ROOT,
        "%n== pods (all, per second of the window): %.0f batches/s, %.0f blocks stored/s, %.0f"
            + " removed/s, %.1f stored + %.1f removed blocks/batch, %.0f bytes/batch (payload),"
            + " %.2f MB/s on the wire per replica (payload + 17-byte frames); publishers %.2f"
            + " cores%n",
        pw.batches,
        pw.stored,
        pw.removed,
        pw.stored / Math.max(1, pw.batches),
        pw.removed / Math.max(1, pw.batches),
        pw.bytes / Math.max(1, pw.batches),
        (pw.bytes + 17 * pw.batches + 8 * pw.batches) / 1e6,
        pubCores);
    System.out.printf(
        Locale.ROOT,
        "%n%-8s %9s %9s %9s %10s %10s %10s %10s %10s %9s %s%n",
        "replica",
        "cores",
        "lookupCPU",
        "heap MB",
        "lag p50",
        "lag p99",
        "lookup p50",
        "lookup p99",
        "batches/s",
        "match",
        "problems");
    System.out.println("-".repeat(118));
    for (int r = 0; r < rw.size(); r++) {
      Replica.Window w = rw.get(r);
      System.out.printf(
          Locale.ROOT,
          "%-8s %9.3f %9.3f %9.1f %10s %10s %10s %10s %10.0f %9.0f %s%n",
          "r" + r,
          repCores[r],
          lookCores[r],
          heapPerReplica / 1e6,
          micros(w.lag.percentile(0.50)),
          micros(w.lag.percentile(0.99)),
          micros(w.lookup.percentile(0.50)),
          micros(w.lookup.percentile(0.99)),
          w.batchesPerSecond,
          w.meanMatched,
          w.problems);
    }
    double repSum = Arrays.stream(repCores).sum() + Arrays.stream(lookCores).sum();
    double proc = (proc1 - proc0) / 1e9 / wall;
    System.out.printf(
        Locale.ROOT,
        "%nprocess %.2f cores = publishers %.2f + replicas %.2f (incl. lookups) + other %.2f (GC,"
            + " JIT, timers)%n",
        proc,
        pubCores,
        repSum,
        proc - pubCores - repSum);
    System.out.println(threadLine);
    for (int r = 0; r < stats.size(); r++) {
      IndexStats s = stats.get(r);
      System.out.printf(
          Locale.ROOT,
          "index r%d: %d keys, %d entries, %d engine keys, %d pods; dropped %s; evictions %s;"
              + " heap/entry %.0f B%n",
          r,
          s.keys(),
          s.entries(),
          s.engineKeys(),
          s.pods(),
          s.dropped(),
          s.evictions(),
          s.entries() == 0 ? 0 : heapPerReplica / s.entries());
    }
    if (redis != null) {
      System.out.printf(
          Locale.ROOT,
          "redis-server: %.3f cores (from /proc/%d/stat), used_memory %.1f MB, %.0f keys (%.0f B"
              + " per key)%n",
          (redisCpu1 - redisCpu0) / 1e9 / wall,
          redis.pid(),
          redisMem / 1e6,
          redisKeys,
          redisKeys == 0 ? 0 : redisMem / redisKeys);
      redis.close();
    }
    System.out.println("== load at window start: " + loadStart);
    System.out.println("== load at window end:   " + loadEnd);
    if (shared != null) {
      shared.close();
    }
    System.exit(0);
  }

  // ---------------------------------------------------------------------------------- helpers

  static String micros(double us) {
    if (Double.isNaN(us)) {
      return "-";
    }
    return us >= 1000
        ? String.format(Locale.ROOT, "%.2f ms", us / 1000)
        : String.format(Locale.ROOT, "%.0f us", us);
  }

  static Set<Long> threadIds() {
    Set<Long> ids = new HashSet<>();
    for (long id : ManagementFactory.getThreadMXBean().getAllThreadIds()) {
      ids.add(id);
    }
    return ids;
  }

  static Set<Long> newThreads(Set<Long> before) {
    Set<Long> now = threadIds();
    now.removeAll(before);
    Set<Long> out = ConcurrentHashMap.newKeySet();
    out.addAll(now);
    return out;
  }

  static long cpu(ThreadMXBean tmx, Set<Long> ids) {
    long sum = 0;
    for (long id : ids) {
      long t = tmx.getThreadCpuTime(id);
      if (t > 0) {
        sum += t;
      }
    }
    return sum;
  }

  static java.util.Map<Long, Long> perThread(ThreadMXBean tmx, List<Replica> replicas) {
    java.util.Map<Long, Long> out = new java.util.HashMap<>();
    for (Replica r : replicas) {
      for (long id : r.threads) {
        out.put(id, Math.max(0, tmx.getThreadCpuTime(id)));
      }
    }
    return out;
  }

  static long heapAfterGc() {
    for (int i = 0; i < 3; i++) {
      System.gc();
      LockSupport.parkNanos(200_000_000L);
    }
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
  }

  /** utime + stime of a process, from /proc/PID/stat (clock ticks of 10 ms), in nanoseconds. */
  static long procCpuNanos(long pid) {
    try {
      String s = Files.readString(Path.of("/proc/" + pid + "/stat"));
      String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
      // fields after the command: state(3) ... utime(14) stime(15): offsets 11 and 12 here
      return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * 10_000_000L;
    } catch (IOException | RuntimeException e) {
      return 0;
    }
  }

  static double dbsize(RedisProcess redis) {
    String r = redis.command("DBSIZE");
    try {
      return Double.parseDouble(r.substring(1).trim());
    } catch (RuntimeException e) {
      return -1;
    }
  }

  static String loadAverage() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).trim();
    } catch (IOException e) {
      return "?";
    }
  }

  static String machine() {
    String model = "?";
    try {
      for (String line : Files.readAllLines(Path.of("/proc/cpuinfo"))) {
        if (line.startsWith("model name")) {
          model = line.substring(line.indexOf(':') + 1).trim();
          break;
        }
      }
    } catch (IOException e) {
      // unknown
    }
    return Runtime.getRuntime().availableProcessors()
        + " CPUs, "
        + model
        + ", JDK "
        + System.getProperty("java.version")
        + ", max heap "
        + Runtime.getRuntime().maxMemory() / (1 << 20)
        + " MB";
  }

  /** A lock-free log-linear histogram of microsecond values (32 sub-buckets per power of 2). */
  static final class Histogram {
    private static final int SUB = 32;
    private final AtomicLongArray counts = new AtomicLongArray(64 * SUB);

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

  // --------------------------------------------------------------------------------- workload

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
    private final long[] slots;
    private final int mask;

    LongSet(int capacity) {
      int n = Integer.highestOneBit(Math.max(4, capacity * 2 - 1)) << 1;
      slots = new long[n];
      mask = n - 1;
    }

    private int slot(long v) {
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
    long nextStepNanos;
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
    long b0;
    long s0;
    long r0;
    long y0;

    record Window(double batches, double stored, double removed, double bytes) {}

    Publishers(Options o, Workload w, ZContext shared) throws InterruptedException {
      this.o = o;
      this.w = w;
      this.ownsContext = shared == null;
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

    private void loop(int t, String[] eps, CountDownLatch bound) {
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
      // pods in phase order, a cursor walks them cycle after cycle: O(1) per batch
      long stepNanos = TimeUnit.MILLISECONDS.toNanos(o.stepMs);
      for (Pod p : mine) {
        p.nextStepNanos = p.rnd.nextLong(stepNanos); // the phase
        p.newRequest(w);
      }
      mine.sort((a, b) -> Long.compare(a.nextStepNanos, b.nextStepNanos));
      long start = System.nanoTime();
      long cycle = 0;
      int i = 0;
      while (running && !mine.isEmpty()) {
        Pod p = mine.get(i);
        long due = start + cycle * stepNanos + p.nextStepNanos;
        long now = System.nanoTime();
        if (due - now > 0) {
          LockSupport.parkNanos(due - now);
          continue;
        }
        if (now - due > stepNanos) { // fell a whole step behind: skip, do not burst
          cycle = (now - start) / stepNanos;
        }
        step(p);
        if (++i == mine.size()) {
          i = 0;
          cycle++;
        }
      }
      for (Pod p : mine) {
        p.socket.close();
      }
    }

    /** One engine step of a pod: one batch. */
    private void step(Pod p) {
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

  // ---------------------------------------------------------------------------------- replica

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
    volatile Histogram lag = new Histogram();
    volatile Histogram lookup = new Histogram();
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
      IndexConfig ic =
          IndexConfig.builder().blockSize(BLOCK).modelName(MODEL).maxPodsPerKey(2048).build();
      if (redis != null) {
        redisIndex =
            RedisBlockIndex.create(
                ic,
                RedisIndexConfig.builder()
                    .url(redis.url())
                    .ingestMode(o.ingest)
                    .replicaId("replica-" + n)
                    .build());
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
        lag.record(nowMicros() - ts);
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

    private void problem(String kind) {
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

    private void lookups() {
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
        long t0 = System.nanoTime();
        index.lookup(keys, keys.length, chosen, into);
        lookup.record((System.nanoTime() - t0) / 1000);
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

    private void probe() {
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
            lag.record(now - ts[0]);
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

    void close() {
      subscriber.close();
      if (redisIndex != null) {
        redisIndex.close();
      }
    }
  }
}
