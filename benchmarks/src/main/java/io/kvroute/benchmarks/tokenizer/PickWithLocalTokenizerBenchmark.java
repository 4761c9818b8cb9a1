package io.kvroute.benchmarks.tokenizer;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Decision;
import io.kvroute.scoring.EndpointMetrics;
import io.kvroute.scoring.MetricsStore;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulingRequest;
import io.kvroute.tokenizer.hf.HfTokenizer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
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
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * {@code Scheduler.pickAsync} end to end for an 8,192-token prompt given as text, over 100
 * endpoints: local Qwen3 tokenization (result cache off), request keys, precise prefix lookup in a
 * real in-memory index (each endpoint holds a random-length prefix of the prompt's real ids), every
 * default scorer and filter, top-3 picker — as {@code SchedulerPickBenchmark}, plus tokenization.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@Fork(
    value = 1,
    jvmArgsAppend = {"-DOPT_OUT_TRACKING=true", "-Dai.djl.offline=true"})
public class PickWithLocalTokenizerBenchmark {
  @Param({"100"})
  int endpoints;

  @Param({"JAVA", "NATIVE"})
  HfTokenizer.Engine engine;

  private HfTokenizer tokenizer;
  private Scheduler scheduler;
  private SchedulingRequest request;

  @Setup
  public void setup() {
    tokenizer = TokenizerFixtures.qwen3(engine);
    String prompt = TokenizerFixtures.prompt(tokenizer, 8192);
    int[] ids = tokenizer.encode(prompt);
    SplittableRandom r = new SplittableRandom(42);
    BlockIndex index =
        BlockIndex.inMemory(IndexConfig.builder().blockSize(16).modelName("qwen3").build());
    MetricsStore metrics = MetricsStore.create(Duration.ofDays(1), System::nanoTime, 10_000);
    List<Endpoint> eps = new ArrayList<>();
    for (int e = 0; e < endpoints; e++) {
      Endpoint ep =
          new Endpoint(
              "pod-" + e,
              "http",
              "10.0." + (e / 250) + "." + (e % 250 + 1),
              8000,
              Endpoint.Role.BOTH,
              Map.of());
      eps.add(ep);
      int blocks = r.nextInt(ids.length / 16 + 1);
      if (blocks > 0) {
        int[] held = Arrays.copyOf(ids, blocks * 16);
        long[] engineKeys = new long[blocks];
        for (int b = 0; b < blocks; b++) {
          engineKeys[b] = r.nextLong();
        }
        index.blockStored(ep.id(), engineKeys, false, 0, held, 16, null, "GPU", 0);
      }
      metrics.update(ep.id(), EndpointMetrics.of(r.nextInt(20), r.nextInt(50), r.nextDouble()));
    }
    scheduler =
        Scheduler.builder()
            .prefixCacheLookup(BlockIndexLookup.of(index))
            .metricsStore(metrics)
            .tokenizer(tokenizer)
            .build();
    request = SchedulingRequest.builder().model("qwen3").prompt(prompt).candidates(eps).build();
    Decision d = pick();
    if (!d.routed() || d.tokenizationFailed()) {
      throw new IllegalStateException("benchmark setup does not route with tokens: " + d);
    }
  }

  @TearDown
  public void close() {
    tokenizer.close();
  }

  /** Tokenize locally, then pick. */
  @Benchmark
  public Decision pick() {
    return scheduler.pickAsync(request).join();
  }
}
