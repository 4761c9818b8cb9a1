package io.kvroute.router;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.HttpTransports;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.pd.PdOrchestrator;
import io.kvroute.router.flow.FlowControlConfig;
import io.kvroute.router.flow.FlowController;
import io.kvroute.router.flow.SaturationDetector;
import io.kvroute.scoring.Decision;
import io.kvroute.scoring.MetricsScraper;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulingRequest;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Collection;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one object a gateway embeds: endpoints (static, plus added and removed at run time), a {@link
 * Scheduler}, a connector per model, the KV-event subscriptions that feed the scheduler's prefix
 * index, and the engine-metrics scraper.
 *
 * <p>Two ways in:
 *
 * <ul>
 *   <li>{@link #decide}: the routing decision only, for gateways that proxy themselves. Call {@link
 *       RouteDecision#complete} when the request ends.
 *   <li>{@link #route}: decide and run the request through the model's connector with retries over
 *       (prefill, decode) pairs, returning the decode stream.
 * </ul>
 *
 * <p>Degrades instead of failing: without KV events the scheduler falls back to its approximate
 * prefix index; when tokenization fails it schedules without token ids; a failing pod trips its
 * circuit breaker and the next pair is used.
 *
 * <p>Thread-safe. {@link #decide} runs on the caller's thread and reads only memory; futures of
 * {@link #route} complete on transport threads.
 */
public final class KvRouter implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(KvRouter.class);

  /** The label naming the model an endpoint serves; endpoints without it serve every model. */
  public static final String MODEL_LABEL = "kvroute.io/model";

  static final Predicate<Endpoint> ANY_ENDPOINT = e -> true;

  private final Scheduler scheduler;
  private final HttpTransport transport;
  private final boolean ownsTransport;
  private final ScheduledExecutorService executor;
  private final Pipelines pipelines;
  private final EndpointRegistry endpoints;
  private final LongSupplier nanoClock;
  private final KvEventFeed eventFeed;
  private final MetricsScraper scraper;
  private final boolean observabilityHeaders;
  private final Duration drainTimeout;
  private final AtomicInteger inFlight = new AtomicInteger();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final Timer routeTimer;
  private final Counter routeErrors;
  private final RouteRunner routeRunner;
  private final ParityMonitor parity;
  private final FlowStage flow;

  /**
   * Validates everything first (connector types included), then starts the executor, the scraper
   * and the endpoints' event subscriptions; if starting fails part way, what was started is closed
   * again before the exception leaves.
   */
  private KvRouter(Builder b) {
    this.scheduler = b.scheduler != null ? b.scheduler : Scheduler.builder().build();
    KVConnectors connectors =
        b.connectors != null
            ? b.connectors
            : KVConnectors.discover(Thread.currentThread().getContextClassLoader());
    Pipelines.checkTypes(connectors, b.defaultConnector, b.modelConnectors);
    this.nanoClock = b.nanoClock;
    this.eventFeed = b.eventFeed;
    this.observabilityHeaders = b.observabilityHeaders;
    this.drainTimeout = b.drainTimeout;
    this.parity = b.parity;

    Deque<Runnable> undo = new ArrayDeque<>();
    try {
      this.ownsTransport = b.transport == null;
      HttpTransport base =
          b.transport != null
              ? b.transport
              : HttpTransports.discover(Thread.currentThread().getContextClassLoader());
      if (b.transportDecorator != null) {
        HttpTransport decorated = b.transportDecorator.apply(base);
        if (decorated == null) {
          if (ownsTransport) {
            base.close();
          }
          throw new IllegalArgumentException("transportDecorator returned null");
        }
        base = decorated;
      }
      this.transport = base;
      if (ownsTransport) {
        undo.push(transport::close);
      }
      this.executor =
          Executors.newSingleThreadScheduledExecutor(
              r -> {
                Thread t = new Thread(r, "kvroute-router");
                t.setDaemon(true);
                return t;
              });
      undo.push(executor::shutdownNow);
      this.pipelines =
          new Pipelines(
              connectors,
              b.modelConnectors,
              KVConnectorProvider.Context.builder(b.defaultConnector, transport, executor)
                  .listener(b.listener)
                  .nanoClock(nanoClock)
                  .build());
      this.scraper =
          b.metricsInterval == null
              ? null
              : MetricsScraper.builder(scheduler.metricsStore(), executor)
                  .interval(b.metricsInterval)
                  .transport(transport)
                  .build();
      this.endpoints = new EndpointRegistry(eventFeed, scraper, scheduler, pipelines);
      for (Map.Entry<Endpoint, KvEventFeed.Source> e : b.endpoints.entrySet()) {
        addEndpoint(e.getKey(), e.getValue());
        undo.push(() -> removeEndpoint(e.getKey().id()));
      }
      if (scraper != null) {
        scraper.start();
        undo.push(scraper::close);
      }
    } catch (RuntimeException e) {
      undo.forEach(KvRouter::quietly);
      throw e;
    }
    MeterRegistry registry = b.meterRegistry;
    this.flow = b.flowControl == null ? null : flowStage(b.flowControl, registry);
    this.routeTimer = Timer.builder("kvroute.route").register(registry);
    this.routeErrors = Counter.builder("kvroute.route.errors").register(registry);
    this.routeRunner = new RouteRunner(this, b.routeListener, registry, nanoClock);
    Gauge.builder("kvroute.inflight", inFlight, AtomicInteger::get).register(registry);
    Gauge.builder("kvroute.endpoints", endpoints, EndpointRegistry::size).register(registry);
  }

  /**
   * Flow control: a {@link FlowController} whose saturation detector reads this router's endpoints,
   * the scheduler's metrics store and latency predictor, woken on the router's executor.
   */
  private FlowStage flowStage(FlowControlConfig config, MeterRegistry registry) {
    java.util.concurrent.atomic.AtomicReference<FlowController> self =
        new java.util.concurrent.atomic.AtomicReference<>();
    FlowController c =
        FlowController.create(
            config,
            SaturationDetector.of(
                config.saturation(),
                // a pass-through request naming no model weighs on every endpoint
                model ->
                    PASS_THROUGH_MODEL.equals(model)
                        ? endpoints.all()
                        : endpoints.candidates(model, ANY_ENDPOINT),
                scheduler.metricsStore(),
                scheduler.latencyPredictor()::prefillQueueTokens),
            nanoClock,
            at -> {
              long delay = Math.max(0, at - nanoClock.getAsLong());
              try {
                executor.schedule(() -> self.get().poll(), delay, TimeUnit.NANOSECONDS);
              } catch (java.util.concurrent.RejectedExecutionException closed) {
                // the router is closing: its waiting requests were failed
              }
            },
            registry);
    self.set(c);
    return new FlowStage(this, c, nanoClock);
  }

  private static void quietly(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      log.warn("kvroute: cleaning up after a failed start: {}", e.toString());
    }
  }

  /** A builder. */
  public static Builder builder() {
    return new Builder();
  }

  // ---------------------------------------------------------------- endpoints

  /** Adds (or replaces) an endpoint that publishes no KV events. */
  public void addEndpoint(Endpoint endpoint) {
    addEndpoint(endpoint, null);
  }

  /**
   * Adds (or replaces) an endpoint and, when {@code events} is given and the router has a {@link
   * KvEventFeed}, subscribes to its KV events. The events source is checked first: when it is
   * rejected ({@link IllegalArgumentException}) nothing changes, the endpoint with that id (if any)
   * keeps its URL and its subscription.
   */
  public void addEndpoint(Endpoint endpoint, KvEventFeed.Source events) {
    endpoints.add(endpoint, events);
  }

  /** Removes an endpoint: its subscription, breaker, metrics and index entries. */
  public boolean removeEndpoint(String endpointId) {
    return endpoints.remove(endpointId);
  }

  /** The endpoints known now. */
  public List<Endpoint> endpoints() {
    return endpoints.all();
  }

  /** The scheduler (for its metrics store, profiles and hooks). */
  public Scheduler scheduler() {
    return scheduler;
  }

  /** The parity check given to {@link Builder#parity}, if any. */
  public Optional<ParityMonitor> parity() {
    return Optional.ofNullable(parity);
  }

  /** Requests decided or routed that have not completed yet. */
  public int inFlight() {
    return inFlight.get();
  }

  boolean observabilityHeaders() {
    return observabilityHeaders;
  }

  // ---------------------------------------------------------------- decide

  /**
   * Decides where {@code request} goes, using only in-memory state (token ids from the body when it
   * carries them; otherwise the approximate index). The request counts as in flight until {@link
   * RouteDecision#complete} is called.
   *
   * @throws ConnectorException.InvalidRequestException for a body that is not a usable request
   * @throws ConnectorException.NoAvailableEndpointException when no endpoint can serve it
   */
  public RouteDecision decide(InferenceRequest request) {
    checkOpen();
    RouteDecision rd = flow != null ? flow.decideNow(request) : decideScheduled(request);
    routed(rd);
    return rd;
  }

  /** Schedules {@code request} (no admission, no {@code onRouted}). */
  RouteDecision decideScheduled(InferenceRequest request) {
    SchedulingRequest sr = toSchedulingRequest(request);
    long start = nanoClock.getAsLong();
    Decision d = scheduler.pick(sr);
    return accept(sr, d, nanoClock.getAsLong() - start);
  }

  /** A decision the gateway proxies itself is sent: count it, start its latency ticket. */
  private void routed(RouteDecision rd) {
    Decision d = rd.scheduling();
    scheduler.onRouted(d);
    rd.ticket(
        LatencyFeed.ticket(
            scheduler.latencyPredictor(),
            d,
            d.primary().orElseThrow(),
            d.prefill().orElse(null),
            nanoClock.getAsLong()));
  }

  /**
   * Like {@link #decide}, but tokenizes the prompt first when the scheduler has a tokenizer (so
   * precise prefix scoring works for text prompts).
   */
  public CompletableFuture<RouteDecision> decideAsync(InferenceRequest request) {
    return decideAsync(request, ANY_ENDPOINT);
  }

  /**
   * Like {@link #decideAsync(InferenceRequest)}, choosing only among the model's endpoints that
   * {@code candidateFilter} accepts: for example the subset a proxy allows for this request (the
   * Gateway API Inference Extension's subset hint). When it accepts none, the future fails with
   * {@link ConnectorException.NoAvailableEndpointException}.
   */
  public CompletableFuture<RouteDecision> decideAsync(
      InferenceRequest request, Predicate<Endpoint> candidateFilter) {
    Objects.requireNonNull(candidateFilter, "candidateFilter");
    return decideInternal(request, candidateFilter)
        .thenApply(
            rd -> {
              routed(rd);
              return rd;
            });
  }

  /**
   * The model an unknown API's request routes under when its body names none: its decision counts
   * under this name, and every endpoint is a candidate whatever model it serves.
   */
  public static final String PASS_THROUGH_MODEL = "(pass-through)";

  /**
   * Decides where a request of an API kvroute does not schedule goes (a path it does not parse,
   * such as {@code /v1/embeddings}, or {@code GET /v1/models}): load-only routing, by the
   * scheduler's filters and scorers without a prompt (no prefix-cache score), never disaggregated.
   * The candidates are the endpoints serving the model the JSON body names ({@code "model"}), or
   * every endpoint when it names none; among those {@code candidateFilter} accepts. In-memory only:
   * safe on an event loop. The request counts as in flight until {@link RouteDecision#complete}.
   *
   * @param body the request body (may be empty; it is read only for its {@code model})
   *     <p>With flow control on, the request is admitted first (its priority and tenant headers,
   *     the model's objective), at once or not at all: a synchronous decision cannot wait in a
   *     queue, so a saturated fleet refuses it with {@code queue-full}. Its admission is released
   *     when the decision completes.
   * @param headers the client's headers (session affinity and flow control read them)
   * @throws ConnectorException.NoAvailableEndpointException when no endpoint can take it
   * @throws io.kvroute.router.flow.RequestDroppedException when flow control is on and would make
   *     it wait
   */
  public RouteDecision decidePassThrough(
      byte[] body, Map<String, List<String>> headers, Predicate<Endpoint> candidateFilter) {
    Objects.requireNonNull(candidateFilter, "candidateFilter");
    checkOpen();
    String model = OpenAiRequests.modelOf(body);
    List<Endpoint> candidates =
        model == null
            ? endpoints.all().stream().filter(candidateFilter).toList()
            : endpoints.candidates(model, candidateFilter);
    SchedulingRequest sr =
        SchedulingRequest.builder()
            .model(model == null ? PASS_THROUGH_MODEL : model)
            .headers(headers == null ? Map.of() : headers)
            .candidates(candidates)
            .disaggregation(false)
            .build();
    FlowController.Admission admission = null;
    if (flow != null) {
      Map<String, List<String>> h = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      if (headers != null) {
        h.putAll(headers);
      }
      admission =
          flow.admitPassThrough(
              sr.model(),
              name -> {
                List<String> v = h.get(name);
                return v == null || v.isEmpty() ? Optional.empty() : Optional.of(v.get(0));
              },
              body == null ? 0 : body.length);
    }
    RouteDecision rd;
    try {
      long start = nanoClock.getAsLong();
      Decision d = scheduler.pick(sr);
      rd = accept(sr, d, nanoClock.getAsLong() - start);
      scheduler.onRouted(d);
    } catch (RuntimeException e) {
      if (admission != null) {
        admission.release();
      }
      throw e;
    }
    if (admission != null) {
      rd.admitted(admission);
    }
    return rd;
  }

  /** Admission (when flow control is on), then scheduling. */
  CompletableFuture<RouteDecision> decideInternal(
      InferenceRequest request, Predicate<Endpoint> candidateFilter) {
    if (flow != null) {
      try {
        checkOpen();
      } catch (ConnectorException e) {
        return CompletableFuture.failedFuture(e);
      }
      return flow.decide(request, candidateFilter);
    }
    return decideScheduledAsync(request, candidateFilter);
  }

  /** Scheduling only, tokenizing first when the scheduler can. */
  CompletableFuture<RouteDecision> decideScheduledAsync(
      InferenceRequest request, Predicate<Endpoint> candidateFilter) {
    SchedulingRequest sr;
    try {
      checkOpen();
      sr = toSchedulingRequest(request, candidateFilter);
    } catch (ConnectorException e) {
      return CompletableFuture.failedFuture(e);
    }
    long start = nanoClock.getAsLong();
    return scheduler.pickAsync(sr).thenApply(d -> accept(sr, d, nanoClock.getAsLong() - start));
  }

  private RouteDecision accept(SchedulingRequest sr, Decision d, long nanos) {
    if (!d.routed()) {
      routeErrors.increment();
      // Endpoints serve the model but the filters refused them all: saturated, not absent.
      boolean saturated = d.result() == Decision.Result.ALL_FILTERED && !sr.candidates().isEmpty();
      throw new ConnectorException.NoAvailableEndpointException(
          "no endpoint can serve model \""
              + sr.model()
              + "\" ("
              + d.result()
              + "; "
              + sr.candidates().size()
              + " candidates)",
          saturated);
    }
    inFlight.incrementAndGet();
    RouteDecision rd = new RouteDecision(this, sr.model(), d, nanos);
    if (parity != null) {
      Endpoint computing = d.prefill().orElseGet(() -> d.primary().orElseThrow());
      rd.paritySample = parity.sample(d, computing, scheduler.prefixCacheLookup().orElse(null));
    }
    return rd;
  }

  /** Forgets a decision that will not be sent (flow control held or refused it). */
  void discard(RouteDecision rd) {
    inFlight.decrementAndGet();
  }

  /** Flow control, or null when it is off. */
  FlowController flowController() {
    return flow == null ? null : flow.controller();
  }

  /** The orchestrator that runs {@code model}'s requests (its connector's). */
  PdOrchestrator orchestrator(String model) {
    return pipelines.orchestrator(model);
  }

  void completeDecision(
      RouteDecision rd,
      Endpoint decode,
      Endpoint prefill,
      RouteDecision.Outcome outcome,
      Duration latency,
      Duration ttft) {
    scheduler.onComplete(rd.scheduling(), decode, prefill);
    ParityMonitor.Sample sample = rd.paritySample;
    if (sample != null) {
      if (outcome == RouteDecision.Outcome.SUCCESS) {
        sample.served(prefill != null ? prefill : decode);
        sample.answered(nanoClock.getAsLong());
      } else {
        sample.drop();
      }
    }
    rd.endTicket(outcome == RouteDecision.Outcome.SUCCESS ? ttft : null, nanoClock.getAsLong());
    rd.releaseAdmission();
    if (outcome != RouteDecision.Outcome.CANCELLED
        && outcome != RouteDecision.Outcome.CLIENT_ERROR) {
      Throwable failure =
          outcome == RouteDecision.Outcome.SUCCESS
              ? null
              : new ConnectorException("decode failed at the gateway", 502, null);
      long nanos = latency == null ? 0 : latency.toNanos();
      pipelines.orchestrator(rd.model()).recordDecodeOutcome(decode, failure, nanos);
    }
    if (latency != null) {
      routeTimer.record(latency);
    }
    inFlight.decrementAndGet();
  }

  // ---------------------------------------------------------------- route

  /**
   * Decides and runs {@code request} through its model's connector, retrying over the decision's
   * (prefill, decode) pairs until one delivers its first byte. The response streams the decode leg;
   * cancel it (or its subscription) when the client goes away.
   */
  public CompletableFuture<RoutedResponse> route(InferenceRequest request) {
    return routeRunner.route(request);
  }

  /**
   * Decides and runs {@code request}, delivering the response to {@code sink}. Returns a handle
   * that cancels the request (both legs) when the client goes away.
   */
  public Cancellable route(InferenceRequest request, ResponseSink sink) {
    Objects.requireNonNull(sink, "sink");
    return SinkDelivery.deliver(route(request), sink);
  }

  /**
   * Ends the router-level accounting of a request {@link #route} ran, once (its breakers and
   * per-pair in-flight counts were kept by the orchestrator's observer): called by {@link
   * RouteDecision#finishRouted}; {@code failed} when no leg delivered.
   */
  void finishRoute(long startNanos, boolean failed, boolean first) {
    if (failed) {
      routeErrors.increment();
    }
    if (first) {
      routeTimer.record(nanoClock.getAsLong() - startNanos, TimeUnit.NANOSECONDS);
      inFlight.decrementAndGet();
    }
  }

  // ---------------------------------------------------------------- request parsing

  SchedulingRequest toSchedulingRequest(InferenceRequest request) {
    return toSchedulingRequest(request, ANY_ENDPOINT);
  }

  private SchedulingRequest toSchedulingRequest(
      InferenceRequest request, Predicate<Endpoint> candidateFilter) {
    SchedulingRequest sr =
        OpenAiRequests.toSchedulingRequest(
            request,
            model -> endpoints.candidates(model, candidateFilter),
            flow == null ? model -> io.kvroute.scoring.LatencySlo.NONE : flow::defaultSlo);
    if (parity != null && parity.degraded(sr.model())) {
      // the model's KV-cache parity failed: its precise index would route on nothing
      sr = sr.toBuilder().preciseScoring(false).build();
    }
    return sr;
  }

  private void checkOpen() {
    if (closed.get()) {
      throw new ConnectorException.NoAvailableEndpointException("the router is closed");
    }
  }

  // ---------------------------------------------------------------- lifecycle

  /**
   * Stops taking requests, waits up to the drain timeout for requests in flight, then stops event
   * subscriptions, the metrics scraper, connectors and (when the router created it) the transport.
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    if (flow != null) {
      flow.controller()
          .shutdown(new ConnectorException.NoAvailableEndpointException("the router is closed"));
    }
    long deadline = nanoClock.getAsLong() + drainTimeout.toNanos();
    while (inFlight.get() > 0 && nanoClock.getAsLong() < deadline) {
      try {
        TimeUnit.MILLISECONDS.sleep(10);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    if (inFlight.get() > 0) {
      log.warn("kvroute: closing with {} requests still in flight", inFlight.get());
    }
    if (eventFeed != null) {
      eventFeed.close();
    }
    if (parity != null) {
      parity.close();
    }
    if (scraper != null) {
      scraper.close();
    }
    pipelines.close();
    if (ownsTransport) {
      transport.close();
    }
    executor.shutdownNow();
  }

  /** Cancels a routed request. */
  @FunctionalInterface
  public interface Cancellable {
    /** Cancels; idempotent. */
    void cancel();
  }

  /**
   * Receives a routed response. Called on transport threads, in order: {@code onHead}, any number
   * of {@code onChunk}, then {@code onComplete} or {@code onError} (or only {@code onError}).
   */
  public interface ResponseSink {
    /** The response head: upstream status and headers, plus the router's response headers. */
    void onHead(int status, Map<String, List<String>> headers, Map<String, String> routerHeaders);

    /** A chunk of the body, as it arrived. */
    void onChunk(ByteBuffer chunk);

    /** The body ended. */
    void onComplete();

    /** The request failed; before {@code onHead}, no bytes reached the client. */
    void onError(ConnectorException error);
  }

  /** Builds a {@link KvRouter}; not thread-safe. */
  public static final class Builder {
    private Scheduler scheduler;
    private KVConnectors connectors;
    private ConnectorConfig defaultConnector = ConnectorConfig.of(ConnectorConfig.DEFAULT_TYPE);
    private final Map<String, ConnectorConfig> modelConnectors = new LinkedHashMap<>();
    private HttpTransport transport;
    private java.util.function.UnaryOperator<HttpTransport> transportDecorator;
    private ConnectorListener listener = ConnectorListener.NONE;
    private LongSupplier nanoClock = System::nanoTime;
    private KvEventFeed eventFeed;
    private Duration metricsInterval;
    private boolean observabilityHeaders;
    private Duration drainTimeout = Duration.ofSeconds(30);
    private MeterRegistry meterRegistry = new SimpleMeterRegistry();
    private RouteListener routeListener = RouteListener.NONE;
    private ParityMonitor parity;
    private final Map<Endpoint, KvEventFeed.Source> endpoints = new LinkedHashMap<>();
    private FlowControlConfig flowControl;

    private Builder() {}

    /**
     * Turns flow control on (default off): requests are admitted before scheduling by priority
     * band, tenant and the fleet's saturation, wait in bounded queues, and are dropped with a 429
     * naming the reason ({@code docs/http-edge.md}). See {@link FlowController}.
     */
    public Builder flowControl(FlowControlConfig config) {
      this.flowControl = Objects.requireNonNull(config, "flowControl");
      return this;
    }

    /** The scheduler (default: {@code Scheduler.builder().build()}, approximate prefix only). */
    public Builder scheduler(Scheduler scheduler) {
      this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
      return this;
    }

    /** The connector registry (default: ServiceLoader on the context class loader). */
    public Builder connectors(KVConnectors connectors) {
      this.connectors = Objects.requireNonNull(connectors, "connectors");
      return this;
    }

    /** The connector of models without their own (default: {@code http} with defaults). */
    public Builder defaultConnector(ConnectorConfig config) {
      this.defaultConnector = Objects.requireNonNull(config, "defaultConnector");
      return this;
    }

    /** A model's own connector configuration (the ModelServer {@code kvConnector} section). */
    public Builder model(String model, ConnectorConfig config) {
      Objects.requireNonNull(model, "model");
      modelConnectors.put(model, Objects.requireNonNull(config, "config"));
      return this;
    }

    /**
     * The HTTP transport (default: a new one from {@link HttpTransports#discover}, the OkHttp
     * transport of {@code kvconnector-http}, closed with the router).
     */
    public Builder transport(HttpTransport transport) {
      this.transport = Objects.requireNonNull(transport, "transport");
      return this;
    }

    /**
     * Wraps the transport (the one given to {@link #transport}, or the discovered default) before
     * anything uses it: a tracing decorator, an allowlist, per-leg TLS. When the router created the
     * underlying transport, it closes the decorated one (which should close what it wraps).
     */
    public Builder transportDecorator(java.util.function.UnaryOperator<HttpTransport> decorator) {
      this.transportDecorator = Objects.requireNonNull(decorator, "transportDecorator");
      return this;
    }

    /** The connector listener (e.g. a {@code MicrometerConnectorListener}). */
    public Builder listener(ConnectorListener listener) {
      this.listener = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /**
     * Observes every request {@link KvRouter#route} runs, from arrival to the end of its response
     * (default {@link RouteListener#NONE}); {@code kvroute-opentelemetry} implements it.
     */
    public Builder routeListener(RouteListener listener) {
      this.routeListener = Objects.requireNonNull(listener, "routeListener");
      return this;
    }

    /** The monotonic clock. */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /** Subscribes to endpoints' KV events (see {@link KvEventFeed}). */
    public Builder eventFeed(KvEventFeed feed) {
      this.eventFeed = Objects.requireNonNull(feed, "eventFeed");
      return this;
    }

    /**
     * The KV-cache parity check of precisely routed requests (default: none): the router samples
     * its decisions into it and routes a model whose parity failed with approximate scoring. Give
     * its {@link ParityMonitor#eventListener} to the subscriber of the {@link #eventFeed}. The
     * router closes it.
     */
    public Builder parity(ParityMonitor parity) {
      this.parity = Objects.requireNonNull(parity, "parity");
      return this;
    }

    /** Scrapes every endpoint's {@code /metrics} at this interval (default: off). */
    public Builder scrapeMetrics(Duration interval) {
      this.metricsInterval = Objects.requireNonNull(interval, "interval");
      return this;
    }

    /** Adds {@code x-kvroute-*} response headers (default off). */
    public Builder observabilityHeaders(boolean on) {
      this.observabilityHeaders = on;
      return this;
    }

    /** How long {@link KvRouter#close()} waits for requests in flight (default 30 s). */
    public Builder drainTimeout(Duration timeout) {
      if (timeout == null || timeout.isNegative()) {
        throw new IllegalArgumentException("drainTimeout must be >= 0, was " + timeout);
      }
      this.drainTimeout = timeout;
      return this;
    }

    /** Where router metrics go. */
    public Builder meterRegistry(MeterRegistry registry) {
      this.meterRegistry = Objects.requireNonNull(registry, "meterRegistry");
      return this;
    }

    /** A static endpoint without KV events. */
    public Builder endpoint(Endpoint endpoint) {
      endpoints.put(Objects.requireNonNull(endpoint, "endpoint"), null);
      return this;
    }

    /** A static endpoint and where its KV events are published. */
    public Builder endpoint(Endpoint endpoint, KvEventFeed.Source events) {
      endpoints.put(Objects.requireNonNull(endpoint, "endpoint"), events);
      return this;
    }

    /** Static endpoints without KV events. */
    public Builder endpoints(Collection<Endpoint> all) {
      all.forEach(this::endpoint);
      return this;
    }

    /**
     * The router.
     *
     * @throws ConnectorException.UnknownConnectorException when a configured connector type has no
     *     provider
     */
    public KvRouter build() {
      return new KvRouter(this);
    }
  }
}
