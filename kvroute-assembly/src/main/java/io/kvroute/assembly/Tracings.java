package io.kvroute.assembly;

import io.kvroute.opentelemetry.KvRouteTracing;
import io.kvroute.router.KvRouter;
import io.opentelemetry.api.GlobalOpenTelemetry;

/**
 * {@code tracing.enabled}. Its own class, so that nothing of the optional {@code
 * kvroute-opentelemetry} (and the OpenTelemetry API) is loaded unless tracing is on.
 */
final class Tracings {
  private Tracings() {}

  /** Traces the router's requests through {@code GlobalOpenTelemetry}. */
  static void apply(KvRouter.Builder b) {
    KvRouteTracing tracing = KvRouteTracing.create(GlobalOpenTelemetry.get());
    b.routeListener(tracing.routeListener()).transportDecorator(tracing::transport);
  }
}
