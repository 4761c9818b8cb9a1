package io.kvroute.benchmarks.trace;

import io.kvroute.benchmarks.Machine;
import io.kvroute.benchmarks.redis.RedisProcess;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * kvroute's block index on NVIDIA Dynamo's KV-indexer benchmark workload ({@code mooncake_bench} in
 * {@code ai-dynamo/dynamo} {@code lib/bench}, results in {@code
 * lib/kv-router/src/indexer/INDEXER_BENCH.md}): a Mooncake trace's requests spread over simulated
 * inference workers, each request a prefix lookup plus the KV events its worker then emits,
 * replayed against the index at a rate set by a time window.
 *
 * <p><b>What is reproduced.</b> As in {@code mooncake_bench}: the trace's requests are assigned to
 * {@code --workers} (1,000) unique workers at random, request by request, from {@code --seed} (42);
 * each worker's requests drive a simulated engine with a prefix cache that emits {@code
 * BlockStored}/{@code BlockRemoved} events; each worker's timeline (its lookups and events, in
 * trace time) is rescaled on its own so that its last operation lands at the end of the window
 * ({@code t * window / t_last}, Dynamo's {@code WorkerTimelines} rescale); the unique workers are
 * duplicated {@code -d} (7) times under distinct worker ids, replaying identical timelines at the
 * same times; an operation is a lookup or an event; offered ops/s = operations / window, achieved
 * ops/s = operations / the time until the last was done (events applied included); the latency is
 * the lookup's own time (Dynamo measures {@code find_matches} from its call to its return; this run
 * also prints the time from the operation's due time, queueing included). A run keeps up when it
 * took at most 1.1 × the window (Dynamo's warning threshold); {@code --sweep} runs windows
 * log-spaced from {@code --sweep-max-ms} down to {@code --sweep-min-ms} ({@code --sweep-steps},
 * Dynamo's published sweep: 30,000 to 1,000 ms in 8 steps), each on a fresh index, and reports the
 * highest achieved rate of the steps that kept up, as Dynamo's "peak".
 *
 * <p><b>How it runs here.</b> Lookups run on the replay threads themselves ({@code
 * --replay-threads}, the "caller threads" of a router): {@link BlockIndex#requestKeys} of the
 * request's tokens, then {@link BlockIndex#lookup} for every worker (all {@code workers × d} pods,
 * the candidates a router would pass). Events take kvroute's real ingestion path by default ({@code
 * --ingest zmq}): each is a vLLM {@code KVEventBatch} (msgpack, one event per batch) sent on the
 * replay thread's PUB socket with its worker's topic {@code kv@<worker>@trace} and sequence number,
 * received by a {@link KvEventSubscriber} in bind mode (one SUB socket, sequence tracking per
 * topic, shard threads that decode and apply: its defaults); {@code --ingest direct} skips ZeroMQ
 * and the sequencing (shard threads decode with {@link KvEventCodec} and apply through {@link
 * BlockIndex#accept}). {@code --backend redis} replays against a {@code RedisBlockIndex} on a
 * {@code redis-server} this run starts.
 *
 * <p><b>Where the workloads differ, and why.</b>
 *
 * <ul>
 *   <li>Events: Dynamo generates them with its mocker (a vLLM scheduler simulation, with its own
 *       timing, replaying the trace compressed into {@code --trace-simulation-duration-ms}); this
 *       run uses a small engine model in the trace's own time: a prefix cache of {@code
 *       --gpu-blocks} (16,384, Dynamo's default) per worker; at arrival, the lookup, then the
 *       removal of what the new blocks evicted, then one store of the request's uncached prompt
 *       blocks (the whole prompt in one step: Dynamo's mocker runs without a batched-token limit);
 *       then one store per {@code --decode-block-tokens} (128, Dynamo's default block size) output
 *       tokens, {@code --decode-ms-per-token} (20) apart per token; at completion the request's
 *       blocks are freed (cached, evicted least recently freed first, tails first). The event
 *       counts and sizes follow the trace as Dynamo's do; their times within a request differ.
 *   <li>Blocks: one index block per trace block id, of {@code --block-tokens} (16) tokens, each
 *       token the block id (Dynamo repeats the id {@code block_size} times too). kvroute keys
 *       blocks by hashes of their tokens, so its events carry tokens (vLLM's do); Dynamo's
 *       benchmark events carry only block hashes.
 *   <li>Lookups: kvroute's lookup scores a given list of candidate pods (here all of them), and
 *       computes the request keys from the tokens inside the timed call; Dynamo's {@code
 *       find_matches} is given precomputed block hashes and returns the workers that match.
 *   <li>Replay: a fixed number of replay threads walk a merged, time-sorted plan (a thread parks
 *       until an operation is due); Dynamo runs one tokio task per worker (7,000) on its runtime.
 *       The partition uses Java's {@code SplittableRandom}, not Rust's {@code StdRng}: the same
 *       distribution, a different draw.
 *   <li>Trace: the bundled trace is Mooncake's synthetic trace (3,993 requests); Dynamo's published
 *       figures use the conversation trace (12,031 requests), runnable here with {@code --trace
 *       conversation_trace.jsonl}.
 *   <li>Machine: Dynamo's figures come from its own (larger) machine with 8 event threads; this
 *       run's come from whatever it runs on, printed with the results.
 * </ul>
 *
 * <p>Run: {@code java -Xmx2g -cp benchmarks/target/benchmarks.jar
 * io.kvroute.benchmarks.trace.IndexTraceRun --window-ms 30000} (steady) or {@code ... --sweep}
 * ({@code --help} lists every option). It ends with {@code result: offered=<ops/s> achieved=<ops/s>
 * p99_us=<x> floor_p99_us=<y>} (steady) or {@code peak: achieved=<ops/s> p99_us=<x>
 * floor_p99_us=<y>} (sweep).
 *
 * <p><b>The floor.</b> Each replay also measures, in the same process right after it, up to 20,000
 * of its own lookups (the same keys and pod list) run back to back on one thread against the index
 * as the replay left it, with nothing else of the run working: the columns {@code floor p50/p99}
 * and {@code floor_p99_us}. The ratio of the replay's lookup percentiles to the floor's is what
 * concurrent ingestion, the replay's own pacing and the machine's load added; on a shared machine
 * that ratio travels better than the absolute figures.
 */
public final class IndexTraceRun {
  private IndexTraceRun() {}

  /** Options, all with defaults. */
  static final class Options {
    Path trace;
    int workers = 1000;
    int duplication = 7;
    long seed = 42;
    int blockTokens = 16;
    int gpuBlocks = 16_384;
    int decodeBlockTokens = 128;
    double decodeMsPerToken = 20;
    long windowMs = 30_000;
    boolean sweep;
    long sweepMinMs = 1000;
    long sweepMaxMs = 30_000;
    int sweepSteps = 8;
    int replayThreads = 2;
    int shards = 2;
    String ingest = "zmq";
    String backend = "memory";

    static Options parse(String[] args) {
      Options o = new Options();
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (a.equals("--help") || a.equals("-h")) {
          System.out.println(
              "options: --trace FILE (Mooncake JSONL, .gz ok; default: the bundled synthetic"
                  + " trace) --workers 1000 -d|--duplication 7 --seed 42 --block-tokens 16"
                  + " --gpu-blocks 16384 --decode-block-tokens 128 --decode-ms-per-token 20"
                  + " --window-ms 30000 | --sweep [--sweep-min-ms 1000 --sweep-max-ms 30000"
                  + " --sweep-steps 8] --replay-threads 2 --shards 2 --ingest zmq|direct"
                  + " --backend memory|redis");
          System.exit(0);
        }
        if (a.equals("--sweep")) {
          o.sweep = true;
          continue;
        }
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException("option " + a + " needs a value");
        }
        String v = args[++i];
        switch (a) {
          case "--trace" -> o.trace = Path.of(v);
          case "--workers" -> o.workers = Integer.parseInt(v);
          case "-d", "--duplication" -> o.duplication = Integer.parseInt(v);
          case "--seed" -> o.seed = Long.parseLong(v);
          case "--block-tokens" -> o.blockTokens = Integer.parseInt(v);
          case "--gpu-blocks" -> o.gpuBlocks = Integer.parseInt(v);
          case "--decode-block-tokens" -> o.decodeBlockTokens = Integer.parseInt(v);
          case "--decode-ms-per-token" -> o.decodeMsPerToken = Double.parseDouble(v);
          case "--window-ms" -> o.windowMs = Long.parseLong(v);
          case "--sweep-min-ms" -> o.sweepMinMs = Long.parseLong(v);
          case "--sweep-max-ms" -> o.sweepMaxMs = Long.parseLong(v);
          case "--sweep-steps" -> o.sweepSteps = Integer.parseInt(v);
          case "--replay-threads" -> o.replayThreads = Integer.parseInt(v);
          case "--shards" -> o.shards = Integer.parseInt(v);
          case "--ingest" -> o.ingest = v;
          case "--backend" -> o.backend = v;
          default -> throw new IllegalArgumentException("unknown option " + a + " (--help)");
        }
      }
      if (!o.ingest.equals("zmq") && !o.ingest.equals("direct")) {
        throw new IllegalArgumentException("--ingest must be zmq or direct, was " + o.ingest);
      }
      if (!o.backend.equals("memory") && !o.backend.equals("redis")) {
        throw new IllegalArgumentException("--backend must be memory or redis, was " + o.backend);
      }
      if (o.workers < 1 || o.duplication < 1 || o.replayThreads < 1 || o.sweepSteps < 2) {
        throw new IllegalArgumentException("need workers, -d, replay threads >= 1, steps >= 2");
      }
      return o;
    }

    TraceWorkload.Params params() {
      return new TraceWorkload.Params(
          workers, duplication, seed, blockTokens, gpuBlocks, decodeBlockTokens, decodeMsPerToken);
    }
  }

  /** One replay's figures. */
  record Result(
      long windowMs,
      long ops,
      double elapsedS,
      double offered,
      double achieved,
      long lookups,
      double p50Us,
      double p99Us,
      double p999Us,
      double maxUs,
      double dueP99Us,
      double floorP50Us,
      double floorP99Us,
      long problems,
      IndexStats stats,
      long heapBytes,
      String cpu) {
    boolean keptUp() {
      return elapsedS <= 1.1 * windowMs / 1000.0;
    }
  }

  /** Runs the steady window or the sweep and prints the figures. */
  public static void main(String[] args) throws Exception {
    Options o = Options.parse(args);
    System.out.println("== machine: " + Machine.describe());
    System.out.println("== load before: " + Machine.loadAverage());
    long t0 = System.nanoTime();
    MooncakeTrace trace = MooncakeTrace.read(o.trace);
    TraceWorkload w = new TraceWorkload(trace, o.params());
    System.out.printf(
        Locale.ROOT,
        "== trace %s: %d requests; %d unique workers (%d idle) x %d = %d pods; per replay: %d"
            + " lookups (%d blocks), %d stores (%d blocks), %d removals (%d blocks),"
            + " %d operations; built in %.1f s%n",
        trace.source,
        trace.requests.size(),
        o.workers,
        w.idleWorkers,
        o.duplication,
        o.workers * o.duplication,
        w.requests * o.duplication,
        w.requestBlocks * o.duplication,
        w.storedEvents * o.duplication,
        w.storedBlocks * o.duplication,
        w.removedEvents * o.duplication,
        w.removedBlocks * o.duplication,
        w.totalOps(),
        (System.nanoTime() - t0) / 1e9);
    System.out.printf(
        Locale.ROOT,
        "== replay: %d replay threads (lookups on them), ingest %s (%d shards), backend %s%n",
        o.replayThreads,
        o.ingest,
        o.shards,
        o.backend);
    RedisProcess redis =
        o.backend.equals("redis") ? RedisProcess.start("--maxmemory", "4gb") : null;
    try {
      // JIT warm-up: one replay as fast as it goes, on an index thrown away
      Result warm = new Replay(o, w, 1, redis).run();
      System.out.printf(
          Locale.ROOT,
          "warm-up (unpaced): %.0f ops/s, lookup p99 %.0f us%n",
          warm.achieved(),
          warm.p99Us());
      if (!o.sweep) {
        Result r = new Replay(o, w, o.windowMs, redis).run();
        printHeader();
        print(r);
        footer(r);
        System.out.printf(
            Locale.ROOT,
            "result: offered=%.0f achieved=%.0f p99_us=%.0f floor_p99_us=%.1f%n",
            r.offered(),
            r.achieved(),
            r.p99Us(),
            r.floorP99Us());
      } else {
        List<Result> results = new ArrayList<>();
        printHeader();
        for (int s = 0; s < o.sweepSteps; s++) {
          double f = s / (double) (o.sweepSteps - 1);
          long win =
              Math.round(Math.exp(Math.log(o.sweepMaxMs) * (1 - f) + Math.log(o.sweepMinMs) * f));
          Result r = new Replay(o, w, win, redis).run();
          results.add(r);
          print(r);
        }
        Result peak = null;
        for (Result r : results) {
          if (r.keptUp() && (peak == null || r.achieved() > peak.achieved())) {
            peak = r;
          }
        }
        footer(results.get(results.size() - 1));
        if (peak == null) {
          System.out.println("peak: none of the windows kept up");
        } else {
          System.out.printf(
              Locale.ROOT,
              "peak: achieved=%.0f p99_us=%.0f floor_p99_us=%.1f (window %d ms)%n",
              peak.achieved(),
              peak.p99Us(),
              peak.floorP99Us(),
              peak.windowMs());
        }
      }
    } finally {
      if (redis != null) {
        redis.close();
      }
    }
    System.exit(0);
  }

  private static void printHeader() {
    System.out.printf(
        Locale.ROOT,
        "%n%9s %10s %10s %9s %9s %9s %9s %9s %10s %9s %9s %8s %s%n",
        "window ms",
        "offered/s",
        "achieved/s",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us",
        "elapsed s",
        "due p99 us",
        "floor p50",
        "floor p99",
        "problems",
        "load");
  }

  private static void print(Result r) {
    if (VERBOSE_CPU) {
      System.out.println("  cpu (cores over the replay): " + r.cpu());
    }
    System.out.printf(
        Locale.ROOT,
        "%9d %10.0f %10.0f %9.1f %9.1f %9.1f %9.0f %9.2f %10.0f %9.1f %9.1f %8d %s%s%n",
        r.windowMs(),
        r.offered(),
        r.achieved(),
        r.p50Us(),
        r.p99Us(),
        r.p999Us(),
        r.maxUs(),
        r.elapsedS(),
        r.dueP99Us(),
        r.floorP50Us(),
        r.floorP99Us(),
        r.problems(),
        Machine.loadAverage(),
        r.keptUp() ? "" : "  (did not keep up)");
  }

  private static void footer(Result r) {
    IndexStats s = r.stats();
    System.out.printf(
        Locale.ROOT,
        "index after the last replay: %d keys, %d entries, %d engine keys, %d pods, evictions %s,"
            + " dropped %s; heap used after GC with it (the whole process: trace, plans, index)"
            + " %.0f MB%n",
        s.keys(),
        s.entries(),
        s.engineKeys(),
        s.pods(),
        s.evictions(),
        s.dropped(),
        r.heapBytes() / 1e6);
    System.out.println("== machine: " + Machine.describe());
    System.out.println("== load after: " + Machine.loadAverage());
  }

  // ------------------------------------------------------------------------------------ replay

  /** One replay of the workload against a fresh index, over one window. */
  static final class Replay {
    /** How many of a replay's lookups the floor repeats. */
    static final int FLOOR_LOOKUPS = 20_000;

    final Options o;
    final TraceWorkload w;
    final long windowMs;
    final boolean paced;
    final BlockIndex index;
    final List<String> pods;
    final Ingest ingest;

    /** A replay over {@code windowMs}; 1 ms or less: as fast as it goes (the warm-up). */
    Replay(Options o, TraceWorkload w, long windowMs, RedisProcess redis) {
      this.o = o;
      this.w = w;
      this.windowMs = windowMs;
      this.paced = windowMs > 1;
      IndexConfig ic =
          IndexConfig.builder()
              .blockSize(o.blockTokens)
              .modelName("trace")
              .maxPods(Math.max(16_384, o.workers * o.duplication + 16))
              // a block every worker holds keeps every worker (default: the 256 most recent)
              .maxPodsPerKey(Math.max(256, o.workers * o.duplication))
              .build();
      this.index =
          redis == null
              ? BlockIndex.inMemory(ic)
              : redis.index(
                  ic,
                  b ->
                      b.ingestMode(IngestMode.ALL_REPLICAS)
                          .replicaId("trace-" + System.nanoTime())
                          .keyPrefix("trace" + System.nanoTime()));
      List<String> names = new ArrayList<>();
      for (int k = 0; k < o.duplication; k++) {
        for (int u = 0; u < o.workers; u++) {
          names.add(podName(u, k));
        }
      }
      this.pods = List.copyOf(names);
      this.ingest = o.ingest.equals("zmq") ? new ZmqIngest(this) : new DirectIngest(this);
    }

    static String podName(int unique, int copy) {
      return "w" + unique + "-" + copy;
    }

    int podIndex(int unique, int copy) {
      return copy * o.workers + unique;
    }

    Result run() throws InterruptedException {
      int n = o.replayThreads;
      Plan[] plans = new Plan[n];
      for (int t = 0; t < n; t++) {
        plans[t] = new Plan(t);
      }
      java.util.Map<String, Long> cpu0 = cpuByGroup();
      long proc0 = processCpu();
      LongAdder replayCpu = new LongAdder();
      long[][] lat = new long[n][];
      long[][] due = new long[n][];
      CountDownLatch done = new CountDownLatch(n);
      long start = System.nanoTime() + 100_000_000L; // every thread starts at the same time
      List<Thread> threads = new ArrayList<>();
      for (int t = 0; t < n; t++) {
        int tt = t;
        Thread th =
            new Thread(
                () -> {
                  try {
                    Plan p = plans[tt];
                    p.replay(start);
                    replayCpu.add(ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime());
                    lat[tt] = Arrays.copyOf(p.latency, p.lookups);
                    due[tt] = Arrays.copyOf(p.sinceDue, p.lookups);
                  } finally {
                    done.countDown();
                  }
                },
                "trace-replay-" + t);
        th.setDaemon(true);
        threads.add(th);
        th.start();
      }
      done.await();
      long sent = 0;
      for (Plan p : plans) {
        sent += p.events;
      }
      ingest.awaitApplied(sent);
      long end = Math.max(ingest.lastApplied(), maxEnd(plans));
      double elapsed = (end - start) / 1e9;
      java.util.Map<String, Long> cpu1 = cpuByGroup();
      StringBuilder cpu =
          new StringBuilder(
              String.format(Locale.ROOT, " replay threads %.2f;", replayCpu.sum() / 1e9 / elapsed));
      cpu1.forEach(
          (g, t) -> {
            double cores = (t - cpu0.getOrDefault(g, 0L)) / 1e9 / elapsed;
            if (cores >= 0.01) {
              cpu.append(String.format(Locale.ROOT, " %s %.2f;", g, cores));
            }
          });
      double proc = (processCpu() - proc0) / 1e9 / elapsed;
      long ops = w.totalOps();
      long[] all = concat(lat);
      long[] dues = concat(due);
      Arrays.sort(all);
      Arrays.sort(dues);
      IndexStats stats = index.stats();
      long problems = ingest.problems();
      long[] floor = floorLookups(plans);
      long heap = heapAfterGc();
      ingest.close();
      if (index instanceof AutoCloseable c) {
        try {
          c.close();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
      return new Result(
          windowMs,
          ops,
          elapsed,
          paced ? ops / (windowMs / 1000.0) : Double.NaN,
          ops / elapsed,
          all.length,
          pct(all, 0.50),
          pct(all, 0.99),
          pct(all, 0.999),
          all.length == 0 ? 0 : all[all.length - 1] / 1e3,
          pct(dues, 0.99),
          pct(floor, 0.50),
          pct(floor, 0.99),
          problems,
          stats,
          heap,
          String.format(Locale.ROOT, "process %.2f cores:%s", proc, cpu));
    }

    /**
     * The floor measured in the same run: up to {@value #FLOOR_LOOKUPS} of the replay's lookups
     * (evenly spaced over the plans), the same keys and pod list, run back to back on this one
     * thread against the index as the replay left it, once the replay threads are done and every
     * event was applied (nothing else of this run is working). What the replay's lookups cost above
     * it is what concurrent ingestion and the machine's load added. Sorted nanoseconds.
     */
    private long[] floorLookups(Plan[] plans) {
      int total = 0;
      for (Plan p : plans) {
        total += p.lookups;
      }
      if (total == 0) {
        return new long[0];
      }
      int step = Math.max(1, total / FLOOR_LOOKUPS);
      PrefixMatch into = new PrefixMatch();
      long[] out = new long[(total + step - 1) / step];
      int n = 0;
      int seen = 0;
      for (int round = 0; round < 2; round++) { // the first pass warms up, the second is measured
        n = 0;
        seen = 0;
        for (Plan p : plans) {
          for (int i = 0; i < p.at.length; i++) {
            int r = p.ref[i];
            if (r >= 0) {
              continue;
            }
            if (seen++ % step != 0 || n == out.length) {
              continue;
            }
            int[] tokens = w.lookupTokens[-r - 1];
            long t0 = System.nanoTime();
            long[] keys = index.requestKeys(tokens, (String) null);
            index.lookup(keys, keys.length, pods, into);
            out[n++] = System.nanoTime() - t0;
          }
        }
      }
      long[] sorted = Arrays.copyOf(out, n);
      Arrays.sort(sorted);
      return sorted;
    }

    private static long maxEnd(Plan[] plans) {
      long m = 0;
      for (Plan p : plans) {
        m = Math.max(m, p.finished);
      }
      return m;
    }

    private static long[] concat(long[][] parts) {
      int n = 0;
      for (long[] p : parts) {
        n += p.length;
      }
      long[] out = new long[n];
      int at = 0;
      for (long[] p : parts) {
        System.arraycopy(p, 0, out, at, p.length);
        at += p.length;
      }
      return out;
    }

    private static double pct(long[] sorted, double q) {
      if (sorted.length == 0) {
        return 0;
      }
      int i = (int) Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1);
      return sorted[Math.max(0, i)] / 1e3;
    }

    /**
     * One replay thread's plan: the operations of the unique workers {@code u % threads == t}, for
     * every copy, merged in time order (rescaled into the window per unique worker).
     */
    final class Plan {
      final int thread;
      final long[] at; // due time, ns from the start
      final int[] pod; // pod index
      final int[] ref; // unique event index, or -(request + 1)
      final long[] latency;
      final long[] sinceDue;
      int lookups;
      long events;
      long finished;

      Plan(int thread) {
        this.thread = thread;
        int count = 0;
        for (int u = thread; u < o.workers; u += o.replayThreads) {
          count += w.timeUs[u].length * o.duplication;
        }
        long[] keys = new long[count];
        int[] pods = new int[count];
        int[] refs = new int[count];
        int k = 0;
        double windowNs = windowMs * 1e6;
        for (int u = thread; u < o.workers; u += o.replayThreads) {
          long[] ts = w.timeUs[u];
          if (ts.length == 0) {
            continue;
          }
          long last = Math.max(1, ts[ts.length - 1]);
          for (int c = 0; c < o.duplication; c++) {
            for (int i = 0; i < ts.length; i++) {
              keys[k] = paced ? (long) (ts[i] * windowNs / last) : 0;
              pods[k] = podIndex(u, c);
              refs[k] = w.refs[u][i];
              k++;
            }
          }
        }
        // a stable sort by time (a worker's own operations keep their order)
        Integer[] order = new Integer[count];
        for (int i = 0; i < count; i++) {
          order[i] = i;
        }
        Arrays.sort(order, (a, b) -> Long.compare(keys[a], keys[b]));
        at = new long[count];
        pod = new int[count];
        ref = new int[count];
        int lookupCount = 0;
        for (int i = 0; i < count; i++) {
          at[i] = keys[order[i]];
          pod[i] = pods[order[i]];
          ref[i] = refs[order[i]];
          if (ref[i] < 0) {
            lookupCount++;
          }
        }
        latency = new long[lookupCount];
        sinceDue = new long[lookupCount];
      }

      void replay(long start) {
        PrefixMatch into = new PrefixMatch();
        while (System.nanoTime() < start) {
          LockSupport.parkNanos(start - System.nanoTime());
        }
        for (int i = 0; i < at.length; i++) {
          long dueAt = start + at[i];
          if (paced) {
            long now = System.nanoTime();
            while (dueAt - now > 0) {
              if (dueAt - now > 150_000) {
                LockSupport.parkNanos(dueAt - now - 100_000);
              } else {
                Thread.onSpinWait();
              }
              now = System.nanoTime();
            }
          }
          int r = ref[i];
          if (r < 0) {
            int[] tokens = w.lookupTokens[-r - 1];
            long t0 = System.nanoTime();
            long[] keys = index.requestKeys(tokens, (String) null);
            index.lookup(keys, keys.length, pods, into);
            long t1 = System.nanoTime();
            latency[lookups] = t1 - t0;
            sinceDue[lookups] = paced ? t1 - dueAt : t1 - t0;
            lookups++;
          } else {
            ingest.send(thread, pod[i], w.payloads.get(r));
            events++;
          }
        }
        ingest.flush(thread);
        finished = System.nanoTime();
      }
    }
  }

  // ------------------------------------------------------------------------------------ ingest

  /** Where the replay threads send events. */
  interface Ingest {
    void send(int thread, int pod, byte[] payload);

    default void flush(int thread) {}

    /** Waits until {@code sent} batches were applied (or lost, counted as problems). */
    void awaitApplied(long sent) throws InterruptedException;

    /** When the last batch was applied (nanoTime). */
    long lastApplied();

    long problems();

    void close();
  }

  /**
   * kvroute's ingestion path: a {@link KvEventSubscriber} in bind mode (its defaults: shard
   * threads, queue sizes), one PUB socket per replay thread connected to it.
   */
  static final class ZmqIngest implements Ingest, KvEventListener {
    final ZContext context = new ZContext(1);
    final KvEventSubscriber subscriber;
    final ZMQ.Socket[] sockets;
    final byte[][] topics;
    final long[] seqs;
    final LongAdder applied = new LongAdder();
    final LongAdder lost = new LongAdder();
    final AtomicLong last = new AtomicLong();
    final AtomicLong notes = new AtomicLong();
    int reconnects;
    final java.util.Set<String> probesSeen = java.util.concurrent.ConcurrentHashMap.newKeySet();

    ZmqIngest(Replay r) {
      subscriber =
          KvEventSubscriber.builder()
              .sink(r.index)
              .listener(this)
              .bind("tcp://127.0.0.1:0")
              .shards(r.o.shards)
              .maxPods(r.pods.size() + 64)
              .build()
              .start();
      String ep = subscriber.boundEndpoint().orElseThrow();
      topics = new byte[r.pods.size()][];
      for (int i = 0; i < topics.length; i++) {
        topics[i] = ("kv@" + r.pods.get(i) + "@trace").getBytes(StandardCharsets.UTF_8);
      }
      seqs = new long[topics.length];
      sockets = new ZMQ.Socket[r.o.replayThreads];
      for (int t = 0; t < sockets.length; t++) {
        sockets[t] = connect(ep, t);
      }
    }

    /**
     * A PUB socket connected to the subscriber, once the subscriber saw a probe from it. With
     * JeroMQ 0.6.0 a publisher that connects to a bound SUB socket is, now and then (about 1 in 20
     * to 40 connects on this machine, also with plain JeroMQ sockets), never delivered: the probe
     * finds out, and the socket is replaced.
     */
    private ZMQ.Socket connect(String ep, int t) {
      for (int attempt = 0; attempt < 20; attempt++) {
        ZMQ.Socket s = context.createSocket(SocketType.PUB);
        s.setSndHWM(0);
        s.setLinger(0);
        s.connect(ep);
        if (probe(s, "probe-" + t + "-" + attempt)) {
          return s;
        }
        reconnects++;
        s.close();
      }
      throw new IllegalStateException("the subscriber never saw a probe of replay thread " + t);
    }

    /** Publishes empty batches on a probe topic until the subscriber saw one (slow joiner). */
    private boolean probe(ZMQ.Socket s, String pod) {
      byte[] topic = ("kv@" + pod + "@trace").getBytes(StandardCharsets.UTF_8);
      byte[] payload = KvEventCodec.encode(KvEventBatch.of(0.0, List.of()));
      long deadline = System.nanoTime() + 3_000_000_000L;
      long seq = 0;
      while (!probesSeen.contains(pod)) {
        if (System.nanoTime() > deadline) {
          return false;
        }
        s.sendMore(topic);
        s.sendMore(seqBytes(seq++));
        s.send(payload, 0);
        LockSupport.parkNanos(5_000_000L);
      }
      return true;
    }

    static byte[] seqBytes(long seq) {
      byte[] b = new byte[8];
      for (int i = 7; i >= 0; i--) {
        b[i] = (byte) seq;
        seq >>>= 8;
      }
      return b;
    }

    @Override
    public void send(int thread, int pod, byte[] payload) {
      ZMQ.Socket s = sockets[thread];
      s.sendMore(topics[pod]);
      s.sendMore(seqBytes(seqs[pod]++));
      s.send(payload, 0);
    }

    @Override
    public void onBatch(String pod, String topic, long seq, KvEventBatch batch, boolean replayed) {
      if (pod.startsWith("probe-")) {
        probesSeen.add(pod);
        return;
      }
      applied.increment();
      last.set(System.nanoTime());
    }

    @Override
    public void onGap(String pod, long expected, long received) {
      note(pod, "gap " + expected + ".." + received);
      lost.add(received - expected);
    }

    @Override
    public void onResync(String pod, String reason) {
      note(pod, "resync " + reason);
    }

    @Override
    public void onReplay(String pod, long from, long to, int replayed, boolean complete) {
      note(pod, "replay " + from + ".." + to + " " + replayed + " " + complete);
    }

    private void note(String pod, String what) {
      if (!pod.startsWith("probe-") && notes.incrementAndGet() <= 5) {
        System.out.println("subscriber: " + pod + ": " + what);
      }
    }

    @Override
    public void onDropped(String pod, long seq, String reason, Exception cause) {
      note(pod, "dropped " + seq + " " + reason);
      if (!pod.startsWith("probe-")) {
        lost.increment();
      }
    }

    @Override
    public void awaitApplied(long sent) throws InterruptedException {
      awaitCount(applied, lost, sent);
    }

    @Override
    public long lastApplied() {
      return last.get();
    }

    @Override
    public long problems() {
      return lost.sum();
    }

    @Override
    public void close() {
      if (reconnects > 0) {
        System.out.println(
            "(JeroMQ: " + reconnects + " publisher socket(s) never delivered, replaced)");
      }
      subscriber.close();
      context.close();
    }
  }

  /**
   * The ingestion path without ZeroMQ and sequencing: per-shard bounded queues (a replay thread
   * waits when one is full) and shard threads that decode each batch and apply it.
   */
  static final class DirectIngest implements Ingest {
    record Item(String pod, byte[] payload) {}

    final List<BlockingQueue<Item>> queues = new ArrayList<>();
    final List<Thread> threads = new ArrayList<>();
    final List<String> pods;
    final LongAdder applied = new LongAdder();
    final LongAdder failed = new LongAdder();
    final AtomicLong last = new AtomicLong();
    volatile boolean running = true;

    DirectIngest(Replay r) {
      this.pods = r.pods;
      for (int s = 0; s < r.o.shards; s++) {
        BlockingQueue<Item> q = new ArrayBlockingQueue<>(4096);
        queues.add(q);
        Thread t =
            new Thread(
                () -> {
                  while (running || !q.isEmpty()) {
                    try {
                      Item it = q.take();
                      if (it.pod() == null) {
                        continue;
                      }
                      r.index.accept(it.pod(), KvEventCodec.decode(it.payload()));
                      applied.increment();
                      last.set(System.nanoTime());
                    } catch (InterruptedException e) {
                      return;
                    } catch (RuntimeException e) {
                      failed.increment();
                    }
                  }
                },
                "trace-shard-" + s);
        t.setDaemon(true);
        threads.add(t);
        t.start();
      }
    }

    @Override
    public void send(int thread, int pod, byte[] payload) {
      try {
        queues.get(pod % queues.size()).put(new Item(pods.get(pod), payload));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    @Override
    public void awaitApplied(long sent) throws InterruptedException {
      awaitCount(applied, failed, sent);
    }

    @Override
    public long lastApplied() {
      return last.get();
    }

    @Override
    public long problems() {
      return failed.sum();
    }

    @Override
    public void close() {
      running = false;
      for (BlockingQueue<Item> q : queues) {
        q.offer(new Item(null, null));
      }
      for (Thread t : threads) {
        t.interrupt();
      }
    }
  }

  /** Waits until {@code done + lost} reaches {@code sent}, or nothing moved for 30 s. */
  static void awaitCount(LongAdder done, LongAdder lost, long sent) throws InterruptedException {
    long seen = -1;
    long since = System.nanoTime();
    while (done.sum() + lost.sum() < sent) {
      long now = done.sum() + lost.sum();
      if (now != seen) {
        seen = now;
        since = System.nanoTime();
      } else if (System.nanoTime() - since > 30_000_000_000L) {
        System.out.printf(
            Locale.ROOT, "warning: %d of %d batches never arrived%n", sent - now, sent);
        return;
      }
      Thread.sleep(1);
    }
  }

  // ----------------------------------------------------------------------------------- helpers

  static final boolean VERBOSE_CPU = true;

  /** CPU time by thread group (the thread name without digits), ns. */
  static java.util.Map<String, Long> cpuByGroup() {
    var tmx = ManagementFactory.getThreadMXBean();
    java.util.Map<String, Long> out = new java.util.TreeMap<>();
    for (long id : tmx.getAllThreadIds()) {
      var info = tmx.getThreadInfo(id);
      long t = tmx.getThreadCpuTime(id);
      if (info != null && t > 0) {
        out.merge(info.getThreadName().replaceAll("[0-9]+", "#"), t, Long::sum);
      }
    }
    return out;
  }

  static long processCpu() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  static long heapAfterGc() {
    for (int i = 0; i < 3; i++) {
      System.gc();
      LockSupport.parkNanos(100_000_000L);
    }
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
  }
}
