package io.kvroute.benchmarks.scoring;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.EndpointMetrics;
import io.kvroute.scoring.MetricsStore;
import io.kvroute.scoring.Scheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The pick benchmarks' cluster: endpoints {@code pod-0 …}, each holding in a real in-memory index
 * (block 16) a prefix of random length (whole blocks) of one prompt, with random fresh engine
 * metrics; {@link #scheduler()} starts a scheduler over that index and those metrics.
 */
public final class PrefixHoldingEndpoints {
  private static final int BLOCK = 16;

  private final BlockIndex index;
  private final MetricsStore metrics;
  private final List<Endpoint> endpoints;

  private PrefixHoldingEndpoints(BlockIndex index, MetricsStore metrics, List<Endpoint> endpoints) {
    this.index = index;
    this.metrics = metrics;
    this.endpoints = endpoints;
  }

  /**
   * Fills a new index for {@code model} with {@code count} endpoints holding prefixes of {@code
   * prompt}, drawing lengths, engine hashes and metrics from {@code r} (endpoint by endpoint).
   */
  public static PrefixHoldingEndpoints of(
      String model, int[] prompt, int count, SplittableRandom r) {
    BlockIndex index =
        BlockIndex.inMemory(IndexConfig.builder().blockSize(BLOCK).modelName(model).build());
    MetricsStore metrics = MetricsStore.create(Duration.ofDays(1), System::nanoTime, 10_000);
    List<Endpoint> eps = new ArrayList<>();
    for (int e = 0; e < count; e++) {
      Endpoint ep =
          Endpoint.builder("pod-" + e, "10.0." + (e / 250) + "." + (e % 250 + 1), 8000).build();
      eps.add(ep);
      int blocks = r.nextInt(prompt.length / BLOCK + 1);
      if (blocks > 0) {
        int[] held = Arrays.copyOf(prompt, blocks * BLOCK);
        long[] engine = new long[blocks];
        for (int b = 0; b < blocks; b++) {
          engine[b] = r.nextLong();
        }
        index.blockStored(ep.id(), engine, false, 0, held, BLOCK, null, "GPU", 0);
      }
      metrics.update(ep.id(), EndpointMetrics.of(r.nextInt(20), r.nextInt(50), r.nextDouble()));
    }
    return new PrefixHoldingEndpoints(index, metrics, eps);
  }

  /** The index. */
  public BlockIndex index() {
    return index;
  }

  /** The endpoints, in order. */
  public List<Endpoint> endpoints() {
    return endpoints;
  }

  /** A scheduler builder with precise prefix lookup in {@link #index()} and the metrics set. */
  public Scheduler.Builder scheduler() {
    return Scheduler.builder().prefixCacheLookup(BlockIndexLookup.of(index)).metricsStore(metrics);
  }
}
