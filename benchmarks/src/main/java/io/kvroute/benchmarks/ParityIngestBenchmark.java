package io.kvroute.benchmarks;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.EventSchema;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.parity.HashSettings;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.router.KvRouter;
import io.kvroute.router.ParityMonitor;
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
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The KV-cache parity check's cost on ingestion (issue 29): {@link EventIngestBenchmark}'s work
 * (decode one msgpack batch of 16 {@code BlockStored} blocks, apply it to the index) followed by
 * the subscriber's listener call, with the listener a no-op ({@code parity=off}, the floor), the
 * parity monitor's tap while no sample waits on any pod ({@code idle}: one map lookup a batch), or
 * while a sample waits on every one of the 100 pods ({@code watched}: each {@code BlockStored} kept
 * in the pod's ring; the worst case, reached only when samples are pending on every engine). Score:
 * blocks per second on one thread.
 *
 * <p>{@code benchmarks/run.sh --only parity} prints the ratios to the floor (goal: ≤ 1.05).
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class ParityIngestBenchmark extends BenchmarkDefaults {
  private static final int PAYLOADS = 1 << 12;
  private static final int PODS = 100;

  /** No parity check, its tap with no pod watched, or with every pod watched. */
  @Param({"off", "idle", "watched"})
  public String parity;

  private KvEventSink sink;
  private byte[][] payloads;
  private String[] pods;
  private KvEventListener listener;
  private KvRouter router;
  private int next;

  /** Encodes the payloads; builds the parity check and, for {@code watched}, its samples. */
  @Setup(Level.Trial)
  public void setUp() {
    SplittableRandom rnd = new SplittableRandom(11);
    sink = KvEventSink.of(BlockIndex.inMemory(IndexConfig.builder().maxKeys(2_000_000).build()));
    payloads = new byte[PAYLOADS][];
    for (int i = 0; i < PAYLOADS; i++) {
      long[] hashes = IndexFixtures.randomHashes(rnd, EventIngestBenchmark.BLOCKS_PER_EVENT);
      int[] tokens = IndexFixtures.randomTokens(rnd, EventIngestBenchmark.BLOCKS_PER_EVENT * 16);
      KvEventBatch batch =
          KvEventBatch.of(
              1.7e9,
              List.of(KvEvent.BlockStored.of(EngineHashes.ofInts(hashes), null, tokens, 16)));
      payloads[i] = KvEventCodec.encode(batch, EventSchema.A5);
    }
    pods = IndexFixtures.podNames(PODS);
    listener = KvEventListener.NONE;
    if (parity.equals("off")) {
      return;
    }
    ParityMonitor monitor =
        ParityMonitor.builder(HashSettings.of(HashAlgorithm.SHA256, 16, null))
            .samplesPerSecond(1e6)
            .maxWait(Duration.ofHours(1))
            .meterRegistry(new SimpleMeterRegistry())
            .build();
    listener = monitor.eventListener(KvEventListener.NONE);
    BlockIndex routerIndex =
        BlockIndex.inMemory(IndexConfig.builder().blockSize(16).modelName("m").build());
    Scheduler.Builder sb = Scheduler.builder().prefixCacheLookup(BlockIndexLookup.of(routerIndex));
    Scheduler.defaultProfiles(true).forEach(sb::profile);
    KvRouter.Builder rb =
        KvRouter.builder()
            .defaultConnector(ConnectorConfig.of("nixl"))
            .scheduler(sb.prefillProfile(Scheduler.PREFILL_PROFILE).build())
            .parity(monitor);
    for (int p = 0; p < PODS; p++) {
      rb.endpoint(
          Endpoint.of("http://127.0.0.1:" + (19000 + p), Endpoint.Role.BOTH).withId(pods[p]));
    }
    router = rb.build();
    if (parity.equals("watched")) {
      // a decision per pod that never completes: its sample waits on the pod's events
      byte[] body =
          "{\"model\":\"m\",\"prompt\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17],\"max_tokens\":1}"
              .getBytes(StandardCharsets.UTF_8);
      Map<String, List<String>> headers = Map.of("Content-Type", List.of("application/json"));
      for (String pod : pods) {
        router
            .decideAsync(
                InferenceRequest.of(InferenceRequest.Api.COMPLETIONS, body, headers, pod),
                e -> e.id().equals(pod))
            .join();
      }
    }
  }

  /** Closes the router (and its parity check). */
  @TearDown(Level.Trial)
  public void tearDown() {
    if (router != null) {
      router.close();
    }
  }

  /** Decode one payload of 16 blocks, apply it, and show it to the listener. */
  @Benchmark
  @OperationsPerInvocation(EventIngestBenchmark.BLOCKS_PER_EVENT)
  public void ingest() {
    int i = next++ & (PAYLOADS - 1);
    String pod = pods[i % PODS];
    KvEventBatch batch = KvEventCodec.decode(payloads[i]);
    sink.accept(pod, batch);
    listener.onBatch(pod, "kv", i, batch, false);
  }
}
