package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.kvindex.fleet.FleetView;
import io.kvroute.kvindex.redis.RedisIndexClient;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.kvroute.kvindex.redis.RedisServer;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimTokenizer;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two real {@code kvroute gateway} replicas of one fleet ({@code fleet} on a real loopback {@code
 * redis-server}) in front of simulated pods whose KV events are held back: a conversation whose
 * turns alternate between the replicas lands on the pod that holds its prefix from the second turn
 * on, though no KV event has reached either replica (each replica sees where the other just sent
 * the previous turn through the fleet's speculative entries); and a replica killed with a request
 * in flight leaves no count behind once its lease ran out.
 *
 * <p>Replica A runs in its own JVM (so that it can be killed), replica B in this one. An observer
 * joined to the same fleet reads what the replicas published: the test waits (with a deadline) for
 * one turn's speculative entry to be visible before sending the next, so the figures do not depend
 * on how fast this machine is; the staleness itself is measured by {@code FleetStalenessRun}.
 */
class GatewayFleetTest {
  private static final Duration LEASE = Duration.ofSeconds(2);
  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  private static HttpResponse<String> post(String base, String prompt) throws Exception {
    return HTTP.send(request(base, prompt), HttpResponse.BodyHandlers.ofString());
  }

  private static HttpRequest request(String base, String prompt) {
    return HttpRequest.newBuilder(URI.create(base + "/v1/completions"))
        .timeout(Duration.ofSeconds(60))
        .header("Content-Type", "application/json")
        .POST(
            HttpRequest.BodyPublishers.ofString(
                "{\"model\":\"sim\",\"max_tokens\":2,\"prompt\":\"" + prompt + "\"}"))
        .build();
  }

  /** The gateway's request keys of {@code prompt} (block size 16, the pods' tokenizer). */
  private static long[] keys(String prompt) {
    BlockIndex index = BlockIndex.inMemory(IndexConfig.builder().blockSize(16).build());
    return BlockIndexLookup.of(index).requestKeys(SimTokenizer.get().encode(prompt), null, null);
  }

  private static FleetView awaitView(
      FleetState observer, List<String> pods, long[] keys, Predicate<FleetView> done, String what)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    FleetView v = observer.view(pods, keys, keys.length);
    while (!done.test(v)) {
      assertThat(System.nanoTime()).as("%s; last view %s", what, v).isLessThan(deadline);
      TimeUnit.MILLISECONDS.sleep(10); // polling interval of the condition, not a wait for it
      v = observer.view(pods, keys, keys.length);
    }
    return v;
  }

  /** {@code kvroute gateway} in a JVM of its own, its output drained in the background. */
  private static final class GatewayProcess implements AutoCloseable {
    final Process process;
    final String base;

    GatewayProcess(Path cfg) throws Exception {
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      process =
          new ProcessBuilder(
                  java,
                  "-Xmx256m",
                  "-cp",
                  System.getProperty("java.class.path"),
                  "io.kvroute.cli.Main",
                  "gateway",
                  "--config",
                  cfg.toString())
              .redirectErrorStream(true)
              .start();
      BufferedReader out =
          new BufferedReader(
              new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
      String found = null;
      StringBuilder seen = new StringBuilder();
      for (String line = out.readLine(); line != null; line = out.readLine()) {
        seen.append(line).append('\n');
        int at = line.indexOf("listening on http://");
        if (at >= 0) {
          String rest = line.substring(at + "listening on ".length());
          found = rest.substring(0, rest.indexOf(' '));
          break;
        }
      }
      assertThat(found).as("gateway did not start:\n%s", seen).isNotNull();
      base = found;
      Thread drain =
          new Thread(
              () -> {
                try {
                  while (out.readLine() != null) {
                    // discard
                  }
                } catch (java.io.IOException e) {
                  // the process is gone
                }
              },
              "gateway-process-output");
      drain.setDaemon(true);
      drain.start();
    }

    void kill() throws InterruptedException {
      process.destroyForcibly();
      assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
    }

    @Override
    public void close() {
      process.destroyForcibly();
    }
  }

  @Test
  void alternatingTurnsLandOnThePrefixHolderBeforeItsEventsAndADeadReplicaLeavesNoCounts(
      @TempDir Path dir) throws Exception {
    try (RedisServer redis = RedisServer.start();
        SimulatedCluster cluster =
            SimulatedCluster.builder()
                .both(3)
                .model("sim")
                .configure(b -> b.blockSize(16).gpuBlocks(1024).latency(LatencyModel.ZERO))
                .build()
                .start();
        RedisIndexClient observerClient =
            RedisIndexClient.connect(
                RedisIndexConfig.builder()
                    .url(redis.url())
                    .commandTimeout(Duration.ofSeconds(10))
                    .build())) {
      List<String> pods = new ArrayList<>();
      for (VllmSimulator p : cluster.pods()) {
        pods.add(p.name());
        p.faults().holdEventBatches(true); // no KV event reaches either replica
      }
      Path cfg =
          GatewayYaml.write(
              dir,
              "listen: { host: 127.0.0.1, port: 0 }\n"
                  + "observabilityHeaders: true\n"
                  + "defaultConnector: { type: http, retry: { maxAttempts: 1 } }\n"
                  + "index: { blockSize: 16, backend: redis, redis: { url: \""
                  + redis.url()
                  + "\", ingestMode: all-replicas, lookupTimeout: 5s } }\n"
                  + "fleet: { name: e2e, leaseTtl: "
                  + LEASE.toMillis()
                  + "ms, viewTimeout: 2s }\n"
                  + GatewayYaml.endpoints(cluster.pods()));
      FleetState observer =
          observerClient.fleet(
              FleetConfig.builder()
                  .fleet("e2e")
                  .replicaId("observer")
                  .viewTimeout(Duration.ofSeconds(5))
                  .viewBackoff(Duration.ZERO)
                  .build());
      RunningCommand<GatewayCommand> b = GatewayYaml.run(cfg);
      try (GatewayProcess a = new GatewayProcess(cfg)) {
        String[] replicas = {a.base, GatewayYaml.base(b)};
        // Warm each replica up: a fresh JVM's first call to the pods' /tokenize can outlast the
        // tokenize timeout on a loaded machine, and a request scheduled without token ids has no
        // request keys to share.
        for (String r : replicas) {
          for (int i = 0; i < 3; i++) {
            assertThat(post(r, "warm up " + i).statusCode()).isEqualTo(200);
          }
        }

        // Three conversations of four turns; turn t of conversation c goes to replica (c + t) % 2.
        for (int c = 0; c < 3; c++) {
          StringBuilder prompt = new StringBuilder();
          String holder = null;
          for (int t = 0; t < 4; t++) {
            prompt.append(
                ("conversation " + c + " turn " + t + " the cache block route ").repeat(8));
            String p = prompt.toString();
            HttpResponse<String> r = post(replicas[(c + t) % 2], p);
            assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
            String pod = r.headers().firstValue("x-kvroute-decode").orElseThrow();
            if (t == 0) {
              holder = pod;
            } else {
              assertThat(pod)
                  .as("conversation %d turn %d (replica %d)", c, t, (c + t) % 2)
                  .isEqualTo(holder);
            }
            // wait until the other replica can see where this turn went (the fleet's staleness)
            long[] k = keys(p);
            int at = pods.indexOf(pod);
            awaitView(
                observer,
                pods,
                k,
                v -> v.source() == FleetView.Source.FLEET && v.speculativeBlocks(at) == k.length,
                "the speculative entry of conversation " + c + " turn " + t);
          }
        }
        // the pods did cache the prompts and produce events, but none was sent
        long produced = 0;
        for (VllmSimulator p : cluster.pods()) {
          produced += p.eventBatches();
        }
        assertThat(produced).isPositive();

        // A request in flight through replica A, then A is killed: its count leaves the fleet.
        for (VllmSimulator p : cluster.pods()) {
          p.faults().hangNext(1);
        }
        CompletableFuture<HttpResponse<String>> hung =
            HTTP.sendAsync(
                request(a.base, "a request that hangs "), HttpResponse.BodyHandlers.ofString());
        FleetView busy =
            awaitView(
                observer,
                pods,
                new long[0],
                v -> sum(v) == 1,
                "replica A's in-flight request in the fleet view");
        int hungOn = -1;
        for (int i = 0; i < pods.size(); i++) {
          if (busy.inFlightRequests(i) == 1) {
            hungOn = i;
          } else {
            cluster.pods().get(i).faults().hangNext(0);
          }
        }
        assertThat(hungOn).isNotNegative();
        a.kill();
        long killed = System.nanoTime();
        awaitView(
            observer, pods, new long[0], v -> sum(v) == 0, "replica A's count after its death");
        long goneMillis = (System.nanoTime() - killed) / 1_000_000;
        System.out.printf(
            "GatewayFleetTest: killed replica's count gone after %d ms (lease %d ms)%n",
            goneMillis, LEASE.toMillis());
        // gone within the lease (plus one heartbeat's slack for this machine's load): not leaked
        assertThat(goneMillis).isLessThan(LEASE.toMillis() + 30_000);
        cluster.pods().get(hungOn).faults().releaseHung();
        hung.handle((r, e) -> null).get(60, TimeUnit.SECONDS);

        // replica B still routes
        HttpResponse<String> after = post(replicas[1], "after replica A died");
        assertThat(after.statusCode()).isEqualTo(200);
      } finally {
        b.stop(b.command::shutdown);
        for (VllmSimulator p : cluster.pods()) {
          p.faults().holdEventBatches(false);
        }
      }
    }
  }

  private static long sum(FleetView v) {
    long s = 0;
    for (int i = 0; i < v.size(); i++) {
      s += v.inFlightRequests(i);
    }
    return s;
  }
}
