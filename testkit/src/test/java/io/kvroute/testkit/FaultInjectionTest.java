package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Every HTTP fault, with real HTTP. Event faults are covered in {@link KvEventsTest}. */
class FaultInjectionTest {
  static final List<Long> sleeps = new CopyOnWriteArrayList<>();
  static VllmSimulator sim;

  @BeforeAll
  static void start() {
    sim =
        VllmSimulator.builder()
            .latency(LatencyModel.ZERO)
            .sleeper(sleeps::add)
            .random(() -> 0.5)
            .build()
            .start();
  }

  @AfterAll
  static void stop() {
    sim.close();
  }

  @AfterEach
  void reset() {
    sim.faults().reset();
    sleeps.clear();
  }

  private static int status() {
    return TestSupport.post(sim, "/v1/completions", TestSupport.completion("fault test", 2))
        .statusCode();
  }

  @Test
  void failNextAndFailNth() {
    sim.faults().failNext(2, 503);
    assertThat(List.of(status(), status(), status())).containsExactly(503, 503, 200);
    sim.faults().failNth(3, 429);
    assertThat(List.of(status(), status(), status(), status())).containsExactly(200, 200, 429, 200);
    HttpResponse<String> r = TestSupport.post(sim, "/v1/completions", "{\"prompt\":\"x\"}");
    assertThat(r.statusCode()).isEqualTo(200);
    sim.faults().failNext(1, 500);
    r = TestSupport.post(sim, "/v1/completions", "{\"prompt\":\"x\"}");
    assertThat(TestSupport.json(r.body()).at("/error/code").asInt()).isEqualTo(500);
    assertThat(sim.stats().errors()).isGreaterThanOrEqualTo(4);
  }

  @Test
  void errorRateUsesTheInjectedRandomness() {
    sim.faults().errorRate(0.6, 500); // random() is 0.5 < 0.6: every request fails
    assertThat(List.of(status(), status())).containsExactly(500, 500);
    sim.faults().errorRate(0.4, 500);
    assertThat(status()).isEqualTo(200);
  }

  @Test
  void latencySpikeIsSleptBeforeTheFirstToken() {
    sim.faults().latencySpike(Duration.ofMillis(750), 1);
    status();
    status();
    assertThat(sleeps).contains(TimeUnit.MILLISECONDS.toNanos(750));
    assertThat(sleeps.stream().filter(n -> n == TimeUnit.MILLISECONDS.toNanos(750)).count())
        .isEqualTo(1);
  }

  @Test
  void hangUntilReleased() throws Exception {
    sim.faults().hangNext(1);
    CompletableFuture<HttpResponse<String>> hung =
        TestSupport.HTTP.sendAsync(
            HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/v1/completions"))
                .POST(HttpRequest.BodyPublishers.ofString(TestSupport.completion("hang", 1)))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    // once the hung request is recorded its fault was decided; a later one is not blocked
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (sim.requests().stream().noneMatch(r -> "hang".equals(r.field("prompt").asText()))) {
      assertThat(System.nanoTime()).isLessThan(deadline);
      Thread.onSpinWait();
    }
    assertThat(status()).isEqualTo(200);
    assertThat(hung).isNotDone();
    sim.faults().releaseHung();
    assertThat(hung.get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
  }

  @Test
  void closeMidStreamTruncatesTheSse() {
    sim.faults().closeMidStream(2, 1);
    String body = "{\"prompt\":\"stream me\",\"max_tokens\":5,\"stream\":true}";
    List<String> received = new ArrayList<>();
    assertThatThrownBy(
            () ->
                TestSupport.HTTP
                    .send(
                        HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/v1/completions"))
                            .POST(HttpRequest.BodyPublishers.ofString(body))
                            .build(),
                        HttpResponse.BodyHandlers.ofLines())
                    .body()
                    .forEach(received::add))
        .isInstanceOfAny(IOException.class, java.io.UncheckedIOException.class);
    assertThat(received.stream().filter(l -> l.startsWith("data: ")).count())
        .isLessThanOrEqualTo(2);
    assertThat(received).doesNotContain("data: [DONE]");
    // the next request is fine again
    assertThat(TestSupport.post(sim, "/v1/completions", body).body()).endsWith("data: [DONE]\n\n");
  }

  @Test
  void closeMidBodyForNonStreaming() {
    sim.faults().closeMidStream(0, 1);
    assertThatThrownBy(
            () ->
                TestSupport.HTTP.send(
                    HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/v1/completions"))
                        .POST(HttpRequest.BodyPublishers.ofString(TestSupport.completion("x", 1)))
                        .build(),
                    HttpResponse.BodyHandlers.ofString()))
        .isInstanceOf(IOException.class);
    assertThat(status()).isEqualTo(200);
  }

  @Test
  void invalidFaultArgumentsAreRejectedWithTheFieldName() {
    assertThatThrownBy(() -> sim.faults().failNext(1, 200)).hasMessageContaining("status");
    assertThatThrownBy(() -> sim.faults().errorRate(1.5, 500)).hasMessageContaining("rate");
    assertThatThrownBy(() -> sim.faults().failNth(0, 500)).hasMessageContaining("n must be");
    assertThatThrownBy(() -> sim.faults().hangNext(-1)).hasMessageContaining("count");
  }
}
