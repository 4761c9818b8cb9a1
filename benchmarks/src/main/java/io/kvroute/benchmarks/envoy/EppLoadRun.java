package io.kvroute.benchmarks.envoy;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.kvroute.benchmarks.Machine;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.envoy.EndpointPicker;
import io.kvroute.envoy.EppServer;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RouteDecision;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Load run of the Envoy ext_proc endpoint picker: picks per second through gRPC (loopback Netty,
 * HTTP/2, one stream per request as Envoy opens them), against the same router called directly.
 *
 * <p>Each gRPC exchange is what Envoy does in {@code FULL_DUPLEX_STREAMED} mode for one
 * non-streamed completion: request headers, the body (2 KB, one chunk, end of stream), then — once
 * the picker has answered with the destination and the streamed body — the response headers and a
 * JSON body with usage, and the end of the stream. The direct run calls {@link
 * KvRouter#decideAsync} and completes the decision, with the same prompts and endpoints. The
 * difference is the picker's cost per request: protobuf, gRPC, HTTP/2 and the stream's threads.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.kvroute.benchmarks.envoy.EppLoadRun \
 *     [seconds=10] [concurrent streams=32] [endpoints=16] [direct: handlers on the event loop]
 * </pre>
 *
 * Client and server share the JVM and the machine's cores, as an EPP next to its Envoy would not:
 * read the absolute figures as a floor, the ratio as the overhead.
 */
public final class EppLoadRun {
  private static final int PROMPTS = 64;

  private EppLoadRun() {}

  public static void main(String[] args) throws Exception {
    int seconds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
    int concurrency = args.length > 1 ? Integer.parseInt(args[1]) : 32;
    int endpoints = args.length > 2 ? Integer.parseInt(args[2]) : 16;
    boolean direct = args.length > 3 && args[3].equals("direct");
    byte[][] bodies = new byte[PROMPTS][];
    String shared = "You are a helpful assistant. Answer precisely. ".repeat(20);
    for (int i = 0; i < PROMPTS; i++) {
      String prompt = shared + "question " + i + " " + "detail ".repeat(100);
      bodies[i] =
          ("{\"model\":\"m\",\"prompt\":\"" + prompt + "\",\"max_tokens\":16}")
              .getBytes(StandardCharsets.UTF_8);
    }
    System.out.printf(
        "cores=%d cpu=%s endpoints=%d streams=%d body=%d bytes seconds=%d server executor=%s%n",
        Runtime.getRuntime().availableProcessors(),
        Machine.cpuModel(),
        endpoints,
        concurrency,
        bodies[0].length,
        seconds,
        direct ? "direct" : "default");
    try (KvRouter router = router(endpoints)) {
      // Warm-up of both paths, then the measured runs.
      direct(router, bodies, concurrency, Math.max(2, seconds / 3));
      double directRate = direct(router, bodies, concurrency, seconds);
      EndpointPicker picker = EndpointPicker.builder(router).build();
      EppServer.Builder sb = EppServer.builder(picker).port(0);
      if (direct) {
        sb.executor(Runnable::run);
      }
      try (EppServer server = sb.build().start()) {
        ManagedChannel ch =
            NettyChannelBuilder.forAddress("127.0.0.1", server.port())
                .usePlaintext()
                .directExecutor()
                .build();
        try {
          grpc(ch, bodies, concurrency, Math.max(2, seconds / 3), false);
          double grpcRate = grpc(ch, bodies, concurrency, seconds, true);
          System.out.printf(
              "ratio grpc/direct = %.3f; picker cost = %.1f us per request (at this concurrency)%n",
              grpcRate / directRate, 1e6 / grpcRate - 1e6 / directRate);
        } finally {
          ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
      }
      if (router.inFlight() != 0) {
        throw new IllegalStateException("decisions left in flight: " + router.inFlight());
      }
    }
  }

  private static KvRouter router(int n) {
    KvRouter.Builder b = KvRouter.builder();
    for (int i = 0; i < n; i++) {
      b.endpoint(
          Endpoint.builder("pod-" + i, "10.0.0." + (i + 1), 8000).role(Endpoint.Role.BOTH).build());
    }
    return b.build();
  }

  /** Decisions per second through {@link KvRouter#decideAsync}, {@code threads} callers. */
  private static double direct(KvRouter router, byte[][] bodies, int threads, int seconds)
      throws InterruptedException {
    LongAdder done = new LongAdder();
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    List<Thread> workers = new ArrayList<>();
    long start = System.nanoTime();
    long cpu0 = processCpuNanos();
    for (int t = 0; t < threads; t++) {
      int seed = t;
      Thread w =
          new Thread(
              () -> {
                int i = seed;
                while (System.nanoTime() < end) {
                  InferenceRequest r =
                      InferenceRequest.of(
                          InferenceRequest.Api.COMPLETIONS,
                          bodies[i++ % PROMPTS],
                          Map.of(),
                          "bench-" + i);
                  RouteDecision rd = router.decideAsync(r).join();
                  rd.complete(RouteDecision.Outcome.SUCCESS, Duration.ZERO, null);
                  done.increment();
                }
              });
      w.start();
      workers.add(w);
    }
    for (Thread w : workers) {
      w.join();
    }
    double rate = done.sum() / ((System.nanoTime() - start) / 1e9);
    System.out.printf(
        "direct decideAsync: %,.0f decisions/s; process CPU %.1f us per decision%n",
        rate, (processCpuNanos() - cpu0) / 1e3 / done.sum());
    return rate;
  }

  /** Full ext_proc exchanges per second with {@code concurrency} streams in flight. */
  private static double grpc(
      ManagedChannel ch, byte[][] bodies, int concurrency, int seconds, boolean report)
      throws InterruptedException {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    LongAdder done = new LongAdder();
    LongAdder failed = new LongAdder();
    AtomicLong next = new AtomicLong();
    long[] pickLatency = new long[1 << 20];
    AtomicLong samples = new AtomicLong();
    CountDownLatch finished = new CountDownLatch(concurrency);
    long start = System.nanoTime();
    long cpu0 = processCpuNanos();
    for (int c = 0; c < concurrency; c++) {
      new Exchange(ch, bodies, end, done, failed, next, pickLatency, samples, finished).start();
    }
    if (!finished.await(seconds + 60L, TimeUnit.SECONDS)) {
      throw new IllegalStateException("exchanges did not finish");
    }
    double rate = done.sum() / ((System.nanoTime() - start) / 1e9);
    double cpuPer = (processCpuNanos() - cpu0) / 1e3 / Math.max(1, done.sum());
    if (report) {
      System.out.printf(
          "grpc ext_proc: process CPU %.1f us per exchange (client and server together)%n", cpuPer);
      int n = (int) Math.min(samples.get(), pickLatency.length);
      long[] l = Arrays.copyOf(pickLatency, n);
      Arrays.sort(l);
      System.out.printf(
          "grpc ext_proc: %,.0f exchanges/s (failed %d); time to destination p50=%.0f us"
              + " p99=%.0f us p99.9=%.0f us%n",
          rate,
          failed.sum(),
          l[n / 2] / 1e3,
          l[(int) (n * 0.99)] / 1e3,
          l[(int) (n * 0.999)] / 1e3);
    }
    return rate;
  }

  /** One stream after another, each a full Envoy exchange; restarts itself until the deadline. */
  private static final class Exchange
      implements ClientResponseObserver<ProcessingRequest, ProcessingResponse> {
    private static final ProcessingRequest HEADERS =
        ProcessingRequest.newBuilder()
            .setRequestHeaders(
                HttpHeaders.newBuilder()
                    .setHeaders(
                        HeaderMap.newBuilder()
                            .addHeaders(h(":method", "POST"))
                            .addHeaders(h(":path", "/v1/completions"))
                            .addHeaders(h("content-type", "application/json"))))
            .setProtocolConfig(
                ProtocolConfiguration.newBuilder()
                    .setRequestBodyMode(BodySendMode.FULL_DUPLEX_STREAMED)
                    .setResponseBodyMode(BodySendMode.FULL_DUPLEX_STREAMED))
            .build();
    private static final ProcessingRequest RESPONSE_HEADERS =
        ProcessingRequest.newBuilder()
            .setResponseHeaders(
                HttpHeaders.newBuilder()
                    .setHeaders(
                        HeaderMap.newBuilder()
                            .addHeaders(h(":status", "200"))
                            .addHeaders(h("content-type", "application/json"))))
            .build();
    private static final ProcessingRequest RESPONSE_BODY =
        ProcessingRequest.newBuilder()
            .setResponseBody(
                HttpBody.newBuilder()
                    .setBody(
                        ByteString.copyFromUtf8(
                            "{\"choices\":[{\"text\":\"ok\"}],\"usage\":{\"prompt_tokens\":500,"
                                + "\"completion_tokens\":16}}"))
                    .setEndOfStream(true))
            .build();

    private final ManagedChannel ch;
    private final byte[][] bodies;
    private final long end;
    private final LongAdder done;
    private final LongAdder failed;
    private final AtomicLong next;
    private final long[] latency;
    private final AtomicLong samples;
    private final CountDownLatch finished;
    private ClientCallStreamObserver<ProcessingRequest> out;
    private int answers;
    private long sent;

    Exchange(
        ManagedChannel ch,
        byte[][] bodies,
        long end,
        LongAdder done,
        LongAdder failed,
        AtomicLong next,
        long[] latency,
        AtomicLong samples,
        CountDownLatch finished) {
      this.ch = ch;
      this.bodies = bodies;
      this.end = end;
      this.done = done;
      this.failed = failed;
      this.next = next;
      this.latency = latency;
      this.samples = samples;
      this.finished = finished;
    }

    private static HeaderValue h(String k, String v) {
      return HeaderValue.newBuilder().setKey(k).setRawValue(ByteString.copyFromUtf8(v)).build();
    }

    void start() {
      if (System.nanoTime() >= end) {
        finished.countDown();
        return;
      }
      answers = 0;
      ExternalProcessorGrpc.newStub(ch).process(this);
      sent = System.nanoTime();
      out.onNext(HEADERS);
      byte[] body = bodies[(int) (next.getAndIncrement() % PROMPTS)];
      out.onNext(
          ProcessingRequest.newBuilder()
              .setRequestBody(
                  HttpBody.newBuilder().setBody(ByteString.copyFrom(body)).setEndOfStream(true))
              .build());
    }

    @Override
    public void beforeStart(ClientCallStreamObserver<ProcessingRequest> stream) {
      this.out = stream;
    }

    @Override
    public void onNext(ProcessingResponse r) {
      answers++;
      if (answers == 1) {
        if (!r.hasRequestHeaders()) {
          failed.increment();
          out.onCompleted();
          return;
        }
        long i = samples.getAndIncrement();
        if (i < latency.length) {
          latency[(int) i] = System.nanoTime() - sent;
        }
      } else if (answers == 2) {
        out.onNext(RESPONSE_HEADERS);
      } else if (answers == 3) {
        out.onNext(RESPONSE_BODY);
      } else if (answers == 4) {
        out.onCompleted();
      }
    }

    @Override
    public void onError(Throwable t) {
      failed.increment();
      start();
    }

    @Override
    public void onCompleted() {
      if (answers >= 4) {
        done.increment();
      }
      start();
    }
  }

  private static long processCpuNanos() {
    java.lang.management.OperatingSystemMXBean os =
        java.lang.management.ManagementFactory.getOperatingSystemMXBean();
    return os instanceof com.sun.management.OperatingSystemMXBean
        ? ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime()
        : 0;
  }
}
