package io.kvroute.benchmarks;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.EventSchema;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.event.KvEventSink;
import java.util.List;
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

/**
 * Ingestion from payload bytes into the index, the way the subscriber's shard thread does it:
 * decode one msgpack batch of vLLM {@code BlockStored} events (16-token blocks; 4,096 distinct
 * payloads cycled) and apply it through {@link KvEventSink#of(BlockIndex)}. Score: blocks per
 * second on one thread.
 *
 * <p>Floors ({@link IngestFloors}), measured on the same payloads: msgpack-java decoding into
 * arrays without applying ({@link #floorMsgpackJava}), and a plain walk over the bytes ({@link
 * #floorByteWalk}). {@code benchmarks/run.sh} prints the ratios.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class EventIngestBenchmark extends BenchmarkDefaults {
  static final int BLOCKS_PER_EVENT = 16;
  private static final int PAYLOADS = 1 << 12;

  /** The wire schema: array events (A5) or map events (M2, newest vLLM). */
  @Param({"A5", "M2"})
  String schema;

  private KvEventSink sink;
  private byte[][] payloads;
  private String[] pods;
  private int next;
  private final byte[] scratch = new byte[256];

  /** Encodes the payloads. */
  @Setup(Level.Trial)
  public void setUp() {
    SplittableRandom rnd = new SplittableRandom(11);
    sink = KvEventSink.of(BlockIndex.inMemory(IndexConfig.builder().maxKeys(2_000_000).build()));
    payloads = new byte[PAYLOADS][];
    for (int i = 0; i < PAYLOADS; i++) {
      long[] hashes = IndexFixtures.randomHashes(rnd, BLOCKS_PER_EVENT);
      int[] tokens = IndexFixtures.randomTokens(rnd, BLOCKS_PER_EVENT * 16);
      KvEventBatch batch =
          KvEventBatch.of(
              1.7e9,
              List.of(KvEvent.BlockStored.of(EngineHashes.ofInts(hashes), null, tokens, 16)));
      payloads[i] = KvEventCodec.encode(batch, EventSchema.valueOf(schema));
    }
    pods = IndexFixtures.podNames(100);
  }

  /** Decode one payload of 16 blocks and apply it. */
  @Benchmark
  @OperationsPerInvocation(BLOCKS_PER_EVENT)
  public void decodeAndApply() {
    int i = next++ & (PAYLOADS - 1);
    sink.accept(pods[i % pods.length], KvEventCodec.decode(payloads[i]));
  }

  /** Floor: msgpack-java decodes the same payload into arrays; nothing is applied. */
  @Benchmark
  @OperationsPerInvocation(BLOCKS_PER_EVENT)
  public long floorMsgpackJava() {
    int i = next++ & (PAYLOADS - 1);
    return IngestFloors.msgpackJava(payloads[i], scratch);
  }

  /** Floor: a plain walk over the same payload's bytes into arrays; nothing is applied. */
  @Benchmark
  @OperationsPerInvocation(BLOCKS_PER_EVENT)
  public long floorByteWalk() {
    int i = next++ & (PAYLOADS - 1);
    return IngestFloors.byteWalk(payloads[i]);
  }
}
