package io.kvroute.benchmarks.tokenizer;

import io.kvroute.benchmarks.scoring.PrefixHoldingEndpoints;
import io.kvroute.connector.Endpoint;
import io.kvroute.scoring.Decision;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulingRequest;
import io.kvroute.tokenizer.hf.HfTokenizer;
import java.util.List;
import java.util.SplittableRandom;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * {@code Scheduler.pickAsync} end to end for an 8,192-token prompt given as text, over 100
 * endpoints: local Qwen3 tokenization (result cache off), request keys, precise prefix lookup in a
 * real in-memory index (each endpoint holds a random-length prefix of the prompt's real ids), every
 * default scorer and filter, top-3 picker — as {@code SchedulerPickBenchmark}, plus tokenization.
 */
public class PickWithLocalTokenizerBenchmark extends TokenizerBenchmarkDefaults {
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
    PrefixHoldingEndpoints cluster = PrefixHoldingEndpoints.of("qwen3", ids, endpoints, r);
    List<Endpoint> eps = cluster.endpoints();
    scheduler = cluster.scheduler().tokenizer(tokenizer).build();
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
