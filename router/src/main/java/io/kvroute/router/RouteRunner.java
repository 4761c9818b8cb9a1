package io.kvroute.router;

import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.EngineUsage;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.pd.PdOrchestrator;
import io.kvroute.scoring.ReuseSplit;
import io.kvroute.scoring.Scheduler;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What {@link KvRouter#route} does with a request: decide (the one call into the router), run the
 * decision's (prefill, decode) pairs through the decision's orchestrator, and end the request once,
 * when its decode stream ends or it fails or is cancelled: the decision's accounting, the {@link
 * RouteListener}'s {@code ended}, and the routing-accuracy measurement from the usage the engines
 * reported. What a leg learnt comes up with the response: the prefill engine's usage, read by the
 * connector from the answer it parsed ({@link StreamingResponse#prefillUsage()}), and the decode
 * engine's, read from the end of the stream ({@link RoutedResponse}).
 *
 * <p>Thread-safe: each request's state lives in its own futures and callbacks; futures complete on
 * transport threads.
 */
final class RouteRunner {
  private static final Logger log = LoggerFactory.getLogger(RouteRunner.class);

  private final KvRouter router;
  private final Scheduler scheduler;
  private final RouteListener routeListener;
  private final PredictionMeters predictionMeters;
  private final ReuseMeters reuseMeters;
  private final LongSupplier nanoClock;

  RouteRunner(
      KvRouter router,
      RouteListener routeListener,
      MeterRegistry registry,
      LongSupplier nanoClock) {
    this.router = router;
    this.scheduler = router.scheduler();
    this.routeListener = routeListener;
    this.predictionMeters = new PredictionMeters(registry);
    this.reuseMeters = new ReuseMeters(registry);
    this.nanoClock = nanoClock;
  }

  /** See {@link KvRouter#route(InferenceRequest)}. */
  CompletableFuture<RoutedResponse> route(InferenceRequest request) {
    long start = nanoClock.getAsLong();
    RouteListener.RequestListener rl = startListener(request);
    InferenceRequest upstream = request.withHeaders(upstreamHeaders(rl));
    AtomicBoolean ended = new AtomicBoolean();
    LatencyFeed latency =
        new LatencyFeed(scheduler.latencyPredictor(), nanoClock, router.flowController());
    BiConsumer<RouteDecision, Throwable> end =
        (rd, t) -> {
          if (ended.compareAndSet(false, true)) {
            listen(() -> rl.ended(rd, t));
          }
        };
    CompletableFuture<RouteDecision> decided =
        router.decideInternal(upstream, KvRouter.ANY_ENDPOINT);
    // Cancelling the returned future cancels whatever runs now: the decision, or both legs.
    AtomicReference<CompletableFuture<RoutedResponse>> running = new AtomicReference<>();
    AtomicBoolean cancelled = new AtomicBoolean();
    decided.whenComplete(
        (rd, t) -> {
          if (t != null) {
            end.accept(null, CancellableFutures.unwrap(t));
          }
        });
    CompletableFuture<RoutedResponse> result =
        decided.thenCompose(
            rd -> {
              listen(() -> rl.decided(rd));
              CompletableFuture<StreamingResponse> f =
                  rd.orchestrator().execute(upstream, rd.pairs(), new Attempts(rd, rl, latency));
              CompletableFuture<RoutedResponse> out = new CompletableFuture<>();
              out.whenComplete(
                  (r, t) -> {
                    if (out.isCancelled()) {
                      f.cancel(true);
                    }
                  });
              running.set(out);
              if (cancelled.get()) {
                out.cancel(true);
              }
              f.whenComplete(
                  (resp, t) -> {
                    if (t != null) {
                      dropSample(rd);
                      rd.finishRouted(start, true);
                      end.accept(rd, CancellableFutures.unwrap(t));
                      out.completeExceptionally(t);
                      return;
                    }
                    ParityMonitor.Sample sample = rd.paritySample;
                    if (sample != null) {
                      // the engine computed the prompt: its blocks' events are on their way
                      sample.answered(nanoClock.getAsLong());
                    }
                    Optional<EngineUsage> prefill = resp.prefillUsage();
                    RoutedResponse routed =
                        new RoutedResponse(
                            resp,
                            rd,
                            upstream.api(),
                            latency,
                            (failure, decodeUsage) -> {
                              if (failure == null) {
                                reportUsage(rd, rl, prefill, Optional.ofNullable(decodeUsage));
                              }
                              rd.finishRouted(start, false);
                              end.accept(rd, failure);
                            });
                    if (!out.complete(routed)) {
                      routed.cancel();
                    }
                  });
              return out;
            });
    result.whenComplete(
        (r, t) -> {
          if (result.isCancelled()) {
            cancelled.set(true);
            decided.cancel(true);
            CompletableFuture<RoutedResponse> o = running.get();
            if (o != null && !o.cancel(true) && !o.isCompletedExceptionally()) {
              RoutedResponse orphan = o.getNow(null);
              if (orphan != null) {
                orphan.cancel();
              }
            }
          }
        });
    // Whatever else fails on the way (or the caller cancelling), the listener hears of it once.
    result.whenComplete(
        (r, t) -> {
          if (t != null) {
            end.accept(null, CancellableFutures.unwrap(t));
          }
        });
    return result;
  }

  /**
   * Follows the attempts of one request: the scheduler's per-pair accounting, the endpoints that
   * served it, and the listener.
   */
  private final class Attempts implements PdOrchestrator.AttemptObserver {
    private final RouteDecision rd;
    private final RouteListener.RequestListener rl;
    private final LatencyFeed latency;

    Attempts(RouteDecision rd, RouteListener.RequestListener rl, LatencyFeed latency) {
      this.rd = rd;
      this.rl = rl;
      this.latency = latency;
    }

    @Override
    public void started(int attempt, PdOrchestrator.Pair pair) {
      scheduler.onRouted(rd.scheduling(), pair.decode(), pair.prefill());
      latency.started(rd.scheduling(), pair.decode(), pair.prefill());
      rd.served(pair.decode(), pair.prefill());
      ParityMonitor.Sample sample = rd.paritySample;
      if (sample != null) {
        sample.served(pair.prefill() != null ? pair.prefill() : pair.decode());
      }
      listen(() -> rl.attemptStarted(attempt, pair));
    }

    @Override
    public void ended(int attempt, PdOrchestrator.Pair pair, Throwable failure) {
      scheduler.onComplete(rd.scheduling(), pair.decode(), pair.prefill());
      if (failure != null) {
        latency.failed();
      }
      listen(() -> rl.attemptEnded(attempt, pair, failure));
    }
  }

  /**
   * What the engines reported for a completed request: both legs' usage to the listener, and the
   * routing accuracy and the reuse split from the engine that computed the prompt (the prefill
   * engine when the request was disaggregated, else the decode engine) against the index's
   * prediction.
   */
  private void reportUsage(
      RouteDecision rd,
      RouteListener.RequestListener rl,
      Optional<EngineUsage> prefill,
      Optional<EngineUsage> decode) {
    if (prefill.isPresent() || decode.isPresent()) {
      listen(() -> rl.engineUsage(prefill, decode));
    }
    ReuseSplit split = rd.reuse();
    Optional<EngineUsage> computing = rd.servedPrefill().isPresent() ? prefill : decode;
    if (computing.isPresent() && computing.get().complete() && computing.get().promptTokens() > 0) {
      long prompt = computing.get().promptTokens();
      long cached = computing.get().cachedTokens();
      split = split.withUsage(prompt, cached);
      predictionMeters.record(split);
      ParityMonitor.Sample sample = rd.paritySample;
      if (sample != null) {
        sample.reported(cached);
      }
      ReuseSplit measured = split;
      router.parity().ifPresent(p -> p.usage(rd.model(), measured));
      listen(() -> rl.usage(prompt, cached));
    }
    reuseMeters.record(split);
    ReuseSplit reported = split;
    listen(() -> rl.reuse(reported));
  }

  private static void dropSample(RouteDecision rd) {
    ParityMonitor.Sample sample = rd.paritySample;
    if (sample != null) {
      sample.drop();
    }
  }

  /** Runs a route-listener callback; a listener that throws is logged, never propagated. */
  private static void listen(Runnable call) {
    try {
      call.run();
    } catch (RuntimeException e) {
      log.warn("kvroute: route listener failed: {}", e.toString());
    }
  }

  private RouteListener.RequestListener startListener(InferenceRequest request) {
    try {
      RouteListener.RequestListener rl = routeListener.requestStarted(request);
      return rl == null ? RouteListener.RequestListener.NONE : rl;
    } catch (RuntimeException e) {
      log.warn("kvroute: route listener failed: {}", e.toString());
      return RouteListener.RequestListener.NONE;
    }
  }

  private static Map<String, String> upstreamHeaders(RouteListener.RequestListener rl) {
    try {
      Map<String, String> h = rl.upstreamHeaders();
      return h == null ? Map.of() : h;
    } catch (RuntimeException e) {
      log.warn("kvroute: route listener failed: {}", e.toString());
      return Map.of();
    }
  }
}
