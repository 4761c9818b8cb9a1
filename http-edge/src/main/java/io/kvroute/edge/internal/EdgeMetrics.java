package io.kvroute.edge.internal;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * The edge's meters, names under one prefix ({@code kvroute_edge} by default):
 *
 * <ul>
 *   <li>{@code <prefix>_connections{listener}} open connections (gauge)
 *   <li>{@code <prefix>_connections_rejected_total{listener}} connections answered 503 because the
 *       listener's maximum was open
 *   <li>{@code <prefix>_refused_total{listener,status,reason}} requests refused by the edge
 *       (malformed, too large, timed out, unauthorized, no route…)
 *   <li>{@code <prefix>_timeouts_total{listener,phase}} connections closed by a timeout ({@code
 *       header}, {@code body}, {@code idle}, {@code write})
 *   <li>{@code <prefix>_client_gone_total{listener}} exchanges whose client left before the answer
 *       was complete
 *   <li>{@code <prefix>_buffered_body_bytes} request-body bytes buffered now (gauge)
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
    Gauge.builder(prefix + "_connections", open, AtomicInteger::get)
        .description("open HTTP connections")
        .tag("listener", listener)
        .register(registry);
    this.rejectedConnections =
        Counter.builder(prefix + "_connections_rejected_total")
            .description("connections answered 503 because the listener's maximum was open")
            .tag("listener", listener)
            .register(registry);
    this.clientGone =
        Counter.builder(prefix + "_client_gone_total")
            .description("exchanges whose client left before the answer was complete")
            .tag("listener", listener)
            .register(registry);
  }

  static void bufferedGauge(MeterRegistry registry, String prefix, Supplier<Number> value) {
    Gauge.builder(prefix + "_buffered_body_bytes", value)
        .description("request-body bytes buffered by the server now")
        .baseUnit("bytes")
        .register(registry);
  }

  void refused(int status, String reason) {
    counters
        .computeIfAbsent(
            "r" + status + reason,
            k ->
                Counter.builder(prefix + "_refused_total")
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
                Counter.builder(prefix + "_timeouts_total")
                    .description("connections closed by a timeout")
                    .tag("listener", listener)
                    .tag("phase", phase)
                    .register(registry))
        .increment();
  }
}
