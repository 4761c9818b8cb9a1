package io.kvroute.scoring;

import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.HttpTransports;
import io.kvroute.scoring.internal.EngineMetricsParser;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Scrapes vLLM and SGLang {@code /metrics} (Prometheus text) on a schedule into a {@link
 * MetricsStore}. An endpoint whose scrape fails keeps its last snapshot, which goes stale after the
 * store's {@code staleAfter}; at most one scrape per endpoint is in flight.
 *
 * <p>Thread-safe. Ticks run on the injected {@link ScheduledExecutorService}; HTTP responses are
 * handled on the transport's threads. {@link #close()} stops the schedule (it does not shut down
 * the executor, which the caller owns).
 */
public final class MetricsScraper implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(MetricsScraper.class);
  private static final int MAX_BODY_BYTES = 16 << 20;

  private final MetricsStore store;
  private final ScheduledExecutorService executor;
  private final HttpTransport transport;
  private final Duration interval;
  private final Duration timeout;
  private final String path;
  private volatile List<Endpoint> endpoints = List.of();
  private final Set<String> inFlight = ConcurrentHashMap.newKeySet();
  private final Set<String> warned = ConcurrentHashMap.newKeySet();
  private volatile ScheduledFuture<?> task;

  private MetricsScraper(Builder b) {
    this.store = b.store;
    this.executor = b.executor;
    this.transport = b.transport != null ? b.transport : HttpTransports.shared();
    this.interval = b.interval;
    this.timeout = b.timeout;
    this.path = b.path;
  }

  /** A builder writing into {@code store} and ticking on {@code executor}. */
  public static Builder builder(MetricsStore store, ScheduledExecutorService executor) {
    return new Builder(store, executor);
  }

  /** Replaces the endpoints to scrape; the store forgets endpoints no longer listed. */
  public void setEndpoints(Collection<Endpoint> endpoints) {
    this.endpoints = List.copyOf(endpoints);
    List<String> ids = new ArrayList<>();
    for (Endpoint e : this.endpoints) {
      ids.add(e.id());
    }
    store.retain(ids);
  }

  /** Starts scraping every {@code interval}. Idempotent. */
  public synchronized MetricsScraper start() {
    if (task == null) {
      long ns = interval.toNanos();
      task = executor.scheduleAtFixedRate(this::tick, 0, ns, TimeUnit.NANOSECONDS);
    }
    return this;
  }

  private void tick() {
    try {
      scrapeAll();
    } catch (RuntimeException e) {
      log.warn("metrics scrape tick failed", e);
    }
  }

  /** Scrapes every endpoint once; the future completes when all scrapes ended. */
  public CompletableFuture<Void> scrapeAll() {
    List<Endpoint> eps = endpoints;
    List<CompletableFuture<Void>> fs = new ArrayList<>(eps.size());
    for (Endpoint e : eps) {
      fs.add(scrape(e));
    }
    return CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0]));
  }

  /** Scrapes one endpoint (skipped if a scrape of it is already in flight). */
  public CompletableFuture<Void> scrape(Endpoint e) {
    if (!inFlight.add(e.id())) {
      return CompletableFuture.completedFuture(null);
    }
    HttpTransport.Outbound get;
    try {
      get =
          HttpTransport.Outbound.get(e, path)
              .headers(Map.of("Accept", List.of("text/plain")))
              .timeout(timeout)
              .build();
    } catch (IllegalArgumentException ex) {
      inFlight.remove(e.id());
      return CompletableFuture.completedFuture(null);
    }
    return CancellableFutures.compose(
            transport.send(get),
            resp -> {
              if (resp.status() != 200) {
                resp.cancel();
                return CompletableFuture.<String>failedFuture(
                    new IllegalStateException("HTTP " + resp.status()));
              }
              return resp.readAll(MAX_BODY_BYTES)
                  .thenApply(b -> new String(b, StandardCharsets.UTF_8));
            })
        .handle(
            (text, err) -> {
              inFlight.remove(e.id());
              if (err == null) {
                EndpointMetrics m = EngineMetricsParser.parse(text);
                if (m != null) {
                  store.update(e.id(), m);
                  warned.remove(e.id());
                  return null;
                }
              }
              store.recordFailure(e.id());
              if (warned.add(e.id())) {
                log.warn(
                    "metrics scrape of {} failed: {}",
                    e.id(),
                    err != null ? CancellableFutures.unwrap(err).toString() : "no metrics");
              }
              return null;
            });
  }

  /** Stops the schedule. */
  @Override
  public synchronized void close() {
    if (task != null) {
      task.cancel(false);
      task = null;
    }
  }

  /** Builds {@link MetricsScraper}s. Not thread-safe. */
  public static final class Builder {
    private final MetricsStore store;
    private final ScheduledExecutorService executor;
    private HttpTransport transport;
    private Duration interval = Duration.ofMillis(250);
    private Duration timeout = Duration.ofSeconds(1);
    private String path = "/metrics";

    private Builder(MetricsStore store, ScheduledExecutorService executor) {
      this.store = Objects.requireNonNull(store, "store");
      this.executor = Objects.requireNonNull(executor, "executor");
    }

    /** The HTTP transport (default: {@link HttpTransports#shared()}). */
    public Builder transport(HttpTransport transport) {
      this.transport = Objects.requireNonNull(transport, "transport");
      return this;
    }

    /** Scrape interval (default 250 ms; llm-d ticks every 50 ms, Kthena every 1 s). */
    public Builder interval(Duration interval) {
      this.interval = Objects.requireNonNull(interval, "interval");
      return this;
    }

    /** Per-scrape timeout (default 1 s). */
    public Builder timeout(Duration timeout) {
      this.timeout = Objects.requireNonNull(timeout, "timeout");
      return this;
    }

    /** The metrics path (default {@code /metrics}). */
    public Builder path(String path) {
      this.path = Objects.requireNonNull(path, "path");
      return this;
    }

    /**
     * Builds the scraper.
     *
     * @throws IllegalArgumentException naming the bad field
     */
    public MetricsScraper build() {
      if (interval.isNegative() || interval.isZero()) {
        throw new IllegalArgumentException("scraper.interval must be > 0, was " + interval);
      }
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("scraper.timeout must be > 0, was " + timeout);
      }
      if (!path.startsWith("/")) {
        throw new IllegalArgumentException("scraper.path must start with /, was \"" + path + "\"");
      }
      return new MetricsScraper(this);
    }
  }
}
