package io.kvroute.opentelemetry;

import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.pd.PdOrchestrator;
import io.kvroute.router.RouteDecision;
import io.kvroute.router.RouteListener;
import io.kvroute.scoring.ReuseSplit;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapPropagator;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;

/** The {@code kvroute.route} span of each routed request. */
final class TracingRouteListener implements RouteListener {
  static final AttributeKey<String> REQUEST_ID = AttributeKey.stringKey("kvroute.request.id");
  static final AttributeKey<String> MODEL = AttributeKey.stringKey("gen_ai.request.model");
  static final AttributeKey<String> RESULT = AttributeKey.stringKey("kvroute.decision.result");
  static final AttributeKey<String> PD = AttributeKey.stringKey("kvroute.decision.pd");
  static final AttributeKey<String> DECODE = AttributeKey.stringKey("kvroute.decode.endpoint");
  static final AttributeKey<String> PREFILL = AttributeKey.stringKey("kvroute.prefill.endpoint");
  static final AttributeKey<Long> PROMPT_TOKENS = AttributeKey.longKey("kvroute.prompt_tokens");
  static final AttributeKey<Long> PREDICTED =
      AttributeKey.longKey("kvroute.cached_tokens.predicted");
  static final AttributeKey<Long> ACTUAL = AttributeKey.longKey("kvroute.cached_tokens.actual");
  static final AttributeKey<Long> INPUT_TOKENS = AttributeKey.longKey("gen_ai.usage.input_tokens");
  static final AttributeKey<Long> SCHEDULING_US =
      AttributeKey.longKey("kvroute.scheduling.duration_us");
  static final AttributeKey<Long> ATTEMPTS = AttributeKey.longKey("kvroute.attempts");
  static final AttributeKey<Long> ATTEMPT = AttributeKey.longKey("kvroute.attempt");
  static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("kvroute.outcome");
  static final AttributeKey<Long> REUSE_AVAILABLE =
      AttributeKey.longKey("kvroute.reuse.available_tokens");
  static final AttributeKey<Long> REUSE_CAPTURED =
      AttributeKey.longKey("kvroute.reuse.captured_tokens");
  static final AttributeKey<Long> REUSE_DELIVERED =
      AttributeKey.longKey("kvroute.reuse.delivered_tokens");
  static final AttributeKey<List<String>> REUSE_MISSES =
      AttributeKey.stringArrayKey("kvroute.reuse.misses");

  private final Tracer tracer;
  private final TextMapPropagator propagator;

  TracingRouteListener(Tracer tracer, TextMapPropagator propagator) {
    this.tracer = tracer;
    this.propagator = propagator;
  }

  @Override
  public RequestListener requestStarted(InferenceRequest request) {
    Context current = Context.current();
    boolean local = Span.fromContext(current).getSpanContext().isValid();
    Context parent =
        local ? current : propagator.extract(Context.root(), request.headers(), Headers.GETTER);
    Span span =
        tracer
            .spanBuilder("kvroute.route")
            .setParent(parent)
            .setSpanKind(local ? SpanKind.INTERNAL : SpanKind.SERVER)
            .setAttribute(REQUEST_ID, request.requestId())
            .startSpan();
    return new Request(span, parent.with(span));
  }

  /** One request's span; the router calls it serially. */
  private final class Request implements RequestListener {
    private final Span span;
    private final Context context;
    private int attempts;

    Request(Span span, Context context) {
      this.span = span;
      this.context = context;
    }

    @Override
    public Map<String, String> upstreamHeaders() {
      Map<String, String> h = new LinkedHashMap<>();
      propagator.inject(context, h, Headers.SETTER);
      return h;
    }

    @Override
    public void decided(RouteDecision d) {
      span.setAttribute(MODEL, d.model());
      span.setAttribute(RESULT, d.scheduling().result().name());
      span.setAttribute(PD, d.scheduling().pdOutcome().name());
      span.setAttribute(SCHEDULING_US, d.schedulingTime().toNanos() / 1000);
      if (d.scheduling().promptTokens() >= 0) {
        span.setAttribute(PROMPT_TOKENS, (long) d.scheduling().promptTokens());
      }
      endpoints(d);
    }

    private void endpoints(RouteDecision d) {
      span.setAttribute(DECODE, d.servedDecode().id());
      d.servedPrefill().ifPresent(p -> span.setAttribute(PREFILL, p.id()));
      span.setAttribute(PREDICTED, d.predictedCachedTokens());
    }

    @Override
    public void attemptStarted(int attempt, PdOrchestrator.Pair pair) {
      attempts = attempt;
      span.addEvent("kvroute.attempt", attemptAttributes(attempt, pair, null));
    }

    @Override
    public void attemptEnded(int attempt, PdOrchestrator.Pair pair, Throwable failure) {
      if (failure != null) {
        span.addEvent("kvroute.attempt.failed", attemptAttributes(attempt, pair, failure));
      }
    }

    private Attributes attemptAttributes(int attempt, PdOrchestrator.Pair pair, Throwable failure) {
      var b = Attributes.builder().put(ATTEMPT, attempt).put(DECODE, pair.decode().id());
      Endpoint p = pair.prefill();
      if (p != null) {
        b.put(PREFILL, p.id());
      }
      if (failure != null) {
        b.put(OUTCOME, ConnectorListener.outcome(failure));
      }
      return b.build();
    }

    @Override
    public void usage(long promptTokens, long cachedTokens) {
      span.setAttribute(INPUT_TOKENS, promptTokens);
      span.setAttribute(ACTUAL, cachedTokens);
    }

    /**
     * The reuse split: available and captured tokens always, delivered only when the engine
     * reported its cached tokens, and the causes of a miss ({@code load}, {@code stale_index},
     * {@code none_available}; empty when the request reused all that was available).
     */
    @Override
    public void reuse(ReuseSplit split) {
      span.setAttribute(REUSE_AVAILABLE, split.available());
      span.setAttribute(REUSE_CAPTURED, split.captured());
      if (split.measured()) {
        span.setAttribute(REUSE_DELIVERED, split.delivered());
      }
      List<String> misses = new ArrayList<>(2);
      for (ReuseSplit.Miss m : split.misses()) {
        misses.add(m.tag());
      }
      span.setAttribute(REUSE_MISSES, misses);
    }

    @Override
    public void ended(RouteDecision decision, Throwable failure) {
      if (decision != null) {
        endpoints(decision); // the pair that finally served it
      }
      span.setAttribute(ATTEMPTS, (long) attempts);
      String outcome = ConnectorListener.outcome(failure);
      span.setAttribute(OUTCOME, outcome);
      if (failure != null && !(failure instanceof CancellationException)) {
        span.recordException(failure);
        span.setStatus(StatusCode.ERROR, String.valueOf(failure.getMessage()));
      }
      span.end();
    }
  }
}
