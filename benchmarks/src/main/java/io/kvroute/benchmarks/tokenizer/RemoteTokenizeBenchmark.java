package io.kvroute.benchmarks.tokenizer;

import io.kvroute.scoring.SchedulingRequest;
import io.kvroute.scoring.Tokenizers;
import io.kvroute.testkit.EngineTokenizer;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.VllmSimulator;
import io.kvroute.tokenizer.hf.HfTokenizer;
import java.time.Duration;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The remote alternative: {@code Tokenizers.vllm()} (cache off) calling a testkit simulator's
 * {@code POST /tokenize} on loopback with the same 8,192-token prompt. {@code podTokenizer}: {@code
 * REAL} makes the pod tokenize with the same Qwen3 tokenizer (Java engine, as a fast engine would);
 * {@code BUILTIN} uses the simulator's cheap regex tokenizer, isolating the HTTP + JSON hop.
 */
@Fork(
    value = 1,
    jvmArgsAppend = {
      "-DOPT_OUT_TRACKING=true",
      "-Dai.djl.offline=true",
      "-Dsun.net.httpserver.nodelay=true"
    })
public class RemoteTokenizeBenchmark extends TokenizerBenchmarkDefaults {
  /** How the simulated pod tokenizes. */
  public enum PodTokenizer {
    REAL,
    BUILTIN
  }

  @Param({"REAL", "BUILTIN"})
  PodTokenizer podTokenizer;

  private HfTokenizer tokenizer;
  private VllmSimulator pod;
  private Tokenizers.VllmTokenizer remote;
  private SchedulingRequest request;

  @Setup
  public void setup() {
    tokenizer = TokenizerFixtures.qwen3(HfTokenizer.Engine.JAVA);
    String prompt = TokenizerFixtures.prompt(tokenizer, 8192);
    pod =
        VllmSimulator.builder()
            .model("qwen3")
            .latency(LatencyModel.ZERO)
            .tokenizer(
                podTokenizer == PodTokenizer.REAL
                    ? TokenizerFixtures.engineTokenizer(tokenizer)
                    : EngineTokenizer.simulated())
            .build()
            .start();
    remote =
        Tokenizers.vllm()
            .baseUrl(pod.baseUrl())
            .cache(0, 0)
            .timeout(Duration.ofSeconds(10))
            .build();
    request = SchedulingRequest.builder().model("qwen3").prompt(prompt).build();
    System.out.printf(
        "%n[fixture] pod=%s remote ids: %d%n", podTokenizer, tokenizeRemote8k().length);
  }

  @TearDown
  public void close() {
    pod.close();
    tokenizer.close();
  }

  /** One {@code /tokenize} round trip for the 8k prompt. */
  @Benchmark
  public int[] tokenizeRemote8k() {
    return remote.tokenize(request).toCompletableFuture().join();
  }
}
