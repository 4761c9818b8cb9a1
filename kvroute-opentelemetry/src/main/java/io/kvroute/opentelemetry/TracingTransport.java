package io.kvroute.opentelemetry;

import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapPropagator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * An {@link HttpTransport} decorator with a client span per prefill and decode leg. The leg's
 * parent is the trace context its request carries (the {@code kvroute.route} span's, set by {@link
 * TracingRouteListener}), else the span current on the sending thread; the leg span's own context
 * replaces it on the request, so the engine's spans are children of the leg. The span ends once:
 * when sending fails, or when the response body completes, fails or is cancelled (a {@link
 * StreamingResponse#tap} of the response).
 *
 * <p>Thread-safe.
 */
final class TracingTransport implements HttpTransport {
  static final AttributeKey<String> LEG = AttributeKey.stringKey("kvroute.leg");
  static final AttributeKey<String> ENDPOINT = AttributeKey.stringKey("kvroute.endpoint.id");
  static final AttributeKey<String> SERVER_ADDRESS = AttributeKey.stringKey("server.address");
  static final AttributeKey<Long> SERVER_PORT = AttributeKey.longKey("server.port");
  static final AttributeKey<String> METHOD = AttributeKey.stringKey("http.request.method");
  static final AttributeKey<String> URL_PATH = AttributeKey.stringKey("url.path");
  static final AttributeKey<Long> STATUS = AttributeKey.longKey("http.response.status_code");
  static final AttributeKey<Double> TTFT_MS = AttributeKey.doubleKey("kvroute.ttft_ms");

  private final HttpTransport delegate;
  private final Tracer tracer;
  private final TextMapPropagator propagator;

  TracingTransport(HttpTransport delegate, Tracer tracer, TextMapPropagator propagator) {
    this.delegate = delegate;
    this.tracer = tracer;
    this.propagator = propagator;
  }

  @Override
  public CompletableFuture<StreamingResponse> send(Outbound request) {
    if (request.leg() != Leg.PREFILL && request.leg() != Leg.DECODE) {
      return delegate.send(request);
    }
    Context parent = propagator.extract(Context.root(), request.headers(), Headers.GETTER);
    if (!Span.fromContext(parent).getSpanContext().isValid()) {
      parent = Context.current();
    }
    String leg = request.leg() == Leg.PREFILL ? "prefill" : "decode";
    var sb =
        tracer
            .spanBuilder("kvroute." + leg)
            .setParent(parent)
            .setSpanKind(SpanKind.CLIENT)
            .setAttribute(LEG, leg)
            .setAttribute(ENDPOINT, request.endpoint().id())
            .setAttribute(SERVER_ADDRESS, request.endpoint().host())
            .setAttribute(SERVER_PORT, (long) request.endpoint().port())
            .setAttribute(METHOD, request.method().name())
            .setAttribute(URL_PATH, path(request.path()));
    List<String> id = request.headers().get(InferenceRequest.REQUEST_ID_HEADER);
    if (id != null && !id.isEmpty()) {
      sb.setAttribute(TracingRouteListener.REQUEST_ID, id.get(0));
    }
    Span span = sb.startSpan();
    Map<String, String> h = new LinkedHashMap<>();
    propagator.inject(parent.with(span), h, Headers.SETTER);
    Leg legEnum = request.leg();
    LegEnd end = new LegEnd(span, System.nanoTime());
    CompletableFuture<StreamingResponse> sent;
    try {
      sent = delegate.send(request.withHeaders(h));
    } catch (RuntimeException e) {
      end.end(e);
      throw e;
    }
    sent.whenComplete(
        (resp, t) -> {
          if (t != null) {
            end.end(t);
          }
        });
    // compose over the delegate's own future, so cancelling the result cancels the call
    return CancellableFutures.compose(
        sent,
        resp -> {
          span.setAttribute(STATUS, (long) resp.status());
          if (resp.status() >= 400) {
            span.setStatus(
                StatusCode.ERROR, legEnum.name().toLowerCase() + " answered " + resp.status());
          }
          // the span ends once, with the body: completed, failed or cancelled
          return CompletableFuture.completedFuture(
              StreamingResponse.tap(resp, chunk -> end.firstByte(), end::end));
        });
  }

  private static String path(String pathAndQuery) {
    int q = pathAndQuery.indexOf('?');
    return q < 0 ? pathAndQuery : pathAndQuery.substring(0, q);
  }

  @Override
  public void close() {
    delegate.close();
  }

  /** Ends a leg span once: on a failure before the head, or when the body ends. */
  private static final class LegEnd {
    private final Span span;
    private final long startNanos;
    private final AtomicBoolean ended = new AtomicBoolean();
    private final AtomicBoolean firstByte = new AtomicBoolean();

    LegEnd(Span span, long startNanos) {
      this.span = span;
      this.startNanos = startNanos;
    }

    void firstByte() {
      if (firstByte.compareAndSet(false, true)) {
        double ms = (System.nanoTime() - startNanos) / 1e6;
        span.setAttribute(TTFT_MS, ms);
        span.addEvent("kvroute.first_byte");
      }
    }

    void end(Throwable failure) {
      if (!ended.compareAndSet(false, true)) {
        return;
      }
      span.setAttribute(TracingRouteListener.OUTCOME, ConnectorListener.outcome(failure));
      if (failure != null
          && !(CancellableFutures.unwrap(failure)
              instanceof java.util.concurrent.CancellationException)) {
        span.recordException(CancellableFutures.unwrap(failure));
        span.setStatus(StatusCode.ERROR, String.valueOf(failure.getMessage()));
      }
      span.end();
    }
  }
}
