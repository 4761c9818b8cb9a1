package io.kvroute.edge.internal;

import io.kvroute.edge.AdminConfig;
import io.kvroute.edge.EdgeLimits;
import io.kvroute.edge.ErrorRenderer;
import io.kvroute.edge.TlsConfig;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.util.function.LongSupplier;

/**
 * Everything the Netty server needs, gathered by {@code EdgeServer.Builder}.
 *
 * @param host traffic listener address
 * @param port traffic listener port (0: any)
 * @param tls traffic listener TLS, or {@code null}
 * @param limits limits and timeouts of the traffic listener
 * @param routes traffic routes
 * @param admin admin listener, or {@code null}
 * @param adminRoutes admin routes
 * @param registry where the meters go
 * @param metricPrefix meter name prefix, e.g. {@code kvroute.edge}
 * @param ioThreads event-loop threads
 * @param threadName thread name prefix
 * @param transport {@code auto}, {@code nio} or {@code epoll}
 * @param errors error body renderer
 * @param nanoClock the clock of deadlines
 * @param timeoutTick how often deadlines are checked
 * @param wallClock the clock of {@code Date} headers
 */
public record EdgeSettings(
    String host,
    int port,
    TlsConfig tls,
    EdgeLimits limits,
    Routes routes,
    AdminConfig admin,
    Routes adminRoutes,
    MeterRegistry registry,
    String metricPrefix,
    int ioThreads,
    String threadName,
    String transport,
    ErrorRenderer errors,
    LongSupplier nanoClock,
    Duration timeoutTick,
    Clock wallClock) {}
