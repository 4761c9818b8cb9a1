package io.kvroute.benchmarks.router;

import io.kvroute.benchmarks.BenchmarkDefaults;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.parity.HashSettings;
import io.kvroute.router.KvRouter;
import io.kvroute.router.ParityMonitor;
import io.kvroute.router.RouteDecision;
import io.kvroute.router.RoutedResponse;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Scheduler;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The KV-cache parity check's cost on the request path (issue 29): {@link KvRouter#route} of a
 * completions request whose prompt is 1,024 token ids, scored precisely on an in-memory {@link
 * BlockIndex} over 8 decode endpoints and answered at once by {@link
 * RoutePathBenchmark.InMemoryPods}, with the parity check off (the floor, {@code sampling=off}), as
 * configured by default ({@code default}: at most 50 samples a second, the rest refused by a rate
 * limiter), or sampling every request ({@code every}: each one predicted and judged on the
 * monitor's thread, which on a small machine competes with the request thread).
 *
 * <p>{@link #decide} measures the same requests on the path of a gateway that proxies itself
 * (decide, then complete), without the connector.
 *
 * <p>{@code benchmarks/run.sh --only parity} prints the ratios to the floor (goal: ≤ 1.05).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class ParityCostBenchmark extends BenchmarkDefaults {
  static final String MODEL = "Qwen/Qwen3-8B";
  static final int PROMPT_TOKENS = 1024;
  private static final int BODIES = 64;
  private static final Duration LATENCY = Duration.ofMillis(1);

  /** Parity check off, at its default sampling rate, or sampling every request. */
  @Param({"off", "default", "every"})
  public String sampling;

  private KvRouter router;
  private byte[][] bodies;
  private Map<String, List<String>> headers;
  private long n;

  /** Builds the router, its index and parity check, and the request bodies. */
  @Setup(Level.Trial)
  public void setUp() {
    BlockIndex index =
        BlockIndex.inMemory(IndexConfig.builder().blockSize(16).modelName(MODEL).build());
    Scheduler.Builder sb = Scheduler.builder().prefixCacheLookup(BlockIndexLookup.of(index));
    Scheduler.defaultProfiles(true).forEach(sb::profile);
    KvRouter.Builder b =
        KvRouter.builder()
            .transport(new RoutePathBenchmark.InMemoryPods())
            .defaultConnector(ConnectorConfig.of("nixl"))
            .scheduler(sb.prefillProfile(Scheduler.PREFILL_PROFILE).build());
    for (int i = 0; i < 8; i++) {
      b.endpoint(
          Endpoint.of("http://127.0.0.1:" + (18200 + i), Endpoint.Role.DECODE).withId("d" + i));
    }
    if (!sampling.equals("off")) {
      ParityMonitor.Builder pb =
          ParityMonitor.builder(HashSettings.of(HashAlgorithm.SHA256, 16, null))
              .meterRegistry(new SimpleMeterRegistry());
      if (sampling.equals("every")) {
        pb.samplesPerSecond(1e9).maxPending(1 << 16).grace(Duration.ZERO);
      }
      b.parity(pb.build());
    }
    router = b.build();
    SplittableRandom rnd = new SplittableRandom(29);
    bodies = new byte[BODIES][];
    for (int i = 0; i < BODIES; i++) {
      StringBuilder sb2 = new StringBuilder("{\"model\":\"" + MODEL + "\",\"prompt\":[");
      for (int t = 0; t < PROMPT_TOKENS; t++) {
        // a shared first half, then tokens of this body's own
        sb2.append(t < PROMPT_TOKENS / 2 ? t : rnd.nextInt(150_000))
            .append(t + 1 < PROMPT_TOKENS ? "," : "");
      }
      bodies[i] =
          sb2.append("],\"max_tokens\":16,\"temperature\":0}")
              .toString()
              .getBytes(StandardCharsets.UTF_8);
    }
    headers = Map.of("Content-Type", List.of("application/json"));
  }

  /** Closes the router (and its parity check). */
  @TearDown(Level.Trial)
  public void tearDown() {
    router.close();
  }

  /**
   * One decision as a gateway that proxies itself takes it ({@link KvRouter#decide}, then {@link
   * RouteDecision#complete}): the request path without the connector's thread hand-offs, so the
   * check's share is measured on the router's own CPU.
   */
  @Benchmark
  public RouteDecision decide() {
    long i = n++;
    InferenceRequest r =
        InferenceRequest.of(
            InferenceRequest.Api.COMPLETIONS,
            bodies[(int) (i & (BODIES - 1))],
            headers,
            "bench-" + Long.toHexString(i));
    RouteDecision d = router.decide(r);
    d.complete(RouteDecision.Outcome.SUCCESS, LATENCY, LATENCY);
    return d;
  }

  /** One routed request, its answer read to the end. */
  @Benchmark
  public byte[] route() throws Exception {
    long i = n++;
    InferenceRequest r =
        InferenceRequest.of(
            InferenceRequest.Api.COMPLETIONS,
            bodies[(int) (i & (BODIES - 1))],
            headers,
            "bench-" + Long.toHexString(i));
    RoutedResponse resp = router.route(r).get(10, TimeUnit.SECONDS);
    return resp.readAll(1 << 20).get(10, TimeUnit.SECONDS);
  }
}
