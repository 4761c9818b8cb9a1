package io.kvroute.kvindex.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.contract.FleetStateContract;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.kvindex.fleet.FleetView;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The fleet state on a real redis-server, where it differs from memory: a replica process killed
 * with SIGKILL leaves the fleet view once the server's clock passes its lease, with no leaked
 * count; Redis frozen (SIGSTOP) or stopped mid-run makes views answer from the local view within
 * their deadline, counted by reason, writes never block; after a restart that lost everything,
 * every replica publishes its whole state again.
 */
class RedisFleetTest {
  private static final List<String> EPS = List.of("e1", "e2");
  private static final long[] NONE = new long[0];

  private static RedisIndexClient client(RedisServer server) {
    return RedisIndexClient.connect(
        RedisIndexConfig.builder().url(server.url()).commandTimeout(Duration.ofSeconds(2)).build());
  }

  @Test
  void aKilledReplicasCountsLeaveTheViewOnceTheServerClockPassesItsLease() throws Exception {
    long leaseMs = 3000;
    try (RedisServer server = RedisServer.start();
        RedisIndexClient bc = client(server);
        RedisClient raw = RedisClient.create(server.url());
        StatefulRedisConnection<String, String> conn = raw.connect()) {
      RedisCommands<String, String> redis = conn.sync();
      FleetState b =
          bc.fleet(
              FleetConfig.builder()
                  .fleet("kill")
                  .replicaId("b")
                  .leaseTtl(Duration.ofMillis(leaseMs))
                  .viewTimeout(Duration.ofSeconds(10))
                  .build());
      List<String> cmd = new ArrayList<>();
      cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      cmd.addAll(List.of("-cp", System.getProperty("java.class.path")));
      cmd.add(FleetReplicaProcess.class.getName());
      cmd.addAll(List.of(server.url(), "kill", "a", Long.toString(leaseMs), "e1", "3"));
      Process a = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      try {
        BufferedReader out =
            new BufferedReader(new InputStreamReader(a.getInputStream(), StandardCharsets.UTF_8));
        String line;
        while ((line = out.readLine()) != null && !line.equals("ready")) {
          // the child's start-up output
        }
        assertThat(line).as("the replica process started").isEqualTo("ready");
        Await.until("b to see a's 3 requests", () -> b.view(EPS, NONE, 0).inFlightRequests(0) == 3);

        a.destroyForcibly(); // SIGKILL: no goodbye
        assertThat(a.waitFor(30, TimeUnit.SECONDS)).isTrue();
        long killedAt = serverMillis(redis);
        String key = "{kvroute:fleet:kill}:replicas";
        Double expiry = redis.zscore(key, "a");
        if (expiry != null) { // else already withdrawn
          // the lease ends at most one lease after the kill (its last heartbeat was before it)
          assertThat(expiry.longValue() - killedAt).isLessThanOrEqualTo(leaseMs);
          Await.until("the server clock to pass a's lease", () -> serverMillis(redis) > expiry);
        }
        // from then on no view counts a: the view withdraws expired replicas before reading
        FleetView v = b.view(EPS, NONE, 0);
        assertThat(v.source()).isEqualTo(FleetView.Source.FLEET);
        assertThat(v.inFlightRequests(0)).isZero();
        assertThat(v.inFlightTokens(0)).isZero();
        assertThat(redis.zscore(key, "a")).isNull();
        assertThat(redis.exists("{kvroute:fleet:kill}:l:a")).isZero();
        assertThat(redis.hlen("{kvroute:fleet:kill}:lr")).isZero(); // nothing leaked
      } finally {
        a.destroyForcibly();
      }
    }
  }

  private static long serverMillis(RedisCommands<String, String> redis) {
    List<String> t = redis.time();
    return Long.parseLong(t.get(0)) * 1000 + Long.parseLong(t.get(1)) / 1000;
  }

  @Test
  void aFrozenOrStoppedServerMakesViewsLocalWithinTheDeadlineAndARestartRepublishes() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    try (RedisServer server = RedisServer.start();
        RedisIndexClient ac = client(server);
        RedisIndexClient bc = client(server)) {
      FleetConfig.Builder cfg =
          FleetConfig.builder()
              .fleet("outage")
              .leaseTtl(Duration.ofMillis(1500))
              .speculativeStride(1)
              .viewTimeout(Duration.ofMillis(50))
              .viewBackoff(Duration.ofMillis(200));
      FleetState a = ac.fleet(cfg.replicaId("a").build());
      FleetState b = bc.fleet(cfg.replicaId("b").meterRegistry(reg).build());
      long[] k = FleetStateContract.keys(9, 4);
      a.requestStarted("e1", 10);
      a.requestStarted("e1", 10);
      a.speculate("e2", k, 4);
      long[] h = FleetStateContract.keys(10, 4);
      a.remember("e2", h, 4); // the routing memory and cold routing, shared the same way
      a.coldRouted("e2");
      assertThat(a.flush(Duration.ofSeconds(30))).isTrue();
      b.requestStarted("e2", 5);
      b.remember("e1", h, 3);
      b.coldRouted("e1");
      Await.until(
          "b to see a",
          () -> {
            FleetView v = b.view(EPS, k, 4, h, 4);
            return v.source() == FleetView.Source.FLEET
                && v.inFlightRequests(0) == 2
                && v.speculativeBlocks(1) == 4
                && v.rememberedBlocks(0) == 3
                && v.rememberedBlocks(1) == 4
                && v.lastColdRouted(1) != 0
                && v.lastColdRouted(0) > v.lastColdRouted(1); // b's after a's
          });

      // frozen: commands hang; views give up at their deadline and answer locally
      server.pause();
      long worst = 0;
      for (int i = 0; i < 5; i++) {
        long t0 = System.nanoTime();
        FleetView v = b.view(EPS, k, 4);
        worst = Math.max(worst, System.nanoTime() - t0);
        assertThat(v.source()).isEqualTo(FleetView.Source.LOCAL);
        assertThat(describe(v)).isEqualTo("e1=0/0/0 e2=1/5/0"); // b's own only
        FleetView m = b.view(EPS, k, 4, h, 4); // b's own memory and cold routing only
        assertThat(m.source()).isEqualTo(FleetView.Source.LOCAL);
        assertThat(m.rememberedBlocks(0)).isEqualTo(3);
        assertThat(m.rememberedBlocks(1)).isZero();
        assertThat(m.lastColdRouted(0)).isPositive();
        assertThat(m.lastColdRouted(1)).isZero();
      }
      b.requestStarted("e2", 5); // writes never block the caller
      b.requestFinished("e2", 5);
      assertThat(reg.get("kvroute.fleet.view.fallbacks").tag("reason", "timeout").counter().count())
          .isPositive();
      System.out.printf(
          "RedisFleetTest: slowest view while Redis was frozen: %.1f ms (deadline 50 ms)%n",
          worst / 1e6);
      server.resume();
      Await.until("views to come back", () -> b.view(EPS, k, 4).source() == FleetView.Source.FLEET);

      // stopped (connections refused) and restarted empty
      server.stop();
      a.requestStarted("e1", 10); // a: 3 in flight now
      Await.until("b to notice", () -> b.view(EPS, NONE, 0).source() == FleetView.Source.LOCAL);
      assertThat(describe(b.view(EPS, NONE, 0))).isEqualTo("e1=0/0/0 e2=1/5/0");
      assertThat(
              reg.get("kvroute.fleet.view.fallbacks").tag("reason", "unavailable").counter().count()
                  + reg.get("kvroute.fleet.view.fallbacks")
                      .tag("reason", "backoff")
                      .counter()
                      .count())
          .isPositive();
      server.restart();
      // every replica publishes its whole state again (the first write after the outage is full)
      Await.until(
          "b to see a's 3 again",
          () -> describe(b.view(EPS, NONE, 0)).equals("e1=3/30/0 e2=1/5/0"));
      Await.until(
          "a to see b again", () -> describe(a.view(EPS, NONE, 0)).equals("e1=3/30/0 e2=1/5/0"));
      assertThat(reg.get("kvroute.fleet.views").tag("source", "local").counter().count())
          .isPositive();
      assertThat(reg.get("kvroute.fleet.write.latency").timer().count()).isPositive();
      // as of b's last write (its heartbeats go on): both replicas live again
      Await.until(
          "b's writes to count two live replicas",
          () -> reg.get("kvroute.fleet.replicas").gauge().value() == 2);
    }
  }

  private static String describe(FleetView v) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < v.size(); i++) {
      sb.append(i == 0 ? "" : " ")
          .append(v.endpointId(i))
          .append('=')
          .append(v.inFlightRequests(i))
          .append('/')
          .append(v.inFlightTokens(i))
          .append('/')
          .append(v.speculativeBlocks(i));
    }
    return sb.toString();
  }

  @Test
  void viewAsyncCompletesWithTheLocalViewWhenTheServerIsFrozen() throws Exception {
    try (RedisServer server = RedisServer.start();
        RedisIndexClient ac = client(server)) {
      FleetState a =
          ac.fleet(
              FleetConfig.builder()
                  .fleet("async")
                  .replicaId("a")
                  .viewTimeout(Duration.ofMillis(50))
                  .build());
      a.requestStarted("e1", 7);
      Await.until(
          "the async view to answer from Redis",
          () -> a.viewAsync(EPS, NONE, 0).join().source() == FleetView.Source.FLEET);
      server.pause();
      try {
        FleetView v = a.viewAsync(EPS, NONE, 0).get(60, TimeUnit.SECONDS);
        assertThat(v.source()).isEqualTo(FleetView.Source.LOCAL);
        assertThat(describe(v)).isEqualTo("e1=1/7/0 e2=0/0/0");
      } finally {
        server.resume();
      }
    }
  }
}
