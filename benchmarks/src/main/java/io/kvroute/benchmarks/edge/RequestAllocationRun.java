package io.kvroute.benchmarks.edge;

import io.kvroute.benchmarks.Machine;
import io.kvroute.benchmarks.router.RoutePathBenchmark;
import io.kvroute.edge.EdgeServer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * Bytes allocated per request on each of kvroute's request paths, counted with {@code
 * com.sun.management.ThreadMXBean#getThreadAllocatedBytes} over every thread of the JVM except the
 * harness's own (the load's connections {@code alloc-load-*}, the stub engines' event loop {@code
 * alloc-stub-*}, the launcher and {@code main}). A count of bytes does not depend on how fast the
 * machine is, only on the code and on what the JIT has compiled (escape analysis removes
 * allocations): each path runs in a fresh JVM, is warmed up, then measured over several windows
 * whose median is printed.
 *
 * <p>Paths ({@code side_by_side.sh}'s contenders and their parts, over the same static engines):
 *
 * <ul>
 *   <li>{@code edge-static}: the floor, kvroute's HTTP edge answering a static 400-byte body (the
 *       HTTP layer alone, no upstream);
 *   <li>{@code route-decode}, {@code route-pd}: {@link io.kvroute.router.KvRouter#route} in process
 *       over an in-memory transport ({@link RoutePathBenchmark}), no HTTP at all;
 *   <li>{@code gateway-decode}: {@code kvroute gateway} as {@code side_by_side.sh} starts {@code
 *       kvgw} (nixl connector, one prefill and one decode endpoint, the default scheduler: decode
 *       only once the prompt is in the approximate index; the engines' {@code /tokenize} is called
 *       per request);
 *   <li>{@code gateway-decode-fc}: the same with {@code flowControl} on (idle: the stub fleet never
 *       saturates), for what admission costs a request that is admitted at once;
 *   <li>{@code gateway-pd}: {@code kvgwpd} ({@code always-disagg-pd-decider}: prefill then decode);
 *   <li>{@code proxy-pd}: {@code kvroute proxy --connector nixl} ({@code kvproxy});
 *   <li>{@code gateway-decode-sse}, {@code proxy-pd-sse}: the same with {@code "stream":true}
 *       against the SSE engine (64 chunks and {@code [DONE]}).
 * </ul>
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.kvroute.benchmarks.edge.RequestAllocationRun \
 *     [--paths edge-static,route-decode,...] [--warmup 50000] [--requests 5000] [--windows 5] \
 *     [--connections 1] [--prompt-chars 32000] [--jvm "-XX:+UseParallelGC"]
 * java -cp benchmarks/target/benchmarks.jar io.kvroute.benchmarks.edge.RequestAllocationRun \
 *     --path gateway-decode --jfr /tmp/gw.jfr    # one path in this JVM, JFR allocation samples
 *
 * </pre>
 *
 * Without {@code --path} it runs each path in a child JVM (the same classpath, Netty's leak
 * detector off as the {@code kvroute} launcher has it) and prints two tables: bytes per request,
 * and CPU time per request (kvroute's threads; the VM's own threads, GC and JIT) with the GC pauses
 * seen while measuring ({@code --jvm} compares collectors: CPU time, unlike wall time, hardly
 * depends on the machine's load).
 */
public final class RequestAllocationRun {
  static final List<String> PATHS =
      List.of(
          "edge-static",
          "route-decode",
          "route-pd",
          "gateway-decode",
          "gateway-decode-fc",
          "gateway-pd",
          "proxy-pd",
          "gateway-decode-sse",
          "proxy-pd-sse");

  private RequestAllocationRun() {}

  public static void main(String[] args) throws Exception {
    Map<String, String> opt = options(args);
    if (opt.containsKey("path")) {
      int code = 0;
      try {
        child(opt);
      } catch (Exception | Error e) {
        e.printStackTrace();
        code = 1;
      }
      System.out.flush();
      // the gateway's and proxy's own threads are not daemons: end the JVM here
      Runtime.getRuntime().halt(code);
    }
    parent(opt);
  }

  // ------------------------------------------------------------------ parent: one JVM per path

  private static void parent(Map<String, String> opt) throws Exception {
    List<String> paths =
        Arrays.asList(opt.getOrDefault("paths", String.join(",", PATHS)).split(","));
    System.out.println("# " + Machine.describe());
    System.out.println("# load average before: " + Machine.loadAverages());
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    String cp = System.getProperty("java.class.path");
    Map<String, String[]> results = new LinkedHashMap<>();
    for (String p : paths) {
      if (!PATHS.contains(p)) {
        throw new IllegalArgumentException("unknown path " + p + "; known: " + PATHS);
      }
      List<String> cmd = new ArrayList<>();
      cmd.add(java);
      cmd.add("-Dio.netty.leakDetection.level=disabled");
      for (String j : opt.getOrDefault("jvm", "").split(" ")) {
        if (!j.isBlank()) {
          cmd.add(j);
        }
      }
      cmd.addAll(List.of("-cp", cp, RequestAllocationRun.class.getName(), "--path", p));
      for (String k : List.of("warmup", "requests", "windows", "connections", "prompt-chars")) {
        if (opt.containsKey(k)) {
          cmd.add("--" + k);
          cmd.add(opt.get(k));
        }
      }
      Process proc = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String[] result = null;
      try (BufferedReader r =
          new BufferedReader(
              new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line = r.readLine(); line != null; line = r.readLine()) {
          if (line.startsWith("RESULT ")) {
            result = line.substring(7).split(" ");
          }
          System.out.println("  [" + p + "] " + line);
        }
      }
      if (!proc.waitFor(5, TimeUnit.MINUTES) || proc.exitValue() != 0 || result == null) {
        throw new IllegalStateException("path " + p + " failed (exit " + proc.exitValue() + ")");
      }
      results.put(p, result);
    }
    System.out.println();
    System.out.println("# load average after: " + Machine.loadAverages());
    System.out.println(
        "| path | bytes/request (median) | windows (bytes/request) | × edge-static |");
    System.out.println("|---|---|---|---|");
    double floor =
        results.containsKey("edge-static") ? Double.parseDouble(results.get("edge-static")[0]) : 0;
    for (Map.Entry<String, String[]> e : results.entrySet()) {
      double median = Double.parseDouble(e.getValue()[0]);
      System.out.printf(
          Locale.ROOT,
          "| %s | %,.0f | %s | %s |%n",
          e.getKey(),
          median,
          e.getValue()[1].replace(",", " / "),
          floor > 0 ? String.format(Locale.ROOT, "%.1f", median / floor) : "");
    }
    System.out.println();
    System.out.println(
        "| path | µs CPU/request, kvroute's threads (median window) | µs CPU/request, the VM's"
            + " (GC, JIT) | GC pauses per 10k requests | pause ms: mean / max |");
    System.out.println("|---|---|---|---|---|");
    for (Map.Entry<String, String[]> e : results.entrySet()) {
      String[] r = e.getValue();
      System.out.printf(
          Locale.ROOT,
          "| %s | %s | %s | %s | %s / %s |%n",
          e.getKey(),
          r[2],
          r[3],
          r[4],
          r[5],
          r[6]);
    }
  }

  private static double median(double[] values) {
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    return sorted[sorted.length / 2];
  }

  /**
   * CPU time: kvroute's threads (every Java thread but the harness's, {@link Snapshot#harness}),
   * all Java threads, and the whole process (so the VM's own threads, GC and JIT, are the process
   * minus the Java threads). CPU time, unlike wall time, hardly depends on what else the machine
   * runs (caches aside), so it can be compared across runs on a shared machine.
   */
  static final class Cpu {
    private static final java.lang.management.ThreadMXBean THREADS =
        ManagementFactory.getThreadMXBean();
    private static final com.sun.management.OperatingSystemMXBean OS =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    long kvroute;
    long java;
    long process;

    long vm() {
      return process - java;
    }

    static Cpu take() {
      Cpu c = new Cpu();
      long[] ids = THREADS.getAllThreadIds();
      ThreadInfo[] infos = THREADS.getThreadInfo(ids);
      for (int i = 0; i < ids.length; i++) {
        long t = THREADS.getThreadCpuTime(ids[i]);
        if (infos[i] == null || t < 0) {
          continue;
        }
        c.java += t;
        if (!Snapshot.harness(infos[i].getThreadName())) {
          c.kvroute += t;
        }
      }
      c.process = OS.getProcessCpuTime();
      return c;
    }
  }

  /** GC pauses (stop-the-world phases) reported by the collectors while measuring. */
  static final class Pauses implements javax.management.NotificationListener {
    private final List<Long> millis = java.util.Collections.synchronizedList(new ArrayList<>());

    static Pauses listen() {
      Pauses p = new Pauses();
      for (java.lang.management.GarbageCollectorMXBean gc :
          ManagementFactory.getGarbageCollectorMXBeans()) {
        // ZGC and Shenandoah report their concurrent cycles too: only pauses count
        if (gc.getName().endsWith("Cycles")) {
          continue;
        }
        ((javax.management.NotificationEmitter) gc).addNotificationListener(p, null, null);
      }
      return p;
    }

    @Override
    public void handleNotification(javax.management.Notification n, Object handback) {
      if (n.getType()
          .equals(
              com.sun.management.GarbageCollectionNotificationInfo
                  .GARBAGE_COLLECTION_NOTIFICATION)) {
        com.sun.management.GarbageCollectionNotificationInfo info =
            com.sun.management.GarbageCollectionNotificationInfo.from(
                (javax.management.openmbean.CompositeData) n.getUserData());
        millis.add(info.getGcInfo().getDuration());
      }
    }

    String summary(long requests) {
      return "GC pauses: "
          + brief(requests).replace(' ', '/')
          + " (per 10k requests, mean ms, max ms)";
    }

    String brief(long requests) {
      List<Long> copy;
      synchronized (millis) {
        copy = new ArrayList<>(millis);
      }
      long max = copy.stream().mapToLong(Long::longValue).max().orElse(0);
      double mean = copy.stream().mapToLong(Long::longValue).average().orElse(0);
      return String.format(
          Locale.ROOT, "%.1f %.2f %d", copy.size() * 10_000.0 / requests, mean, max);
    }
  }

  // ------------------------------------------------------------------ child: one path

  private static void child(Map<String, String> opt) throws Exception {
    String path = opt.get("path");
    long warmup = Long.parseLong(opt.getOrDefault("warmup", "50000"));
    long requests = Long.parseLong(opt.getOrDefault("requests", "5000"));
    int windows = Integer.parseInt(opt.getOrDefault("windows", "5"));
    int connections = Integer.parseInt(opt.getOrDefault("connections", "1"));
    int promptChars = Integer.parseInt(opt.getOrDefault("prompt-chars", "0"));
    System.out.println(
        "path "
            + path
            + ": warm-up "
            + warmup
            + " requests, "
            + windows
            + " windows of "
            + requests
            + ", "
            + connections
            + " connection(s), prompt of "
            + Math.max(promptChars, StubEngines.PROMPT.length())
            + " characters; "
            + Machine.describe());
    Workload w = workload(path, connections, promptChars);
    try {
      w.run(warmup);
      jdk.jfr.Recording jfr = null;
      if (opt.containsKey("jfr")) {
        // after the warm-up: what the compiled path allocates, not the interpreter's
        jfr = new jdk.jfr.Recording();
        jfr.enable("jdk.ObjectAllocationSample").with("throttle", "5000/s").withStackTrace();
        // with -XX:-UseTLAB every allocation is one of these: exact sizes and sites
        jfr.enable("jdk.ObjectAllocationOutsideTLAB").withStackTrace();
        // and where the CPU time goes (jfr print --events jdk.ExecutionSample)
        jfr.enable("jdk.ExecutionSample").withPeriod(java.time.Duration.ofMillis(10));
        jfr.setToDisk(true);
        jfr.setDestination(Path.of(opt.get("jfr")));
        jfr.start();
      }
      double[] perRequest = new double[windows];
      double[] cpuPerRequest = new double[windows];
      double[] vmPerRequest = new double[windows];
      Map<String, Long> byGroup = new TreeMap<>();
      Pauses pauses = Pauses.listen();
      for (int i = 0; i < windows; i++) {
        Map<Long, Long> before = Snapshot.take();
        Cpu cpu0 = Cpu.take();
        w.run(requests);
        Cpu cpu1 = Cpu.take();
        Map<Long, Long> after = Snapshot.take();
        Snapshot.Delta d = Snapshot.delta(before, after);
        perRequest[i] = (double) d.measured / requests;
        cpuPerRequest[i] = (cpu1.kvroute - cpu0.kvroute) / 1e3 / requests;
        vmPerRequest[i] = (cpu1.vm() - cpu0.vm()) / 1e3 / requests;
        d.byGroup.forEach((g, b) -> byGroup.merge(g, b, Long::sum));
        System.out.printf(
            Locale.ROOT,
            "window %d: %,.0f bytes/request, %.1f µs CPU/request in kvroute's threads, %.1f µs in"
                + " the VM's (GC, JIT) (%d threads counted, %d gone)%n",
            i + 1,
            perRequest[i],
            cpuPerRequest[i],
            vmPerRequest[i],
            d.threads,
            d.gone);
      }
      System.out.println(pauses.summary(requests * windows));
      long total = requests * windows;
      StringBuilder groups = new StringBuilder("by thread group:");
      byGroup.forEach(
          (g, b) -> groups.append(String.format(Locale.ROOT, " %s %,.0f;", g, (double) b / total)));
      System.out.println(groups);
      if (jfr != null) {
        jfr.stop();
        jfr.close();
        System.out.println("allocation samples in " + opt.get("jfr"));
      }
      double[] sorted = perRequest.clone();
      Arrays.sort(sorted);
      StringBuilder all = new StringBuilder();
      for (double v : perRequest) {
        all.append(all.length() == 0 ? "" : ",").append(Math.round(v));
      }
      System.out.println(
          "RESULT "
              + Math.round(sorted[windows / 2])
              + " "
              + all
              + String.format(
                  Locale.ROOT,
                  " %.1f %.1f %s",
                  median(cpuPerRequest),
                  median(vmPerRequest),
                  pauses.brief(requests * windows)));
    } finally {
      w.close();
    }
  }

  /** What a path runs: batches of requests, then closed. */
  interface Workload {
    void run(long requests) throws Exception;

    void close() throws IOException;
  }

  private static Workload workload(String path, int connections, int promptChars) throws Exception {
    boolean sse = path.endsWith("-sse");
    StringBuilder prompt = new StringBuilder(StubEngines.PROMPT);
    while (prompt.length() < promptChars) {
      prompt.append(' ').append(StubEngines.PROMPT);
    }
    byte[] body =
        ("{\"model\":\"Qwen/Qwen3-8B\",\"prompt\":\""
                + prompt
                + "\",\"max_tokens\":16,\"temperature\":0"
                + (sse ? ",\"stream\":true" : "")
                + "}")
            .getBytes(StandardCharsets.UTF_8);
    switch (path) {
      case "edge-static":
        {
          byte[] answer = StubEngines.DECODE_BODY;
          EdgeServer server =
              EdgeServer.builder()
                  .listen("127.0.0.1", 0)
                  .threadName("kvroute-edge")
                  .route(
                      "POST", "/v1/completions", ex -> ex.respond(200, "application/json", answer))
                  .build()
                  .start();
          KeepAliveLoad load =
              new KeepAliveLoad(server.port(), "/v1/completions", body, connections);
          return new Workload() {
            @Override
            public void run(long n) throws Exception {
              load.run(n);
            }

            @Override
            public void close() throws IOException {
              load.close();
              server.close();
            }
          };
        }
      case "route-decode":
      case "route-pd":
        {
          RoutePathBenchmark b = new RoutePathBenchmark();
          b.mode = path.equals("route-pd") ? "pd" : "decode";
          b.setUp();
          // one thread of its own, counted as kvroute's (route() runs on its caller), alive
          // across windows so that its count is read at both ends of each
          java.util.concurrent.ExecutorService caller =
              java.util.concurrent.Executors.newSingleThreadExecutor(
                  r -> new Thread(r, "route-caller"));
          return new Workload() {
            @Override
            public void run(long n) throws Exception {
              caller
                  .submit(
                      () -> {
                        for (long i = 0; i < n; i++) {
                          b.route();
                        }
                        return null;
                      })
                  .get();
            }

            @Override
            public void close() {
              caller.shutdownNow();
              b.tearDown();
            }
          };
        }
      default:
        return front(path, sse, body, connections);
    }
  }

  /** {@code kvroute gateway} or {@code kvroute proxy} in process, over the stub engines. */
  private static Workload front(String path, boolean sse, byte[] body, int connections)
      throws Exception {
    StubEngines engines = new StubEngines();
    int port = freePort();
    Path dir = Files.createTempDirectory("alloc-run");
    String prefill = "http://127.0.0.1:" + engines.prefillPort();
    String decode = "http://127.0.0.1:" + engines.decodePort(sse);
    String[] args;
    if (path.startsWith("proxy-")) {
      args =
          new String[] {
            "proxy",
            "--connector",
            "nixl",
            "--host",
            "127.0.0.1",
            "--port",
            Integer.toString(port),
            "--prefill",
            prefill,
            "--decode",
            decode
          };
    } else {
      boolean pd = path.startsWith("gateway-pd");
      if (pd) {
        try (var in = RequestAllocationRun.class.getResourceAsStream("picker-pd.yaml")) {
          Files.write(dir.resolve("picker-pd.yaml"), in.readAllBytes());
        }
      }
      Path config = dir.resolve("gateway.yaml");
      Files.writeString(
          config,
          String.join(
              "\n",
              "listen: { host: 127.0.0.1, port: " + port + " }",
              "observabilityHeaders: true",
              "defaultConnector: { type: nixl }",
              pd ? "scheduler: picker-pd.yaml" : "",
              // flow control on, idle (the fleet never saturates here): what admission costs
              path.equals("gateway-decode-fc") ? "flowControl: { tenantHeader: x-tenant-id }" : "",
              "endpoints:",
              "  - { id: p0, url: \"" + prefill + "\", role: prefill }",
              "  - { id: d0, url: \"" + decode + "\", role: decode }",
              ""));
      args = new String[] {"gateway", "--config", config.toString()};
    }
    Thread launcher =
        new Thread(
            () -> {
              int code = io.kvroute.cli.Main.run(args);
              if (code != 0) {
                System.out.println("kvroute " + args[0] + " exited with " + code);
              }
            },
            "alloc-launcher");
    launcher.setDaemon(true);
    launcher.start();
    KeepAliveLoad load = awaitServing(port, body, connections, launcher);
    return new Workload() {
      @Override
      public void run(long n) throws Exception {
        load.run(n);
      }

      @Override
      public void close() throws IOException {
        load.close();
        engines.close();
      }
    };
  }

  private static KeepAliveLoad awaitServing(int port, byte[] body, int connections, Thread launcher)
      throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (true) {
      try {
        KeepAliveLoad probe = new KeepAliveLoad(port, "/v1/completions", body, 1);
        probe.run(1);
        probe.close();
        return new KeepAliveLoad(port, "/v1/completions", body, connections);
      } catch (IOException e) {
        if (!launcher.isAlive() || System.nanoTime() > deadline) {
          throw new IllegalStateException("not serving on " + port, e);
        }
        TimeUnit.MILLISECONDS.sleep(50);
      }
    }
  }

  private static int freePort() throws IOException {
    try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  private static Map<String, String> options(String[] args) {
    Map<String, String> opt = new HashMap<>();
    for (int i = 0; i < args.length; i++) {
      if (!args[i].startsWith("--") || i + 1 >= args.length) {
        throw new IllegalArgumentException("expected --name value, got " + args[i]);
      }
      opt.put(args[i].substring(2), args[++i]);
    }
    return opt;
  }

  /** Per-thread allocated bytes, and what changed between two snapshots. */
  static final class Snapshot {
    private static final com.sun.management.ThreadMXBean THREADS =
        (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    private static final Map<Long, String> NAMES = new HashMap<>();

    static Map<Long, Long> take() {
      long[] ids = THREADS.getAllThreadIds();
      long[] bytes = THREADS.getThreadAllocatedBytes(ids);
      ThreadInfo[] infos = THREADS.getThreadInfo(ids);
      Map<Long, Long> out = new HashMap<>();
      for (int i = 0; i < ids.length; i++) {
        if (infos[i] != null && bytes[i] >= 0) {
          out.put(ids[i], bytes[i]);
          NAMES.put(ids[i], infos[i].getThreadName());
        }
      }
      return out;
    }

    /** The harness's threads, left out of the count. */
    static boolean harness(String name) {
      return name.startsWith("alloc-") || name.equals("main") || name.startsWith("JFR ");
    }

    /** A thread's group in the breakdown: its name without trailing numbers. */
    static String group(String name) {
      return name.replaceAll("[-#]?[0-9]+(-[0-9]+)*$", "");
    }

    static Delta delta(Map<Long, Long> before, Map<Long, Long> after) {
      Delta d = new Delta();
      for (Map.Entry<Long, Long> e : after.entrySet()) {
        String name = NAMES.get(e.getKey());
        if (harness(name)) {
          continue;
        }
        long b = e.getValue() - before.getOrDefault(e.getKey(), 0L);
        d.measured += b;
        d.threads++;
        d.byGroup.merge(group(name), b, Long::sum);
      }
      for (Long id : before.keySet()) {
        if (!after.containsKey(id) && !harness(NAMES.get(id))) {
          d.gone++;
        }
      }
      return d;
    }

    static final class Delta {
      long measured;
      int threads;
      int gone;
      final Map<String, Long> byGroup = new TreeMap<>();
    }
  }
}
