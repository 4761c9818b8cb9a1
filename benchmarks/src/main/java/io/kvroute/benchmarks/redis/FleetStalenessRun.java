package io.kvroute.benchmarks.redis;

import io.kvroute.benchmarks.Machine;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.kvindex.fleet.FleetView;
import io.kvroute.kvindex.redis.RedisIndexClient;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.distribution.ValueAtPercentile;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The staleness of the fleet state on Redis (issue 31, part 1): two gateway replicas, each with its
 * own client, on one {@code redis-server} this run starts. Replica A records a change; replica B
 * reads views in a loop until it sees it; the time from A's call to B's first view that shows it is
 * one sample (an upper bound on the staleness, by one of B's view round trips). Measured for an
 * in-flight count and for a speculative entry, while A also carries {@code --background} other
 * requests per second (started and finished) so that its writer coalesces as in production; plus
 * the latency of a view of {@code --endpoints} endpoints with a 512-key prompt, and A's own {@code
 * kvroute.fleet.write.latency} (change to acknowledgement).
 *
 * <p>Run: {@code java -cp benchmarks/target/benchmarks.jar
 * io.kvroute.benchmarks.redis.FleetStalenessRun --samples 2000 --background 2000}.
 */
public final class FleetStalenessRun {
  private FleetStalenessRun() {}

  /** Runs the measurement and prints it. */
  public static void main(String[] args) throws Exception {
    int samples = 2000;
    int background = 2000;
    int endpoints = 100;
    int stride = 8;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--samples" -> samples = Integer.parseInt(args[i + 1]);
        case "--background" -> background = Integer.parseInt(args[i + 1]);
        case "--endpoints" -> endpoints = Integer.parseInt(args[i + 1]);
        case "--stride" -> stride = Integer.parseInt(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    System.out.println("== fleet state staleness on Redis: " + Machine.describe());
    System.out.println("== load before: " + Machine.loadAverages());
    SimpleMeterRegistry regA = new SimpleMeterRegistry();
    try (RedisProcess redis = RedisProcess.start();
        RedisIndexClient ca =
            RedisIndexClient.connect(
                RedisIndexConfig.builder()
                    .url(redis.url())
                    .commandTimeout(Duration.ofSeconds(5))
                    .build());
        RedisIndexClient cb =
            RedisIndexClient.connect(
                RedisIndexConfig.builder()
                    .url(redis.url())
                    .commandTimeout(Duration.ofSeconds(5))
                    .build())) {
      FleetConfig.Builder cfg =
          FleetConfig.builder()
              .fleet("staleness")
              .speculativeStride(stride)
              .viewTimeout(Duration.ofSeconds(5));
      FleetState a = ca.fleet(cfg.replicaId("a").meterRegistry(regA).build());
      FleetState b = cb.fleet(cfg.replicaId("b").meterRegistry(null).build());
      List<String> eps = new ArrayList<>();
      for (int i = 0; i < endpoints; i++) {
        eps.add("ep-" + i);
      }
      SplittableRandom rnd = new SplittableRandom(7);
      long[] prompt = new long[512];
      for (int i = 0; i < prompt.length; i++) {
        prompt[i] = rnd.nextLong();
      }
      // background traffic on A
      int bg = background;
      Thread load =
          new Thread(
              () -> {
                long period = bg <= 0 ? 0 : 1_000_000_000L / bg;
                long next = System.nanoTime();
                int n = 0;
                while (!Thread.currentThread().isInterrupted() && bg > 0) {
                  String e = "bg-" + (n++ % 64);
                  a.requestStarted(e, 500);
                  a.requestFinished(e, 500);
                  next += period;
                  long wait = next - System.nanoTime();
                  if (wait > 0) {
                    LockSupport.parkNanos(wait);
                  }
                }
              },
              "fleet-background");
      load.setDaemon(true);
      load.start();
      List<String> one = List.of("probe");
      long[] none = new long[0];
      // warm-up
      for (int i = 0; i < 200; i++) {
        b.view(eps, prompt, prompt.length);
      }
      long[] count = new long[samples];
      long[] spec = new long[samples];
      long[] view = new long[samples];
      for (int s = 0; s < samples; s++) {
        long t0 = System.nanoTime();
        a.requestStarted("probe", 100);
        while (b.view(one, none, 0).inFlightRequests(0) != 1) {
          Thread.onSpinWait();
        }
        count[s] = System.nanoTime() - t0;
        a.requestFinished("probe", 100);
        while (b.view(one, none, 0).inFlightRequests(0) != 0) {
          Thread.onSpinWait();
        }
        long[] k = new long[32];
        for (int i = 0; i < k.length; i++) {
          k[i] = rnd.nextLong();
        }
        t0 = System.nanoTime();
        a.speculate("probe", k, k.length);
        while (b.view(one, k, k.length).speculativeBlocks(0) == 0) {
          Thread.onSpinWait();
        }
        spec[s] = System.nanoTime() - t0;
        t0 = System.nanoTime();
        FleetView v = b.view(eps, prompt, prompt.length);
        view[s] = System.nanoTime() - t0;
        if (v.source() != FleetView.Source.FLEET) {
          throw new IllegalStateException("a view fell back to local: " + v.source());
        }
      }
      load.interrupt();
      Timer wl = regA.get("kvroute.fleet.write.latency").timer();
      String wlp = "";
      for (ValueAtPercentile p : wl.takeSnapshot().percentileValues()) {
        wlp +=
            String.format(
                Locale.ROOT,
                " p%.0f %.0f us",
                p.percentile() * 100,
                p.value(TimeUnit.MICROSECONDS));
      }
      System.out.printf(
          Locale.ROOT,
          "in-flight count visible to the other replica: p50 %s, p99 %s, max %s (%d samples, A"
              + " carrying %d other requests/s)%n",
          us(count, 0.50),
          us(count, 0.99),
          us(count, 1.0),
          samples,
          background);
      System.out.printf(
          Locale.ROOT,
          "speculative entry (32 keys, stride %d) visible: p50 %s, p99 %s, max %s%n",
          stride,
          us(spec, 0.50),
          us(spec, 0.99),
          us(spec, 1.0));
      System.out.printf(
          Locale.ROOT,
          "view of %d endpoints with a 512-key prompt: p50 %s, p99 %s%n",
          endpoints,
          us(view, 0.50),
          us(view, 0.99));
      System.out.println("A's kvroute.fleet.write.latency (change to acknowledgement):" + wlp);
      System.out.println("== load after: " + Machine.loadAverages());
      System.out.printf(
          Locale.ROOT,
          "result: fleet_staleness count_p50_us=%.0f count_p99_us=%.0f spec_p50_us=%.0f"
              + " spec_p99_us=%.0f view_p50_us=%.0f view_p99_us=%.0f%n",
          pct(count, 0.50) / 1e3,
          pct(count, 0.99) / 1e3,
          pct(spec, 0.50) / 1e3,
          pct(spec, 0.99) / 1e3,
          pct(view, 0.50) / 1e3,
          pct(view, 0.99) / 1e3);
    }
    System.exit(0);
  }

  private static double pct(long[] v, double q) {
    long[] s = v.clone();
    Arrays.sort(s);
    int i = (int) Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1));
    return s[i];
  }

  private static String us(long[] v, double q) {
    double x = pct(v, q) / 1e3;
    return x >= 1000
        ? String.format(Locale.ROOT, "%.2f ms", x / 1000)
        : String.format(Locale.ROOT, "%.0f us", x);
  }
}
