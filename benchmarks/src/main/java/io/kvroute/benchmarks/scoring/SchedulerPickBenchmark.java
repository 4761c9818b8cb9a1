package io.kvroute.benchmarks.scoring;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Decision;
import io.kvroute.scoring.EndpointMetrics;
import io.kvroute.scoring.MetricsStore;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulingRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * {@link Scheduler#pick} of an 8,192-token prompt (token ids supplied, so tokenization is excluded;
 * request keys are computed inside {@code pick}) over 100 endpoints with the default profiles and
 * every default scorer: precise prefix (real in-memory {@code BlockIndex}, block 16, each endpoint
 * holding a random-length prefix of the prompt), queue, KV utilization, load-aware, active
 * requests, LoRA affinity, session affinity, no-hit LRU; decode-role, health and LoRA filters;
 * top-3 picker. Every endpoint has fresh engine metrics.
 *
 * <p>Floor: request-key hashing alone ({@link #floorRequestKeys}) plus the lookup alone ({@link
 * #floorLookup}); {@code benchmarks/run.sh} prints {@code pick} against their sum.
 *
 * <p>Run: {@code java -cp ... org.openjdk.jmh.Main SchedulerPickBenchmark -f1 -wi 2 -i 3}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@Fork(1)
public class SchedulerPickBenchmark {
  @Param({"100"})
  int endpoints;

  @Param({"8192"})
  int promptTokens;

  private Scheduler scheduler;
  private SchedulingRequest request;
  private BlockIndex index;
  private int[] prompt;
  private long[] keys;
  private final List<String> ids = new ArrayList<>();
  private final PrefixMatch match = new PrefixMatch();

  @Setup
  public void setup() {
    SplittableRandom r = new SplittableRandom(42);
    BlockIndex index =
        BlockIndex.inMemory(IndexConfig.builder().blockSize(16).modelName("m").build());
    int[] prompt = new int[promptTokens];
    for (int i = 0; i < prompt.length; i++) {
      prompt[i] = r.nextInt(150_000);
    }
    MetricsStore metrics = MetricsStore.create(Duration.ofDays(1), System::nanoTime, 10_000);
    List<Endpoint> eps = new ArrayList<>();
    for (int e = 0; e < endpoints; e++) {
      Endpoint ep =
          Endpoint.builder("pod-" + e, "10.0." + (e / 250) + "." + (e % 250 + 1), 8000).build();
      eps.add(ep);
      // Each endpoint holds a prefix of random length (whole blocks) of the prompt.
      int blocks = r.nextInt(prompt.length / 16 + 1);
      if (blocks > 0) {
        int[] held = Arrays.copyOf(prompt, blocks * 16);
        long[] engine = new long[blocks];
        for (int b = 0; b < blocks; b++) {
          engine[b] = r.nextLong();
        }
        index.blockStored(ep.id(), engine, false, 0, held, 16, null, "GPU", 0);
      }
      metrics.update(ep.id(), EndpointMetrics.of(r.nextInt(20), r.nextInt(50), r.nextDouble()));
    }
    scheduler =
        Scheduler.builder()
            .prefixCacheLookup(BlockIndexLookup.of(index))
            .metricsStore(metrics)
            .build();
    request = SchedulingRequest.builder().model("m").tokenIds(prompt).candidates(eps).build();
    Decision d = scheduler.pick(request);
    if (!d.routed()) {
      throw new IllegalStateException("benchmark setup does not route: " + d);
    }
    this.index = index;
    this.prompt = prompt;
    this.keys = index.requestKeys(prompt, (String) null);
    for (Endpoint ep : eps) {
      ids.add(ep.id());
    }
  }

  /** Floor, part 1: the request keys of the prompt alone (what {@code pick} hashes). */
  @Benchmark
  public long floorRequestKeys() {
    long[] k = index.requestKeys(prompt, (String) null);
    return k[k.length - 1];
  }

  /** Floor, part 2: the index lookup alone (keys precomputed) over the same endpoints. */
  @Benchmark
  public int floorLookup() {
    return index.lookup(keys, keys.length, ids, match).maxMatchedBlocks();
  }

  /** The synchronous pick, request keys and index lookup included. */
  @Benchmark
  public Decision pick() {
    return scheduler.pick(request);
  }
}
