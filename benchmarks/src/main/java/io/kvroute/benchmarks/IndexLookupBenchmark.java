package io.kvroute.benchmarks;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;

/**
 * Lookup of an 8,192-token prompt (512 blocks of 16) over N pods holding prefixes of it of uniform
 * random length, in an index that also holds {@code backgroundBlocks} unrelated blocks (so the
 * table is larger than the caches). Request-key computation is included in {@link #lookup}.
 *
 * <p>Floor: {@link #floorFlatScan} scans the same keys through {@link FlatPrefixFloor}, which holds
 * the same keys; {@code benchmarks/run.sh} prints the ratios ({@link #lookupOnly} against it, and
 * {@link #lookup} against it plus {@link #requestKeys}).
 *
 * <p>Run: {@code java -cp ... org.openjdk.jmh.Main IndexLookupBenchmark -f1 -wi 2 -i 3}.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class IndexLookupBenchmark extends BenchmarkDefaults {
  @Param({"100", "1000"})
  int pods;

  @Param({"1000000"})
  int backgroundBlocks;

  private BlockIndex index;
  private int[] prompt;
  private List<String> podIds;
  private final PrefixMatch result = new PrefixMatch();
  private long[] keys;
  private FlatPrefixFloor floor;
  private int[] matched;

  /** Fills the index. */
  @Setup(Level.Trial)
  public void setUp() {
    SplittableRandom rnd = new SplittableRandom(42);
    index =
        BlockIndex.inMemory(
            IndexConfig.builder().blockSize(16).maxKeys(4_000_000).maxPodsPerKey(2048).build());
    prompt = IndexFixtures.randomTokens(rnd, 8192);
    long[] engine = IndexFixtures.randomHashes(rnd, 512);
    podIds = new ArrayList<>();
    keys = index.requestKeys(prompt, (String) null);
    floor = new FlatPrefixFloor(backgroundBlocks + keys.length, pods);
    for (long k : keys) {
      floor.put(k, floor.newRow());
    }
    for (int p = 0; p < pods; p++) {
      String pod = "10.0." + (p / 250) + "." + (p % 250) + ":8000";
      podIds.add(pod);
      int blocks = rnd.nextInt(513);
      IndexFixtures.storeChain(index, pod, prompt, engine, blocks, 128, 16);
      for (int b = 0; b < blocks; b++) {
        floor.set(b, p); // the prompt's block b is row b
      }
    }
    // unrelated blocks, spread over the pods, in 64-block chains
    int[] podRow = new int[pods];
    Arrays.fill(podRow, -1);
    for (int done = 0; done < backgroundBlocks; done += 64) {
      int[] t = IndexFixtures.randomTokens(rnd, 64 * 16);
      long[] e = IndexFixtures.randomHashes(rnd, 64);
      int p = rnd.nextInt(pods);
      IndexFixtures.storeChain(index, podIds.get(p), t, e, 64, 64, 16);
      if (podRow[p] < 0) {
        podRow[p] = floor.newRow();
        floor.set(podRow[p], p);
      }
      for (long k : index.requestKeys(t, (String) null)) {
        floor.put(k, podRow[p]);
      }
    }
    matched = new int[pods];
    if (floor.size() != index.stats().keys()) {
      throw new IllegalStateException(
          "floor holds " + floor.size() + " keys, the index " + index.stats().keys());
    }
    if (floorFlatScan() != lookupOnly()) {
      throw new IllegalStateException("floor and index disagree on the longest prefix");
    }
  }

  /** Request keys + lookup over all pods. */
  @Benchmark
  public int lookup() {
    long[] k = index.requestKeys(prompt, (String) null);
    return index.lookup(k, k.length, podIds, result).maxMatchedBlocks();
  }

  /** Lookup only (keys precomputed). */
  @Benchmark
  public int lookupOnly() {
    return index.lookup(keys, keys.length, podIds, result).maxMatchedBlocks();
  }

  /**
   * Floor: a flat scan of the same keys through a primitive open-addressing map holding the same
   * number of keys, pods as dense ints ({@link FlatPrefixFloor}).
   */
  @Benchmark
  public int floorFlatScan() {
    return floor.scan(keys, keys.length, pods, matched);
  }

  /** Request-key computation only (512 blocks). */
  @Benchmark
  public long requestKeys() {
    long[] k = index.requestKeys(prompt, (String) null);
    return k[k.length - 1];
  }
}
