package io.kvroute.service;

import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.HttpTransports;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.service.ServiceConfig.PodSpec;
import io.kvroute.service.internal.HttpApi;
import io.kvroute.service.internal.PodTracker;
import io.kvroute.service.internal.RemoteTokenizer;
import io.kvroute.service.internal.TrackingBlockIndex;
import io.kvroute.service.internal.ZmqEventFeed;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Clock;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The KV-cache manager as a service ({@code kvroute serve}): follows every configured pod's KV
 * events into a {@link BlockIndex} and answers the scoring, state, health and metrics API over
 * HTTP, with a dashboard at {@code /}.
 *
 * <pre>{@code
 * try (KvIndexService service = KvIndexService.start(ServiceConfig.load(path))) {
 *   System.out.println("listening on " + service.baseUri());
 *   service.awaitClose();
 * }
 * }</pre>
 *
 * <p><b>Routes.</b> {@code POST /api/v1/score}, {@code GET /api/v1/cache/state}, {@code GET
 * /api/v1/cache/pods}, {@code GET /api/v1/cache/pod/{pod_id}}, {@code GET /healthz}, {@code GET
 * /readyz} (200 once every configured pod has sent an event or its readiness timeout elapsed;
 * otherwise 503 naming the pods), {@code GET /metrics} (Prometheus text), {@code GET /} (the
 * dashboard). Errors are {@code {"error", "field", "status"}} objects: 400 naming the field, 404
 * for unknown pods and routes, 405, 413 for bodies over {@code http.max_body_bytes}, 502/504 for
 * tokenizer failures.
 *
 * <p><b>Thread-safety.</b> Thread-safe. HTTP handlers run on {@code http.threads} event-loop
 * threads; one scheduler thread samples rates and re-reads the pods file; the event feed runs its
 * own threads. {@link #close()} stops all of them.
 */
public final class KvIndexService implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(KvIndexService.class);

  private final ServiceConfig config;
  private final PrometheusMeterRegistry registry;
  private final LongSupplier nanoClock;
  private final PodTracker tracker;
  private final TrackingBlockIndex index;
  private final ZmqEventFeed feed;
  private final io.kvroute.edge.EdgeServer server;
  private final ScheduledExecutorService scheduler;
  private final Object podsLock = new Object();
  private Map<String, PodSpec> currentPods = new LinkedHashMap<>();
  private List<PodSpec> filePods = List.of();
  private FileTime podsFileTime;
  private long podsFileSize = -1;
  private String podsFileError;
  private final java.util.concurrent.CountDownLatch closed =
      new java.util.concurrent.CountDownLatch(1);

  private KvIndexService(Builder b) {
    this.config = b.config;
    this.registry =
        b.registry != null ? b.registry : new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    this.nanoClock = b.nanoClock;
    this.tracker = new PodTracker(b.nanoClock, b.wallClock);
    IndexConfig.Builder ib =
        IndexConfig.builder()
            .blockSize(config.blockSize())
            .hashSeed(config.hashSeed())
            .modelName(config.model())
            .maxKeys(config.maxKeys())
            .meterRegistry(registry);
    config.tierWeights().forEach(ib::tierWeight);
    IndexConfig indexConfig;
    try {
      indexConfig = ib.build();
    } catch (IllegalArgumentException e) {
      throw new ServiceConfigException(e.getMessage());
    }
    this.index = new TrackingBlockIndex(BlockIndex.inMemory(indexConfig), tracker);
    this.feed =
        b.withoutEventFeed
            ? ZmqEventFeed.disabled()
            : ZmqEventFeed.of(index, config.topic(), registry, b.nanoClock);
    RemoteTokenizer tokenizer =
        config
            .tokenizer()
            .map(
                t ->
                    new RemoteTokenizer(
                        t,
                        this::podHttpUrls,
                        b.transport != null ? b.transport : HttpTransports.shared(),
                        registry,
                        localTokenizer(b, t)))
            .orElse(null);
    Gauge.builder("kvroute.service.pods", tracker, t -> t.ids().size()).register(registry);
    Gauge.builder("kvroute.service.pods.not.ready", this, s -> s.notReadyPods().size())
        .register(registry);

    this.scheduler =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "kvservice-scheduler");
              t.setDaemon(true);
              return t;
            });
    HttpApi api =
        new HttpApi(
            config,
            index,
            tracker,
            feed,
            tokenizer,
            registry::scrape,
            this::notReadyPods,
            b.wallClock,
            registry);
    try {
      this.server =
          io.kvroute.edge.EdgeServer.builder()
              .listen(config.host(), config.port())
              .ioThreads(Math.max(1, config.threads()))
              .threadName("kvservice-http")
              .limits(
                  io.kvroute.edge.EdgeLimits.builder()
                      .maxConnections(config.maxConnections())
                      .maxBodyBytes(config.maxBodyBytes())
                      .headerTimeout(config.requestTimeout())
                      .bodyTimeout(config.requestTimeout())
                      .idleTimeout(config.idleTimeout())
                      .build())
              .meterRegistry(registry)
              .errorRenderer(
                  (status, type, param, message) -> HttpApi.errorBody(status, param, message))
              .route("*", "/*", api)
              .build();
    } catch (RuntimeException e) {
      feed.close();
      scheduler.shutdownNow();
      throw e;
    }
  }

  private void begin() {
    feed.start();
    synchronized (podsLock) {
      if (config.podsFile().isPresent()) {
        checkPodsFile(true);
      }
      applyPods(true);
    }
    try {
      server.start();
    } catch (io.kvroute.edge.EdgeBindException e) {
      throw new UncheckedIOException(
          "http: " + e.getMessage(), new java.net.BindException(e.getMessage()));
    }
    scheduler.scheduleAtFixedRate(this::sample, 0, 1, TimeUnit.SECONDS);
    if (config.podsFile().isPresent()) {
      long ms = config.podsFilePoll().toMillis();
      scheduler.scheduleWithFixedDelay(this::pollPodsFile, ms, ms, TimeUnit.MILLISECONDS);
    }
    log.info(
        "kvroute serve listening on {} ({} pods, model {})",
        baseUri(),
        currentPods.size(),
        config.model());
  }

  /**
   * Starts a service with the default clocks and a new Prometheus registry.
   *
   * @throws ServiceConfigException if the configuration or the pods file is invalid
   * @throws UncheckedIOException if the port cannot be bound
   */
  public static KvIndexService start(ServiceConfig config) {
    return builder(config).start();
  }

  private static java.util.function.Function<String, int[]> localTokenizer(
      Builder b, ServiceConfig.TokenizerSettings t) {
    if (t.path().isPresent() && b.localTokenizer == null) {
      throw new ServiceConfigException(
          "tokenizer.path needs a local tokenizer: run `kvroute serve`, or pass"
              + " KvIndexService.Builder.localTokenizer(...) (kvroute-tokenizer-hf's HfTokenizer)");
    }
    return t.path().isPresent() ? b.localTokenizer : null;
  }

  /** A builder for a service with injected clocks or registry. */
  public static Builder builder(ServiceConfig config) {
    return new Builder(config);
  }

  /** The configuration. */
  public ServiceConfig config() {
    return config;
  }

  /** The bound port. */
  public int port() {
    return server.port();
  }

  /** The base URI, e.g. {@code http://127.0.0.1:8080}. */
  public URI baseUri() {
    String host = config.host();
    if (host.equals("0.0.0.0") || host.equals("::")) {
      host = "127.0.0.1";
    }
    return URI.create("http://" + (host.contains(":") ? "[" + host + "]" : host) + ":" + port());
  }

  /**
   * The index the service answers from. Writes through it count as the pod's events (for an
   * embedding that feeds events itself).
   */
  public BlockIndex index() {
    return index;
  }

  /** The Prometheus registry holding the service's, the index's and the subscriber's meters. */
  public PrometheusMeterRegistry meterRegistry() {
    return registry;
  }

  /** The pods followed now (configuration plus pods file), by id. */
  public List<String> pods() {
    return tracker.ids();
  }

  /** Whether every configured pod has been heard from or has timed out. */
  public boolean isReady() {
    return notReadyPods().isEmpty();
  }

  /** Configured pods neither heard from nor timed out yet. */
  public List<String> notReadyPods() {
    long now = nanoClock.getAsLong();
    long timeout = config.readyTimeout().toNanos();
    List<String> out = new ArrayList<>();
    for (String id : tracker.ids()) {
      PodTracker.Pod p = tracker.get(id);
      if (p != null && !p.heardFrom() && now - p.addedNanos() < timeout) {
        out.add(id);
      }
    }
    return out;
  }

  /**
   * Re-reads the pods file now (it is also polled every {@code pods_file_poll_ms}).
   *
   * @return {@code Optional.empty()} if the file was applied or unchanged, else the validation
   *     error (the previous pod list stays in force)
   */
  public Optional<String> reloadPodsFile() {
    synchronized (podsLock) {
      checkPodsFile(false);
      applyPods(false);
      return Optional.ofNullable(podsFileError);
    }
  }

  private void pollPodsFile() {
    try {
      reloadPodsFile();
    } catch (RuntimeException e) {
      log.warn("pods file poll failed", e);
    }
  }

  private void checkPodsFile(boolean strict) {
    Path file = config.podsFile().get();
    try {
      FileTime t = Files.getLastModifiedTime(file);
      long size = Files.size(file);
      if (t.equals(podsFileTime) && size == podsFileSize) {
        return;
      }
      List<PodSpec> pods = ServiceConfig.parsePodsFile(Files.readAllBytes(file), file.toString());
      for (PodSpec p : pods) {
        if (config.pods().stream().anyMatch(c -> c.id().equals(p.id()))) {
          throw new ServiceConfigException(
              file + ": pod \"" + p.id() + "\" is also listed in the configuration's pods");
        }
      }
      podsFileTime = t;
      podsFileSize = size;
      filePods = pods;
      podsFileError = null;
    } catch (IOException | ServiceConfigException e) {
      String msg =
          e instanceof IOException ? file + ": cannot read: " + e.getMessage() : e.getMessage();
      if (strict) {
        throw new ServiceConfigException(msg);
      }
      if (!msg.equals(podsFileError)) {
        log.warn("pods file not applied, keeping {} pods: {}", currentPods.size(), msg);
      }
      podsFileError = msg;
    }
  }

  /**
   * Replaces the pods the service follows (beyond those of the configuration file): new pods are
   * subscribed, missing ones unsubscribed and dropped from the index.
   */
  public void updatePods(List<PodSpec> pods) {
    synchronized (podsLock) {
      filePods = List.copyOf(pods);
      applyPods(false);
    }
  }

  /**
   * Follows the pods of the configuration and the pods file.
   *
   * @param starting at start-up the pods followed are logged at debug only: the one line that
   *     follows is "listening" or the error that stops the service (a port in use), not a line per
   *     pod before it
   */
  private void applyPods(boolean starting) {
    Map<String, PodSpec> next = new LinkedHashMap<>();
    for (PodSpec p : config.pods()) {
      next.put(p.id(), p);
    }
    for (PodSpec p : filePods) {
      if (next.size() < ServiceConfig.MAX_PODS) {
        next.putIfAbsent(p.id(), p);
      }
    }
    for (PodSpec old : currentPods.values()) {
      PodSpec now = next.get(old.id());
      if (now == null || !now.equals(old)) {
        feed.removePod(old.id());
        index.removePod(old.id());
        if (now == null) {
          tracker.remove(old.id());
          log.info("pod {} removed", old.id());
        }
      }
    }
    for (PodSpec p : next.values()) {
      PodSpec old = currentPods.get(p.id());
      if (old == null || !old.equals(p)) {
        tracker.add(p);
        feed.addPod(p);
        if (starting) {
          log.debug("pod {} followed at {}", p.id(), p.events());
        } else {
          log.info("pod {} followed at {}", p.id(), p.events());
        }
      }
    }
    currentPods = next;
  }

  private List<URI> podHttpUrls() {
    List<URI> out = new ArrayList<>();
    for (String id : tracker.ids()) {
      PodTracker.Pod p = tracker.get(id);
      if (p != null) {
        p.spec().http().ifPresent(out::add);
      }
    }
    return out;
  }

  private void sample() {
    try {
      tracker.sample(feed);
    } catch (RuntimeException e) {
      log.warn("sampling failed", e);
    }
  }

  /** Blocks until {@link #close()} is called. */
  public void awaitClose() throws InterruptedException {
    closed.await();
  }

  /** Stops the HTTP server, the event feed and the scheduler. Idempotent. */
  @Override
  public void close() {
    if (closed.getCount() == 0) {
      return;
    }
    closed.countDown();
    server.close();
    scheduler.shutdownNow();
    feed.close();
  }

  /** Configures a {@link KvIndexService}; not thread-safe. */
  public static final class Builder {
    private final ServiceConfig config;
    private PrometheusMeterRegistry registry;
    private LongSupplier nanoClock = System::nanoTime;
    private Clock wallClock = Clock.systemUTC();
    private boolean withoutEventFeed;
    private HttpTransport transport;
    private Function<String, int[]> localTokenizer;

    private Builder(ServiceConfig config) {
      this.config = Objects.requireNonNull(config, "config");
    }

    /**
     * Tokenizes {@code prompt} text in process (required when {@code tokenizer.path} is set; for
     * example {@code HfTokenizer::encode} of the model's files); the configured {@code url}, if
     * any, becomes the fallback when it throws.
     */
    public Builder localTokenizer(Function<String, int[]> tokenizer) {
      this.localTokenizer = Objects.requireNonNull(tokenizer, "tokenizer");
      return this;
    }

    /** The Prometheus registry (default: a new one). */
    public Builder meterRegistry(PrometheusMeterRegistry registry) {
      this.registry = Objects.requireNonNull(registry, "registry");
      return this;
    }

    /**
     * The transport of the remote tokenizer's {@code /tokenize} calls (default {@link
     * HttpTransports#shared()}); the caller keeps ownership.
     */
    public Builder transport(HttpTransport transport) {
      this.transport = Objects.requireNonNull(transport, "transport");
      return this;
    }

    /** Monotonic clock of rates and timeouts (default {@code System::nanoTime}). */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /** Wall clock of reported instants (default UTC system clock). */
    public Builder wallClock(Clock wallClock) {
      this.wallClock = Objects.requireNonNull(wallClock, "wallClock");
      return this;
    }

    /**
     * Follows no event publishers: the index is fed only through {@link KvIndexService#index()}
     * (embeddings that receive events themselves, and tests of the HTTP layer).
     */
    public Builder withoutEventFeed() {
      this.withoutEventFeed = true;
      return this;
    }

    /**
     * Binds the port, subscribes to the pods and starts serving.
     *
     * @throws ServiceConfigException if the pods file or index settings are invalid
     * @throws UncheckedIOException if the port cannot be bound
     */
    public KvIndexService start() {
      KvIndexService s = new KvIndexService(this);
      try {
        s.begin();
      } catch (RuntimeException e) {
        s.close();
        throw e;
      }
      return s;
    }
  }
}
