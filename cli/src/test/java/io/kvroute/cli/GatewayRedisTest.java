package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.redis.RedisServer;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvroute gateway} with {@code index: {backend: redis}} against a real {@code redis-server}
 * and simulated pods: one replica's index, filled from the pods' KV events, is the other's; a
 * replica that starts against the warm Redis routes precisely from its first request; Redis going
 * away costs precision, not requests.
 */
class GatewayRedisTest {
  private static HttpResponse<String> post(RunningCommand<GatewayCommand> g, String body)
      throws Exception {
    return TestHttp.postJson(GatewayYaml.base(g) + "/v1/completions", body);
  }

  private static long cached(HttpResponse<String> r) {
    return Long.parseLong(r.headers().firstValue("x-kvroute-cached-tokens").orElse("0"));
  }

  @Test
  void replicasShareOneIndexOnRedis(@TempDir Path dir) throws Exception {
    try (RedisServer redis = RedisServer.start();
        SimulatedCluster cluster =
            SimulatedCluster.builder()
                .both(3)
                .model("sim")
                .configure(b -> b.blockSize(16).gpuBlocks(1024).latency(LatencyModel.ZERO))
                .build()
                .start()) {
      Path cfg =
          GatewayYaml.write(
              dir,
              "listen: { port: 0 }\n"
                  + "observabilityHeaders: true\n"
                  + "index: { blockSize: 16, backend: redis, redis: { url: \""
                  + redis.url()
                  + "\", ingestMode: all-replicas, lookupTimeout: \"5s\" } }\n"
                  + GatewayYaml.endpoints(cluster.pods()));
      String body =
          "{\"model\":\"sim\",\"max_tokens\":2,\"prompt\":\""
              + "a long shared prefix that several requests repeat ".repeat(20)
              + "\"}";
      RunningCommand<GatewayCommand> a = GatewayYaml.run(cfg);
      RunningCommand<GatewayCommand> b = null;
      try {
        HttpResponse<String> first = post(a, body);
        assertThat(first.statusCode()).as(first.body()).isEqualTo(200);
        String pod = first.headers().firstValue("x-kvroute-decode").orElseThrow();
        // The pod's events reach Redis asynchronously: repeat until replica A sees them there.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        HttpResponse<String> again = first;
        while (cached(again) == 0) {
          assertThat(System.nanoTime()).as("no cached tokens reported").isLessThan(deadline);
          TimeUnit.MILLISECONDS.sleep(20);
          again = post(a, body);
          assertThat(again.statusCode()).isEqualTo(200);
        }
        assertThat(again.headers().firstValue("x-kvroute-decode")).contains(pod);

        // A second replica starts against the warm Redis and routes on the shared index.
        b = GatewayYaml.run(cfg);
        // B's cold start on a loaded machine (its first /tokenize call, its first Redis lookup)
        // can run into their timeouts, and a request without token ids has no keys to look up:
        // repeat until B predicts the cached prefix (what B reads is the index A filled; B's own
        // subscriber writes the same entries, idempotently)
        HttpResponse<String> fromB = post(b, body);
        long deadlineB = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (cached(fromB) < 16 * 10) {
          assertThat(System.nanoTime())
              .as("B never predicted the cached prefix: %s", fromB.headers().map())
              .isLessThan(deadlineB);
          assertThat(fromB.statusCode()).as(fromB.body()).isEqualTo(200);
          TimeUnit.MILLISECONDS.sleep(20);
          fromB = post(b, body);
        }
        assertThat(fromB.statusCode()).isEqualTo(200);
        assertThat(fromB.headers().firstValue("x-kvroute-decode")).contains(pod);

        // Redis goes away: requests still succeed (the index answers "no cache information";
        // the router's own approximate prefix history may still predict the pod).
        redis.stop();
        for (int i = 0; i < 3; i++) {
          HttpResponse<String> withoutRedis = post(b, body);
          assertThat(withoutRedis.statusCode()).as(withoutRedis.body()).isEqualTo(200);
        }
      } finally {
        a.stop(a.command::shutdown);
        if (b != null) {
          b.stop(b.command::shutdown);
        }
      }
    }
  }
}
