package io.kvroute.pd;

import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig;
import io.kvroute.connector.AllAttemptsFailedException;
import io.kvroute.connector.AllAttemptsFailedException.Attempt;
import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnector.DecodeRequest;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;

/**
 * Runs a request over an ordered list of (prefill, decode) candidate pairs with one {@link
 * KVConnector}, until one pair succeeds or the retry policy says stop.
 *
 * <p>The rules:
 *
 * <ul>
 *   <li>Pairs are tried in order, at most {@code retry.maxAttempts} attempts. A pair with an
 *       ejected endpoint (circuit breaker open) is skipped.
 *   <li>Each endpoint has a Resilience4j circuit breaker. At most {@code maxEjectionPercent} of the
 *       known endpoints (Envoy's outlier detection default: 50%) are ejected at once; beyond that,
 *       open breakers are ignored, oldest-opened ejections kept.
 *   <li>Transport errors, timeouts, 5xx, 408 and 429 are retried on the next pair; any other 4xx is
 *       the client's error and is returned at once.
 *   <li>Before a retry the orchestrator waits {@code retry.backoff(n)}, or the upstream's {@code
 *       Retry-After} when longer (capped at {@code retry.backoffMax}).
 *   <li>Retries draw on a {@link RetryBudget}; when it is spent the request fails.
 *   <li>A decode response is returned only once its first body byte has arrived; after that nothing
 *       is retried (the client has bytes), and a later failure reaches the subscriber as {@code
 *       onError}.
 *   <li>Every attempt gets its own request id ({@code id}, {@code id-r2}, {@code id-r3}...), so a
 *       prefill that still holds KV from a failed attempt never collides with the next.
 *   <li>When every attempt fails, {@link AllAttemptsFailedException} lists each attempt and its
 *       cause.
 * </ul>
 *
 * <p>Thread-safe; share one per connector. Futures complete on transport or scheduler threads.
 * Cancelling the returned future cancels the attempt in flight.
 */
public final class PdOrchestrator {

  /** A (prefill, decode) candidate pair; {@code prefill} is null for decode-only. */
  public record Pair(Endpoint prefill, Endpoint decode) {
    /** Validates. */
    public Pair {
      Objects.requireNonNull(decode, "decode");
    }

    /** A decode-only pair. */
    public static Pair decodeOnly(Endpoint decode) {
      return new Pair(null, decode);
    }
  }

  private final KVConnector connector;
  private final ConnectorConfig.Retry retry;
  private final CircuitBreakerConfig breakerConfig;
  private final BreakerPolicy breakerPolicy;
  private final int maxEjectionPercent;
  private final RetryBudget budget;
  private final ConnectorListener listener;
  private final ScheduledExecutorService scheduler;
  private final LongSupplier nanoClock;
  private final Random random;
  private final int maxBreakers;
  private final Map<String, CircuitBreaker> breakers = new ConcurrentHashMap<>();
  private final Map<String, Long> openedAt = new ConcurrentHashMap<>();
  private final long healthIntervalNanos;
  private final Map<String, Health> health = new ConcurrentHashMap<>();

  /** The last health-check result of an endpoint; {@code checking} while a probe runs. */
  private record Health(boolean healthy, long checkedAtNanos, boolean checking) {}

  private PdOrchestrator(Builder b) {
    this.connector = b.connector;
    this.retry = b.retry;
    this.breakerPolicy = b.breakerPolicy;
    this.breakerConfig = toResilience4j(b.breakerPolicy);
    this.maxEjectionPercent = b.maxEjectionPercent;
    this.budget = b.budget != null ? b.budget : RetryBudget.defaults(b.nanoClock);
    this.listener = b.listener;
    this.scheduler = b.scheduler;
    this.nanoClock = b.nanoClock;
    this.random = b.random;
    this.maxBreakers = b.maxBreakers;
    this.healthIntervalNanos = b.healthInterval == null ? 0 : b.healthInterval.toNanos();
  }

  /** A builder for an orchestrator over {@code connector}. */
  public static Builder builder(KVConnector connector, ScheduledExecutorService scheduler) {
    return new Builder(connector, scheduler);
  }

  private static CircuitBreakerConfig toResilience4j(BreakerPolicy p) {
    return CircuitBreakerConfig.custom()
        .failureRateThreshold(p.failureRatePercent())
        .slidingWindowType(CircuitBreakerConfig.SlidingWindowType.COUNT_BASED)
        .slidingWindowSize(p.windowSize())
        .minimumNumberOfCalls(p.minimumCalls())
        .waitDurationInOpenState(p.openFor())
        .permittedNumberOfCallsInHalfOpenState(p.halfOpenCalls())
        .automaticTransitionFromOpenToHalfOpenEnabled(false)
        .build();
  }

  /** The breaker policy every endpoint gets. */
  public BreakerPolicy breakerPolicy() {
    return breakerPolicy;
  }

  /**
   * Observes the attempts of one request, e.g. to keep a scheduler's in-flight counts right. Called
   * on transport threads; implementations must be fast and must not throw.
   */
  public interface AttemptObserver {
    /** No-op. */
    AttemptObserver NONE = new AttemptObserver() {};

    /** Attempt {@code attempt} (1-based) starts on {@code pair}. */
    default void started(int attempt, Pair pair) {}

    /**
     * Attempt {@code attempt} on {@code pair} ended: failed before the first byte ({@code failure}
     * set), or, for the attempt that succeeded, when its stream ended ({@code failure} null on
     * completion, the stream error, or a {@link CancellationException}). Called exactly once per
     * {@link #started} call.
     */
    default void ended(int attempt, Pair pair, Throwable failure) {}
  }

  /**
   * Runs the request through the connector's full proxy form. The future completes with the decode
   * response once its first byte arrived.
   */
  public CompletableFuture<StreamingResponse> execute(InferenceRequest request, List<Pair> pairs) {
    return execute(request, pairs, AttemptObserver.NONE);
  }

  /** {@link #execute(InferenceRequest, List)} reporting each attempt to {@code observer}. */
  public CompletableFuture<StreamingResponse> execute(
      InferenceRequest request, List<Pair> pairs, AttemptObserver observer) {
    Objects.requireNonNull(observer, "observer");
    return run(
        request,
        pairs,
        observer,
        (pd, attempt, start) -> {
          Pair pair = new Pair(pd.prefill(), pd.decode());
          return CancellableFutures.compose(
              connector.proxy(pd),
              resp ->
                  ObservedStream.prefetch(
                      resp,
                      connector.type(),
                      pd.decode().id(),
                      listener,
                      nanoClock,
                      start,
                      failure -> observer.ended(attempt, pair, failure)));
        },
        true);
  }

  /**
   * Runs the two-phase form with the same retry rules over the steps before decode; the gateway
   * sends the returned decode request itself and should report its outcome with {@link
   * #recordDecodeOutcome}.
   */
  public CompletableFuture<DecodeRequest> prepare(InferenceRequest request, List<Pair> pairs) {
    return run(
        request,
        pairs,
        AttemptObserver.NONE,
        (pd, attempt, start) -> connector.prepareDecode(pd),
        false);
  }

  /** Feeds the outcome of a decode leg the gateway ran itself into the endpoint's breaker. */
  public void recordDecodeOutcome(Endpoint decode, Throwable failure, long nanos) {
    CircuitBreaker cb = breaker(decode.id());
    if (failure == null) {
      cb.onSuccess(nanos, TimeUnit.NANOSECONDS);
    } else {
      cb.onError(nanos, TimeUnit.NANOSECONDS, failure);
    }
  }

  /** The ids of the endpoints ejected now (breaker open, within the ejection cap). */
  public Set<String> ejectedEndpoints() {
    List<Map.Entry<String, Long>> open = new ArrayList<>();
    for (Map.Entry<String, CircuitBreaker> e : breakers.entrySet()) {
      CircuitBreaker.State s = e.getValue().getState();
      if (s == CircuitBreaker.State.OPEN || s == CircuitBreaker.State.FORCED_OPEN) {
        open.add(Map.entry(e.getKey(), openedAt.getOrDefault(e.getKey(), 0L)));
      }
    }
    if (open.isEmpty()) {
      return Set.of();
    }
    int total = breakers.size();
    int cap = total < 2 ? 0 : Math.max(1, total * maxEjectionPercent / 100);
    open.sort(Map.Entry.comparingByValue());
    Set<String> ejected = new TreeSet<>();
    for (int i = 0; i < Math.min(cap, open.size()); i++) {
      ejected.add(open.get(i).getKey());
    }
    return Collections.unmodifiableSet(ejected);
  }

  /**
   * The state of an endpoint's circuit breaker; {@link BreakerState#CLOSED} for an endpoint the
   * orchestrator has not seen.
   */
  public BreakerState breakerState(String endpointId) {
    CircuitBreaker cb = breakers.get(Objects.requireNonNull(endpointId, "endpointId"));
    if (cb == null) {
      return BreakerState.CLOSED;
    }
    switch (cb.getState()) {
      case OPEN:
      case FORCED_OPEN:
        return BreakerState.OPEN;
      case HALF_OPEN:
        return BreakerState.HALF_OPEN;
      default:
        return BreakerState.CLOSED;
    }
  }

  /**
   * Starts tracking an endpoint before it has served anything, so that it counts toward the
   * ejection cap ({@code maxEjectionPercent} of the endpoints known). A router calls this when an
   * endpoint joins; {@link #removeEndpoint} is the reverse.
   */
  public void addEndpoint(String endpointId) {
    breaker(Objects.requireNonNull(endpointId, "endpointId"));
  }

  private CircuitBreaker breaker(String endpointId) {
    CircuitBreaker cb = breakers.get(endpointId);
    if (cb != null) {
      return cb;
    }
    if (breakers.size() >= maxBreakers) {
      // Bounded: forget closed breakers of endpoints that are probably gone.
      breakers.entrySet().removeIf(e -> e.getValue().getState() == CircuitBreaker.State.CLOSED);
    }
    return breakers.computeIfAbsent(
        endpointId,
        id -> {
          CircuitBreaker created = CircuitBreaker.of(id, breakerConfig);
          created
              .getEventPublisher()
              .onStateTransition(
                  ev -> {
                    CircuitBreaker.State to = ev.getStateTransition().getToState();
                    boolean open =
                        to == CircuitBreaker.State.OPEN || to == CircuitBreaker.State.FORCED_OPEN;
                    if (open) {
                      openedAt.put(id, nanoClock.getAsLong());
                    } else {
                      openedAt.remove(id);
                    }
                    listener.circuitStateChanged(id, open);
                  });
          return created;
        });
  }

  /** Forgets an endpoint that left the fleet. */
  public void removeEndpoint(String endpointId) {
    CircuitBreaker cb = breakers.remove(endpointId);
    openedAt.remove(endpointId);
    if (cb != null) {
      listener.circuitStateChanged(endpointId, false);
    }
  }

  /** One attempt: (request, attempt number, start nanos) → result. */
  @FunctionalInterface
  private interface AttemptFn<T> {
    CompletableFuture<T> apply(PdRequest pd, int attempt, long startNanos);
  }

  private <T> CompletableFuture<T> run(
      InferenceRequest request,
      List<Pair> pairs,
      AttemptObserver observer,
      AttemptFn<T> attemptFn,
      boolean successEndsLater) {
    Objects.requireNonNull(request, "request");
    Objects.requireNonNull(pairs, "pairs");
    budget.recordRequest();
    CompletableFuture<T> result = new CompletableFuture<>();
    AtomicReference<CompletableFuture<?>> inFlight = new AtomicReference<>();
    result.whenComplete(
        (r, t) -> {
          if (result.isCancelled()) {
            CompletableFuture<?> f = inFlight.get();
            if (f != null) {
              f.cancel(true);
            }
          }
        });
    if (pairs.isEmpty()) {
      ConnectorException e =
          new ConnectorException.NoAvailableEndpointException(
              "no prefill/decode pair to run request " + request.requestId());
      listener.failed(connector.type(), e);
      result.completeExceptionally(e);
      return result;
    }
    new Attempts<>(request, pairs, observer, attemptFn, successEndsLater, result, inFlight)
        .next(0, 1);
    return result;
  }

  private final class Attempts<T> {
    final InferenceRequest request;
    final List<Pair> pairs;
    final AttemptObserver observer;
    final AttemptFn<T> attemptFn;
    final boolean successEndsLater;
    final CompletableFuture<T> result;
    final AtomicReference<CompletableFuture<?>> inFlight;
    final List<Attempt> failures = Collections.synchronizedList(new ArrayList<>());

    Attempts(
        InferenceRequest request,
        List<Pair> pairs,
        AttemptObserver observer,
        AttemptFn<T> attemptFn,
        boolean successEndsLater,
        CompletableFuture<T> result,
        AtomicReference<CompletableFuture<?>> inFlight) {
      this.request = request;
      this.pairs = pairs;
      this.observer = observer;
      this.attemptFn = attemptFn;
      this.successEndsLater = successEndsLater;
      this.result = result;
      this.inFlight = inFlight;
    }

    void next(int pairIndex, int attempt) {
      if (result.isDone()) {
        return;
      }
      Set<String> ejected = ejectedEndpoints();
      int i = pairIndex;
      while (i < pairs.size() && isEjected(pairs.get(i), ejected)) {
        i++;
      }
      if (i >= pairs.size()) {
        String why =
            failures.isEmpty()
                ? "every candidate pair has an ejected endpoint (circuit breaker open): " + ejected
                : "all prefill/decode attempts failed for request " + request.requestId();
        giveUp(
            failures.isEmpty()
                ? new ConnectorException.NoAvailableEndpointException(why)
                : new AllAttemptsFailedException(why, List.copyOf(failures)));
        return;
      }
      Pair pair = pairs.get(i);
      int pairUsed = i;
      InferenceRequest attemptRequest =
          attempt == 1
              ? request
              : request.withRequestId(attemptRequestId(request.requestId(), attempt));
      PdRequest pd = new PdRequest(attemptRequest, pair.prefill(), pair.decode());
      long start = nanoClock.getAsLong();
      observer.started(attempt, pair);
      CompletableFuture<T> f;
      try {
        f = attemptFn.apply(pd, attempt, start);
      } catch (RuntimeException e) {
        f = CompletableFuture.failedFuture(e);
      }
      inFlight.set(f);
      if (result.isCancelled()) {
        f.cancel(true);
        return;
      }
      f.whenComplete(
          (value, error) -> {
            long nanos = nanoClock.getAsLong() - start;
            if (error == null) {
              if (pair.prefill() != null) {
                breaker(pair.prefill().id()).onSuccess(nanos, TimeUnit.NANOSECONDS);
              }
              breaker(pair.decode().id()).onSuccess(nanos, TimeUnit.NANOSECONDS);
              if (!successEndsLater) {
                observer.ended(attempt, pair, null);
              }
              if (!result.complete(value) && value instanceof StreamingResponse r) {
                r.cancel();
              }
              return;
            }
            observer.ended(attempt, pair, error);
            ConnectorException cause = asConnectorException(error, pair);
            recordFailure(pair, cause, nanos);
            failures.add(
                new Attempt(
                    attempt,
                    pair.prefill() == null ? null : pair.prefill().id(),
                    pair.decode().id(),
                    cause));
            if (result.isDone()) {
              return;
            }
            if (!cause.retryable()) {
              giveUp(cause);
              return;
            }
            if (attempt >= retry.maxAttempts()) {
              giveUp(
                  new AllAttemptsFailedException(
                      "all "
                          + attempt
                          + " attempts failed for request "
                          + request.requestId()
                          + " (retry.maxAttempts="
                          + retry.maxAttempts()
                          + ")",
                      List.copyOf(failures)));
              return;
            }
            if (!budget.tryAcquireRetry()) {
              listener.retryBudgetExhausted(connector.type());
              giveUp(
                  new AllAttemptsFailedException(
                      "retry budget exhausted; not retrying request " + request.requestId(),
                      List.copyOf(failures)));
              return;
            }
            listener.retry(connector.type(), attempt + 1, cause);
            long delay = backoffNanos(attempt, cause);
            if (delay <= 0) {
              next(pairUsed + 1, attempt + 1);
            } else {
              scheduler.schedule(
                  () -> next(pairUsed + 1, attempt + 1), delay, TimeUnit.NANOSECONDS);
            }
          });
    }

    private void giveUp(ConnectorException e) {
      listener.failed(connector.type(), e);
      result.completeExceptionally(e);
    }
  }

  private boolean isEjected(Pair pair, Set<String> ejected) {
    return ejected.contains(pair.decode().id())
        || (pair.prefill() != null && ejected.contains(pair.prefill().id()))
        || !healthy(pair.decode())
        || (pair.prefill() != null && !healthy(pair.prefill()));
  }

  /**
   * With health gating on, the endpoint's last known health; a stale or missing result starts a
   * background probe (the request does not wait for it; unknown counts as healthy).
   */
  private boolean healthy(Endpoint e) {
    if (healthIntervalNanos == 0) {
      return true;
    }
    long now = nanoClock.getAsLong();
    Health h = health.get(e.id());
    if (h == null || (!h.checking() && now - h.checkedAtNanos() >= healthIntervalNanos)) {
      if (health.size() >= maxBreakers) {
        health.clear();
      }
      Health checking =
          new Health(h == null || h.healthy(), h == null ? now : h.checkedAtNanos(), true);
      boolean won =
          h == null
              ? health.putIfAbsent(e.id(), checking) == null
              : health.replace(e.id(), h, checking);
      if (won) {
        connector
            .checkHealth(e)
            .whenComplete(
                (ok, t) -> {
                  boolean healthyNow = t == null && Boolean.TRUE.equals(ok);
                  health.put(e.id(), new Health(healthyNow, nanoClock.getAsLong(), false));
                  if (!healthyNow) {
                    listener.connectorEvent(connector.type(), "health_check_failed");
                  }
                });
      }
      return h == null || h.healthy();
    }
    return h.healthy();
  }

  private void recordFailure(Pair pair, ConnectorException cause, long nanos) {
    if (cause instanceof UpstreamException u) {
      if (u.endpointFault()) {
        breaker(u.endpointId()).onError(nanos, TimeUnit.NANOSECONDS, u);
      }
      if (u.leg() == Leg.DECODE && pair.prefill() != null) {
        breaker(pair.prefill().id()).onSuccess(nanos, TimeUnit.NANOSECONDS);
      }
    }
  }

  private long backoffNanos(int attempt, ConnectorException cause) {
    long base = retry.backoff(attempt).toNanos();
    // Jitter in [50%, 100%] of the exponential backoff, so retries of many requests spread out.
    long jittered = base <= 0 ? 0 : base / 2 + (long) (random.nextDouble() * (base / 2.0));
    long after = cause.retryAfter().map(Duration::toNanos).orElse(0L);
    return Math.min(Math.max(jittered, after), retry.backoffMax().toNanos());
  }

  /**
   * The request id attempt {@code attempt} (1-based) of a request sends as {@code X-Request-Id}:
   * {@code requestId} itself for the first, {@code requestId-rN} after (cut to 128 characters).
   */
  public static String attemptRequestId(String id, int attempt) {
    if (attempt <= 1) {
      return id;
    }
    String suffix = "-r" + attempt;
    String base = id.length() + suffix.length() > 128 ? id.substring(0, 128 - suffix.length()) : id;
    return base + suffix;
  }

  static ConnectorException asConnectorException(Throwable error, Pair pair) {
    Throwable t = error;
    while ((t instanceof CompletionException || t instanceof ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    if (t instanceof ConnectorException ce) {
      return ce;
    }
    if (t instanceof CancellationException) {
      return new UpstreamException(
          Leg.DECODE,
          pair.decode().id(),
          UpstreamException.Kind.CANCELLED,
          0,
          null,
          null,
          "request cancelled",
          t);
    }
    return new UpstreamException(
        Leg.DECODE,
        pair.decode().id(),
        UpstreamException.Kind.IO,
        0,
        null,
        null,
        "connector failed: " + t,
        t);
  }

  /** Builds a {@link PdOrchestrator}; not thread-safe. */
  public static final class Builder {
    private final KVConnector connector;
    private final ScheduledExecutorService scheduler;
    private ConnectorConfig.Retry retry = ConnectorConfig.Retry.DEFAULTS;
    private BreakerPolicy breakerPolicy = BreakerPolicy.defaults();
    private int maxEjectionPercent = 50;
    private RetryBudget budget;
    private ConnectorListener listener = ConnectorListener.NONE;
    private LongSupplier nanoClock = System::nanoTime;
    private Random random = new Random();
    private int maxBreakers = 10_000;
    private Duration healthInterval;

    private Builder(KVConnector connector, ScheduledExecutorService scheduler) {
      this.connector = Objects.requireNonNull(connector, "connector");
      this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
    }

    /** The retry policy (default {@link ConnectorConfig.Retry#DEFAULTS}). */
    public Builder retry(ConnectorConfig.Retry retry) {
      this.retry = Objects.requireNonNull(retry, "retry");
      return this;
    }

    /** The per-endpoint breaker policy (default {@link BreakerPolicy#defaults()}). */
    public Builder circuitBreaker(BreakerPolicy policy) {
      this.breakerPolicy = Objects.requireNonNull(policy, "circuitBreaker");
      return this;
    }

    /** The most endpoints ejected at once, in percent of those known (default 50). */
    public Builder maxEjectionPercent(int percent) {
      if (percent < 0 || percent > 100) {
        throw new IllegalArgumentException("maxEjectionPercent must be in 0..100, was " + percent);
      }
      this.maxEjectionPercent = percent;
      return this;
    }

    /** The retry budget (default: 20% of requests plus 10 retries/s). */
    public Builder retryBudget(RetryBudget budget) {
      this.budget = Objects.requireNonNull(budget, "retryBudget");
      return this;
    }

    /** The listener (default {@link ConnectorListener#NONE}). */
    public Builder listener(ConnectorListener listener) {
      this.listener = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /** The monotonic clock (default {@link System#nanoTime()}). */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /** The random source for backoff jitter. */
    public Builder random(Random random) {
      this.random = Objects.requireNonNull(random, "random");
      return this;
    }

    /** The most endpoints tracked (default 10,000); closed breakers are forgotten past it. */
    public Builder maxEndpoints(int max) {
      if (max < 1) {
        throw new IllegalArgumentException("maxEndpoints must be >= 1, was " + max);
      }
      this.maxBreakers = max;
      return this;
    }

    /**
     * Gates pairs on {@link KVConnector#checkHealth}: each endpoint is probed in the background at
     * most once per {@code interval}, and a pair with an endpoint whose last probe failed is
     * skipped. Off by default (gateways usually have their own health source).
     */
    public Builder healthCheckInterval(Duration interval) {
      if (interval == null || interval.isNegative() || interval.isZero()) {
        throw new IllegalArgumentException("healthCheckInterval must be > 0, was " + interval);
      }
      this.healthInterval = interval;
      return this;
    }

    /** The orchestrator. */
    public PdOrchestrator build() {
      return new PdOrchestrator(this);
    }
  }
}
