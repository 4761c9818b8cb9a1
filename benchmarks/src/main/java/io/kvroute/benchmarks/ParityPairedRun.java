package io.kvroute.benchmarks;

import io.kvroute.benchmarks.router.ParityCostBenchmark;
import java.util.Arrays;
import java.util.Locale;

/**
 * The parity check's cost measured in pairs, for machines too loaded for separate JMH forks to
 * compare within 5%: the {@link ParityCostBenchmark} and {@link ParityIngestBenchmark} states with
 * the check off and on live in one JVM, and short batches of each run alternately (off, on, on,
 * off, ...), so a change of load hits both sides of each pair. Prints the median over pairs of the
 * on/off time ratio, with its interquartile range. Complements the floor table's {@code parity:}
 * rows (same benchmark code, same data).
 *
 * <p>Usage: {@code java -cp benchmarks/target/benchmarks.jar io.kvroute.benchmarks.ParityPairedRun
 * [--pairs N] [--warmup-seconds S]}.
 */
public final class ParityPairedRun {
  private ParityPairedRun() {}

  /** One side of a pair: a batch of operations. */
  private interface Batch {
    void run(int n) throws Exception;
  }

  /**
   * Runs the pairs.
   *
   * @param args {@code --pairs N} (default 60), {@code --warmup-seconds S} (default 20)
   * @throws Exception when a benchmark fails
   */
  public static void main(String[] args) throws Exception {
    int pairs = 60;
    int warmupSeconds = 20;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--pairs" -> pairs = Integer.parseInt(args[++i]);
        case "--warmup-seconds" -> warmupSeconds = Integer.parseInt(args[++i]);
        default ->
            throw new IllegalArgumentException(
                "unknown option " + args[i] + "; known: --pairs --warmup-seconds");
      }
    }
    System.out.printf(
        Locale.ROOT,
        "machine: %s CPUs; JDK %s; load average %s%n",
        Runtime.getRuntime().availableProcessors(),
        System.getProperty("java.runtime.version"),
        java.nio.file.Files.readString(java.nio.file.Path.of("/proc/loadavg")).trim());
    ParityCostBenchmark routeOff = route("off");
    ParityCostBenchmark routeOn = route("default");
    ParityCostBenchmark routeEvery = route("every");
    ParityIngestBenchmark ingestOff = ingest("off");
    ParityIngestBenchmark ingestIdle = ingest("idle");
    ParityIngestBenchmark ingestWatched = ingest("watched");
    try {
      compare(
          "decide, default sampling vs off",
          n -> decide(routeOff, n),
          n -> decide(routeOn, n),
          500,
          pairs,
          warmupSeconds);
      compare(
          "route, default sampling vs off",
          n -> loop(routeOff, n),
          n -> loop(routeOn, n),
          500,
          pairs,
          warmupSeconds);
      compare(
          "route, every request vs off",
          n -> loop(routeOff, n),
          n -> loop(routeEvery, n),
          500,
          pairs,
          warmupSeconds);
      compare(
          "ingest, tap idle vs off",
          n -> loop(ingestOff, n),
          n -> loop(ingestIdle, n),
          100_000,
          pairs,
          warmupSeconds);
      compare(
          "ingest, every pod watched vs off",
          n -> loop(ingestOff, n),
          n -> loop(ingestWatched, n),
          100_000,
          pairs,
          warmupSeconds);
    } finally {
      routeOff.tearDown();
      routeOn.tearDown();
      routeEvery.tearDown();
      ingestOff.tearDown();
      ingestIdle.tearDown();
      ingestWatched.tearDown();
    }
    System.out.printf(
        Locale.ROOT,
        "load average at the end %s%n",
        java.nio.file.Files.readString(java.nio.file.Path.of("/proc/loadavg")).trim());
  }

  private static ParityCostBenchmark route(String sampling) {
    ParityCostBenchmark b = new ParityCostBenchmark();
    b.sampling = sampling;
    b.setUp();
    return b;
  }

  private static ParityIngestBenchmark ingest(String parity) {
    ParityIngestBenchmark b = new ParityIngestBenchmark();
    b.parity = parity;
    b.setUp();
    return b;
  }

  private static void loop(ParityCostBenchmark b, int n) throws Exception {
    for (int i = 0; i < n; i++) {
      b.route();
    }
  }

  private static void decide(ParityCostBenchmark b, int n) {
    for (int i = 0; i < n; i++) {
      b.decide();
    }
  }

  private static void loop(ParityIngestBenchmark b, int n) {
    for (int i = 0; i < n; i++) {
      b.ingest();
    }
  }

  private static void compare(
      String label, Batch off, Batch on, int batch, int pairs, int warmupSeconds) throws Exception {
    long warmEnd = System.nanoTime() + warmupSeconds * 1_000_000_000L;
    while (System.nanoTime() < warmEnd) {
      off.run(batch);
      on.run(batch);
    }
    double[] ratios = new double[pairs];
    double offTotal = 0;
    double onTotal = 0;
    for (int p = 0; p < pairs; p++) {
      long a;
      long b;
      if ((p & 1) == 0) {
        a = time(off, batch);
        b = time(on, batch);
      } else {
        b = time(on, batch);
        a = time(off, batch);
      }
      ratios[p] = (double) b / a;
      offTotal += a;
      onTotal += b;
    }
    Arrays.sort(ratios);
    System.out.printf(
        Locale.ROOT,
        "%-36s | off %9.3f us/op | on %9.3f us/op | ratio median %.3f (IQR %.3f-%.3f, %d pairs"
            + " of %d ops)%n",
        label,
        offTotal / pairs / batch / 1e3,
        onTotal / pairs / batch / 1e3,
        ratios[pairs / 2],
        ratios[pairs / 4],
        ratios[3 * pairs / 4],
        pairs,
        batch);
  }

  private static long time(Batch b, int n) throws Exception {
    long t0 = System.nanoTime();
    b.run(n);
    return System.nanoTime() - t0;
  }
}
