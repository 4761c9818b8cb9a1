/**
 * OpenTelemetry traces for {@link io.kvroute.router.KvRouter}: {@link
 * io.kvroute.opentelemetry.KvRouteTracing}. Depends on the OpenTelemetry API only; the application
 * brings the SDK.
 */
module io.kvroute.opentelemetry {
  requires transitive io.kvroute.router;
  requires transitive io.opentelemetry.api;
  requires transitive io.opentelemetry.context;

  exports io.kvroute.opentelemetry;
}
