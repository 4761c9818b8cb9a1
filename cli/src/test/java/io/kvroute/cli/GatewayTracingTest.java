package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.assembly.RouterAssembly;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.KvRouter;
import io.kvroute.testkit.VllmSimulator;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code tracing: { enabled: true }} traces the gateway's routed requests via GlobalOpenTelemetry.
 */
class GatewayTracingTest {

  @Test
  void theGatewayTracesThroughGlobalOpenTelemetry(@TempDir Path dir) throws Exception {
    InMemorySpanExporter exporter = InMemorySpanExporter.create();
    GlobalOpenTelemetry.resetForTest();
    try (OpenTelemetrySdk sdk =
            OpenTelemetrySdk.builder()
                .setTracerProvider(
                    SdkTracerProvider.builder()
                        .addSpanProcessor(SimpleSpanProcessor.create(exporter))
                        .build())
                .buildAndRegisterGlobal();
        VllmSimulator pod = VllmSimulator.builder().name("d0").model("m").build().start()) {
      assertThat(GlobalOpenTelemetry.get().getTracerProvider()).isNotNull();
      assertThat(sdk.getSdkTracerProvider()).isNotNull();
      Path cfg = dir.resolve("gateway.yaml");
      Files.writeString(
          cfg,
          "tracing: { enabled: true }\nendpoints: [{ id: d0, url: \"" + pod.baseUrl() + "\" }]\n",
          StandardCharsets.UTF_8);
      GatewayConfig c = GatewayConfig.load(cfg);
      try (RouterAssembly assembly =
          RouterAssembly.builder(c.settings())
              .meterRegistry(new PrometheusMeterRegistry(PrometheusConfig.DEFAULT))
              .build()) {
        KvRouter router = assembly.router();
        InferenceRequest request =
            InferenceRequest.of(
                InferenceRequest.Api.COMPLETIONS,
                "{\"model\":\"m\",\"prompt\":\"hello there\",\"max_tokens\":2}"
                    .getBytes(StandardCharsets.UTF_8),
                Map.of(),
                "gw-1");
        router.route(request).get(20, TimeUnit.SECONDS).readAll(1 << 20).get(20, TimeUnit.SECONDS);
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (exporter.getFinishedSpanItems().size() < 2 && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      List<SpanData> spans = exporter.getFinishedSpanItems();
      assertThat(spans).extracting(SpanData::getName).contains("kvroute.route", "kvroute.decode");
      SpanData decode =
          spans.stream().filter(s -> s.getName().equals("kvroute.decode")).findFirst().get();
      // (the trace flags of a new root may carry W3C level 2's random-trace-id bit: 01 or 03)
      assertThat(pod.requests().get(pod.requests().size() - 1).header("traceparent").orElseThrow())
          .startsWith("00-" + decode.getTraceId() + "-" + decode.getSpanId() + "-");
    } finally {
      GlobalOpenTelemetry.resetForTest();
    }
  }
}
