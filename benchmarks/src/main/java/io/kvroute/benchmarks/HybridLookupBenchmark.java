package io.kvroute.benchmarks;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hybrid.HybridBlockIndex;
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
 * What the hybrid layer ({@link HybridBlockIndex}) costs a lookup.
 *
 * <p><b>Plain pods</b> (the case that must not slow down): the {@link IndexLookupBenchmark} setup
 * (an 8,192-token prompt, 512 blocks of 16, over N pods holding prefixes of uniform random length,
 * plus {@code backgroundBlocks} unrelated blocks), fed through the hybrid layer; {@link
 * #plainThroughLayer} looks up through the layer, {@link #floorPlainIndex} through the wrapped
 * in-memory index directly, the same keys and pods: the floor.
 *
 * <p><b>Hybrid pods</b> (for information): N gpt-oss-style pods (a full-attention group and a
 * 128-token sliding-window group), each holding a random prefix of the prompt in its full-attention
 * group and the last 16 blocks of it in its window group; {@link #gptOssRule} applies vLLM's rule,
 * {@link #floorGptOssGroup0} is the plain lookup of the same keys over the same pods' group 0 in
 * the same index.
 *
 * <p>Run: {@code java -jar benchmarks/target/benchmarks.jar HybridLookupBenchmark}, or the ratio
 * rows of {@code benchmarks/run.sh --only hybrid}.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class HybridLookupBenchmark extends BenchmarkDefaults {
  @Param({"100"})
  int pods;

  @Param({"1000000"})
  int backgroundBlocks;

  private BlockIndex inner;
  private HybridBlockIndex layer;
  private HybridBlockIndex gptOss;
  private long[] keys;
  private long[] gptOssKeys;
  private List<String> podIds;
  private final PrefixMatch result = new PrefixMatch();

  /** Fills both indexes. */
  @Setup(Level.Trial)
  public void setUp() {
    SplittableRandom rnd = new SplittableRandom(42);
    inner =
        BlockIndex.inMemory(
            IndexConfig.builder().blockSize(16).maxKeys(4_000_000).maxPodsPerKey(2048).build());
    layer = HybridBlockIndex.wrap(inner);
    int[] prompt = IndexFixtures.randomTokens(rnd, 8192);
    long[] engine = IndexFixtures.randomHashes(rnd, 512);
    podIds = new ArrayList<>();
    for (int p = 0; p < pods; p++) {
      String pod = "10.0." + (p / 250) + "." + (p % 250) + ":8000";
      podIds.add(pod);
      IndexFixtures.storeChain(layer, pod, prompt, engine, rnd.nextInt(513), 128, 16);
    }
    for (int done = 0; done < backgroundBlocks; done += 64) {
      int[] t = IndexFixtures.randomTokens(rnd, 64 * 16);
      long[] e = IndexFixtures.randomHashes(rnd, 64);
      IndexFixtures.storeChain(layer, podIds.get(rnd.nextInt(pods)), t, e, 64, 64, 16);
    }
    keys = layer.requestKeys(prompt, (String) null);

    gptOss =
        HybridBlockIndex.inMemory(
            IndexConfig.builder().blockSize(16).maxKeys(1_000_000).maxPodsPerKey(2048).build());
    for (String pod : podIds) {
      int blocks = rnd.nextInt(513);
      store(gptOss, pod, 0, "full_attention", null, prompt, engine, 0, blocks);
      store(
          gptOss, pod, 1, "sliding_window", 128, prompt, engine, Math.max(0, blocks - 16), blocks);
    }
    gptOssKeys = gptOss.requestKeys(prompt, (String) null);
    if (plainThroughLayer() != floorPlainIndex()) {
      throw new IllegalStateException("the layer and the index disagree on plain pods");
    }
    if (gptOssRule() > floorGptOssGroup0()) {
      throw new IllegalStateException("the hybrid rule matched more than full attention holds");
    }
  }

  private static void store(
      BlockIndex index,
      String pod,
      int group,
      String kind,
      Integer window,
      int[] tokens,
      long[] engine,
      int from,
      int to) {
    if (to <= from) {
      return;
    }
    KvEvent.BlockStored.Builder b =
        KvEvent.BlockStored.builder()
            .blockHashes(EngineHashes.ofInts(Arrays.copyOfRange(engine, from, to)))
            .tokenIds(Arrays.copyOfRange(tokens, from * 16, to * 16))
            .blockSize(16)
            .groupIdx(group)
            .kvCacheSpecKind(kind)
            .kvCacheSpecSlidingWindow(window);
    if (from > 0) {
      b.parentBlockHash(engine[from - 1]);
    }
    index.blockStored(pod, b.build());
  }

  /** Plain pods through the hybrid layer. */
  @Benchmark
  public int plainThroughLayer() {
    return layer.lookup(keys, keys.length, podIds, result).maxMatchedBlocks();
  }

  /** Floor: the same lookup on the wrapped in-memory index. */
  @Benchmark
  public int floorPlainIndex() {
    return inner.lookup(keys, keys.length, podIds, result).maxMatchedBlocks();
  }

  /** gpt-oss-style pods: vLLM's hybrid rule. */
  @Benchmark
  public int gptOssRule() {
    return gptOss.lookup(gptOssKeys, gptOssKeys.length, podIds, result).maxMatchedBlocks();
  }

  /** Floor of {@link #gptOssRule}: the plain lookup of the same pods' group 0. */
  @Benchmark
  public int floorGptOssGroup0() {
    return gptOss
        .delegate()
        .lookup(gptOssKeys, gptOssKeys.length, podIds, result)
        .maxMatchedBlocks();
  }
}
