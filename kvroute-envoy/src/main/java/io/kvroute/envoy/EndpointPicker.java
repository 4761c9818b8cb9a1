package io.kvroute.envoy;

import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.BindableService;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.kvroute.envoy.internal.EppMetrics;
import io.kvroute.envoy.internal.ExtProcStream;
import io.kvroute.envoy.internal.PickerSettings;
import io.kvroute.router.KvRouter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * The Envoy {@code ext_proc} service ({@code envoy.service.ext_proc.v3.ExternalProcessor}) that
 * makes kvroute a Gateway API Inference Extension <em>endpoint picker</em> (EPP): for each HTTP
 * request Envoy streams to it, the picker reads the OpenAI body, asks {@link
 * KvRouter#decideAsync(io.kvroute.connector.InferenceRequest, java.util.function.Predicate)} where
 * it should go, and answers with
 *
 * <ul>
 *   <li>the {@value #DESTINATION_ENDPOINT_HEADER} request header and the same value under {@code
 *       envoy.lb} in the dynamic metadata: the decode endpoint, then the fallbacks, as {@code
 *       ip:port,ip:port,...};
 *   <li>{@code x-prefiller-host-port} when the request is disaggregated (for a decode-side
 *       sidecar), and the removal of any client-sent copy otherwise;
 *   <li>an {@code ImmediateResponse} when the request cannot be routed: 400 for a body that is not
 *       a usable request, 413 for a body over the limit, 503 when no endpoint serves the model (or
 *       none in Envoy's subset hint), 429 when endpoints exist but the scheduler's filters refused
 *       them all (with {@code x-llm-d-request-dropped-reason}).
 * </ul>
 *
 * <p>It then follows the response (headers, body, trailers) to account usage ({@code
 * usage.prompt_tokens}, {@code completion_tokens}, {@code prompt_tokens_details.cached_tokens}) and
 * to complete the {@link io.kvroute.router.RouteDecision} exactly once — on the end of the
 * response, or when the stream ends early (client gone, upstream reset) — with the endpoint Envoy
 * reports in {@value #DESTINATION_ENDPOINT_SERVED_KEY}, so in-flight counts and breakers stay
 * right.
 *
 * <p>Every body mode of the filter is handled: {@code NONE}, {@code BUFFERED}, {@code
 * BUFFERED_PARTIAL}, {@code STREAMED} (which needs {@code
 * send_body_without_waiting_for_header_response: true}) and {@code FULL_DUPLEX_STREAMED} (the GIE
 * default, with {@code request_trailer_mode: SEND}). Envoy names its modes in the first message of
 * each stream ({@code protocol_config}); the builder's modes apply when it does not.
 *
 * <p>Serve it with {@link EppServer}, or add it to your own gRPC server: {@code
 * serverBuilder.addService(picker)}. Thread-safe; per-stream state is confined to the stream.
 */
public final class EndpointPicker implements BindableService {

  /** The request header (and {@code envoy.lb} metadata key) naming the picked endpoints. */
  public static final String DESTINATION_ENDPOINT_HEADER = "x-gateway-destination-endpoint";

  /** The default metadata namespace of the picked endpoints. */
  public static final String DESTINATION_NAMESPACE = "envoy.lb";

  /** The {@code envoy.lb} key in which Envoy reports the endpoint that served the request. */
  public static final String DESTINATION_ENDPOINT_SERVED_KEY =
      "x-gateway-destination-endpoint-served";

  /** The metadata namespace in which Envoy may pass the subset of endpoints to pick from. */
  public static final String SUBSET_NAMESPACE = "envoy.lb.subset_hint";

  /** The key of the subset list ({@code ["ip:port", ...]}) in {@link #SUBSET_NAMESPACE}. */
  public static final String SUBSET_KEY = "x-gateway-destination-endpoint-subset";

  /** The response header naming why a request was refused (llm-d's name). */
  public static final String DROPPED_REASON_HEADER = "x-llm-d-request-dropped-reason";

  /** The metadata namespace of kvroute's own per-request facts (decision and usage). */
  public static final String KVROUTE_NAMESPACE = "io.kvroute";

  /**
   * How the ext_proc filter sends a body ({@code ProcessingMode.BodySendMode}); the mode assumed
   * for streams whose first message does not carry Envoy's {@code protocol_config}.
   */
  public enum BodyMode {
    /** The body is not sent: routing without the body (not KV-aware). */
    NONE,
    /** Chunks as they arrive; needs {@code send_body_without_waiting_for_header_response}. */
    STREAMED,
    /** The whole body in one message. */
    BUFFERED,
    /** The body up to Envoy's buffer limit, in one message. */
    BUFFERED_PARTIAL,
    /** Chunks as they arrive, answered with streamed body responses (GIE's mode). */
    FULL_DUPLEX_STREAMED
  }

  private final KvRouter router;
  private final PickerSettings settings;
  private final EppMetrics metrics;
  private final AtomicLong roundRobin = new AtomicLong();

  private EndpointPicker(Builder b) {
    this.router = b.router;
    this.metrics = new EppMetrics(b.meterRegistry);
    this.settings =
        new PickerSettings(
            b.requestBodyMode,
            b.responseBodyMode,
            b.maxRequestBytes,
            b.maxUsageScanBytes,
            b.destinationNamespace,
            b.nanoClock);
  }

  /** A builder for a picker in front of {@code router}. */
  public static Builder builder(KvRouter router) {
    return new Builder(router);
  }

  /** The router decisions come from. */
  public KvRouter router() {
    return router;
  }

  /** ext_proc streams open now (one per HTTP request Envoy is processing). */
  public int activeStreams() {
    return metrics.activeStreams();
  }

  @Override
  public ServerServiceDefinition bindService() {
    return ExternalProcessorGrpc.bindService(
        new ExternalProcessorGrpc.AsyncService() {
          @Override
          public StreamObserver<ProcessingRequest> process(
              StreamObserver<ProcessingResponse> responses) {
            return new ExtProcStream(
                router,
                settings,
                metrics,
                roundRobin,
                (ServerCallStreamObserver<ProcessingResponse>) responses);
          }
        });
  }

  /** Builds an {@link EndpointPicker}; not thread-safe. */
  public static final class Builder {
    private final KvRouter router;
    private BodyMode requestBodyMode = BodyMode.FULL_DUPLEX_STREAMED;
    private BodyMode responseBodyMode = BodyMode.FULL_DUPLEX_STREAMED;
    private int maxRequestBytes = 16 * 1024 * 1024;
    private int maxUsageScanBytes = 4 * 1024 * 1024;
    private String destinationNamespace = DESTINATION_NAMESPACE;
    private MeterRegistry meterRegistry = new SimpleMeterRegistry();
    private LongSupplier nanoClock = System::nanoTime;

    private Builder(KvRouter router) {
      this.router = Objects.requireNonNull(router, "router");
    }

    /**
     * The request body mode assumed when Envoy does not name it in {@code protocol_config} (Envoy
     * before 1.34). Default {@link BodyMode#FULL_DUPLEX_STREAMED}, as GIE deploys it.
     */
    public Builder requestBodyMode(BodyMode mode) {
      this.requestBodyMode = Objects.requireNonNull(mode, "requestBodyMode");
      return this;
    }

    /** The response body mode assumed likewise. Default {@link BodyMode#FULL_DUPLEX_STREAMED}. */
    public Builder responseBodyMode(BodyMode mode) {
      this.responseBodyMode = Objects.requireNonNull(mode, "responseBodyMode");
      return this;
    }

    /** The largest request body accepted; larger ones get a 413. Default 16 MiB. */
    public Builder maxRequestBytes(int bytes) {
      if (bytes < 1) {
        throw new IllegalArgumentException("maxRequestBytes must be >= 1, was " + bytes);
      }
      this.maxRequestBytes = bytes;
      return this;
    }

    /**
     * The largest non-streamed (JSON) response body kept to read its usage; larger ones pass
     * through unaccounted. Streamed (SSE) responses are scanned line by line whatever their length.
     * Default 4 MiB.
     */
    public Builder maxUsageScanBytes(int bytes) {
      if (bytes < 0) {
        throw new IllegalArgumentException("maxUsageScanBytes must be >= 0, was " + bytes);
      }
      this.maxUsageScanBytes = bytes;
      return this;
    }

    /**
     * The dynamic metadata namespace of the picked endpoints (GIE's {@code
     * --destination-endpoint-hint-metadata-namespace}). Default {@value #DESTINATION_NAMESPACE}.
     */
    public Builder destinationNamespace(String namespace) {
      Objects.requireNonNull(namespace, "destinationNamespace");
      if (namespace.isBlank()) {
        throw new IllegalArgumentException("destinationNamespace must not be blank");
      }
      this.destinationNamespace = namespace;
      return this;
    }

    /** Where the picker's meters go (names under {@code kvroute.epp}). */
    public Builder meterRegistry(MeterRegistry registry) {
      this.meterRegistry = Objects.requireNonNull(registry, "meterRegistry");
      return this;
    }

    /** The monotonic clock used for latency and time to first byte. */
    public Builder nanoClock(LongSupplier clock) {
      this.nanoClock = Objects.requireNonNull(clock, "nanoClock");
      return this;
    }

    /** The picker. */
    public EndpointPicker build() {
      return new EndpointPicker(this);
    }
  }
}
