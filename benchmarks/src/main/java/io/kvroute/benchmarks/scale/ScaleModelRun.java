package io.kvroute.benchmarks.scale;

import io.kvroute.benchmarks.Machine;
import io.kvroute.benchmarks.redis.RedisProcess;
import io.kvroute.benchmarks.scale.ScalePods.Publishers;
import io.kvroute.benchmarks.scale.ScalePods.Workload;
import io.kvroute.benchmarks.scale.ScaleReplicas.ControlLookups;
import io.kvroute.benchmarks.scale.ScaleReplicas.Histogram;
import io.kvroute.benchmarks.scale.ScaleReplicas.Replica;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
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
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.ZContext;

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
 * <p><b>Load profile.</b> {@code --profile 250ms:20s,50ms:20s,250ms:20s} runs phases one after the
 * other (per-pod batch interval : duration; without it, one phase of {@code --step-ms} for {@code
 * --seconds}); the warm-up uses the first phase's interval. Each phase prints its published and
 * applied batches/s, lag and lookup percentiles, the same-process control lookup (an idle index:
 * what the machine adds to any lookup), GC time and the clears the index applied. The run ends with
 * one machine-readable line, {@code result: published=<batches/s> applied=<batches/s>
 * lag_p99_ms=<x> lookup_p99_ms=<y> clears=<n> recovered_s=<s>}: the heaviest phase's (the first
 * with the shortest interval) figures, the clears over the whole window, and the seconds from the
 * start of the next lighter phase until the lag is back under 100 ms ({@link #recoveredS}; -1 if
 * never, or if there is no lighter phase after the heaviest). With several replicas, the worst
 * replica's figures. A second line, {@code control: ...}, gives the same run's floors for the
 * heaviest phase: the control lookup's p99, the lookups' CPU time p99 (wall time beyond it was
 * spent off the CPU: descheduled, or in a GC pause), the in-memory index's optimistic retries and
 * locked lookups per lookup, and {@code first_phase_late_s}: the seconds of the first phase, before
 * any overload, that were already behind (late 1 s windows; the table's {@code late s} column per
 * phase): when it is not 0 the machine could not keep even the light load steady, and {@code
 * recovered_s} measures the machine as much as the replica. The phases' late share is also printed
 * second by second.
 *
 * <p>Run: {@code java -Xmx4g -cp benchmarks/target/benchmarks.jar
 * io.kvroute.benchmarks.scale.ScaleModelRun --pods 1000 --replicas 2 --backend memory --seconds 30}
 * ({@code --help} lists every option). Needs about 6 file descriptors per pod and 6 more per pod
 * and replica over TCP ({@code ulimit -n}); {@code --transport inproc} uses in-process ZMQ pipes
 * instead (one shared context, no TCP).
 */
public final class ScaleModelRun {
  static final int BLOCK = 16;
  static final int DOC_BLOCKS = 512;
  static final String MODEL = "scale-model";

  /** A batch applied this late or later is late (the recovery criterion of the load profile). */
  static final long LATE_MICROS = 100_000L;

  private static final long EPOCH_MICROS = System.currentTimeMillis() * 1000L;
  static final long NANO_BASE = System.nanoTime();

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
    List<Phase> profile = List.of();

    /** One phase of the load profile: every pod publishes a batch every {@code stepMs}. */
    record Phase(int stepMs, double seconds) {
      static List<Phase> parse(String spec) {
        List<Phase> out = new ArrayList<>();
        for (String part : spec.split(",")) {
          String[] f = part.trim().split(":");
          if (f.length != 2 || !f[0].endsWith("ms") || !f[1].endsWith("s")) {
            throw new IllegalArgumentException(
                "--profile: a phase is <interval>ms:<duration>s, e.g. 250ms:20s; was " + part);
          }
          int step = Integer.parseInt(f[0].substring(0, f[0].length() - 2));
          double secs = Double.parseDouble(f[1].substring(0, f[1].length() - 1));
          if (step < 1 || secs <= 0) {
            throw new IllegalArgumentException("--profile: need interval >= 1 ms, duration > 0");
          }
          out.add(new Phase(step, secs));
        }
        return List.copyOf(out);
      }

      @Override
      public String toString() {
        return String.format(Locale.ROOT, "%dms:%.0fs", stepMs, seconds);
      }
    }

    /** The measured phases' total duration (the warm-up excluded). */
    double totalSeconds() {
      return warmup + profile.stream().mapToDouble(Phase::seconds).sum();
    }

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
                  + " --lookup-interval-ms 10 --shards 2 --redis-lag-sample 4 --seed 1"
                  + " --profile 250ms:20s,50ms:20s,250ms:20s (per-pod batch interval:duration,"
                  + " phase after phase; replaces --step-ms and --seconds)");
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
          case "--profile" -> o.profile = Phase.parse(v);
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
      if (o.profile.isEmpty()) {
        o.profile = List.of(new Phase(o.stepMs, o.seconds));
      }
      o.stepMs = o.profile.get(0).stepMs(); // the warm-up's
      o.seconds = o.profile.stream().mapToDouble(Phase::seconds).sum();
      return o;
    }

    String describe() {
      return String.format(
          Locale.ROOT,
          "%d pods x %d replicas, backend %s%s, %s; profile %s, %d..%d blocks/batch, pool %d"
              + " blocks/pod, %d docs; %d publisher threads, %d shards/replica; warm-up %.0f s,"
              + " measured %.0f s",
          pods,
          replicas,
          backend,
          backend.equals("redis") ? " (" + ingest + ")" : "",
          transport,
          profile,
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
    if (Arrays.asList(args).contains("--redis-cluster")) { // the model on a Redis Cluster
      ScaleClusterRun.main(args);
      return;
    }
    Options o = Options.parse(args);
    System.out.println("== scale model: " + o.describe());
    System.out.println("== machine: " + Machine.describe());
    System.out.println("== load before: " + Machine.loadAverages());
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
    ControlLookups control = new ControlLookups(o, workload);
    publishers.start();
    for (Replica rep : replicas) {
      rep.startLookups();
    }
    control.thread.start();
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
    String loadStart = Machine.loadAverages();
    long base = nowMicros();
    for (Replica rep : replicas) {
      rep.slotBase = base;
      rep.startPhase();
    }
    control.startPhase();
    List<PhaseResult> phases = runPhases(o, publishers, replicas, control, t0);
    control.running = false;
    List<Replica> measured = List.copyOf(replicas);
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
    String loadEnd = Machine.loadAverages();
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
    List<String> reclamation = new ArrayList<>();
    for (Replica rep : replicas) {
      stats.add(rep.stats());
      reclamation.add(rep.reclamation());
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
        pw.batches(),
        pw.stored(),
        pw.removed(),
        pw.stored() / Math.max(1, pw.batches()),
        pw.removed() / Math.max(1, pw.batches()),
        pw.bytes() / Math.max(1, pw.batches()),
        (pw.bytes() + 17 * pw.batches() + 8 * pw.batches()) / 1e6,
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
          micros(w.lag().percentile(0.50)),
          micros(w.lag().percentile(0.99)),
          micros(w.lookup().percentile(0.50)),
          micros(w.lookup().percentile(0.99)),
          w.batchesPerSecond(),
          w.meanMatched(),
          w.problems());
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
              + " heap/entry %.0f B%s%n",
          r,
          s.keys(),
          s.entries(),
          s.engineKeys(),
          s.pods(),
          s.dropped(),
          s.evictions(),
          s.entries() == 0 ? 0 : heapPerReplica / s.entries(),
          reclamation.get(r));
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
    printProfile(phases, measured);
    if (shared != null) {
      shared.close();
    }
    System.exit(0);
  }

  // ----------------------------------------------------------------------------- load profile

  /** What one phase of the profile measured (replicas: the worst of them). */
  record PhaseResult(
      Options.Phase phase,
      double startS,
      double published,
      double applied,
      double lagP50,
      double lagP99,
      double lookupP99,
      double controlP99,
      long gcMillis,
      long clears,
      double lookupCpuP99,
      double controlCpuP99,
      double retriesPerLookup,
      double lockedPerLookup) {}

  /**
   * Runs the load profile's phases one after the other (the publishers take each phase's interval
   * up at their next cycle) and measures each; the window starts at {@code t0}.
   */
  static List<PhaseResult> runPhases(
      Options o, Publishers publishers, List<Replica> replicas, ControlLookups control, long t0) {
    List<PhaseResult> out = new ArrayList<>();
    double at = 0;
    for (Options.Phase ph : o.profile) {
      publishers.stepNanos = ph.stepMs() * 1_000_000L;
      long b0 = publishers.batches.sum();
      long[] a0 = new long[replicas.size()];
      long[] c0 = new long[replicas.size()];
      double[] retries0 = new double[replicas.size()];
      double[] locked0 = new double[replicas.size()];
      for (int r = 0; r < replicas.size(); r++) {
        a0[r] = replicas.get(r).batches.sum();
        c0[r] = clears(replicas.get(r).stats());
        retries0[r] = replicas.get(r).counter("kvroute.kvindex.lookup.retries");
        locked0[r] = replicas.get(r).counter("kvroute.kvindex.lookup.locked");
      }
      long gc0 = gcMillis();
      long p0 = System.nanoTime();
      long end = t0 + (long) ((at + ph.seconds()) * 1e9);
      for (long left = end - System.nanoTime(); left > 0; left = end - System.nanoTime()) {
        LockSupport.parkNanos(left);
      }
      double secs = (System.nanoTime() - p0) / 1e9;
      double published = (publishers.batches.sum() - b0) / secs;
      double applied = Double.MAX_VALUE;
      double lag50 = 0;
      double lag99 = 0;
      double look99 = 0;
      double lookCpu99 = 0;
      double retries = 0;
      double locked = 0;
      long clears = 0;
      for (int r = 0; r < replicas.size(); r++) {
        Replica rep = replicas.get(r);
        Histogram[] h = rep.startPhase();
        applied = Math.min(applied, (rep.batches.sum() - a0[r]) / secs);
        lag50 = Math.max(lag50, nanToZero(h[0].percentile(0.50)));
        lag99 =
            Math.max(lag99, h[0].count() == 0 ? Double.POSITIVE_INFINITY : h[0].percentile(0.99));
        look99 = Math.max(look99, nanToZero(h[1].percentile(0.99)));
        lookCpu99 = Math.max(lookCpu99, nanToZero(h[2].percentile(0.99)));
        double n = Math.max(1, h[1].count());
        retries =
            Math.max(retries, (rep.counter("kvroute.kvindex.lookup.retries") - retries0[r]) / n);
        locked = Math.max(locked, (rep.counter("kvroute.kvindex.lookup.locked") - locked0[r]) / n);
        clears += clears(rep.stats()) - c0[r];
      }
      Histogram[] ch = control.startPhase();
      double control99 = nanToZero(ch[0].percentile(0.99));
      double controlCpu99 = nanToZero(ch[1].percentile(0.99));
      long gc = gcMillis() - gc0;
      PhaseResult pr =
          new PhaseResult(
              ph,
              at,
              published,
              applied,
              lag50,
              lag99,
              look99,
              control99,
              gc,
              clears,
              lookCpu99,
              controlCpu99,
              retries,
              locked);
      out.add(pr);
      System.out.printf(
          Locale.ROOT,
          "phase %s (from %.0f s): published %.0f batches/s, applied %.0f/s, lag p50 %s p99 %s,"
              + " lookup p99 %s (CPU time p99 %s; control %s, CPU %s; %.3f retries, %.4f locked"
              + " per lookup), GC %d ms, clears %d; load %s%n",
          ph,
          at,
          published,
          applied,
          micros(lag50),
          micros(lag99),
          micros(look99),
          micros(lookCpu99),
          micros(control99),
          micros(controlCpu99),
          retries,
          locked,
          gc,
          clears,
          Machine.loadAverages());
      at += ph.seconds();
    }
    return out;
  }

  /** Collection time of every garbage collector so far (ms). */
  static long gcMillis() {
    long t = 0;
    for (var gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      t += Math.max(0, gc.getCollectionTime());
    }
    return t;
  }

  private static double nanToZero(double v) {
    return Double.isNaN(v) ? 0 : v;
  }

  /** Clears the index applied (AllBlocksCleared and pod removals). */
  static long clears(IndexStats s) {
    return s.events().getOrDefault("cleared", 0L) + s.events().getOrDefault("pod_removed", 0L);
  }

  /**
   * Seconds from the start of the phase ({@code startS} .. {@code endS}, seconds from the window's
   * start) until the replica's lag is back under {@link #LATE_MICROS}: the phase is cut into
   * sliding 1 s windows (100 ms steps); a window is behind if no batch was applied in it or more
   * than 1% of its batches were applied 100 ms or more after their publication. The answer is the
   * start of the last behind window plus 100 ms (from there on every window is fine); 0 if none is
   * behind; -1 if one of the phase's last 2 s is (never recovered, or not for long enough to tell).
   */
  static double recoveredS(Replica rep, double startS, double endS) {
    int s0 = (int) Math.round(startS * 10);
    int s1 = Math.min((int) Math.round(endS * 10), rep.slotBatches.length());
    int lastBehind = -1;
    for (int w = s0; w + 10 <= s1; w++) {
      long total = 0;
      long late = 0;
      for (int k = w; k < w + 10; k++) {
        total += rep.slotBatches.get(k);
        late += rep.slotLate.get(k);
      }
      if (total == 0 || late * 100 > total) {
        lastBehind = w;
      }
    }
    if (lastBehind < 0) {
      return 0;
    }
    if (lastBehind + 10 > s1 - 20) {
      return -1;
    }
    return (lastBehind + 1 - s0) / 10.0;
  }

  /**
   * The seconds of the phase (1 s windows from its start) in which the replica applied nothing, or
   * more than 1% of what it applied 100 ms or more after publication (the recovery criterion's
   * "behind"): a steady phase has none.
   */
  static int lateSeconds(Replica rep, PhaseResult p) {
    int s0 = (int) Math.round(p.startS() * 10);
    int s1 =
        Math.min(
            (int) Math.round((p.startS() + p.phase().seconds()) * 10), rep.slotBatches.length());
    int n = 0;
    for (int w = s0; w + 10 <= s1; w += 10) {
      long total = 0;
      long late = 0;
      for (int k = w; k < w + 10; k++) {
        total += rep.slotBatches.get(k);
        late += rep.slotLate.get(k);
      }
      if (total == 0 || late * 100 > total) {
        n++;
      }
    }
    return n;
  }

  /**
   * The phase's batches applied and the share of them late (100 ms or more), second by second, for
   * one replica: {@code applied/late%} per second.
   */
  static String timeline(Replica rep, PhaseResult p) {
    StringBuilder b =
        new StringBuilder(
            String.format(Locale.ROOT, "r%d %s by second (applied/late%%):", rep.n, p.phase()));
    int s0 = (int) Math.round(p.startS() * 10);
    int s1 =
        Math.min(
            (int) Math.round((p.startS() + p.phase().seconds()) * 10), rep.slotBatches.length());
    for (int w = s0; w + 10 <= s1; w += 10) {
      long total = 0;
      long late = 0;
      for (int k = w; k < w + 10; k++) {
        total += rep.slotBatches.get(k);
        late += rep.slotLate.get(k);
      }
      b.append(
          String.format(Locale.ROOT, " %d/%.0f", total, total == 0 ? 0 : 100.0 * late / total));
    }
    return b.toString();
  }

  /**
   * Prints the profile's table and the one machine-readable line: published, applied, lag p99 and
   * lookup p99 of the heaviest phase (the first with the shortest interval), the clears over the
   * whole window, and the recovery after it (the next phase with a longer interval).
   */
  static void printProfile(List<PhaseResult> phases, List<Replica> replicas) {
    System.out.printf(
        Locale.ROOT,
        "%n%-12s %8s %11s %10s %10s %10s %11s %11s %7s %7s %6s %10s%n",
        "phase",
        "from s",
        "published/s",
        "applied/s",
        "lag p50",
        "lag p99",
        "lookup p99",
        "control p99",
        "GC ms",
        "clears",
        "late s",
        "recovered");
    int heavy = 0;
    for (int i = 1; i < phases.size(); i++) {
      if (phases.get(i).phase().stepMs() < phases.get(heavy).phase().stepMs()) {
        heavy = i;
      }
    }
    int light = -1;
    for (int i = heavy + 1; i < phases.size() && light < 0; i++) {
      if (phases.get(i).phase().stepMs() > phases.get(heavy).phase().stepMs()) {
        light = i;
      }
    }
    double recovered = -1;
    long clears = 0;
    int[] lateOf = new int[phases.size()];
    for (int i = 0; i < phases.size(); i++) {
      PhaseResult p = phases.get(i);
      clears += p.clears();
      String rec = "";
      if (i == light) {
        recovered = 0;
        double end = p.startS() + p.phase().seconds();
        for (Replica rep : replicas) {
          double r = recoveredS(rep, p.startS(), end);
          recovered = r < 0 || recovered < 0 ? -1 : Math.max(recovered, r);
        }
        rec = recovered < 0 ? "never" : String.format(Locale.ROOT, "%.1f s", recovered);
      }
      int late = 0;
      for (Replica rep : replicas) {
        late = Math.max(late, lateSeconds(rep, p));
      }
      lateOf[i] = late;
      System.out.printf(
          Locale.ROOT,
          "%-12s %8.0f %11.0f %10.0f %10s %10s %11s %11s %7d %7d %6d %10s%n",
          p.phase(),
          p.startS(),
          p.published(),
          p.applied(),
          micros(p.lagP50()),
          micros(p.lagP99()),
          micros(p.lookupP99()),
          micros(p.controlP99()),
          p.gcMillis(),
          p.clears(),
          late,
          rec);
    }
    if (light < 0) {
      System.out.println("(no lighter phase after the heaviest: recovered_s is -1)");
    }
    for (int i = 1; i < phases.size(); i++) { // what recovery looks like, second by second
      PhaseResult p = phases.get(i);
      for (Replica rep : replicas) {
        System.out.println(timeline(rep, p));
      }
    }
    PhaseResult h = phases.get(heavy);
    System.out.printf(
        Locale.ROOT,
        "result: published=%.0f applied=%.0f lag_p99_ms=%.1f lookup_p99_ms=%.2f clears=%d"
            + " recovered_s=%s%n",
        h.published(),
        h.applied(),
        h.lagP99() / 1000,
        h.lookupP99() / 1000,
        clears,
        recovered < 0 ? "-1" : String.format(Locale.ROOT, "%.1f", recovered));
    // the same run's floors: what the machine adds to a lookup, what the lookup itself costs, and
    // whether the first phase (before any overload) was steady at all
    System.out.printf(
        Locale.ROOT,
        "control: lookup_p99_ms=%.2f lookup_cpu_p99_ms=%.2f control_cpu_p99_ms=%.2f"
            + " retries_per_lookup=%.3f locked_per_lookup=%.4f first_phase_late_s=%d%n",
        h.controlP99() / 1000,
        h.lookupCpuP99() / 1000,
        h.controlCpuP99() / 1000,
        h.retriesPerLookup(),
        h.lockedPerLookup(),
        lateOf[0]);
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

  // --------------------------------------------------------------------------------- workload

  // ---------------------------------------------------------------------------------- replica
}
