package io.kvroute.cli;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.assembly.P2pNcclDiscovery;
import io.kvroute.cli.demo.Report;
import io.kvroute.cli.demo.Workload;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.KVConnectors;
import io.kvroute.connector.p2pnccl.P2pNcclRegistry;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.parity.HashSettings;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.router.KvEventFeed;
import io.kvroute.router.KvEventFeeds;
import io.kvroute.router.KvRouter;
import io.kvroute.router.ParityMonitor;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Filters;
import io.kvroute.scoring.Pickers;
import io.kvroute.scoring.Profile;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulingRequest;
import io.kvroute.scoring.Scorers;
import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimStats;
import io.kvroute.testkit.SimTokenizer;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.InputStream;
import java.io.PrintWriter;
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
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code kvroute demo}: a simulated prefill/decode cluster (testkit pods with real HTTP and real
 * ZMQ KV events) routed by {@link KvRouter} through a real gateway, once per routing strategy, with
 * a side-by-side report.
 */
@Command(
    name = "demo",
    mixinStandardHelpOptions = true,
    header =
        "Runs a simulated PD cluster routed by kvroute and reports how each routing strategy does.",
    description =
        "Starts simulated vLLM prefill and decode pods (real HTTP, real ZMQ KV events) behind kvroute gateway replicas, replays a multi-turn shared-prefix chat workload once per routing strategy, and compares cache hits, TTFT and throughput.")
final class DemoCommand implements Callable<Integer> {
  static final String MODEL = "demo-llm";

  @Option(names = "--prefill", defaultValue = "3", description = "Prefill pods (default 3)")
  int prefill;

  @Option(names = "--decode", defaultValue = "3", description = "Decode pods (default 3)")
  int decode;

  @Option(names = "--tenants", defaultValue = "8", description = "Distinct system prompts")
  int tenants;

  @Option(names = "--conversations", defaultValue = "32", description = "Conversations")
  int conversations;

  @Option(names = "--turns", defaultValue = "6", description = "Turns per conversation")
  int turns;

  @Option(names = "--concurrency", defaultValue = "4", description = "Concurrent clients")
  int concurrency;

  @Option(
      names = "--replicas",
      defaultValue = "2",
      description = "Gateway replicas, each with its own router; requests alternate between them")
  int replicas;

  @Option(names = "--gpu-blocks", defaultValue = "512", description = "KV blocks per pod")
  int gpuBlocks;

  @Option(names = "--block-size", defaultValue = "16", description = "Tokens per block")
  int blockSize;

  @Option(
      names = "--strategies",
      split = ",",
      defaultValue = "random,load,approximate,precise",
      description = "Strategies to compare: ${DEFAULT-VALUE}")
  List<String> strategies;

  @Option(
      names = {"--connector", "--protocol"},
      description =
          "Connector type, the pods' KV-transfer protocol with it (default: nixl if present, else"
              + " http); p2pnccl: the pods register with a P2pNccl registry, as vLLM's xPyD"
              + " instances do, and the gateways route to what registered")
  String connector;

  @Option(
      names = "--html",
      description = "Also write the report as an HTML page to this file (default: none)")
  Path html;

  @Option(names = "--seed", defaultValue = "42", description = "Workload seed")
  long seed;

  @Option(
      names = "--tokenizer",
      paramLabel = "DIR",
      description =
          "Run with a real model's tokenizer and chat template (pods and routers alike): a model"
              + " directory or a Hugging Face cache dir models--org--name (default: the simulator's"
              + " built-in tokenizer)")
  Path tokenizerDir;

  /** How routers tokenize (the pods' own tokenizer, in process). */
  private io.kvroute.scoring.Tokenizer demoTokenizer = DemoCommand::tokenize;

  /** How the simulated pods tokenize. */
  private io.kvroute.testkit.EngineTokenizer podTokenizer =
      io.kvroute.testkit.EngineTokenizer.simulated();

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    if (tokenizerDir != null) {
      try {
        io.kvroute.tokenizer.hf.HfTokenizer hf =
            io.kvroute.tokenizer.hf.HfTokenizer.builder()
                .path(tokenizerDir)
                .modelName(MODEL)
                .build();
        demoTokenizer = hf;
        podTokenizer = new HfEngineTokenizer(hf);
      } catch (io.kvroute.tokenizer.hf.TokenizerLoadException e) {
        err.println("kvroute demo: --tokenizer: " + e.getMessage());
        return 2;
      }
    }
    for (String s : strategies) {
      if (!List.of("random", "load", "approximate", "precise").contains(s)) {
        err.println(
            "kvroute demo: unknown strategy \"" + s + "\"; use random, load, approximate, precise");
        return 2;
      }
    }
    String type = connector;
    if (type == null) {
      type =
          KVConnectors.discover(getClass().getClassLoader()).types().contains("nixl")
              ? "nixl"
              : "http";
    }
    Workload workload = new Workload(tenants, conversations, turns, 220, seed);
    out.printf(
        Locale.ROOT,
        "kvroute demo: %d prefill + %d decode simulated vLLM pods (%s connector, %d-token blocks, %d"
            + " GPU blocks each)%n"
            + "workload: %d conversations x %d turns over %d shared system prompts, %d concurrent"
            + " clients, %d gateway replicas%n",
        prefill,
        decode,
        type,
        blockSize,
        gpuBlocks,
        conversations,
        turns,
        tenants,
        concurrency,
        replicas);
    out.flush();
    List<Report.Result> results = new ArrayList<>();
    for (String s : strategies) {
      results.add(run(s, type, workload, err));
    }
    Report.print(results, out);
    if (html != null) {
      Files.writeString(html, Report.html(results), StandardCharsets.UTF_8);
      out.println("HTML report: " + html.toAbsolutePath());
    }
    out.flush();
    return 0;
  }

  private Report.Result run(String strategy, String type, Workload workload, PrintWriter err)
      throws Exception {
    LatencyModel latency =
        new LatencyModel(Duration.ofMillis(2), Duration.ofNanos(200_000), Duration.ofMillis(1));
    boolean p2p = type.equals(io.kvroute.connector.p2pnccl.P2pNcclConnector.TYPE);
    // every pod that registered, whether or not its last heartbeat is fresh at a given instant
    Map<String, Endpoint> joined = new java.util.concurrent.ConcurrentHashMap<>();
    try (P2pNcclRegistry instances =
            p2p
                ? P2pNcclDiscovery.start(
                    "--protocol",
                    "tcp://127.0.0.1:*",
                    Duration.ofSeconds(5),
                    List.of(),
                    null,
                    io.kvroute.connector.ConnectorListener.NONE,
                    new P2pNcclRegistry.Listener() {
                      @Override
                      public void joined(Endpoint e) {
                        joined.put(e.id(), e);
                      }
                    })
                : null;
        SimulatedCluster cluster =
            SimulatedCluster.builder()
                .prefill(prefill)
                .decode(decode)
                .model(MODEL)
                .protocol(
                    type.equals("nixl")
                        ? KvTransferProtocol.NIXL
                        : p2p ? KvTransferProtocol.P2P_NCCL : KvTransferProtocol.NONE)
                .configure(
                    b -> {
                      b.blockSize(blockSize)
                          .gpuBlocks(gpuBlocks)
                          .latency(latency)
                          .maxRunning(4)
                          .tokenizer(podTokenizer);
                      if (instances != null) {
                        b.p2pNcclProxy(instances.endpoint()).p2pNcclPing(Duration.ofMillis(500));
                      }
                    })
                .build()
                .start()) {
      List<Endpoint> registered =
          instances == null ? null : awaitRegistered(instances, joined, err);
      List<KvRouter> routers = new ArrayList<>();
      List<OpenAiFront> gateways = new ArrayList<>();
      List<MeterRegistry> meters = new ArrayList<>();
      try {
        for (int r = 0; r < replicas; r++) {
          SimpleMeterRegistry registryMeters = new SimpleMeterRegistry();
          meters.add(registryMeters);
          KvRouter router = router(strategy, type, cluster, registered, registryMeters);
          routers.add(router);
          OpenAiFront gateway =
              OpenAiFront.builder("demo-gateway-" + r, (request, extra) -> router.route(request))
                  .listen("127.0.0.1", 0)
                  .ioThreads(1)
                  .build()
                  .start();
          gateways.add(gateway);
        }
        int[] ports = gateways.stream().mapToInt(OpenAiFront::port).toArray();
        return drive(strategy, describe(strategy), workload, cluster, ports, err, meters);
      } finally {
        gateways.forEach(OpenAiFront::close);
        routers.forEach(KvRouter::close);
      }
    }
  }

  /**
   * Waits until every pod has registered (p2pnccl), up to 60 s; the endpoints as registered, with
   * their KV-address labels ({@code joined}: what the registry's listener heard).
   */
  private List<Endpoint> awaitRegistered(
      P2pNcclRegistry registry, Map<String, Endpoint> joined, PrintWriter err)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (joined.size() < prefill + decode && System.nanoTime() < deadline) {
      TimeUnit.MILLISECONDS.sleep(20);
    }
    List<Endpoint> found = new ArrayList<>(joined.values());
    if (found.size() < prefill + decode) {
      err.printf(
          Locale.ROOT,
          "  only %d of %d pods registered with %s%n",
          found.size(),
          prefill + decode,
          registry.endpoint());
    }
    return found;
  }

  /**
   * One gateway replica's router: its own scheduler state and, for precise, its own index; the pods
   * as configured, or ({@code registered} not null) as they registered with the P2pNccl registry,
   * their KV events still found through the cluster.
   */
  private KvRouter router(
      String strategy,
      String type,
      SimulatedCluster cluster,
      List<Endpoint> registered,
      MeterRegistry meters) {
    BlockIndex index =
        BlockIndex.inMemory(IndexConfig.builder().blockSize(blockSize).modelName(MODEL).build());
    KvRouter.Builder rb =
        KvRouter.builder()
            // PD always with p2pnccl: its instances cannot serve a request that names no prefill
            .scheduler(scheduler(strategy, index, registered != null))
            .meterRegistry(meters)
            .defaultConnector(
                ConnectorConfig.of(type)
                    .withRetry(
                        new ConnectorConfig.Retry(
                            3, Duration.ofMillis(10), Duration.ofMillis(100))));
    if (strategy.equals("precise")) {
      // the parity check a gateway runs: the pods hash as vLLM does by default
      ParityMonitor parity =
          ParityMonitor.builder(HashSettings.of(HashAlgorithm.SHA256, blockSize, null))
              .meterRegistry(meters)
              .build();
      rb.parity(parity)
          .eventFeed(
              KvEventFeeds.zmq(
                  KvEventFeeds.subscriberFor(index)
                      .listener(parity.eventListener(KvEventListener.NONE))
                      .build(),
                  index));
    }
    if (registered != null) {
      for (Endpoint e : registered) {
        VllmSimulator pod =
            cluster.pods().stream()
                .filter(p -> p.hostPort().equals(e.id()))
                .findFirst()
                .orElseThrow();
        rb.endpoint(
            e.withLabels(merged(e.labels(), pod.labels())),
            pod.eventsEndpoint() == null
                ? null
                : new KvEventFeed.Source(pod.eventsEndpoint(), pod.replayEndpoint(), pod.topic()));
      }
      return rb.build();
    }
    for (VllmSimulator pod : cluster.pods()) {
      Endpoint e =
          Endpoint.builder(pod.name(), pod.baseUrl().getHost(), pod.baseUrl().getPort())
              .role(
                  pod.role().producer() && !pod.role().consumer()
                      ? Endpoint.Role.PREFILL
                      : pod.role().consumer() && !pod.role().producer()
                          ? Endpoint.Role.DECODE
                          : Endpoint.Role.BOTH)
              .labels(pod.labels())
              .build();
      rb.endpoint(
          e,
          pod.eventsEndpoint() == null
              ? null
              : new KvEventFeed.Source(pod.eventsEndpoint(), pod.replayEndpoint(), pod.topic()));
    }
    return rb.build();
  }

  private Report.Result drive(
      String strategy,
      String description,
      Workload workload,
      SimulatedCluster cluster,
      int[] ports,
      PrintWriter err,
      List<MeterRegistry> meters)
      throws Exception {
    HttpClient client =
        HttpClient.newBuilder().executor(Executors.newFixedThreadPool(concurrency)).build();
    List<Workload.Turn> turnsList = workload.turns();
    ConcurrentLinkedQueue<Double> ttfts = new ConcurrentLinkedQueue<>();
    AtomicInteger done = new AtomicInteger();
    AtomicInteger errors = new AtomicInteger();
    ExecutorService pool = Executors.newFixedThreadPool(concurrency);
    // Turn t+1 of a conversation must follow turn t: one lane per conversation slot.
    List<List<Workload.Turn>> lanes = new ArrayList<>();
    for (int i = 0; i < concurrency; i++) {
      lanes.add(new ArrayList<>());
    }
    for (Workload.Turn t : turnsList) {
      lanes.get(t.conversation() % concurrency).add(t);
    }
    long start = System.nanoTime();
    List<CompletableFuture<Void>> all = new ArrayList<>();
    for (List<Workload.Turn> lane : lanes) {
      all.add(
          CompletableFuture.runAsync(
              () -> {
                for (Workload.Turn t : lane) {
                  try {
                    // Clients reach the gateway replicas through a load balancer: any request
                    // may land on any replica.
                    double ttft =
                        send(client, ports[(t.conversation() + t.turn()) % ports.length], t);
                    if (ttft < 0) {
                      errors.incrementAndGet();
                    } else {
                      ttfts.add(ttft);
                    }
                  } catch (Exception e) {
                    errors.incrementAndGet();
                  }
                  done.incrementAndGet();
                }
              },
              pool));
    }
    CompletableFuture<Void> finished =
        CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0]));
    while (!finished.isDone()) {
      progress(err, strategy, done.get(), turnsList.size());
      try {
        finished.get(200, TimeUnit.MILLISECONDS);
      } catch (java.util.concurrent.TimeoutException e) {
        // keep reporting progress
      }
    }
    progress(err, strategy, done.get(), turnsList.size());
    err.println();
    double seconds = (System.nanoTime() - start) / 1e9;
    pool.shutdownNow();
    long clientPrompt = 0;
    long computed = 0;
    List<String> perPod = new ArrayList<>();
    for (VllmSimulator pod : cluster.pods()) {
      SimStats s = pod.stats();
      if (pod.role().consumer()) {
        clientPrompt += s.promptTokens();
      }
      computed += s.promptTokens() - s.cachedTokens();
      List<Double> podTtft = new ArrayList<>();
      s.ttft().forEach(d -> podTtft.add(d.toNanos() / 1e6));
      perPod.add(
          String.format(
              Locale.ROOT,
              "%-10s %-8s requests %4d  prompt tokens %7d  cached %5.1f%%  pod TTFT mean %6.1fms",
              pod.name(),
              pod.role().label(),
              s.requests(),
              s.promptTokens(),
              100 * s.cachedTokenRatio(),
              s.meanTtft().toNanos() / 1e6));
    }
    double[] t = ttfts.stream().mapToDouble(Double::doubleValue).toArray();
    Report.Parity parity = parity(meters);
    Report.Reuse reuse = reuse(meters, turnsList.size() - errors.get(), !cacheBlind(strategy));
    return new Report.Result(
        strategy,
        description,
        turnsList.size(),
        errors.get(),
        clientPrompt,
        Math.max(0, clientPrompt - computed),
        t,
        seconds,
        perPod,
        prediction(meters),
        parity,
        reuse);
  }

  /** True for the strategies that keep no prefix index (their routers see nothing available). */
  private static boolean cacheBlind(String strategy) {
    return strategy.equals("random") || strategy.equals("load");
  }

  /**
   * The routers' reuse split ({@code kvroute.routing.reuse.*}), summed over the replicas, once they
   * counted every completed request (a router records a request when its response completed, which
   * may be just after the client read the end of the stream).
   */
  private static Report.Reuse reuse(List<MeterRegistry> registries, int completed, boolean indexed)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (reuseRequests(registries, "true") + reuseRequests(registries, "false") < completed
        && System.nanoTime() < deadline) {
      TimeUnit.MILLISECONDS.sleep(20);
    }
    return new Report.Reuse(
        indexed,
        reuseRequests(registries, "true"),
        reuseRequests(registries, "false"),
        reuseTokens(registries, "prompt"),
        reuseTokens(registries, "available"),
        reuseTokens(registries, "captured"),
        reuseTokens(registries, "delivered"),
        reuseMisses(registries, "load"),
        reuseMisses(registries, "stale_index"),
        reuseMisses(registries, "none_available"));
  }

  private static long reuseRequests(List<MeterRegistry> registries, String measured) {
    long total = 0;
    for (MeterRegistry m : registries) {
      total += count(m.find("kvroute.routing.reuse.requests").tag("measured", measured).counter());
    }
    return total;
  }

  private static long reuseTokens(List<MeterRegistry> registries, String split) {
    long total = 0;
    for (MeterRegistry m : registries) {
      total += count(m.find("kvroute.routing.reuse.tokens").tag("split", split).counter());
    }
    return total;
  }

  private static long reuseMisses(List<MeterRegistry> registries, String cause) {
    long total = 0;
    for (MeterRegistry m : registries) {
      total += count(m.find("kvroute.routing.reuse.misses").tag("cause", cause).counter());
    }
    return total;
  }

  /**
   * The routers' parity check ({@code kvroute.routing.parity.*}), summed over the replicas, once
   * the samples of the run's last requests are judged (their engines' events get a grace period):
   * {@link Report.Parity#NONE} for a strategy that does not check.
   */
  private static Report.Parity parity(List<MeterRegistry> registries) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    boolean checking = false;
    while (true) {
      double pending = 0;
      for (MeterRegistry m : registries) {
        io.micrometer.core.instrument.Gauge g = m.find("kvroute.routing.parity.pending").gauge();
        if (g != null) {
          checking = true;
          pending += g.value();
        }
      }
      if (!checking) {
        return Report.Parity.NONE;
      }
      if (pending == 0 || System.nanoTime() > deadline) {
        break;
      }
      TimeUnit.MILLISECONDS.sleep(50);
    }
    long matched = 0;
    long missing = 0;
    long checked = 0;
    boolean degraded = false;
    for (MeterRegistry m : registries) {
      matched += count(m.find("kvroute.routing.parity.blocks").tag("result", "matched").counter());
      missing += count(m.find("kvroute.routing.parity.blocks").tag("result", "missing").counter());
      checked +=
          count(m.find("kvroute.routing.parity.samples").tag("outcome", "checked").counter());
      for (io.micrometer.core.instrument.Gauge g :
          m.find("kvroute.routing.parity.degraded").gauges()) {
        degraded |= g.value() > 0;
      }
    }
    return new Report.Parity(checked, matched, missing, degraded);
  }

  private static long count(Counter c) {
    return c == null ? 0 : (long) c.count();
  }

  /** The routers' routing-accuracy meters, summed over the replicas. */
  private static Report.Prediction prediction(List<MeterRegistry> registries) {
    long n = 0;
    double predicted = 0;
    double actual = 0;
    double error = 0;
    for (MeterRegistry m : registries) {
      DistributionSummary p = m.find("kvroute.routing.predicted.tokens").summary();
      DistributionSummary a = m.find("kvroute.routing.actual.cached.tokens").summary();
      DistributionSummary e = m.find("kvroute.routing.prediction.error").summary();
      if (p != null && a != null && e != null) {
        n += p.count();
        predicted += p.totalAmount();
        actual += a.totalAmount();
        error += e.totalAmount();
      }
    }
    if (n == 0) {
      return Report.Prediction.NONE;
    }
    return new Report.Prediction(
        n,
        predicted / n,
        actual / n,
        error / n,
        predictions(registries, "exact"),
        predictions(registries, "over"),
        predictions(registries, "under"));
  }

  private static long predictions(List<MeterRegistry> registries, String result) {
    long total = 0;
    for (MeterRegistry m : registries) {
      Counter c = m.find("kvroute.routing.predictions").tag("result", result).counter();
      total += c == null ? 0 : (long) c.count();
    }
    return total;
  }

  private static void progress(PrintWriter err, String strategy, int done, int total) {
    int width = 30;
    int filled = total == 0 ? width : done * width / total;
    err.printf(
        Locale.ROOT,
        "\r  %-12s [%s%s] %d/%d requests",
        strategy,
        "#".repeat(filled),
        ".".repeat(width - filled),
        done,
        total);
    err.flush();
  }

  /** Sends one streamed chat turn; returns the client-side TTFT in ms, or -1 on error. */
  private double send(HttpClient client, int port, Workload.Turn turn) throws Exception {
    ObjectNode body = JsonNodeFactory.instance.objectNode();
    body.put("model", MODEL);
    body.put("stream", true);
    body.putObject("stream_options").put("include_usage", true);
    body.put("max_tokens", 16);
    ArrayNode messages = body.putArray("messages");
    for (String[] m : turn.messages()) {
      messages.addObject().put("role", m[0]).put("content", m[1]);
    }
    HttpRequest req =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(60))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body.toString()))
            .build();
    long start = System.nanoTime();
    HttpResponse<InputStream> resp = client.send(req, HttpResponse.BodyHandlers.ofInputStream());
    try (InputStream in = resp.body()) {
      if (resp.statusCode() != 200) {
        in.readAllBytes();
        return -1;
      }
      byte[] buf = new byte[8192];
      double ttft = -1;
      StringBuilder all = new StringBuilder();
      for (int n; (n = in.read(buf)) > 0; ) {
        if (ttft < 0) {
          ttft = (System.nanoTime() - start) / 1e6;
        }
        all.append(new String(buf, 0, n, StandardCharsets.UTF_8));
      }
      return all.indexOf("[DONE]") >= 0 ? ttft : -1;
    }
  }

  private static Map<String, String> merged(Map<String, String> a, Map<String, String> b) {
    Map<String, String> m = new java.util.LinkedHashMap<>(b);
    m.putAll(a);
    return m;
  }

  /**
   * The scheduler of one strategy: PD-enabled, tokenizing with {@link #demoTokenizer}; {@code
   * alwaysDisaggregate}: every request gets a prefill (the default decider may serve a well-cached
   * prompt by decode alone).
   */
  private Scheduler scheduler(String strategy, BlockIndex index, boolean alwaysDisaggregate) {
    Scheduler.Builder b =
        Scheduler.builder()
            .tokenizer(demoTokenizer)
            .pdEnabled(true)
            .prefillProfile(Scheduler.PREFILL_PROFILE);
    if (alwaysDisaggregate) {
      b.pdDecider(io.kvroute.scoring.PdDecider.always());
    }
    switch (strategy) {
      case "random":
        pdProfiles(
            b,
            d -> d.picker(Pickers.random("random-picker", 3)),
            p -> p.picker(Pickers.random("random-picker", 2)));
        break;
      case "load":
        pdProfiles(
            b,
            d ->
                d.scorer(Scorers.activeRequests(), 1)
                    .scorer(Scorers.queue(), 1)
                    .picker(Pickers.topN(3)),
            p -> p.scorer(Scorers.activeRequests(), 1).picker(Pickers.topN(2)));
        break;
      case "approximate":
        Scheduler.defaultProfiles(false).forEach(b::profile);
        break;
      default:
        b.prefixCacheLookup(BlockIndexLookup.of(index));
        Scheduler.defaultProfiles(true).forEach(b::profile);
    }
    return b.build();
  }

  /**
   * A decode and a prefill profile, each filtered to its role and completed by {@code decode} and
   * {@code prefill}; no approximate prefix index (these strategies ignore the cache).
   */
  private static void pdProfiles(
      Scheduler.Builder b,
      UnaryOperator<Profile.Builder> decode,
      UnaryOperator<Profile.Builder> prefill) {
    b.profile(
            decode
                .apply(Profile.builder(Scheduler.DECODE_PROFILE).filter(Filters.decode()))
                .build())
        .profile(
            prefill
                .apply(Profile.builder(Scheduler.PREFILL_PROFILE).filter(Filters.prefill()))
                .build())
        .approximateIndexing(false);
  }

  private static String describe(String strategy) {
    switch (strategy) {
      case "random":
        return "random decode and prefill pods (no cache awareness)";
      case "load":
        return "least loaded pods (in-flight requests and queue)";
      case "approximate":
        return "each replica's own LRU of what it sent where (no KV events) + load";
      default:
        return "precise prefix scoring from the pods' real ZMQ KV events (every replica sees all)"
            + " + load";
    }
  }

  /** The engine's tokenization, in process: the simulator's chat template and tokenizer. */
  static CompletableFuture<int[]> tokenize(SchedulingRequest request) {
    SimTokenizer tok = SimTokenizer.get();
    if (request.messages().isPresent()) {
      ArrayNode arr = JsonNodeFactory.instance.arrayNode();
      for (SchedulingRequest.ChatMessage m : request.messages().get()) {
        arr.addObject().put("role", m.role()).put("content", m.content());
      }
      return CompletableFuture.completedFuture(tok.encode(tok.applyChatTemplate(arr, true)));
    }
    return CompletableFuture.completedFuture(tok.encode(request.prompt().orElse("")));
  }
}
