package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The reference gateway end to end against simulated vLLM pods with NIXL PD, real HTTP and real ZMQ
 * KV events: streaming and not, PD and not, a pod failing mid-test, a pod added and another removed
 * while traffic flows. Every request either succeeds or fails visibly to its client, and failures
 * are only those the injected faults explain.
 */
class GatewaySimulatedTest {
  private final HttpClient client =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  /** Outcome of one client request: "ok", or a description of the visible failure. */
  private String send(String base, int i) {
    boolean chat = i % 2 == 0;
    boolean stream = i % 3 != 0;
    String prompt =
        (i % 4 == 0 ? "short " + i : "a long shared prefix for the pd path ".repeat(12) + i);
    String body =
        chat
            ? "{\"model\":\"sim\",\"max_tokens\":4,\"stream\":"
                + stream
                + ",\"messages\":[{\"role\":\"user\",\"content\":\""
                + prompt
                + "\"}]}"
            : "{\"model\":\"sim\",\"max_tokens\":4,\"stream\":"
                + stream
                + ",\"prompt\":\""
                + prompt
                + "\"}";
    try {
      HttpResponse<String> r =
          client.send(
              HttpRequest.newBuilder(
                      URI.create(base + (chat ? "/v1/chat/completions" : "/v1/completions")))
                  .timeout(Duration.ofSeconds(30))
                  .header("Content-Type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofString(body))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() != 200) {
        return "status " + r.statusCode();
      }
      if (stream) {
        return r.body().contains("data: [DONE]") ? "ok" : "stream without [DONE]";
      }
      return r.body().contains("\"choices\"") ? "ok" : "bad body";
    } catch (IOException e) {
      return "connection broken: " + e.getMessage();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted";
    }
  }

  @Test
  void trafficSurvivesFailuresAndFleetChanges(@TempDir Path dir) throws Exception {
    try (SimulatedCluster cluster =
            SimulatedCluster.builder()
                .prefill(1)
                .decode(3)
                .model("sim")
                .protocol(KvTransferProtocol.NIXL)
                .configure(b -> b.blockSize(16).gpuBlocks(512).latency(LatencyModel.ZERO))
                .build()
                .start();
        VllmSimulator extra =
            VllmSimulator.builder()
                .name("decode-extra")
                .model("sim")
                .role(io.kvroute.testkit.SimRole.DECODE)
                .protocol(KvTransferProtocol.NIXL)
                .blockSize(16)
                .latency(LatencyModel.ZERO)
                .build()
                .start()) {
      StringBuilder yaml =
          new StringBuilder(
              "listen: { host: 127.0.0.1, port: 0 }\n"
                  + "admin: { port: 0 }\n"
                  + "observabilityHeaders: true\n"
                  + "defaultConnector: { type: nixl, retry: { maxAttempts: 3, backoffBase: \"1ms\" } }\n"
                  + "index: { blockSize: 16 }\n"
                  + "endpoints:\n");
      for (VllmSimulator p : cluster.prefillPods()) {
        yaml.append(GatewayYaml.endpoint(p, "prefill"));
      }
      for (VllmSimulator d : cluster.decodePods()) {
        yaml.append(GatewayYaml.endpoint(d, "decode"));
      }
      Path cfg = GatewayYaml.write(dir, yaml.toString());

      Path token = tokenFile(dir);
      RunningCommand<GatewayCommand> gateway =
          GatewayYaml.run(cfg, "--admin-token-file", token.toString());
      String base = GatewayYaml.base(gateway);
      String admin = "http://127.0.0.1:" + gateway.command.running.adminPort();
      try {
        ConcurrentLinkedQueue<String> outcomes = new ConcurrentLinkedQueue<>();
        AtomicInteger next = new AtomicInteger();
        int total = 120;
        ExecutorService clients = Executors.newFixedThreadPool(4);
        List<CompletableFuture<Void>> running = new ArrayList<>();
        for (int c = 0; c < 4; c++) {
          running.add(
              CompletableFuture.runAsync(
                  () -> {
                    for (int i = next.getAndIncrement(); i < total; i = next.getAndIncrement()) {
                      outcomes.add(send(base, i));
                      if (i == 30) {
                        // A decode pod starts failing: 503s (retried on another pair) and two
                        // streams cut after the first chunk (visible to those clients).
                        VllmSimulator sick = cluster.decodePods().get(0);
                        sick.faults().failNext(3, 503).closeMidStream(1, 2);
                      }
                      if (i == 60) {
                        post(admin + "/admin/endpoints", GatewayYaml.endpoint(extra, "decode"));
                      }
                      if (i == 80) {
                        delete(admin + "/admin/endpoints/" + cluster.decodePods().get(2).name());
                      }
                    }
                  },
                  clients));
        }
        CompletableFuture.allOf(running.toArray(new CompletableFuture<?>[0]))
            .get(120, TimeUnit.SECONDS);
        clients.shutdownNow();

        List<String> failures = new ArrayList<>();
        for (String o : outcomes) {
          if (!o.equals("ok")) {
            failures.add(o);
          }
        }
        assertThat(outcomes).hasSize(total);
        // Only the two cut streams may fail, and only visibly (never a silently short answer).
        assertThat(failures).hasSizeLessThanOrEqualTo(2);
        assertThat(failures)
            .allSatisfy(
                f ->
                    assertThat(f)
                        .matches("stream without \\[DONE\\]|connection broken: .*|bad body"));
        String listed = get(admin + "/admin/endpoints");
        assertThat(listed)
            .contains("decode-extra")
            .doesNotContain(cluster.decodePods().get(2).name());
        // Issue 14: without the token (or with a wrong one) the admin API refuses, and a
        // cross-site text/plain POST (no CORS preflight) is refused even with it.
        for (String auth : new String[] {null, "Bearer wrong-token-0123456789", TOKEN}) {
          HttpRequest.Builder rb =
              HttpRequest.newBuilder(URI.create(admin + "/admin/endpoints"))
                  .header("Content-Type", "text/plain")
                  .POST(
                      HttpRequest.BodyPublishers.ofString(
                          "{\"id\":\"evil\",\"url\":\"http://127.0.0.1:19999\",\"role\":\"decode\"}"));
          if (auth != null) {
            rb.header("Authorization", auth.startsWith("Bearer") ? auth : "Bearer " + auth);
          }
          HttpResponse<String> r = client.send(rb.build(), HttpResponse.BodyHandlers.ofString());
          assertThat(r.statusCode()).as(r.body()).isEqualTo(auth == TOKEN ? 415 : 401);
        }
        assertThat(
                client
                    .send(
                        HttpRequest.newBuilder(URI.create(admin + "/admin/endpoints"))
                            .GET()
                            .build(),
                        HttpResponse.BodyHandlers.ofString())
                    .statusCode())
            .isEqualTo(401);
        assertThat(get(admin + "/admin/endpoints")).doesNotContain("evil");
        // The traffic listener does not serve the admin API at all.
        assertThat(
                client
                    .send(
                        HttpRequest.newBuilder(URI.create(base + "/admin/endpoints"))
                            .header("Authorization", "Bearer " + TOKEN)
                            .GET()
                            .build(),
                        HttpResponse.BodyHandlers.ofString())
                    .statusCode())
            .isEqualTo(404);
        String metrics = get(base + "/metrics");
        assertThat(metrics).contains("kvroute_connector_prefill_seconds_count");
        // the reuse split of every completed request, and the parity check's verdict
        assertThat(metrics)
            .contains("kvroute_routing_reuse_requests_total{measured=\"true\"}")
            .contains("kvroute_routing_reuse_tokens_total{split=\"delivered\"}");
        String ready = get(base + "/readyz");
        assertThat(ready).startsWith("ready\n").contains("parity: model sim: parity");
        assertThat(ready).as(ready).doesNotContain("(failed");
        assertThat(cluster.prefillPods().get(0).stats().requests()).as("PD ran").isPositive();
      } finally {
        gateway.command.shutdown();
      }
      assertThat(gateway.exit.get(30, TimeUnit.SECONDS)).isZero();
    }
  }

  private static final String TOKEN = "test-admin-token-0123456789";

  private static Path tokenFile(Path dir) throws IOException {
    Path f = dir.resolve("admin.token");
    Files.writeString(f, TOKEN + "\n", StandardCharsets.UTF_8);
    return f;
  }

  private String get(String url) throws Exception {
    return client
        .send(
            HttpRequest.newBuilder(URI.create(url))
                .header("Authorization", "Bearer " + TOKEN)
                .GET()
                .build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }

  private void post(String url, String yamlEndpoint) {
    // The admin API takes JSON: convert the one-endpoint YAML line by line.
    String id = yamlEndpoint.replaceAll("(?s).*id: (\\S+).*", "$1");
    String u = yamlEndpoint.replaceAll("(?s).*url: \"([^\"]+)\".*", "$1");
    String pub = yamlEndpoint.replaceAll("(?s).*publisher: \"([^\"]+)\".*", "$1");
    String rep = yamlEndpoint.replaceAll("(?s).*replay: \"([^\"]+)\".*", "$1");
    String json =
        "{\"id\":\""
            + id
            + "\",\"url\":\""
            + u
            + "\",\"role\":\"decode\",\"kvEvents\":{\"publisher\":\""
            + pub
            + "\",\"replay\":\""
            + rep
            + "\"}}";
    try {
      HttpResponse<String> r =
          client.send(
              HttpRequest.newBuilder(URI.create(url))
                  .header("Authorization", "Bearer " + TOKEN)
                  .header("Content-Type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofString(json))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(r.statusCode()).as(r.body()).isEqualTo(201);
    } catch (IOException | InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  private void delete(String url) {
    try {
      HttpResponse<String> r =
          client.send(
              HttpRequest.newBuilder(URI.create(url))
                  .header("Authorization", "Bearer " + TOKEN)
                  .DELETE()
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    } catch (IOException | InterruptedException e) {
      throw new AssertionError(e);
    }
  }
}
