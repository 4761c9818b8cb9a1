package io.kvroute.benchmarks.redis;

import io.kvroute.benchmarks.BenchmarkDefaults;
import io.kvroute.benchmarks.IndexFixtures;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.kvroute.kvindex.redis.RedisIndexConfig.LookupMode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Lookup of an 8,192-token prompt (512 blocks of 16) over 100 pods holding prefixes of it of
 * uniform random length (chains of 128 blocks), in an index that also holds {@code
 * backgroundBlocks} unrelated blocks: the in-memory index as the reference, and the Redis index
 * (its own redis-server on loopback) with each lookup mode. Request keys are precomputed (their
 * cost is the same for every backend: see {@code IndexLookupBenchmark.requestKeys}).
 *
 * <p>Run: {@code java -jar benchmarks/target/benchmarks.jar RedisLookupBenchmark -f 1 -wi 3 -i 5}
 * (needs {@code redis-server}). Sample mode: read p0.50 and p0.99.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class RedisLookupBenchmark extends BenchmarkDefaults {
  @Param({"memory", "redis-script", "redis-mget"})
  String backend;

  @Param({"100"})
  int pods;

  @Param({"200000"})
  int backgroundBlocks;

  private RedisProcess redis;
  private BlockIndex index;
  private List<String> podIds;
  private long[] keys;
  private final PrefixMatch result = new PrefixMatch();

  /** Starts Redis if needed and fills the index. */
  @Setup(Level.Trial)
  public void setUp() {
    IndexConfig ic =
        IndexConfig.builder().blockSize(16).maxKeys(4_000_000).maxPodsPerKey(2048).build();
    if (backend.equals("memory")) {
      index = BlockIndex.inMemory(ic);
    } else {
      redis = RedisProcess.start();
      index =
          redis.index(
              ic,
              b ->
                  b.ingestMode(IngestMode.ALL_REPLICAS)
                      .lookupMode(
                          backend.equals("redis-script")
                              ? LookupMode.SCRIPT
                              : LookupMode.PIPELINED_MGET)
                      .lookupTimeout(Duration.ofSeconds(5)));
    }
    SplittableRandom rnd = new SplittableRandom(42);
    int[] prompt = IndexFixtures.randomTokens(rnd, 8192);
    long[] engine = IndexFixtures.randomHashes(rnd, 512);
    podIds = new ArrayList<>();
    for (int p = 0; p < pods; p++) {
      String pod = "10.0." + (p / 250) + "." + (p % 250) + ":8000";
      podIds.add(pod);
      IndexFixtures.storeChain(index, pod, prompt, engine, rnd.nextInt(513), 128, 16);
    }
    for (int done = 0; done < backgroundBlocks; done += 64) {
      int[] t = IndexFixtures.randomTokens(rnd, 64 * 16);
      long[] e = IndexFixtures.randomHashes(rnd, 64);
      IndexFixtures.storeChain(index, podIds.get(rnd.nextInt(pods)), t, e, 64, 64, 16);
    }
    if (index instanceof RedisBlockIndex) {
      ((RedisBlockIndex) index).flush();
    }
    keys = index.requestKeys(prompt, (String) null);
    PrefixMatch m = index.lookup(keys, keys.length, podIds, result);
    if (m.maxMatchedBlocks() < 400) {
      throw new IllegalStateException("the index was not filled: " + m.maxMatchedBlocks());
    }
  }

  /** Stops Redis. */
  @TearDown(Level.Trial)
  public void tearDown() throws Exception {
    if (index instanceof AutoCloseable) {
      ((AutoCloseable) index).close();
    }
    if (redis != null) {
      System.out.printf(
          "%nredis used_memory %.0f MB, keys %s",
          redis.info("memory", "used_memory") / 1e6, redis.command("DBSIZE").trim());
      redis.close();
    }
  }

  /** One lookup of the whole prompt over all pods. */
  @Benchmark
  public int lookup() {
    return index.lookup(keys, keys.length, podIds, result).maxMatchedBlocks();
  }
}
