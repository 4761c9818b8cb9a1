package io.kvroute.benchmarks.redis;

import io.kvroute.benchmarks.BenchmarkDefaults;
import io.kvroute.benchmarks.IndexFixtures;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import java.time.Duration;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Ingestion throughput of one replica, applied (not just queued): each invocation stores 16
 * requests of 64 blocks from 100 pods, as engine steps would announce them (events of {@code
 * perEvent} blocks, each chained to the previous event's last block), then waits until the index
 * applied them (the Redis index's {@code flush()}). Score: blocks per second. For Redis, the
 * server's CPU seconds per million blocks are printed after each iteration ({@code INFO cpu}).
 *
 * <p>Run: {@code java -jar benchmarks/target/benchmarks.jar RedisIngestBenchmark -f 1 -wi 3 -i 5}.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
public class RedisIngestBenchmark extends BenchmarkDefaults {
  static final int REQUESTS = 16;
  static final int BLOCKS = 64;
  private static final int POOL = 1 << 10;

  @Param({"memory", "redis-all", "redis-leased"})
  String backend;

  /** Blocks per event: 16 (prefill of a long prompt), 1 (a decode step's new block). */
  @Param({"16", "1"})
  int perEvent;

  private RedisProcess redis;
  private BlockIndex index;
  private int[][] tokens;
  private long[][] hashes;
  private String[] pods;
  private int next;
  private long round;
  private long blocks;
  private double cpuAtStart;

  /** Prepares requests and the index. */
  @Setup(Level.Trial)
  public void setUp() {
    SplittableRandom rnd = new SplittableRandom(7);
    IndexConfig ic = IndexConfig.builder().maxKeys(2_000_000).build();
    if (backend.equals("memory")) {
      index = BlockIndex.inMemory(ic);
    } else {
      redis = RedisProcess.start("--maxmemory", "3gb", "--maxmemory-policy", "allkeys-lru");
      index =
          redis.index(
              ic,
              b ->
                  b.ingestMode(
                          backend.equals("redis-all") ? IngestMode.ALL_REPLICAS : IngestMode.LEASED)
                      .commandTimeout(Duration.ofSeconds(10)));
    }
    tokens = new int[POOL][];
    hashes = new long[POOL][];
    for (int i = 0; i < POOL; i++) {
      tokens[i] = IndexFixtures.randomTokens(rnd, BLOCKS * 16);
      hashes[i] = IndexFixtures.randomHashes(rnd, BLOCKS);
    }
    pods = IndexFixtures.podNames(100);
  }

  /** Notes the server's CPU time. */
  @Setup(Level.Iteration)
  public void startIteration() {
    blocks = 0;
    cpuAtStart = redis == null ? 0 : redis.cpuSeconds();
  }

  /** Prints the server's CPU per block. */
  @TearDown(Level.Iteration)
  public void endIteration() {
    if (redis != null && blocks > 0) {
      double cpu = redis.cpuSeconds() - cpuAtStart;
      System.out.printf(
          "%nredis-server CPU: %.2f s per million blocks (%.2f us/block), used_memory %.0f MB%n",
          cpu * 1e6 / blocks, cpu * 1e6 / blocks, redis.info("memory", "used_memory") / 1e6);
    }
  }

  /** Stops Redis. */
  @TearDown(Level.Trial)
  public void tearDown() throws Exception {
    if (index instanceof AutoCloseable) {
      ((AutoCloseable) index).close();
    }
    if (redis != null) {
      redis.close();
    }
  }

  /** 16 requests × 64 blocks, applied. */
  @Benchmark
  @OperationsPerInvocation(REQUESTS * BLOCKS)
  public void store() {
    round++;
    for (int r = 0; r < REQUESTS; r++) {
      int i = next++ & (POOL - 1);
      long[] h = hashes[i];
      // new engine hashes each round so mappings keep being inserted
      long salt = round * 0x9E3779B97F4A7C15L;
      long[] e = new long[BLOCKS];
      for (int b = 0; b < BLOCKS; b++) {
        e[b] = h[b] ^ salt;
      }
      int[] t = tokens[i];
      t[0] = (int) (round & 0xffff); // new content each round
      String pod = pods[i % pods.length];
      IndexFixtures.storeChain(index, pod, t, e, BLOCKS, perEvent, 16);
    }
    if (index instanceof RedisBlockIndex) {
      ((RedisBlockIndex) index).flush();
    }
    blocks += REQUESTS * BLOCKS;
  }
}
