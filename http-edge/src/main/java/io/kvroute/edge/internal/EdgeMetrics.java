package io.kvroute.edge.internal;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * The edge's meters, names under one prefix ({@code kvroute.edge} by default; Prometheus adds
 * {@code _total} to counters):
 *
 * <ul>
 *   <li>{@code <prefix>.connections{listener}} open connections (gauge)
 *   <li>{@code <prefix>.connections.rejected{listener}} connections answered 503 because the
 *       listener's maximum was open
 *   <li>{@code <prefix>.refused{listener,status,reason}} requests refused by the edge (malformed,
 *       too large, timed out, unauthorized, no route…)
 *   <li>{@code <prefix>.timeouts{listener,phase}} connections closed by a timeout ({@code header},
 *       {@code body}, {@code idle}, {@code write})
 *   <li>{@code <prefix>.client.gone{listener}} exchanges whose client left before the answer was
 *       complete
 *   <li>{@code <prefix>.buffered.body.bytes} request-body bytes buffered now (gauge)
 * </ul>
 *
 * <p>Thread-safe.
 */
final class EdgeMetrics {
  private final MeterRegistry registry;
  private final String prefix;
  private final String listener;
  private final Map<String, Counter> counters = new ConcurrentHashMap<>();
  final Counter rejectedConnections;
  final Counter clientGone;

  EdgeMetrics(MeterRegistry registry, String prefix, String listener, AtomicInteger open) {
    this.registry = registry;
    this.prefix = prefix;
    this.listener = listener;
    Gauge.builder(prefix + ".connections", open, AtomicInteger::get)
        .description("open HTTP connections")
        .tag("listener", listener)
        .register(registry);
    this.rejectedConnections =
        Counter.builder(prefix + ".connections.rejected")
            .description("connections answered 503 because the listener's maximum was open")
            .tag("listener", listener)
            .register(registry);
    this.clientGone =
        Counter.builder(prefix + ".client.gone")
            .description("exchanges whose client left before the answer was complete")
            .tag("listener", listener)
            .register(registry);
  }

  static void bufferedGauge(MeterRegistry registry, String prefix, Supplier<Number> value) {
    Gauge.builder(prefix + ".buffered.body.bytes", value)
        .description("request-body bytes buffered by the server now")
        .baseUnit("bytes")
        .register(registry);
  }

  void refused(int status, String reason) {
    counters
        .computeIfAbsent(
            "r" + status + reason,
            k ->
                Counter.builder(prefix + ".refused")
                    .description("requests refused by the HTTP edge before or instead of a handler")
                    .tag("listener", listener)
                    .tag("status", Integer.toString(status))
                    .tag("reason", reason)
                    .register(registry))
        .increment();
  }

  void timeout(String phase) {
    counters
        .computeIfAbsent(
            "t" + phase,
            k ->
                Counter.builder(prefix + ".timeouts")
                    .description("connections closed by a timeout")
                    .tag("listener", listener)
                    .tag("phase", phase)
                    .register(registry))
        .increment();
  }
}
