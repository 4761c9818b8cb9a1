package io.kvroute.benchmarks;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;

/**
 * Index-only ingestion throughput: {@code blockStored} calls of {@value #BLOCKS_PER_EVENT} blocks
 * (tokens included, request keys computed) from 100 pods, into an index bounded at {@code maxKeys}
 * (so it runs in steady state with evictions). Score: blocks per second (one op = one block).
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class IndexIngestBenchmark extends BenchmarkDefaults {
  static final int BLOCKS_PER_EVENT = 16;
  private static final int EVENTS = 1 << 14;

  @Param({"1000000"})
  int maxKeys;

  private BlockIndex index;
  private int[][] tokens;
  private long[][] hashes;
  private String[] pods;
  private int next;

  /** Prepares events. */
  @Setup(Level.Trial)
  public void setUp() {
    SplittableRandom rnd = new SplittableRandom(7);
    index = BlockIndex.inMemory(IndexConfig.builder().maxKeys(maxKeys).build());
    tokens = new int[EVENTS][];
    hashes = new long[EVENTS][];
    for (int i = 0; i < EVENTS; i++) {
      tokens[i] = IndexFixtures.randomTokens(rnd, BLOCKS_PER_EVENT * 16);
      hashes[i] = IndexFixtures.randomHashes(rnd, BLOCKS_PER_EVENT);
    }
    pods = IndexFixtures.podNames(100);
  }

  /** One BlockStored event of 16 blocks. */
  @Benchmark
  @OperationsPerInvocation(BLOCKS_PER_EVENT)
  public void blockStored() {
    int i = next++ & (EVENTS - 1);
    // vary the engine hashes per round so mappings keep being inserted
    long[] h = hashes[i];
    h[0] += 0x9E3779B97F4A7C15L;
    index.blockStored(pods[i % pods.length], h, false, 0, tokens[i], 16, null, null, 0);
  }
}
