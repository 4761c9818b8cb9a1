package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.HttpTransports;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;

/**
 * An optional active health check: {@code GET /health} on every endpoint each interval. An endpoint
 * is down after {@code unhealthyThreshold} consecutive failures (non-2xx, error or timeout) and up
 * again after one success. Use {@link #isDown()} as the predicate of {@link Filters#health(String,
 * boolean, Predicate)}.
 *
 * <p>Thread-safe. Probes are scheduled on the injected executor (owned by the caller); responses
 * are handled on the transport's threads.
 */
public final class HealthProbe implements AutoCloseable {
  private final ScheduledExecutorService executor;
  private final HttpTransport transport;
  private final Duration interval;
  private final Duration timeout;
  private final String path;
  private final int unhealthyThreshold;
  private final ConcurrentHashMap<String, AtomicInteger> failures = new ConcurrentHashMap<>();
  private volatile List<Endpoint> endpoints = List.of();
  private volatile ScheduledFuture<?> task;

  private HealthProbe(
      ScheduledExecutorService executor,
      HttpTransport transport,
      Duration interval,
      Duration timeout,
      String path,
      int unhealthyThreshold) {
    this.executor = executor;
    this.transport = transport;
    this.interval = interval;
    this.timeout = timeout;
    this.path = path;
    this.unhealthyThreshold = unhealthyThreshold;
  }

  /**
   * A probe.
   *
   * @param executor ticks run here
   * @param transport the HTTP transport (nullable: {@link HttpTransports#shared()})
   * @param interval time between probes (> 0)
   * @param timeout per-probe timeout (> 0)
   * @param unhealthyThreshold consecutive failures before an endpoint is down (>= 1)
   * @throws IllegalArgumentException naming the bad field
   */
  public static HealthProbe create(
      ScheduledExecutorService executor,
      HttpTransport transport,
      Duration interval,
      Duration timeout,
      int unhealthyThreshold) {
    Objects.requireNonNull(executor, "executor");
    if (interval == null || interval.isNegative() || interval.isZero()) {
      throw new IllegalArgumentException("healthProbe.interval must be > 0, was " + interval);
    }
    if (timeout == null || timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("healthProbe.timeout must be > 0, was " + timeout);
    }
    if (unhealthyThreshold < 1) {
      throw new IllegalArgumentException(
          "healthProbe.unhealthyThreshold must be >= 1, was " + unhealthyThreshold);
    }
    HttpTransport t = transport != null ? transport : HttpTransports.shared();
    return new HealthProbe(executor, t, interval, timeout, "/health", unhealthyThreshold);
  }

  /** Replaces the endpoints to probe. */
  public void setEndpoints(Collection<Endpoint> endpoints) {
    this.endpoints = List.copyOf(endpoints);
    Set<String> ids = new HashSet<>();
    for (Endpoint e : this.endpoints) {
      ids.add(e.id());
    }
    failures.keySet().removeIf(k -> !ids.contains(k));
  }

  /** Starts probing. Idempotent. */
  public synchronized HealthProbe start() {
    if (task == null) {
      task =
          executor.scheduleAtFixedRate(this::probeAll, 0, interval.toNanos(), TimeUnit.NANOSECONDS);
    }
    return this;
  }

  /** Probes every endpoint once; completes when all probes ended. */
  public CompletableFuture<Void> probeAll() {
    List<CompletableFuture<Void>> fs = new ArrayList<>();
    for (Endpoint e : endpoints) {
      fs.add(
          transport
              .send(HttpTransport.Outbound.get(e, path).timeout(timeout).build())
              .handle(
                  (r, err) -> {
                    if (r != null) {
                      r.cancel();
                    }
                    AtomicInteger f = failures.computeIfAbsent(e.id(), k -> new AtomicInteger());
                    if (err == null && r.status() / 100 == 2) {
                      f.set(0);
                    } else {
                      f.incrementAndGet();
                    }
                    return null;
                  }));
    }
    return CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0]));
  }

  /** True when the endpoint is down now. */
  public boolean isDown(String endpointId) {
    AtomicInteger f = failures.get(endpointId);
    return f != null && f.get() >= unhealthyThreshold;
  }

  /** {@link #isDown(String)} as a predicate. */
  public Predicate<String> isDown() {
    return this::isDown;
  }

  /** Stops probing (the executor is the caller's). */
  @Override
  public synchronized void close() {
    if (task != null) {
      task.cancel(false);
      task = null;
    }
  }
}
