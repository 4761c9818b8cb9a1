package io.kvroute.benchmarks.scoring;

import io.kvroute.benchmarks.BenchmarkDefaults;
import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.scoring.Decision;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulingRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;

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
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class SchedulerPickBenchmark extends BenchmarkDefaults {
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
    int[] prompt = new int[promptTokens];
    for (int i = 0; i < prompt.length; i++) {
      prompt[i] = r.nextInt(150_000);
    }
    PrefixHoldingEndpoints cluster = PrefixHoldingEndpoints.of("m", prompt, endpoints, r);
    BlockIndex index = cluster.index();
    List<Endpoint> eps = cluster.endpoints();
    scheduler = cluster.scheduler().build();
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
