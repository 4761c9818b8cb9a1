package io.kvroute.edge.internal;

import io.kvroute.edge.EdgeLimits;
import io.kvroute.edge.ErrorRenderer;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What the connections of one listener share: limits (in nanoseconds), routes, meters, the admin
 * token's digest (null: no authentication), and the server they belong to. Immutable but for the
 * connection counter; thread-safe.
 */
final class Listener {
  final String name;
  final EdgeLimits limits;
  final Routes routes;
  final EdgeMetrics metrics;
  final byte[] tokenDigest;
  final boolean tls;
  final AtomicInteger open;
  final NettyEdge edge;
  final ErrorRenderer errors;
  final long headerTimeoutNanos;
  final long bodyTimeoutNanos;
  final long idleTimeoutNanos;
  final long writeTimeoutNanos;
  final byte[] busy;

  Listener(
      String name,
      EdgeLimits limits,
      Routes routes,
      EdgeMetrics metrics,
      byte[] tokenDigest,
      boolean tls,
      AtomicInteger open,
      NettyEdge edge,
      ErrorRenderer errors) {
    this.name = name;
    this.limits = limits;
    this.routes = routes;
    this.metrics = metrics;
    this.tokenDigest = tokenDigest;
    this.tls = tls;
    this.open = open;
    this.edge = edge;
    this.errors = errors;
    this.headerTimeoutNanos = limits.headerTimeout().toNanos();
    this.bodyTimeoutNanos = limits.bodyTimeout().toNanos();
    this.idleTimeoutNanos = limits.idleTimeout().toNanos();
    this.writeTimeoutNanos = limits.writeTimeout().toNanos();
    byte[] json =
        errors.render(
            503,
            "service_unavailable",
            null,
            "too many connections (the "
                + name
                + " listener's maxConnections = "
                + limits.maxConnections()
                + "); retry later");
    String head =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: "
            + json.length
            + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n";
    byte[] h = Wire.ascii(head);
    byte[] all = java.util.Arrays.copyOf(h, h.length + json.length);
    System.arraycopy(json, 0, all, h.length, json.length);
    this.busy = all;
  }

  static String errorType(int status) {
    if (status < 500 || status == 501 || status == 505) {
      return ErrorRenderer.INVALID_REQUEST;
    }
    return status == 503 ? "service_unavailable" : "server_error";
  }
}
