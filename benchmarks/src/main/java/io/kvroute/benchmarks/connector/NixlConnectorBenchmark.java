package io.kvroute.benchmarks.connector;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.http.OkHttpTransport;
import io.kvroute.connector.nixl.NixlConnector;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What the {@code nixl} connector adds to a request, against zero-latency stub pods on loopback
 * ({@link StubPods}), always as a difference against direct calls in the same run (loopback round
 * trips are dominated by thread wake-ups):
 *
 * <ul>
 *   <li>{@link #directDecode}: one non-streaming decode call straight through the transport;
 *   <li>{@link #directPrefillThenDecode}: the same two calls the connector makes, by hand;
 *   <li>{@link #nixlProxy}: the full PD request through {@link NixlConnector#proxy} (prefill,
 *       {@code kv_transfer_params} copied, decode). {@code nixlProxy - directDecode} is the latency
 *       a PD request adds; {@code nixlProxy - directPrefillThenDecode} is the connector's own cost
 *       (JSON parse and rewrite, futures).
 *   <li>{@link #sseDirect} and {@link #sseThroughNixl}: SSE events per second from the decode pod
 *       to the caller (2,000 events, each flushed on its own), direct and through the connector's
 *       decode path.
 * </ul>
 *
 * <p>Run: {@code java -cp benchmarks/target/classes:<deps> org.openjdk.jmh.Main
 * NixlConnectorBenchmark -f1 -wi 2 -i 3}.
 */
@State(Scope.Benchmark)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 3)
@Fork(
    value = 1,
    jvmArgsAppend = {"-Dsun.net.httpserver.nodelay=true"})
public class NixlConnectorBenchmark {
  static final int SSE_EVENTS = 2000;

  private StubPods prefillPod;
  private StubPods decodePod;
  private OkHttpTransport transport;
  private ScheduledExecutorService scheduler;
  private KVConnector nixl;
  private Endpoint prefill;
  private Endpoint decode;
  private InferenceRequest request;
  private InferenceRequest streamRequest;
  private byte[] prefillBody;
  private byte[] decodeBody;
  private byte[] streamBody;
  private Map<String, List<String>> headers;

  /** Starts the stub pods and the connector. */
  @Setup(Level.Trial)
  public void setUp() throws Exception {
    prefillPod = new StubPods(SSE_EVENTS);
    decodePod = new StubPods(SSE_EVENTS);
    transport = OkHttpTransport.create();
    scheduler = Executors.newSingleThreadScheduledExecutor();
    nixl =
        new NixlConnector.Provider()
            .create(
                KVConnectorProvider.Context.builder(
                        ConnectorConfig.of("nixl"), transport, scheduler)
                    .build());
    prefill =
        Endpoint.builder("p", "127.0.0.1", prefillPod.port()).role(Endpoint.Role.PREFILL).build();
    decode =
        Endpoint.builder("d", "127.0.0.1", decodePod.port()).role(Endpoint.Role.DECODE).build();
    String body =
        "{\"model\":\"m\",\"prompt\":\"The quick brown fox jumps over the lazy dog\","
            + "\"max_tokens\":16,\"temperature\":0.7}";
    request = InferenceRequest.of(InferenceRequest.Api.COMPLETIONS, body);
    decodeBody = body.getBytes(StandardCharsets.UTF_8);
    prefillBody = body.replace("}", ",\"do_remote_decode\":true}").getBytes(StandardCharsets.UTF_8);
    String stream = body.replace("}", ",\"stream\":true}");
    streamBody = stream.getBytes(StandardCharsets.UTF_8);
    streamRequest = InferenceRequest.of(InferenceRequest.Api.COMPLETIONS, stream);
    headers = Map.of("X-Request-Id", List.of("bench-1"));
  }

  /** Stops everything. */
  @TearDown(Level.Trial)
  public void tearDown() {
    nixl.close();
    transport.close();
    scheduler.shutdownNow();
    prefillPod.close();
    decodePod.close();
  }

  private byte[] call(Leg leg, Endpoint e, byte[] body, boolean streaming) throws Exception {
    StreamingResponse r =
        transport
            .send(
                HttpTransport.Outbound.post(e, "/v1/completions", body)
                    .leg(leg)
                    .headers(headers)
                    .timeout(Duration.ofSeconds(10))
                    .streaming(streaming)
                    .build())
            .get(10, TimeUnit.SECONDS);
    return r.readAll(1 << 20).get(10, TimeUnit.SECONDS);
  }

  /** One decode call, no connector. */
  @Benchmark
  @BenchmarkMode(Mode.SampleTime)
  @OutputTimeUnit(TimeUnit.MICROSECONDS)
  public byte[] directDecode() throws Exception {
    return call(Leg.DECODE, decode, decodeBody, true);
  }

  /** The connector's two calls made by hand. */
  @Benchmark
  @BenchmarkMode(Mode.SampleTime)
  @OutputTimeUnit(TimeUnit.MICROSECONDS)
  public byte[] directPrefillThenDecode() throws Exception {
    call(Leg.PREFILL, prefill, prefillBody, false);
    return call(Leg.DECODE, decode, decodeBody, true);
  }

  /** A full PD request through the nixl connector. */
  @Benchmark
  @BenchmarkMode(Mode.SampleTime)
  @OutputTimeUnit(TimeUnit.MICROSECONDS)
  public byte[] nixlProxy() throws Exception {
    StreamingResponse r =
        nixl.proxy(new PdRequest(request, prefill, decode)).get(10, TimeUnit.SECONDS);
    return r.readAll(1 << 20).get(10, TimeUnit.SECONDS);
  }

  /** SSE events per second, straight from the transport. */
  @Benchmark
  @BenchmarkMode(Mode.Throughput)
  @OutputTimeUnit(TimeUnit.SECONDS)
  @OperationsPerInvocation(SSE_EVENTS)
  public byte[] sseDirect() throws Exception {
    return call(Leg.DECODE, decode, streamBody, true);
  }

  /** SSE events per second through the connector's decode path. */
  @Benchmark
  @BenchmarkMode(Mode.Throughput)
  @OutputTimeUnit(TimeUnit.SECONDS)
  @OperationsPerInvocation(SSE_EVENTS)
  public byte[] sseThroughNixl() throws Exception {
    StreamingResponse r =
        nixl.proxy(PdRequest.decodeOnly(streamRequest, decode)).get(10, TimeUnit.SECONDS);
    return r.readAll(1 << 24).get(10, TimeUnit.SECONDS);
  }
}
