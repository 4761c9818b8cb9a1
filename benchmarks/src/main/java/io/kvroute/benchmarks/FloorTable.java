package io.kvroute.benchmarks;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.runner.options.VerboseMode;

/**
 * Runs each hot kvroute benchmark interleaved with its floor (the same data, measured in the same
 * round on the same machine) and prints both, the ratio, the machine and the load average. Absolute
 * times on shared virtual machines do not travel; the ratio to a floor does.
 *
 * <p>Rounds: every round runs every benchmark of every row once (each in its own JMH fork, in row
 * order: the kvroute benchmark, then its floors), so a load change hits both sides of a ratio. The
 * table reports, per row, the median over rounds of each side and the median of the per-round
 * ratios. Times are per block for ingestion (JMH throughput, inverted) and the p50 of JMH's sample
 * mode for lookups and {@code pick}.
 *
 * <p>Usage (see {@code benchmarks/run.sh}): {@code java -cp benchmarks.jar
 * io.kvroute.benchmarks.FloorTable [--rounds N] [--warmup N] [--iterations N] [--time S] [--only
 * REGEX]}.
 */
public final class FloorTable {
  private FloorTable() {}

  /** One JMH benchmark with one parameter setting. */
  private record Bench(String method, String param, String value, boolean throughput) {
    String key() {
      return method + (param == null ? "" : "[" + param + "=" + value + "]");
    }
  }

  /** A kvroute benchmark, the floors whose sum it is compared with, and its goals. */
  private record Row(
      String label, Bench bench, List<Bench> floor, double maxRatio, double maxMicros) {}

  private static Bench thrpt(String method, String param, String value) {
    return new Bench(method, param, value, true);
  }

  private static Bench sample(String method, String param, String value) {
    return new Bench(method, param, value, false);
  }

  private static List<Row> rows() {
    List<Row> rows = new ArrayList<>();
    for (String schema : List.of("A5", "M2")) {
      Bench ingest = thrpt("EventIngestBenchmark.decodeAndApply", "schema", schema);
      rows.add(
          new Row(
              "ingest " + schema + " vs msgpack-java decode",
              ingest,
              List.of(thrpt("EventIngestBenchmark.floorMsgpackJava", "schema", schema)),
              1.5,
              1e9 / 3e6 / 1e3));
      rows.add(
          new Row(
              "ingest " + schema + " vs byte walk",
              ingest,
              List.of(thrpt("EventIngestBenchmark.floorByteWalk", "schema", schema)),
              Double.NaN,
              Double.NaN));
    }
    Bench keys = sample("IndexLookupBenchmark.requestKeys", "pods", "100");
    for (String pods : List.of("100", "1000")) {
      Bench scan = sample("IndexLookupBenchmark.floorFlatScan", "pods", pods);
      rows.add(
          new Row(
              "lookupOnly " + pods + " pods vs flat scan",
              sample("IndexLookupBenchmark.lookupOnly", "pods", pods),
              List.of(scan),
              1.5,
              Double.NaN));
      rows.add(
          new Row(
              "lookup+keys " + pods + " pods vs keys+flat scan",
              sample("IndexLookupBenchmark.lookup", "pods", pods),
              List.of(keys, scan),
              Double.NaN,
              pods.equals("100") ? 20 : 60));
    }
    rows.add(
        new Row(
            "hybrid layer, plain pods vs wrapped index",
            sample("HybridLookupBenchmark.plainThroughLayer", "pods", "100"),
            List.of(sample("HybridLookupBenchmark.floorPlainIndex", "pods", "100")),
            1.05,
            Double.NaN));
    rows.add(
        new Row(
            "hybrid rule, gpt-oss pods vs group-0 lookup",
            sample("HybridLookupBenchmark.gptOssRule", "pods", "100"),
            List.of(sample("HybridLookupBenchmark.floorGptOssGroup0", "pods", "100")),
            Double.NaN,
            Double.NaN));
    rows.add(
        new Row(
            "pick 8192 tok x 100 ep vs keys+lookup",
            sample("scoring.SchedulerPickBenchmark.pick", null, null),
            List.of(
                sample("scoring.SchedulerPickBenchmark.floorRequestKeys", null, null),
                sample("scoring.SchedulerPickBenchmark.floorLookup", null, null)),
            Double.NaN,
            50));
    // the KV-cache parity check (issue 29): the same work with the check off is the floor
    Bench routeOff = sample("router.ParityCostBenchmark.route", "sampling", "off");
    rows.add(
        new Row(
            "parity: route, default sampling vs off",
            sample("router.ParityCostBenchmark.route", "sampling", "default"),
            List.of(routeOff),
            1.05,
            Double.NaN));
    rows.add(
        new Row(
            "parity: route, every request vs off",
            sample("router.ParityCostBenchmark.route", "sampling", "every"),
            List.of(routeOff),
            Double.NaN,
            Double.NaN));
    Bench decideOff = sample("router.ParityCostBenchmark.decide", "sampling", "off");
    rows.add(
        new Row(
            "parity: decide, default sampling vs off",
            sample("router.ParityCostBenchmark.decide", "sampling", "default"),
            List.of(decideOff),
            1.05,
            Double.NaN));
    Bench ingestOff = thrpt("ParityIngestBenchmark.ingest", "parity", "off");
    rows.add(
        new Row(
            "parity: ingest, tap idle vs off",
            thrpt("ParityIngestBenchmark.ingest", "parity", "idle"),
            List.of(ingestOff),
            1.05,
            Double.NaN));
    rows.add(
        new Row(
            "parity: ingest, every pod watched vs off",
            thrpt("ParityIngestBenchmark.ingest", "parity", "watched"),
            List.of(ingestOff),
            1.05,
            Double.NaN));
    return rows;
  }

  /**
   * Runs the table.
   *
   * @param args options (see the class comment)
   * @throws RunnerException if JMH fails
   */
  public static void main(String[] args) throws RunnerException {
    int rounds = 3;
    int warmup = 3;
    int iterations = 4;
    int time = 2;
    Pattern only = null;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--rounds" -> rounds = Integer.parseInt(args[++i]);
        case "--warmup" -> warmup = Integer.parseInt(args[++i]);
        case "--iterations" -> iterations = Integer.parseInt(args[++i]);
        case "--time" -> time = Integer.parseInt(args[++i]);
        case "--only" -> only = Pattern.compile(args[++i]);
        default ->
            throw new IllegalArgumentException(
                "unknown option "
                    + args[i]
                    + "; known: --rounds --warmup --iterations --time --only");
      }
    }
    List<Row> rows = new ArrayList<>();
    for (Row r : rows()) {
      if (only == null || only.matcher(r.label()).find()) {
        rows.add(r);
      }
    }
    System.out.printf(
        "machine: %s, %d CPUs; JDK %s (%s)%n",
        Machine.cpuModel(),
        Runtime.getRuntime().availableProcessors(),
        System.getProperty("java.runtime.version"),
        System.getProperty("java.vm.name"));
    System.out.printf(
        "settings: %d rounds; per run 1 fork, %d x %ds warmup, %d x %ds measurement%n",
        rounds, warmup, time, iterations, time);
    List<Map<String, Double>> results = new ArrayList<>();
    List<String> loads = new ArrayList<>();
    for (int round = 1; round <= rounds; round++) {
      String load = Machine.loadAverages();
      loads.add(load);
      System.out.printf("round %d/%d, load average %s%n", round, rounds, load);
      Map<String, Double> res = new LinkedHashMap<>();
      for (Row r : rows) {
        List<Bench> all = new ArrayList<>();
        all.add(r.bench());
        all.addAll(r.floor());
        for (Bench b : all) {
          if (!res.containsKey(b.key())) {
            double v = run(b, warmup, iterations, time);
            res.put(b.key(), v);
            System.out.printf(Locale.ROOT, "  %-62s %10.3f %s%n", b.key(), display(b, v), unit(b));
          }
        }
      }
      results.add(res);
    }
    loads.add(Machine.loadAverages());
    System.out.println();
    System.out.println("load average at the start of each round and at the end: " + loads);
    System.out.printf(
        Locale.ROOT,
        "%-40s | %14s | %14s | %7s | %s%n",
        "benchmark",
        "kvroute (med)",
        "floor (med)",
        "ratio",
        "goal");
    for (Row r : rows) {
      double[] bench = new double[rounds];
      double[] floor = new double[rounds];
      double[] ratio = new double[rounds];
      for (int i = 0; i < rounds; i++) {
        Map<String, Double> res = results.get(i);
        bench[i] = res.get(r.bench().key());
        for (Bench f : r.floor()) {
          floor[i] += res.get(f.key());
        }
        ratio[i] = bench[i] / floor[i];
      }
      double b = median(bench);
      double f = median(floor);
      double q = median(ratio);
      StringBuilder goal = new StringBuilder();
      if (!Double.isNaN(r.maxRatio())) {
        goal.append(
            String.format(Locale.ROOT, "ratio <= %.2f %s", r.maxRatio(), ok(q <= r.maxRatio())));
      }
      if (!Double.isNaN(r.maxMicros())) {
        if (goal.length() > 0) {
          goal.append("; ");
        }
        if (r.bench().throughput()) {
          goal.append(
              String.format(
                  Locale.ROOT,
                  ">= %.1fM blocks/s %s",
                  1.0 / r.maxMicros(),
                  ok(b <= r.maxMicros() * 1e3)));
        } else {
          goal.append(
              String.format(Locale.ROOT, "<= %.0f us %s", r.maxMicros(), ok(b <= r.maxMicros())));
        }
      }
      System.out.printf(
          Locale.ROOT,
          "%-40s | %14s | %14s | %6.2fx | %s%n",
          r.label(),
          format(r.bench(), b),
          format(r.bench(), f),
          q,
          goal);
    }
  }

  private static String ok(boolean met) {
    return met ? "(met)" : "(MISSED)";
  }

  /** Runs one benchmark; returns ns per op (throughput) or the p50 in µs (sample time). */
  private static double run(Bench b, int warmup, int iterations, int time) throws RunnerException {
    ChainedOptionsBuilder o =
        new OptionsBuilder()
            .include("\\." + Pattern.quote(b.method()) + "$")
            .forks(1)
            .warmupIterations(warmup)
            .measurementIterations(iterations)
            .warmupTime(TimeValue.seconds(time))
            .measurementTime(TimeValue.seconds(time))
            .verbosity(VerboseMode.SILENT)
            .jvmArgsAppend("-Dslf4j.internal.verbosity=ERROR")
            .shouldFailOnError(true);
    if (b.param() != null) {
      o.param(b.param(), b.value());
    }
    if (b.throughput()) {
      o.mode(Mode.Throughput).timeUnit(TimeUnit.SECONDS);
    } else {
      o.mode(Mode.SampleTime).timeUnit(TimeUnit.MICROSECONDS);
    }
    Collection<RunResult> rr = new Runner(o.build()).run();
    if (rr.size() != 1) {
      throw new IllegalStateException(b.key() + " matched " + rr.size() + " benchmarks");
    }
    RunResult r = rr.iterator().next();
    if (b.throughput()) {
      return 1e9 / r.getPrimaryResult().getScore();
    }
    return r.getPrimaryResult().getStatistics().getPercentile(50.0);
  }

  private static double display(Bench b, double v) {
    return b.throughput() ? 1e3 / v : v;
  }

  private static String unit(Bench b) {
    return b.throughput() ? "M ops/s" : "us p50";
  }

  private static String format(Bench b, double v) {
    if (b.throughput()) {
      return String.format(Locale.ROOT, "%.1f ns (%.2fM/s)", v, 1e3 / v);
    }
    return String.format(Locale.ROOT, "%.2f us", v);
  }

  private static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    int n = s.length;
    return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  }
}
