package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.junit5.StartStop;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class MetricsScraperTest {
  @StartStop final MockWebServer server = new MockWebServer();
  private final ScheduledExecutorService exec = Executors.newSingleThreadScheduledExecutor();
  private final TestSupport.Clock clock = new TestSupport.Clock();

  @AfterEach
  void stop() {
    exec.shutdownNow();
  }

  private Endpoint endpoint() {
    return Endpoint.builder("pod-1", "127.0.0.1", server.getPort()).build();
  }

  @Test
  void scrapesIntoTheStoreAndGoesStaleAfterFailures() throws Exception {
    MetricsStore store = MetricsStore.create(Duration.ofSeconds(2), clock::get, 10);
    MetricsScraper scraper =
        MetricsScraper.builder(store, exec).timeout(Duration.ofSeconds(5)).build();
    scraper.setEndpoints(List.of(endpoint()));
    server.enqueue(
        new MockResponse.Builder()
            .body("vllm:num_requests_waiting 4\nvllm:kv_cache_usage_perc 0.5\n")
            .build());
    scraper.scrapeAll().get(10, TimeUnit.SECONDS);
    assertThat(store.fresh("pod-1"))
        .hasValueSatisfying(
            m -> {
              assertThat(m.waitingRequests()).isEqualTo(4);
              assertThat(m.kvCacheUsage()).isEqualTo(0.5);
            });
    assertThat(server.takeRequest().getUrl().encodedPath()).isEqualTo("/metrics");

    server.enqueue(new MockResponse.Builder().code(500).build());
    scraper.scrapeAll().get(10, TimeUnit.SECONDS);
    assertThat(store.failures()).isEqualTo(1);
    assertThat(store.freshness("pod-1")).isEqualTo(MetricsStore.Freshness.FRESH); // kept
    clock.advanceMillis(2001);
    assertThat(store.freshness("pod-1")).isEqualTo(MetricsStore.Freshness.STALE);
    assertThat(store.fresh("pod-1")).isEmpty();
    assertThat(store.last("pod-1")).isPresent();

    scraper.setEndpoints(List.of());
    assertThat(store.size()).isZero();
  }

  @Test
  void scheduledScrapingRunsOnTheExecutor() throws Exception {
    MetricsStore store = MetricsStore.create();
    server.setDispatcher(
        new mockwebserver3.Dispatcher() {
          @Override
          public MockResponse dispatch(mockwebserver3.RecordedRequest r) {
            return new MockResponse.Builder().body("vllm:num_requests_running 9\n").build();
          }
        });
    try (MetricsScraper scraper =
        MetricsScraper.builder(store, exec).interval(Duration.ofMillis(20)).build()) {
      scraper.setEndpoints(List.of(endpoint()));
      scraper.start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (store.fresh("pod-1").isEmpty() && System.nanoTime() < deadline) {
        java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
      }
      assertThat(store.fresh("pod-1").get().runningRequests()).isEqualTo(9);
    }
  }

  @Test
  void validation() {
    MetricsStore store = MetricsStore.create();
    assertThatThrownBy(() -> MetricsScraper.builder(store, exec).interval(Duration.ZERO).build())
        .hasMessage("scraper.interval must be > 0, was PT0S");
    assertThatThrownBy(() -> MetricsScraper.builder(store, exec).path("metrics").build())
        .hasMessage("scraper.path must start with /, was \"metrics\"");
    assertThatThrownBy(() -> MetricsStore.create(Duration.ZERO, System::nanoTime, 1))
        .hasMessage("metrics.staleAfter must be > 0, was PT0S");
  }

  @Test
  void storeIsBounded() {
    MetricsStore store = MetricsStore.create(Duration.ofSeconds(1), clock::get, 2);
    store.update("a", EndpointMetrics.of(0, 0, 0));
    store.update("b", EndpointMetrics.of(0, 0, 0));
    store.update("c", EndpointMetrics.of(0, 0, 0));
    assertThat(store.size()).isEqualTo(2);
    assertThat(store.dropped()).isEqualTo(1);
    store.update("a", EndpointMetrics.of(1, 0, 0)); // existing ids still update
    assertThat(store.fresh("a").get().waitingRequests()).isEqualTo(1);
  }

  @Test
  void healthProbeMarksDownAfterConsecutiveFailures() throws Exception {
    HealthProbe probe =
        HealthProbe.create(exec, null, Duration.ofSeconds(1), Duration.ofSeconds(5), 2);
    probe.setEndpoints(List.of(endpoint()));
    server.enqueue(new MockResponse.Builder().code(503).build());
    server.enqueue(new MockResponse.Builder().code(503).build());
    server.enqueue(new MockResponse.Builder().code(200).build());
    probe.probeAll().get(10, TimeUnit.SECONDS);
    assertThat(probe.isDown("pod-1")).isFalse();
    probe.probeAll().get(10, TimeUnit.SECONDS);
    assertThat(probe.isDown("pod-1")).isTrue();
    Filter f = Filters.health("h", false, probe.isDown());
    assertThat(f.filter(FakeContext.of(), List.of(endpoint()))).isEmpty();
    probe.probeAll().get(10, TimeUnit.SECONDS);
    assertThat(probe.isDown("pod-1")).isFalse();
    assertThat(server.takeRequest().getUrl().encodedPath()).isEqualTo("/health");
  }
}
