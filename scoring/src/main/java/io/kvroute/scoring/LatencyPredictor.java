package io.kvroute.scoring;

import io.kvroute.scoring.internal.OnlineRegression;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Predicts each endpoint's time to first token (TTFT) and time per output token (TPOT) for a
 * request, from what the router sees, learned online from the latencies it observes. Small and
 * explainable: two linear models per endpoint (plus one pooled over the fleet, used until an
 * endpoint has {@link Builder#minSamples} samples of its own), fitted by relative least squares
 * with forgetting ({@code window} samples), on these features:
 *
 * <table>
 *   <caption>Features</caption>
 *   <tr><th>model</th><th>feature</th><th>unit</th></tr>
 *   <tr><td>TTFT</td><td>the request's uncached prompt tokens u</td><td>10⁴ tokens</td></tr>
 *   <tr><td>TTFT</td><td>its attention work u·(cached + u/2)</td><td>10⁸ token pairs</td></tr>
 *   <tr><td>TTFT, TPOT</td><td>uncached tokens of requests routed to the endpoint whose first
 *       token has not come back yet (the prefill queue ahead)</td><td>10⁴ tokens</td></tr>
 *   <tr><td>TTFT, TPOT</td><td>requests routed there that are decoding</td><td>100 requests</td></tr>
 *   <tr><td>TTFT</td><td>the engine's waiting queue ({@code /metrics}, when fresh)</td>
 *       <td>10 requests</td></tr>
 *   <tr><td>TTFT</td><td>u × decoding requests (prefill chunks slowed by decodes)</td>
 *       <td>10⁴ tokens × 100 requests</td></tr>
 *   <tr><td>TPOT</td><td>context tokens of the decoding requests (KV read per step)</td>
 *       <td>10⁵ tokens</td></tr>
 * </table>
 *
 * plus an intercept each. The router keeps the live features with a {@link Ticket} per routed
 * request ({@link #dispatched}: the tokens join the endpoint's prefill queue; {@link
 * Ticket#firstToken}: the TTFT is learnt and the request moves to decoding; {@link
 * Ticket#finished}: the TPOT is learnt), and the {@code predicted-latency-scorer} and flow control
 * ask {@link #predict}. The {@link Scheduler} owns one ({@link Scheduler#latencyPredictor()}).
 *
 * <p>Meters: {@code kvroute.slo.predicted} and {@code kvroute.slo.actual} (timers, tag {@code
 * latency} = {@code ttft} or {@code tpot}), {@code kvroute.slo.prediction.error} (|predicted −
 * actual| / actual), {@code kvroute.slo.predictor.endpoints} and {@code
 * kvroute.slo.predictor.dropped} (endpoints beyond the bound, predicted by the pooled model).
 *
 * <p>Thread-safe: each endpoint's state is locked on its own; predictions read the coefficients
 * without a lock.
 */
public final class LatencyPredictor {
  static final int TTFT_FEATURES = 7;
  static final int TPOT_FEATURES = 4;

  private final MetricsStore metrics;
  private final int window;
  private final int minSamples;
  private final int maxEndpoints;
  private final ConcurrentHashMap<String, EndpointState> endpoints = new ConcurrentHashMap<>();
  private final OnlineRegression pooledTtft;
  private final OnlineRegression pooledTpot;
  private final Meters meters;

  private LatencyPredictor(Builder b) {
    this.metrics = b.metrics;
    this.window = b.window;
    this.minSamples = b.minSamples;
    this.maxEndpoints = b.maxEndpoints;
    this.pooledTtft = ttftModel();
    this.pooledTpot = tpotModel();
    this.meters = b.registry == null ? null : new Meters(b.registry, this);
  }

  /** A builder. */
  public static Builder builder() {
    return new Builder();
  }

  private OnlineRegression ttftModel() {
    return new OnlineRegression(TTFT_FEATURES, window, 1e-6, 0.005);
  }

  private OnlineRegression tpotModel() {
    return new OnlineRegression(TPOT_FEATURES, window, 1e-6, 0.0005);
  }

  /**
   * What an endpoint is predicted to give a request.
   *
   * @param ttftNanos predicted time to first token, or -1 when the models have not learnt enough
   * @param tpotNanos predicted time per output token, or -1 when unknown
   */
  public record Prediction(long ttftNanos, long tpotNanos) {
    /** Nothing known. */
    public static final Prediction UNKNOWN = new Prediction(-1, -1);

    /** True when the TTFT is predicted. */
    public boolean knowsTtft() {
      return ttftNanos >= 0;
    }

    /** True when the TPOT is predicted. */
    public boolean knowsTpot() {
      return tpotNanos >= 0;
    }
  }

  /**
   * The latencies {@code endpointId} is predicted to give a request with {@code uncachedTokens} of
   * its prompt to compute there and {@code cachedTokens} found in its cache, given what is routed
   * there now.
   */
  public Prediction predict(String endpointId, long uncachedTokens, long cachedTokens) {
    EndpointState s = endpoints.get(endpointId);
    double[] x = new double[TTFT_FEATURES];
    double[] z = new double[TPOT_FEATURES];
    if (s != null) {
      synchronized (s) {
        s.ttftFeatures(x, uncachedTokens, cachedTokens, waiting(endpointId));
        s.tpotFeatures(z, uncachedTokens + cachedTokens);
      }
    } else {
      EndpointState.ttftFeatures(x, uncachedTokens, cachedTokens, 0, 0, waiting(endpointId));
      EndpointState.tpotFeatures(z, 0, 0, 0);
    }
    return new Prediction(toNanos(eval(ttftModelOf(s), x)), toNanos(eval(tpotModelOf(s), z)));
  }

  /**
   * The latencies {@code endpointId} is predicted to give the request with nothing else routed
   * there: the best it could do.
   */
  public Prediction predictIdle(String endpointId, long uncachedTokens, long cachedTokens) {
    EndpointState s = endpoints.get(endpointId);
    double[] x = new double[TTFT_FEATURES];
    double[] z = new double[TPOT_FEATURES];
    EndpointState.ttftFeatures(x, uncachedTokens, cachedTokens, 0, 0, 0);
    EndpointState.tpotFeatures(z, 0, 0, 0);
    return new Prediction(toNanos(eval(ttftModelOf(s), x)), toNanos(eval(tpotModelOf(s), z)));
  }

  private OnlineRegression ttftModelOf(EndpointState s) {
    if (s != null && s.ttft.samples() >= minSamples) {
      return s.ttft;
    }
    return pooledTtft.samples() >= minSamples ? pooledTtft : null;
  }

  private OnlineRegression tpotModelOf(EndpointState s) {
    if (s != null && s.tpot.samples() >= minSamples) {
      return s.tpot;
    }
    return pooledTpot.samples() >= minSamples ? pooledTpot : null;
  }

  private static double eval(OnlineRegression model, double[] x) {
    return model == null ? Double.NaN : model.predict(x);
  }

  private static long toNanos(double seconds) {
    if (Double.isNaN(seconds)) {
      return -1;
    }
    return Math.round(Math.max(1e-4, seconds) * 1e9);
  }

  private int waiting(String endpointId) {
    if (metrics == null) {
      return 0;
    }
    EndpointMetrics m = metrics.freshOrNull(endpointId, metricsNow());
    return m == null || m.waitingRequests() < 0 ? 0 : m.waitingRequests();
  }

  private long metricsNow() {
    return metrics.clockNow();
  }

  /**
   * A request was sent: {@code computeEndpointId} computes its prompt ({@code uncachedTokens} of it
   * not cached there, {@code cachedTokens} cached) and {@code decodeEndpointId} decodes it (the
   * same endpoint unless disaggregated). Its tokens join the endpoint's prefill queue until {@link
   * Ticket#firstToken}; the ticket must end with {@link Ticket#finished} or {@link Ticket#abandon}.
   */
  public Ticket dispatched(
      String computeEndpointId,
      String decodeEndpointId,
      long uncachedTokens,
      long cachedTokens,
      long nowNanos) {
    Objects.requireNonNull(computeEndpointId, "computeEndpointId");
    Objects.requireNonNull(decodeEndpointId, "decodeEndpointId");
    EndpointState compute = state(computeEndpointId);
    EndpointState decode =
        decodeEndpointId.equals(computeEndpointId) ? compute : state(decodeEndpointId);
    long u = Math.max(0, uncachedTokens);
    long c = Math.max(0, cachedTokens);
    double[] x = new double[TTFT_FEATURES];
    double[] z = new double[TPOT_FEATURES];
    int waiting = waiting(computeEndpointId);
    if (compute != null) {
      synchronized (compute) {
        compute.ttftFeatures(x, u, c, waiting);
        compute.pendingTokens += u;
        compute.pendingRequests++;
      }
    } else {
      EndpointState.ttftFeatures(x, u, c, 0, 0, waiting);
    }
    if (decode != null) {
      synchronized (decode) {
        decode.tpotFeatures(z, u + c);
      }
    } else {
      EndpointState.tpotFeatures(z, 0, 0, 0);
    }
    long predictedTtft = toNanos(eval(ttftModelOf(compute), x));
    long predictedTpot = toNanos(eval(tpotModelOf(decode), z));
    return new Ticket(compute, decode, u, u + c, x, z, predictedTtft, predictedTpot, nowNanos);
  }

  /** The state of {@code id}, created up to the bound; null beyond it. */
  private EndpointState state(String id) {
    EndpointState s = endpoints.get(id);
    if (s != null) {
      return s;
    }
    if (endpoints.size() >= maxEndpoints) {
      if (meters != null) {
        meters.dropped.increment();
      }
      return null;
    }
    return endpoints.computeIfAbsent(id, k -> new EndpointState(ttftModel(), tpotModel()));
  }

  /**
   * Forgets an endpoint that left the pool. Tickets still open on it end without effect on the
   * others.
   */
  public void remove(String endpointId) {
    endpoints.remove(endpointId);
  }

  /**
   * Uncached prompt tokens routed to {@code endpointId} whose first token has not come back yet:
   * the prefill work the router knows is queued or running there.
   */
  public long prefillQueueTokens(String endpointId) {
    EndpointState s = endpoints.get(endpointId);
    if (s == null) {
      return 0;
    }
    synchronized (s) {
      return Math.max(0, s.pendingTokens);
    }
  }

  /** Endpoints with a state of their own. */
  public int size() {
    return endpoints.size();
  }

  /**
   * The coefficients of {@code endpointId}'s TTFT model in seconds per feature unit, by feature
   * name (the pooled model's while it has fewer than {@code minSamples}; empty before any): what
   * the predictions are made of.
   */
  public Map<String, Double> ttftCoefficients(String endpointId) {
    return named(ttftModelOf(endpoints.get(endpointId)), EndpointState.TTFT_NAMES);
  }

  /** The coefficients of {@code endpointId}'s TPOT model (see {@link #ttftCoefficients}). */
  public Map<String, Double> tpotCoefficients(String endpointId) {
    return named(tpotModelOf(endpoints.get(endpointId)), EndpointState.TPOT_NAMES);
  }

  private static Map<String, Double> named(OnlineRegression r, String[] names) {
    Map<String, Double> out = new LinkedHashMap<>();
    if (r != null) {
      double[] c = r.coefficients();
      for (int i = 0; i < c.length; i++) {
        out.put(names[i], c[i]);
      }
    }
    return out;
  }

  /**
   * One routed request's part in the predictor's state: its tokens in the computing endpoint's
   * prefill queue until its first token, then its place among the decode endpoint's decoding
   * requests until it finishes. Each transition happens once; calls out of order are ignored.
   * Thread-safe.
   */
  public final class Ticket {
    private static final int QUEUED = 0;
    private static final int DECODING = 1;
    private static final int DONE = 2;

    private final EndpointState compute;
    private final EndpointState decode;
    private final long uncached;
    private final long prompt;
    private final double[] ttftX;
    private final double[] tpotX;
    private final long predictedTtft;
    private final long predictedTpot;
    private final long dispatchedAt;
    private int state = QUEUED;
    private long firstTokenAt = -1;

    private Ticket(
        EndpointState compute,
        EndpointState decode,
        long uncached,
        long prompt,
        double[] ttftX,
        double[] tpotX,
        long predictedTtft,
        long predictedTpot,
        long dispatchedAt) {
      this.compute = compute;
      this.decode = decode;
      this.uncached = uncached;
      this.prompt = prompt;
      this.ttftX = ttftX;
      this.tpotX = tpotX;
      this.predictedTtft = predictedTtft;
      this.predictedTpot = predictedTpot;
      this.dispatchedAt = dispatchedAt;
    }

    /** The TTFT predicted when the request was sent, -1 when the models knew too little. */
    public long predictedTtftNanos() {
      return predictedTtft;
    }

    /** The TPOT predicted when the request was sent, -1 when unknown. */
    public long predictedTpotNanos() {
      return predictedTpot;
    }

    /** The TTFT observed ({@link #firstToken} minus dispatch), -1 before it. */
    public synchronized long observedTtftNanos() {
      return firstTokenAt < 0 ? -1 : firstTokenAt - dispatchedAt;
    }

    /** The first token came back {@code ttftNanos} after the request was sent. */
    public void firstTokenAfter(long ttftNanos) {
      firstToken(dispatchedAt + Math.max(0, ttftNanos));
    }

    /** The first token came back at {@code nowNanos}: the TTFT is learnt. */
    public void firstToken(long nowNanos) {
      synchronized (this) {
        if (state != QUEUED) {
          return;
        }
        state = DECODING;
        firstTokenAt = nowNanos;
      }
      leaveQueue();
      if (decode != null) {
        synchronized (decode) {
          decode.decoding++;
          decode.decodingContext += prompt;
        }
      }
      double ttft = (nowNanos - dispatchedAt) / 1e9;
      OnlineRegression own = compute == null ? null : compute.ttft;
      if (own != null) {
        own.add(ttftX, ttft);
      }
      pooledTtft.add(ttftX, ttft);
      if (meters != null) {
        meters.observe(true, predictedTtft, nowNanos - dispatchedAt);
      }
    }

    /**
     * The request finished at {@code nowNanos} with {@code outputTokens} generated: the TPOT is
     * learnt when the first token was seen and there was more than one.
     */
    public void finished(long nowNanos, long outputTokens) {
      int was;
      long first;
      synchronized (this) {
        was = state;
        first = firstTokenAt;
        if (was == DONE) {
          return;
        }
        state = DONE;
      }
      if (was == QUEUED) {
        leaveQueue();
        return;
      }
      leaveDecoding();
      if (outputTokens > 1 && nowNanos > first) {
        double tpot = (nowNanos - first) / 1e9 / (outputTokens - 1);
        if (decode != null) {
          decode.tpot.add(tpotX, tpot);
        }
        pooledTpot.add(tpotX, tpot);
        if (meters != null) {
          meters.observe(false, predictedTpot, Math.round(tpot * 1e9));
        }
      }
    }

    /** The request failed or was cancelled: it leaves the state without teaching anything. */
    public void abandon() {
      int was;
      synchronized (this) {
        was = state;
        if (was == DONE) {
          return;
        }
        state = DONE;
      }
      if (was == QUEUED) {
        leaveQueue();
      } else {
        leaveDecoding();
      }
    }

    private void leaveQueue() {
      if (compute != null) {
        synchronized (compute) {
          compute.pendingTokens -= uncached;
          compute.pendingRequests--;
        }
      }
    }

    private void leaveDecoding() {
      if (decode != null) {
        synchronized (decode) {
          decode.decoding--;
          decode.decodingContext -= prompt;
        }
      }
    }
  }

  /** One endpoint's live load and models. Fields guarded by the instance's lock. */
  private static final class EndpointState {
    static final String[] TTFT_NAMES = {
      "intercept",
      "uncachedTokens/1e4",
      "attentionPairs/1e8",
      "prefillQueueTokens/1e4",
      "decodingRequests/100",
      "engineWaiting/10",
      "uncachedTokens/1e4*decodingRequests/100"
    };
    static final String[] TPOT_NAMES = {
      "intercept", "decodingRequests/100", "decodingContextTokens/1e5", "prefillQueueTokens/1e4"
    };

    final OnlineRegression ttft;
    final OnlineRegression tpot;
    long pendingTokens;
    int pendingRequests;
    int decoding;
    long decodingContext;

    EndpointState(OnlineRegression ttft, OnlineRegression tpot) {
      this.ttft = ttft;
      this.tpot = tpot;
    }

    void ttftFeatures(double[] x, long uncached, long cached, int waiting) {
      ttftFeatures(x, uncached, cached, pendingTokens, decoding, waiting);
    }

    static void ttftFeatures(
        double[] x, long uncached, long cached, long pendingTokens, int decoding, int waiting) {
      double u = uncached / 1e4;
      double d = decoding / 100.0;
      x[0] = 1;
      x[1] = u;
      x[2] = uncached * (cached + uncached / 2.0) / 1e8;
      x[3] = Math.max(0, pendingTokens) / 1e4;
      x[4] = Math.max(0, d);
      x[5] = waiting / 10.0;
      x[6] = u * Math.max(0, d);
    }

    void tpotFeatures(double[] z, long promptTokens) {
      tpotFeatures(z, decoding + 1, decodingContext + promptTokens, pendingTokens);
    }

    static void tpotFeatures(double[] z, int decoding, long context, long pendingTokens) {
      z[0] = 1;
      z[1] = Math.max(0, decoding) / 100.0;
      z[2] = Math.max(0, context) / 1e5;
      z[3] = Math.max(0, pendingTokens) / 1e4;
    }
  }

  /** The predictor's meters. */
  private static final class Meters {
    final Timer ttftPredicted;
    final Timer ttftActual;
    final DistributionSummary ttftError;
    final Timer tpotPredicted;
    final Timer tpotActual;
    final DistributionSummary tpotError;
    final Counter dropped;

    Meters(MeterRegistry r, LatencyPredictor p) {
      this.ttftPredicted =
          timer(r, "kvroute.slo.predicted", "ttft", "Predicted latency at routing");
      this.ttftActual = timer(r, "kvroute.slo.actual", "ttft", "Observed latency");
      this.ttftError = error(r, "ttft");
      this.tpotPredicted =
          timer(r, "kvroute.slo.predicted", "tpot", "Predicted latency at routing");
      this.tpotActual = timer(r, "kvroute.slo.actual", "tpot", "Observed latency");
      this.tpotError = error(r, "tpot");
      this.dropped =
          Counter.builder("kvroute.slo.predictor.dropped")
              .description("Endpoints beyond the predictor's bound, predicted by the pooled model")
              .register(r);
      Gauge.builder("kvroute.slo.predictor.endpoints", p, LatencyPredictor::size)
          .description("Endpoints with a latency model of their own")
          .register(r);
    }

    private static Timer timer(MeterRegistry r, String name, String latency, String description) {
      return Timer.builder(name).description(description).tag("latency", latency).register(r);
    }

    private static DistributionSummary error(MeterRegistry r, String latency) {
      return DistributionSummary.builder("kvroute.slo.prediction.error")
          .description("|predicted - actual| / actual latency")
          .tag("latency", latency)
          .register(r);
    }

    void observe(boolean ttft, long predicted, long actual) {
      (ttft ? ttftActual : tpotActual).record(actual, TimeUnit.NANOSECONDS);
      if (predicted >= 0 && actual > 0) {
        (ttft ? ttftPredicted : tpotPredicted).record(predicted, TimeUnit.NANOSECONDS);
        (ttft ? ttftError : tpotError).record(Math.abs(predicted - actual) / (double) actual);
      }
    }
  }

  /** Builds a {@link LatencyPredictor}; not thread-safe. */
  public static final class Builder {
    private MetricsStore metrics;
    private int window = 500;
    private int minSamples = 20;
    private int maxEndpoints = 10_000;
    private MeterRegistry registry;

    private Builder() {}

    /** Where the engines' waiting queues are read (default none: the feature is 0). */
    public Builder metricsStore(MetricsStore store) {
      this.metrics = store;
      return this;
    }

    /** Samples after which an old sample's weight has decayed by 1/e (default 500). */
    public Builder window(int samples) {
      this.window = samples;
      return this;
    }

    /**
     * Samples an endpoint's own models need before they predict (default 20; the pooled model
     * answers before, once it has as many).
     */
    public Builder minSamples(int samples) {
      this.minSamples = samples;
      return this;
    }

    /** The most endpoints with a state of their own (default 10,000). */
    public Builder maxEndpoints(int max) {
      this.maxEndpoints = max;
      return this;
    }

    /** Where the meters go (default none). */
    public Builder meterRegistry(MeterRegistry registry) {
      this.registry = registry;
      return this;
    }

    /**
     * The predictor.
     *
     * @throws IllegalArgumentException naming the bad field
     */
    public LatencyPredictor build() {
      if (window < 1) {
        throw new IllegalArgumentException("latencyPredictor.window must be >= 1, was " + window);
      }
      if (minSamples < 1) {
        throw new IllegalArgumentException(
            "latencyPredictor.minSamples must be >= 1, was " + minSamples);
      }
      if (maxEndpoints < 1) {
        throw new IllegalArgumentException(
            "latencyPredictor.maxEndpoints must be >= 1, was " + maxEndpoints);
      }
      return new LatencyPredictor(this);
    }
  }
}
