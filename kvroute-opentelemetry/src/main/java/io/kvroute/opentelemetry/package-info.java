/**
 * OpenTelemetry traces for kvroute: a {@code kvroute.route} span per request {@link
 * io.kvroute.router.KvRouter#route} runs, a {@code kvroute.prefill} and {@code kvroute.decode}
 * client span per leg sent to an engine, and the W3C {@code traceparent} of each leg span on that
 * leg's request so the engines' own spans (vLLM {@code --otlp-traces-endpoint}) join the trace.
 * Start with {@link io.kvroute.opentelemetry.KvRouteTracing}.
 */
package io.kvroute.opentelemetry;
