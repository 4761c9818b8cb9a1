package io.kvroute.benchmarks.service;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.service.KvIndexService;
import io.kvroute.service.ServiceConfig;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;

/**
 * Load test of {@code POST /api/v1/score} ({@code kvroute serve}): 2,048-token prompts as {@code
 * token_ids}, scored over 100 pods (no {@code candidate_pods}: every pod is scored and listed).
 *
 * <p>Phase 1 (closed loop, keep-alive connections): throughput, and the server's CPU time per
 * request (its dispatcher and one handler thread, from {@link ThreadMXBean}), which gives the
 * requests per second one core sustains. Phase 2 (open loop at half the one-core rate, latency
 * measured from each request's scheduled send time, so stalls are not hidden): p50/p99/p99.9.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.kvroute.benchmarks.service.ScoreLoadRun \
 *     [seconds=10] [connections=4] [http.threads=1] [open-loop rate=half the one-core rate]
 * java -cp benchmarks/target/benchmarks.jar io.kvroute.benchmarks.service.ScoreLoadRun \
 *     pinned [seconds=10] [connections=4]
 * </pre>
 *
 * The first form shares one JVM and the machine's cores between client and server, and reads the
 * server's CPU per request from its threads. The {@code pinned} form (Linux, {@code taskset}) is
 * the honest one-core figure: the server runs in its own JVM pinned to core 0 with one event loop,
 * the load runs pinned to core 1, and the throughput is what core 0 sustains with everything the
 * server process does (GC, JIT, kernel time) counted.
 */
public final class ScoreLoadRun {
  static final int PODS = 100;
  static final int PROMPT_TOKENS = 2048;
  static final int BLOCK = 16;
  static final int PROMPTS = 64;

  private ScoreLoadRun() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("server")) {
      server();
      return;
    }
    if (args.length > 0 && args[0].equals("pinned")) {
      pinned(
          args.length > 1 ? Integer.parseInt(args[1]) : 10,
          args.length > 2 ? Integer.parseInt(args[2]) : 4);
      return;
    }
    int seconds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
    int connections = args.length > 1 ? Integer.parseInt(args[1]) : 4;
    int threads = args.length > 2 ? Integer.parseInt(args[2]) : 1;
    System.setProperty("sun.net.httpserver.nodelay", "true");
    try (KvIndexService service =
        KvIndexService.builder(config(threads)).withoutEventFeed().start()) {
      int[][] prompts = fill(service.index());
      byte[][] requests = new byte[PROMPTS][];
      for (int i = 0; i < PROMPTS; i++) {
        requests[i] = httpRequest(prompts[i]);
      }
      System.out.printf(
          "cores=%d http.threads=%d pods=%d prompt=%d tokens (%d blocks) request=%d bytes%n",
          Runtime.getRuntime().availableProcessors(),
          threads,
          PODS,
          PROMPT_TOKENS,
          PROMPT_TOKENS / BLOCK,
          requests[0].length);
      int port = service.port();
      closedLoop(port, requests, connections, Math.max(2, seconds / 3), false); // warm-up
      double[] r = closedLoop(port, requests, connections, seconds, true);
      double oneCore = r[1];
      System.out.printf(
          "closed loop: %.0f req/s wall (%d connections, shared cores); server CPU %.1f us/req"
              + " -> %.0f req/s on one core%n",
          r[0], connections, 1e6 / oneCore, oneCore);
      byte[][] health = {
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".getBytes(StandardCharsets.US_ASCII)
      };
      double[] h = closedLoop(port, health, connections, Math.max(2, seconds / 2), true);
      System.out.printf(
          "baseline GET /healthz: server CPU %.1f us/req (the HTTP layer's own cost)%n",
          1e6 / h[1]);
      double rate = args.length > 3 ? Double.parseDouble(args[3]) : oneCore / 2;
      openLoop(port, requests, connections, seconds, rate);
    }
  }

  private static ServiceConfig config(int threads) {
    ServiceConfig.Builder cb =
        ServiceConfig.builder().model("bench-model").port(0).threads(threads).maxTokens(8192);
    for (int p = 0; p < PODS; p++) {
      cb.pod(ServiceConfig.PodSpec.of("vllm-" + p, "tcp://127.0.0.1:" + (20000 + p)));
    }
    return cb.build();
  }

  /** The pinned run's server: prints its port, answers "cpu" with its process CPU nanos. */
  private static void server() throws Exception {
    try (KvIndexService service = KvIndexService.builder(config(1)).withoutEventFeed().start()) {
      fill(service.index());
      System.out.println("PORT " + service.port());
      System.out.flush();
      java.io.BufferedReader in =
          new java.io.BufferedReader(
              new java.io.InputStreamReader(System.in, StandardCharsets.US_ASCII));
      String line;
      while ((line = in.readLine()) != null) {
        if (line.equals("cpu")) {
          System.out.println("CPU " + processCpuNanos());
          System.out.flush();
        }
      }
    }
  }

  private static long processCpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  private static void pinned(int seconds, int connections) throws Exception {
    String javaCmd = ProcessHandle.current().info().command().orElse("java");
    int cores = Runtime.getRuntime().availableProcessors();
    List<String> command = new ArrayList<>(List.of("taskset", "-c", "0", javaCmd));
    String extra = System.getProperty("server.jvm.args", "").trim();
    if (!extra.isEmpty()) {
      command.addAll(Arrays.asList(extra.split("\\s+")));
    }
    command.addAll(
        List.of(
            "-cp", System.getProperty("java.class.path"), ScoreLoadRun.class.getName(), "server"));
    Process server =
        new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    try {
      java.io.BufferedReader out =
          new java.io.BufferedReader(
              new java.io.InputStreamReader(server.getInputStream(), StandardCharsets.US_ASCII));
      java.io.PrintStream cmd = new java.io.PrintStream(server.getOutputStream(), true, "US-ASCII");
      String first = out.readLine();
      if (first == null || !first.startsWith("PORT ")) {
        throw new IllegalStateException("server did not start: " + first);
      }
      int port = Integer.parseInt(first.substring(5).trim());
      int rc =
          new ProcessBuilder(
                  "taskset", "-a", "-p", "-c", "1", Long.toString(ProcessHandle.current().pid()))
              .redirectOutput(ProcessBuilder.Redirect.DISCARD)
              .start()
              .waitFor();
      if (rc != 0) {
        throw new IllegalStateException("taskset failed (" + rc + ")");
      }
      int[][] prompts = fill(BlockIndex.inMemory(io.kvroute.kvindex.IndexConfig.builder().build()));
      byte[][] requests = new byte[PROMPTS][];
      for (int i = 0; i < PROMPTS; i++) {
        requests[i] = httpRequest(prompts[i]);
      }
      System.out.printf(
          "pinned: server JVM on core 0 (1 event loop), load on core 1; cores=%d pods=%d"
              + " prompt=%d tokens request=%d bytes%n",
          cores, PODS, PROMPT_TOKENS, requests[0].length);
      java.util.function.LongSupplier cpu =
          () -> {
            cmd.println("cpu");
            try {
              String l = out.readLine();
              return Long.parseLong(l.substring(4).trim());
            } catch (IOException e) {
              throw new java.io.UncheckedIOException(e);
            }
          };
      closedLoop(port, requests, connections, Math.max(5, seconds / 2), null); // warm-up
      double[] r = closedLoop(port, requests, connections, seconds, cpu);
      System.out.printf(
          "closed loop: %.0f req/s on one server core (server process busy %.0f%% of the core,"
              + " %.1f us CPU per request)%n",
          r[0], r[2] * 100, r[3] / 1e3);
      byte[][] health = {
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".getBytes(StandardCharsets.US_ASCII)
      };
      double[] h = closedLoop(port, health, connections, Math.max(2, seconds / 2), cpu);
      System.out.printf(
          "baseline GET /healthz: %.0f req/s, %.1f us CPU per request%n", h[0], h[3] / 1e3);
      openLoop(port, requests, connections, seconds, r[0] / 2);
    } finally {
      server.getOutputStream().close();
      if (!server.waitFor(10, java.util.concurrent.TimeUnit.SECONDS)) {
        server.destroyForcibly();
      }
    }
  }

  /** Each pod holds a random prefix of a random subset of the prompts. */
  public static int[][] fill(BlockIndex index) {
    SplittableRandom rnd = new SplittableRandom(42);
    int[][] prompts = new int[PROMPTS][PROMPT_TOKENS];
    for (int[] p : prompts) {
      for (int i = 0; i < p.length; i++) {
        p[i] = rnd.nextInt(150_000);
      }
    }
    long engine = 1;
    for (int pod = 0; pod < PODS; pod++) {
      for (int i = 0; i < PROMPTS; i++) {
        if (rnd.nextInt(4) != 0) {
          continue;
        }
        int blocks = 1 + rnd.nextInt(PROMPT_TOKENS / BLOCK);
        long[] hashes = new long[blocks];
        for (int b = 0; b < blocks; b++) {
          hashes[b] = engine++;
        }
        index.blockStored(
            "vllm-" + pod,
            hashes,
            false,
            0,
            Arrays.copyOf(prompts[i], blocks * BLOCK),
            BLOCK,
            null,
            "GPU",
            0);
      }
    }
    return prompts;
  }

  public static byte[] httpRequest(int[] tokens) {
    StringBuilder body = new StringBuilder(tokens.length * 7 + 32).append("{\"token_ids\":[");
    for (int i = 0; i < tokens.length; i++) {
      if (i > 0) {
        body.append(',');
      }
      body.append(tokens[i]);
    }
    body.append("],\"model\":\"bench-model\"}");
    byte[] b = body.toString().getBytes(StandardCharsets.US_ASCII);
    String head =
        "POST /api/v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + "Content-Length: "
            + b.length
            + "\r\n\r\n";
    byte[] h = head.getBytes(StandardCharsets.US_ASCII);
    byte[] out = Arrays.copyOf(h, h.length + b.length);
    System.arraycopy(b, 0, out, h.length, b.length);
    return out;
  }

  /** One keep-alive HTTP/1.1 connection; sends a request and reads the whole answer. */
  static final class Conn implements AutoCloseable {
    final Socket socket;
    final OutputStream out;
    final InputStream in;
    final byte[] buf = new byte[64 << 10];

    Conn(int port) throws IOException {
      socket = new Socket("127.0.0.1", port);
      socket.setTcpNoDelay(true);
      out = socket.getOutputStream();
      in = socket.getInputStream();
    }

    void exchange(byte[] request) throws IOException {
      out.write(request);
      out.flush();
      int n = 0;
      int headerEnd = -1;
      int contentLength = -1;
      while (true) {
        int r = in.read(buf, n, buf.length - n);
        if (r < 0) {
          throw new IOException("connection closed");
        }
        n += r;
        if (headerEnd < 0) {
          for (int i = 3; i < n; i++) {
            if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n') {
              headerEnd = i + 1;
              String head = new String(buf, 0, headerEnd, StandardCharsets.US_ASCII);
              if (!head.startsWith("HTTP/1.1 200")) {
                throw new IOException("unexpected answer: " + head.lines().findFirst().get());
              }
              int k = head.toLowerCase(java.util.Locale.ROOT).indexOf("content-length:");
              int e = head.indexOf('\r', k);
              contentLength = Integer.parseInt(head.substring(k + 15, e).trim());
              break;
            }
          }
        }
        if (headerEnd >= 0 && n >= headerEnd + contentLength) {
          return;
        }
        if (n == buf.length) {
          throw new IOException("answer larger than the buffer");
        }
      }
    }

    @Override
    public void close() throws IOException {
      socket.close();
    }
  }

  static long serverCpuNanos() {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    long sum = 0;
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      String n = t.getName();
      if (n.startsWith("kvservice-http-")) {
        long c = mx.getThreadCpuTime(t.getId());
        if (c > 0) {
          sum += c;
        }
      }
    }
    return sum;
  }

  /** Returns {wall req/s, one-core req/s}. */
  static double[] closedLoop(
      int port, byte[][] requests, int connections, int seconds, boolean report) throws Exception {
    return closedLoop(port, requests, connections, seconds, ScoreLoadRun::serverCpuNanos);
  }

  /**
   * Returns {wall req/s, one-core req/s, CPU share, CPU nanos per request}; {@code cpu} reads the
   * server's CPU nanos ({@code null} for none).
   */
  static double[] closedLoop(
      int port,
      byte[][] requests,
      int connections,
      int seconds,
      java.util.function.LongSupplier cpu)
      throws Exception {
    AtomicBoolean stop = new AtomicBoolean();
    LongAdder done = new LongAdder();
    CountDownLatch ready = new CountDownLatch(connections);
    List<Thread> threads =
        startConnections(
            port,
            connections,
            "load",
            (conn, id) -> {
              ready.countDown();
              int i = id;
              while (!stop.get()) {
                conn.exchange(requests[i++ % requests.length]);
                done.increment();
              }
            });
    ready.await();
    long cpu0 = cpu == null ? 0 : cpu.getAsLong();
    long n0 = done.sum();
    long t0 = System.nanoTime();
    Thread.sleep(seconds * 1000L);
    long n1 = done.sum();
    long t1 = System.nanoTime();
    long cpu1 = cpu == null ? 0 : cpu.getAsLong();
    stop.set(true);
    for (Thread t : threads) {
      t.join();
    }
    long n = n1 - n0;
    double wall = n * 1e9 / (t1 - t0);
    double perReq = (double) (cpu1 - cpu0) / n;
    return new double[] {wall, 1e9 / perReq, (cpu1 - cpu0) / (double) (t1 - t0), perReq};
  }

  /** What one load thread does with its own connection ({@code id}: its index). */
  interface OnConnection {
    void run(Conn conn, int id) throws IOException;
  }

  /** Starts {@code connections} threads {@code name-<id>}, each running {@code loop} on its own. */
  static List<Thread> startConnections(int port, int connections, String name, OnConnection loop) {
    List<Thread> threads = new ArrayList<>();
    for (int c = 0; c < connections; c++) {
      int id = c;
      Thread t =
          new Thread(
              () -> {
                try (Conn conn = new Conn(port)) {
                  loop.run(conn, id);
                } catch (IOException e) {
                  throw new IllegalStateException(e);
                }
              },
              name + "-" + c);
      threads.add(t);
      t.start();
    }
    return threads;
  }

  static void openLoop(int port, byte[][] requests, int connections, int seconds, double rate)
      throws Exception {
    double perConn = rate / connections;
    long interval = (long) (1e9 / perConn);
    int perThread = (int) (perConn * seconds);
    long[][] lat = new long[connections][perThread];
    long start = System.nanoTime() + 50_000_000L;
    List<Thread> threads =
        startConnections(
            port,
            connections,
            "open",
            (conn, id) -> {
              long first = start + id * interval / connections;
              for (int i = 0; i < perThread; i++) {
                long due = first + i * interval;
                long now;
                // Park (never spin: the client must not take the server's core); a late
                // wake-up counts against the measured latency, so it is never flattering.
                while ((now = System.nanoTime()) < due) {
                  java.util.concurrent.locks.LockSupport.parkNanos(due - now);
                }
                conn.exchange(requests[(id + i) % requests.length]);
                lat[id][i] = System.nanoTime() - due;
              }
            });
    for (Thread t : threads) {
      t.join();
    }
    long[] all = new long[connections * perThread];
    for (int c = 0; c < connections; c++) {
      System.arraycopy(lat[c], 0, all, c * perThread, perThread);
    }
    Arrays.sort(all);
    System.out.printf(
        "open loop at %.0f req/s (%d connections, %d requests): p50 %.3f ms, p99 %.3f ms,"
            + " p99.9 %.3f ms, max %.3f ms%n",
        rate,
        connections,
        all.length,
        all[all.length / 2] / 1e6,
        all[(int) (all.length * 0.99)] / 1e6,
        all[(int) (all.length * 0.999)] / 1e6,
        all[all.length - 1] / 1e6);
  }
}
