package io.kvroute.opentelemetry;

import io.kvroute.connector.HttpTransport;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RouteListener;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.TextMapPropagator;
import java.util.Objects;

/**
 * OpenTelemetry tracing for a {@link KvRouter}, on the OpenTelemetry API only (the application
 * brings the SDK and its exporter). Two parts, both needed for the whole picture:
 *
 * <ul>
 *   <li>{@link #routeListener()}: one {@code kvroute.route} span per request {@link KvRouter#route}
 *       runs, the child of the span current on the calling thread or else of the client's {@code
 *       traceparent}; it carries the model, the decision, the chosen endpoints, the index's
 *       cached-token prediction and the engine's answer, the scheduling time and the attempts.
 *   <li>{@link #transport(HttpTransport)}: a transport decorator that makes one {@code
 *       kvroute.prefill} or {@code kvroute.decode} client span per leg (endpoint, HTTP status,
 *       outcome, time to the first byte) and sends that span's {@code traceparent} to the engine.
 * </ul>
 *
 * <pre>{@code
 * KvRouteTracing tracing = KvRouteTracing.create(openTelemetry);
 * KvRouter router = KvRouter.builder()
 *     .routeListener(tracing.routeListener())
 *     .transportDecorator(tracing::transport)
 *     ...
 *     .build();
 * }</pre>
 *
 * <p>Immutable and thread-safe; share one per {@link OpenTelemetry} instance.
 */
public final class KvRouteTracing {
  /** The instrumentation scope name of kvroute's tracer. */
  public static final String INSTRUMENTATION_NAME = "io.kvroute";

  private final Tracer tracer;
  private final TextMapPropagator propagator;

  private KvRouteTracing(Builder b) {
    this.tracer = b.openTelemetry.getTracer(INSTRUMENTATION_NAME);
    this.propagator = b.propagator;
  }

  /** Tracing through {@code openTelemetry}, propagating W3C trace context. */
  public static KvRouteTracing create(OpenTelemetry openTelemetry) {
    return builder(openTelemetry).build();
  }

  /** A builder. */
  public static Builder builder(OpenTelemetry openTelemetry) {
    return new Builder(openTelemetry);
  }

  /** The listener to set with {@link KvRouter.Builder#routeListener}. */
  public RouteListener routeListener() {
    return new TracingRouteListener(tracer, propagator);
  }

  /**
   * {@code delegate} with a client span per prefill and decode leg, whose context it sends to the
   * engine; other calls (probes, {@code /tokenize}, {@code /metrics}) pass through untraced.
   * Closing the result closes {@code delegate}.
   */
  public HttpTransport transport(HttpTransport delegate) {
    return new TracingTransport(Objects.requireNonNull(delegate, "delegate"), tracer, propagator);
  }

  /** Builds a {@link KvRouteTracing}; not thread-safe. */
  public static final class Builder {
    private final OpenTelemetry openTelemetry;
    private TextMapPropagator propagator = W3CTraceContextPropagator.getInstance();

    private Builder(OpenTelemetry openTelemetry) {
      this.openTelemetry = Objects.requireNonNull(openTelemetry, "openTelemetry");
    }

    /**
     * How trace context is read from the client's request and written on the legs (default W3C
     * {@code traceparent}/{@code tracestate}, which vLLM reads; {@code
     * openTelemetry.getPropagators().getTextMapPropagator()} to follow the application's
     * configuration).
     */
    public Builder propagator(TextMapPropagator propagator) {
      this.propagator = Objects.requireNonNull(propagator, "propagator");
      return this;
    }

    /** The tracing. */
    public KvRouteTracing build() {
      return new KvRouteTracing(this);
    }
  }
}
