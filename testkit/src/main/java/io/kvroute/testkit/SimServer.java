package io.kvroute.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import io.kvroute.testkit.internal.BlockPool;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The simulator's engine and HTTP front end. Thread-safe; see {@link VllmSimulator}. */
final class SimServer {
  private static final Logger LOG = LoggerFactory.getLogger(SimServer.class);
  static final ObjectMapper JSON = new ObjectMapper();
  private static final JsonNodeFactory NF = JsonNodeFactory.instance;
  private static final int MAX_BODY = 64 << 20;
  private static final int MAX_TTFT_SAMPLES = 10_000;

  /** Simulators by engine id (NIXL/Mooncake) and by bootstrap host:port (SGLang). */
  static final Map<String, SimServer> BY_ENGINE = new ConcurrentHashMap<>();

  static final Map<String, SimServer> BY_BOOTSTRAP = new ConcurrentHashMap<>();

  final VllmSimulator.Builder b;
  final BlockPool pool;
  final SimFaults faults;
  private final EngineTokenizer tokenizer;
  private final Semaphore slots;
  private final AtomicInteger waiting = new AtomicInteger();
  private final AtomicInteger running = new AtomicInteger();
  private final Map<String, AtomicInteger> runningLoras = new ConcurrentHashMap<>();
  private final Map<String, AtomicInteger> waitingLoras = new ConcurrentHashMap<>();
  private final AtomicLong requestCounter = new AtomicLong();
  private final Object statsLock = new Object();
  private long statRequests;
  private long statErrors;
  private long statPrompt;
  private long statCached;
  private long statGenerated;
  private long totalPrompt;
  private long totalGenerated;
  private long totalSuccess;
  private final ArrayDeque<Duration> ttft = new ArrayDeque<>();
  private final long[] ttftBuckets = new long[TTFT_BOUNDS.length];
  private long ttftCount;
  private double ttftSum;
  private final ArrayDeque<RecordedRequest> recorded = new ArrayDeque<>();
  private final Map<String, Transfer> held = new LinkedHashMap<>();
  private final Map<String, CompletableFuture<Transfer>> rendezvous = new ConcurrentHashMap<>();
  private final CountDownLatch closed = new CountDownLatch(1);
  private volatile EventChannel events;
  private HttpServer http;
  private HttpServer bootstrap;
  private ExecutorService executor;
  private volatile String topic;
  private volatile boolean started;

  private static final double[] TTFT_BOUNDS = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0
  };

  /** Prefill KV kept for a decode. */
  static final class Transfer {
    final SimServer owner;
    final BlockPool.Seq seq;
    final int[] prompt;
    final long deadline;

    Transfer(SimServer owner, BlockPool.Seq seq, int[] prompt, long deadline) {
      this.owner = owner;
      this.seq = seq;
      this.prompt = prompt;
      this.deadline = deadline;
    }

    void release() {
      owner.pool.free(seq);
    }
  }

  /** Thrown from a handler to make the JDK server drop the connection without finishing. */
  static final class AbortConnection extends RuntimeException {
    private static final long serialVersionUID = 1L;

    AbortConnection() {
      super("simulated connection close", null, false, false);
    }
  }

  SimServer(VllmSimulator.Builder b) {
    this.b = b;
    this.tokenizer = b.tokenizer;
    this.slots = new Semaphore(b.maxRunning, true);
    VllmBlockHasher hasher =
        VllmBlockHasher.builder()
            .algorithm(b.hashAlgorithm)
            .blockSize(b.blockSize)
            .hashSeed(b.hashSeed)
            .build();
    this.faults = new SimFaults(b.random, this::restartPublisher, this::resetPrefixCache);
    this.pool =
        new BlockPool(
            b.gpuBlocks,
            b.cpuBlocks,
            hasher,
            evs -> {
              EventChannel ch = events;
              if (ch != null) {
                ch.accept(evs);
              }
            });
  }

  // ---------------------------------------------------------------- lifecycle

  synchronized void start() {
    if (started) {
      throw new IllegalStateException("simulator " + b.name + " already started");
    }
    if (System.getProperty("sun.net.httpserver.nodelay") == null) {
      System.setProperty("sun.net.httpserver.nodelay", "true");
    }
    AtomicInteger n = new AtomicInteger();
    ThreadFactory tf =
        r -> {
          Thread t = new Thread(r, "vllm-sim-" + b.name + "-" + n.incrementAndGet());
          t.setDaemon(true);
          return t;
        };
    executor = Executors.newCachedThreadPool(tf);
    try {
      http = HttpServer.create(new InetSocketAddress(b.host, b.port), 128);
    } catch (IOException e) {
      throw new IllegalStateException("cannot bind simulator HTTP on " + b.host + ":" + b.port, e);
    }
    http.setExecutor(executor);
    http.createContext("/v1/completions", ex -> serve(ex, () -> generation(ex, false)));
    http.createContext("/v1/chat/completions", ex -> serve(ex, () -> generation(ex, true)));
    http.createContext("/v1/models", ex -> serve(ex, () -> models(ex)));
    http.createContext("/health", ex -> serve(ex, () -> send(ex, 200, "text/plain", new byte[0])));
    http.createContext("/tokenize", ex -> serve(ex, () -> tokenize(ex)));
    http.createContext("/metrics", ex -> serve(ex, () -> metrics(ex)));
    http.createContext("/reset_prefix_cache", ex -> serve(ex, () -> resetEndpoint(ex)));
    http.createContext("/", ex -> serve(ex, () -> notFound(ex)));
    http.start();
    topic = b.topic != null ? b.topic : "kv@" + hostPort() + "@" + b.model;
    if (b.events) {
      events = new EventChannel(b, topic, faults);
    }
    if ((b.protocol == KvTransferProtocol.MOONCAKE || b.protocol == KvTransferProtocol.SGLANG)
        && b.role.producer()) {
      try {
        bootstrap = HttpServer.create(new InetSocketAddress(b.host, b.bootstrapPort), 64);
      } catch (IOException e) {
        close();
        throw new IllegalStateException(
            "cannot bind bootstrap server on port " + b.bootstrapPort, e);
      }
      bootstrap.setExecutor(executor);
      bootstrap.createContext("/", ex -> serve(ex, () -> bootstrapQuery(ex)));
      bootstrap.start();
      BY_BOOTSTRAP.put(b.host + ":" + bootstrap.getAddress().getPort(), this);
    }
    BY_ENGINE.put(b.engineId, this);
    started = true;
    LOG.debug("simulator {} started on {}", b.name, hostPort());
  }

  void close() {
    synchronized (this) {
      if (closed.getCount() == 0) {
        return;
      }
      closed.countDown();
    }
    faults.releaseHung();
    BY_ENGINE.remove(b.engineId, this);
    if (bootstrap != null) {
      BY_BOOTSTRAP.remove(b.host + ":" + bootstrap.getAddress().getPort(), this);
      bootstrap.stop(0);
    }
    if (http != null) {
      http.stop(0);
    }
    if (executor != null) {
      executor.shutdownNow();
    }
    EventChannel ch = events;
    if (ch != null) {
      ch.close();
    }
    synchronized (held) {
      for (Transfer t : held.values()) {
        t.release();
      }
      held.clear();
    }
  }

  private boolean isClosed() {
    return closed.getCount() == 0;
  }

  URI baseUrl() {
    return URI.create("http://" + hostPort());
  }

  String hostPort() {
    if (http == null) {
      throw new IllegalStateException("simulator " + b.name + " not started");
    }
    return b.host + ":" + http.getAddress().getPort();
  }

  String hostPortOrUnbound() {
    return http == null ? "unbound" : hostPort();
  }

  String eventsEndpoint() {
    EventChannel ch = events;
    return ch == null ? null : ch.endpoint();
  }

  String replayEndpoint() {
    EventChannel ch = events;
    return ch == null ? null : ch.replayEndpoint();
  }

  String topic() {
    return topic;
  }

  URI bootstrapUrl() {
    return bootstrap == null ? null : URI.create("http://" + b.host + ":" + bootstrapPort());
  }

  int bootstrapPort() {
    return bootstrap == null ? -1 : bootstrap.getAddress().getPort();
  }

  long eventBatches() {
    EventChannel ch = events;
    return ch == null ? 0 : ch.batches();
  }

  Map<String, String> labels() {
    Map<String, String> m = new LinkedHashMap<>(b.labels);
    m.putIfAbsent("llm-d.ai/role", b.role.label());
    return Map.copyOf(m);
  }

  void restartPublisher() {
    EventChannel ch = events;
    if (ch != null) {
      synchronized (pool) {
        ch.restart();
      }
    }
  }

  void resetPrefixCache() {
    pool.reset();
  }

  // ---------------------------------------------------------------- stats and records

  SimStats stats() {
    synchronized (statsLock) {
      return new SimStats(
          statRequests, statErrors, statPrompt, statCached, statGenerated, new ArrayList<>(ttft));
    }
  }

  void resetStats() {
    synchronized (statsLock) {
      statRequests = statErrors = statPrompt = statCached = statGenerated = 0;
      ttft.clear();
    }
  }

  List<RecordedRequest> requests() {
    synchronized (recorded) {
      return List.copyOf(recorded);
    }
  }

  void clearRequests() {
    synchronized (recorded) {
      recorded.clear();
    }
  }

  private void countError() {
    synchronized (statsLock) {
      statErrors++;
    }
  }

  private void countSuccess(int prompt, int cached, int generated, long ttftNanos) {
    synchronized (statsLock) {
      statRequests++;
      statPrompt += prompt;
      statCached += cached;
      statGenerated += generated;
      totalPrompt += prompt;
      totalGenerated += generated;
      totalSuccess++;
      if (ttft.size() == MAX_TTFT_SAMPLES) {
        ttft.removeFirst();
      }
      ttft.addLast(Duration.ofNanos(ttftNanos));
      double s = ttftNanos / 1e9;
      ttftSum += s;
      ttftCount++;
      for (int i = 0; i < TTFT_BOUNDS.length; i++) {
        if (s <= TTFT_BOUNDS[i]) {
          ttftBuckets[i]++;
        }
      }
    }
  }

  // ---------------------------------------------------------------- HTTP plumbing

  @FunctionalInterface
  private interface Action {
    void run() throws IOException;
  }

  private void serve(HttpExchange ex, Action action) {
    boolean abort = false;
    try {
      action.run();
    } catch (AbortConnection e) {
      abort = true;
      throw e;
    } catch (IOException e) {
      LOG.debug("simulator {}: I/O error on {}: {}", b.name, ex.getRequestURI(), e.toString());
    } catch (RuntimeException e) {
      LOG.warn("simulator {}: handler failed on {}", b.name, ex.getRequestURI().getPath(), e);
      try {
        sendError(ex, 500, "InternalServerError", String.valueOf(e.getMessage()));
      } catch (IOException | RuntimeException ignored) {
        // headers may already be sent
      }
    } finally {
      if (!abort) {
        ex.close();
      }
    }
  }

  private static void send(HttpExchange ex, int status, String type, byte[] body)
      throws IOException {
    ex.getResponseHeaders().set("content-type", type);
    ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
    if (body.length > 0) {
      try (OutputStream os = ex.getResponseBody()) {
        os.write(body);
      }
    }
  }

  private static void sendJson(HttpExchange ex, int status, JsonNode node) throws IOException {
    send(ex, status, "application/json", JSON.writeValueAsBytes(node));
  }

  static ObjectNode errorJson(int status, String type, String message) {
    ObjectNode err = NF.objectNode();
    ObjectNode e = err.putObject("error");
    e.put("message", message);
    e.put("type", type);
    e.putNull("param");
    e.put("code", status);
    return err;
  }

  private static void sendError(HttpExchange ex, int status, String type, String message)
      throws IOException {
    sendJson(ex, status, errorJson(status, type, message));
  }

  private static String errorType(int status) {
    switch (status) {
      case 400:
        return "BadRequestError";
      case 404:
        return "NotFoundError";
      case 429:
        return "RateLimitError";
      case 503:
        return "ServiceUnavailableError";
      default:
        return status >= 500 ? "InternalServerError" : "BadRequestError";
    }
  }

  private String readBody(HttpExchange ex) throws IOException {
    try (InputStream in = ex.getRequestBody()) {
      byte[] data = in.readNBytes(MAX_BODY + 1);
      if (data.length > MAX_BODY) {
        throw new IOException("body larger than " + MAX_BODY + " bytes");
      }
      return new String(data, StandardCharsets.UTF_8);
    }
  }

  private JsonNode record(HttpExchange ex, String body) {
    JsonNode json = null;
    if (!body.isBlank()) {
      try {
        json = JSON.readTree(body);
      } catch (IOException e) {
        json = null;
      }
    }
    Map<String, List<String>> headers = new LinkedHashMap<>();
    ex.getRequestHeaders()
        .forEach((k, v) -> headers.put(k.toLowerCase(Locale.ROOT), List.copyOf(v)));
    RecordedRequest r =
        new RecordedRequest(
            ex.getRequestMethod(), ex.getRequestURI().getPath(), headers, body, json);
    synchronized (recorded) {
      if (recorded.size() == b.maxRecordedRequests) {
        recorded.removeFirst();
      }
      recorded.addLast(r);
    }
    return json;
  }

  private void notFound(HttpExchange ex) throws IOException {
    sendError(ex, 404, "NotFoundError", "Not Found: " + ex.getRequestURI().getPath());
  }

  private boolean requireMethod(HttpExchange ex, String method) throws IOException {
    if (!ex.getRequestMethod().equalsIgnoreCase(method)) {
      sendError(ex, 405, "MethodNotAllowed", "Method Not Allowed");
      return false;
    }
    return true;
  }

  // ---------------------------------------------------------------- simple endpoints

  private void models(HttpExchange ex) throws IOException {
    if (!requireMethod(ex, "GET")) {
      return;
    }
    long created = b.clock.millis() / 1000;
    ObjectNode root = NF.objectNode();
    root.put("object", "list");
    ArrayNode data = root.putArray("data");
    data.add(modelCard(b.model, null, created));
    for (String lora : b.loras) {
      data.add(modelCard(lora, b.model, created));
    }
    sendJson(ex, 200, root);
  }

  private ObjectNode modelCard(String id, String parent, long created) {
    ObjectNode m = NF.objectNode();
    m.put("id", id);
    m.put("object", "model");
    m.put("created", created);
    m.put("owned_by", "vllm");
    m.put("root", id);
    if (parent == null) {
      m.putNull("parent");
    } else {
      m.put("parent", parent);
    }
    m.put("max_model_len", b.maxModelLen);
    return m;
  }

  private void bootstrapQuery(HttpExchange ex) throws IOException {
    ObjectNode root = NF.objectNode();
    ObjectNode rank = root.putObject("0");
    rank.put("engine_id", b.engineId);
    rank.put("host", b.host);
    rank.put("http_port", http.getAddress().getPort());
    rank.put("dp_rank", 0);
    rank.put("tp_size", 1);
    sendJson(ex, 200, root);
  }

  private void resetEndpoint(HttpExchange ex) throws IOException {
    if (!requireMethod(ex, "POST")) {
      return;
    }
    record(ex, readBody(ex));
    resetPrefixCache();
    send(ex, 200, "text/plain", new byte[0]);
  }

  private void tokenize(HttpExchange ex) throws IOException {
    if (!requireMethod(ex, "POST")) {
      return;
    }
    JsonNode req = record(ex, readBody(ex));
    if (req == null || !req.isObject()) {
      sendError(ex, 400, "BadRequestError", "request body must be a JSON object");
      return;
    }
    int[] tokens;
    try {
      if (req.has("messages")) {
        tokens = tokenizer.encodeChat(req);
      } else if (req.path("prompt").isTextual()) {
        tokens = tokenizer.encodePrompt(req.get("prompt").asText());
      } else {
        sendError(ex, 400, "BadRequestError", "either prompt (string) or messages is required");
        return;
      }
    } catch (IllegalArgumentException e) {
      sendError(ex, 400, "BadRequestError", e.getMessage());
      return;
    }
    ObjectNode root = NF.objectNode();
    root.put("count", tokens.length);
    root.put("max_model_len", b.maxModelLen);
    ArrayNode arr = root.putArray("tokens");
    for (int t : tokens) {
      arr.add(t);
    }
    root.putNull("token_strs");
    sendJson(ex, 200, root);
  }

  private void metrics(HttpExchange ex) throws IOException {
    if (!requireMethod(ex, "GET")) {
      return;
    }
    send(
        ex,
        200,
        "text/plain; version=0.0.4; charset=utf-8",
        metricsText().getBytes(StandardCharsets.UTF_8));
  }

  String metricsText() {
    String lbl = "{engine=\"0\",model_name=\"" + escape(b.model) + "\"}";
    StringBuilder sb = new StringBuilder(4096);
    gauge(
        sb,
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        lbl,
        running.get());
    gauge(
        sb,
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
        lbl,
        waiting.get());
    double usage = pool.usage();
    gauge(sb, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", lbl, usage);
    gauge(
        sb,
        "vllm:gpu_cache_usage_perc",
        "GPU KV-cache usage. 1 means 100 percent usage.",
        lbl,
        usage);
    gauge(
        sb,
        "vllm:cpu_cache_usage_perc",
        "CPU KV-cache usage. 1 means 100 percent usage.",
        lbl,
        pool.cpuUsage());
    counter(
        sb,
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        lbl,
        pool.queries());
    counter(
        sb,
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        lbl,
        pool.hits());
    counter(
        sb,
        "vllm:gpu_prefix_cache_queries",
        "GPU prefix cache queries, in terms of number of queried tokens.",
        lbl,
        pool.queries());
    counter(
        sb,
        "vllm:gpu_prefix_cache_hits",
        "GPU prefix cache hits, in terms of number of cached tokens.",
        lbl,
        pool.hits());
    long prompt;
    long gen;
    long success;
    long[] buckets;
    long count;
    double sum;
    synchronized (statsLock) {
      prompt = totalPrompt;
      gen = totalGenerated;
      success = totalSuccess;
      buckets = ttftBuckets.clone();
      count = ttftCount;
      sum = ttftSum;
    }
    counter(sb, "vllm:prompt_tokens", "Number of prefill tokens processed.", lbl, prompt);
    counter(sb, "vllm:generation_tokens", "Number of generation tokens processed.", lbl, gen);
    counter(sb, "vllm:request_success", "Count of successfully processed requests.", lbl, success);
    counter(sb, "vllm:num_preemptions", "Cumulative number of preemption from the engine.", lbl, 0);
    String name = "vllm:time_to_first_token_seconds";
    sb.append("# HELP ").append(name).append(" Histogram of time to first token in seconds.\n");
    sb.append("# TYPE ").append(name).append(" histogram\n");
    String inner = lbl.substring(1, lbl.length() - 1);
    for (int i = 0; i < TTFT_BOUNDS.length; i++) {
      sb.append(name).append("_bucket{").append(inner).append(",le=\"").append(TTFT_BOUNDS[i]);
      sb.append("\"} ").append((double) buckets[i]).append('\n');
    }
    sb.append(name).append("_bucket{").append(inner).append(",le=\"+Inf\"} ");
    sb.append((double) count).append('\n');
    sb.append(name).append("_count").append(lbl).append(' ').append((double) count).append('\n');
    sb.append(name).append("_sum").append(lbl).append(' ').append(sum).append('\n');
    sb.append("# HELP vllm:lora_requests_info Running stats on lora requests.\n");
    sb.append("# TYPE vllm:lora_requests_info gauge\n");
    sb.append("vllm:lora_requests_info{max_lora=\"").append(b.maxLoras);
    sb.append("\",running_lora_adapters=\"").append(escape(activeLoras(runningLoras)));
    sb.append("\",waiting_lora_adapters=\"").append(escape(activeLoras(waitingLoras)));
    sb.append("\"} ").append(b.clock.millis() / 1000.0).append('\n');
    sb.append("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n");
    sb.append("# TYPE vllm:cache_config_info gauge\n");
    sb.append("vllm:cache_config_info{block_size=\"").append(b.blockSize);
    sb.append("\",enable_prefix_caching=\"True\",num_cpu_blocks=\"").append(b.cpuBlocks);
    sb.append("\",num_gpu_blocks=\"").append(b.gpuBlocks);
    sb.append("\",prefix_caching_hash_algo=\"").append(b.hashAlgorithm.vllmName());
    sb.append("\"} 1.0\n");
    return sb.toString();
  }

  private static String activeLoras(Map<String, AtomicInteger> m) {
    List<String> names = new ArrayList<>();
    m.forEach(
        (k, v) -> {
          if (v.get() > 0) {
            names.add(k);
          }
        });
    names.sort(null);
    return String.join(",", names);
  }

  private static String escape(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
  }

  private static void gauge(StringBuilder sb, String name, String help, String lbl, double v) {
    sb.append("# HELP ").append(name).append(' ').append(help).append('\n');
    sb.append("# TYPE ").append(name).append(" gauge\n");
    sb.append(name).append(lbl).append(' ').append(v).append('\n');
  }

  private static void counter(StringBuilder sb, String name, String help, String lbl, double v) {
    sb.append("# HELP ").append(name).append("_total ").append(help).append('\n');
    sb.append("# TYPE ").append(name).append("_total counter\n");
    sb.append(name).append("_total").append(lbl).append(' ').append(v).append('\n');
  }

  // ---------------------------------------------------------------- generation

  /** A parsed, validated generation request. */
  private static final class Gen {
    boolean chat;
    ObjectNode body;
    String model;
    String lora;
    Long loraId;
    int[] prompt;
    int maxTokens;
    boolean stream;
    boolean includeUsage;
    String id;
    String internalId;
    BlockExtraKeys extras;
  }

  private final class BadRequest extends Exception {
    private static final long serialVersionUID = 1L;
    final int status;

    BadRequest(int status, String message) {
      super(message, null, false, false);
      this.status = status;
    }
  }

  private void generation(HttpExchange ex, boolean chat) throws IOException {
    long arrival = b.nanoClock.getAsLong();
    if (!requireMethod(ex, "POST")) {
      return;
    }
    String raw = readBody(ex);
    SimFaults.Decision fault = faults.onArrival();
    JsonNode json = record(ex, raw); // after the fault decision: a recorded request has one
    if (fault.hang()) {
      CountDownLatch latch = faults.hangLatch();
      try {
        while (!latch.await(50, TimeUnit.MILLISECONDS)) {
          if (isClosed()) {
            throw new AbortConnection();
          }
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AbortConnection();
      }
      if (isClosed()) {
        throw new AbortConnection();
      }
    }
    if (fault.status() != 0) {
      countError();
      sendError(
          ex, fault.status(), errorType(fault.status()), "injected failure (simulator fault)");
      return;
    }
    Gen g;
    try {
      g = parse(ex, json, chat);
    } catch (BadRequest e) {
      countError();
      sendError(ex, e.status, errorType(e.status), e.getMessage());
      return;
    }
    try {
      run(ex, g, fault, arrival);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AbortConnection();
    }
  }

  private Gen parse(HttpExchange ex, JsonNode json, boolean chat) throws BadRequest {
    if (json == null || !json.isObject()) {
      throw new BadRequest(400, "request body must be a JSON object");
    }
    Gen g = new Gen();
    g.chat = chat;
    g.body = (ObjectNode) json;
    String model = json.path("model").isTextual() ? json.get("model").asText() : b.model;
    if (!model.equals(b.model)) {
      int idx = b.loras.indexOf(model);
      if (idx < 0) {
        throw new BadRequest(404, "The model `" + model + "` does not exist.");
      }
      g.lora = model;
      g.loraId = (long) idx + 1;
    }
    g.model = model;
    try {
      if (chat) {
        if (!json.path("messages").isArray()) {
          throw new BadRequest(400, "messages must be an array");
        }
        g.prompt = tokenizer.encodeChat(json);
      } else {
        JsonNode p = json.get("prompt");
        if (p != null && p.isTextual()) {
          g.prompt = tokenizer.encodePrompt(p.asText());
        } else if (p != null && p.isArray() && p.size() > 0 && p.get(0).isIntegralNumber()) {
          g.prompt = new int[p.size()];
          for (int i = 0; i < p.size(); i++) {
            if (!p.get(i).canConvertToInt() || p.get(i).asInt() < 0) {
              throw new BadRequest(400, "prompt token ids must be non-negative ints");
            }
            g.prompt[i] = p.get(i).asInt();
          }
        } else if (p != null && p.isArray() && p.size() == 1 && p.get(0).isTextual()) {
          g.prompt = tokenizer.encodePrompt(p.get(0).asText());
        } else {
          throw new BadRequest(
              400,
              "prompt must be a string, a list of token ids or a one-element list of strings"
                  + " (the simulator serves no batches)");
        }
      }
    } catch (IllegalArgumentException e) {
      throw new BadRequest(400, e.getMessage());
    }
    if (g.prompt.length == 0) {
      throw new BadRequest(400, "prompt must not be empty");
    }
    JsonNode mt =
        chat && json.hasNonNull("max_completion_tokens")
            ? json.get("max_completion_tokens")
            : json.get("max_tokens");
    int maxTokens = b.defaultMaxTokens;
    if (mt != null && !mt.isNull()) {
      if (!mt.canConvertToInt() || mt.asInt() < 1) {
        throw new BadRequest(400, "max_tokens must be an integer >= 1, was " + mt);
      }
      maxTokens = mt.asInt();
    }
    JsonNode minT = json.get("min_tokens");
    if (minT != null && minT.canConvertToInt() && minT.asInt() > maxTokens) {
      throw new BadRequest(
          400,
          "min_tokens must be less than or equal to max_tokens="
              + maxTokens
              + ", got "
              + minT.asInt());
    }
    if (g.prompt.length + maxTokens > b.maxModelLen) {
      throw new BadRequest(
          400,
          "This model's maximum context length is "
              + b.maxModelLen
              + " tokens. However, you requested "
              + (g.prompt.length + maxTokens)
              + " tokens ("
              + g.prompt.length
              + " in the messages, "
              + maxTokens
              + " in the completion).");
    }
    if (!pool.fits(g.prompt.length + maxTokens)) {
      throw new BadRequest(
          400,
          "request needs "
              + pool.blocksFor(g.prompt.length + maxTokens)
              + " KV blocks but the simulator has only "
              + pool.numBlocks());
    }
    g.maxTokens = maxTokens;
    g.stream = json.path("stream").asBoolean(false);
    g.includeUsage = g.stream && json.path("stream_options").path("include_usage").asBoolean(false);
    String rid = ex.getRequestHeaders().getFirst("X-Request-Id");
    if (rid == null || rid.isBlank()) {
      rid = java.util.UUID.randomUUID().toString().replace("-", "");
    }
    g.id = (chat ? "chatcmpl-" : "cmpl-") + rid;
    g.internalId = g.id + "-" + Long.toHexString(requestCounter.incrementAndGet());
    BlockExtraKeys.Builder ek = BlockExtraKeys.builder().loraName(g.lora);
    if (json.path("cache_salt").isTextual()) {
      ek.cacheSalt(json.get("cache_salt").asText());
    }
    g.extras = ek.build();
    return g;
  }

  /** What the KV connector decided for one request. */
  private static final class Plan {
    Transfer incoming;
    int externalTokens;
    String holdKey;
    boolean nixlProducer;
  }

  private Plan plan(Gen g) throws BadRequest, InterruptedException {
    Plan p = new Plan();
    JsonNode ktp = g.body.get("kv_transfer_params");
    boolean hasKtp = ktp != null && ktp.isObject();
    switch (b.protocol) {
      case NIXL:
        if (hasKtp && ktp.path("do_remote_decode").asBoolean(false)) {
          p.nixlProducer = true;
        } else if (hasKtp && ktp.path("do_remote_prefill").asBoolean(false)) {
          boolean complete =
              ktp.hasNonNull("remote_block_ids")
                  && ktp.hasNonNull("remote_engine_id")
                  && ktp.hasNonNull("remote_request_id")
                  && ktp.hasNonNull("remote_host")
                  && ktp.hasNonNull("remote_port");
          if (complete) {
            SimServer src = BY_ENGINE.get(ktp.get("remote_engine_id").asText());
            Transfer t = src == null ? null : src.take(ktp.get("remote_request_id").asText());
            if (t == null) {
              loadFailed(
                  "no held KV for remote_request_id " + ktp.get("remote_request_id").asText());
            }
            p.incoming = t;
          } else {
            LOG.debug("simulator {}: Got invalid KVTransferParams; prefilling locally", b.name);
          }
        }
        break;
      case MOONCAKE:
        if (hasKtp && ktp.path("do_remote_decode").asBoolean(false)) {
          if (ktp.hasNonNull("transfer_id")) {
            p.holdKey = "xfer:" + ktp.get("transfer_id").asText();
          } else {
            LOG.debug(
                "simulator {}: Missing transfer_id in kv_transfer_params from router!", b.name);
          }
        } else if (hasKtp && ktp.path("do_remote_prefill").asBoolean(false)) {
          if (ktp.hasNonNull("transfer_id")
              && ktp.hasNonNull("remote_engine_id")
              && ktp.hasNonNull("remote_bootstrap_addr")) {
            SimServer src = BY_ENGINE.get(ktp.get("remote_engine_id").asText());
            if (src == null) {
              String addr =
                  ktp.get("remote_bootstrap_addr").asText().replaceFirst("^https?://", "");
              src = BY_BOOTSTRAP.get(addr);
            }
            p.incoming =
                src == null
                    ? null
                    : src.await("xfer:" + ktp.get("transfer_id").asText(), b.transferTimeout);
            if (p.incoming == null) {
              loadFailed(
                  "Mooncake transfer " + ktp.get("transfer_id").asText() + " did not arrive");
            }
          }
        }
        break;
      case SGLANG:
        if (g.body.hasNonNull("bootstrap_room")) {
          String room = "room:" + g.body.get("bootstrap_room").asText();
          if (b.role == SimRole.PREFILL) {
            p.holdKey = room;
          } else {
            String host = g.body.path("bootstrap_host").asText("");
            JsonNode port = g.body.get("bootstrap_port");
            int bp = port == null || port.isNull() ? b.bootstrapPort : port.asInt();
            SimServer src = BY_BOOTSTRAP.get(host + ":" + bp);
            if (src == null && ("localhost".equals(host) || host.isEmpty())) {
              src = BY_BOOTSTRAP.get("127.0.0.1:" + bp);
            }
            p.incoming = src == null ? null : src.await(room, b.transferTimeout);
            if (p.incoming == null) {
              throw new BadRequest(
                  500, "KV transfer failed: no prefill for bootstrap room at " + host + ":" + bp);
            }
          }
        }
        break;
      default:
        break;
    }
    return p;
  }

  private void loadFailed(String why) throws BadRequest {
    if (b.kvLoadFailurePolicy == VllmSimulator.KvLoadFailurePolicy.FAIL) {
      throw new BadRequest(500, "KV load failed: " + why);
    }
    LOG.debug("simulator {}: KV load failed ({}); recomputing", b.name, why);
  }

  /** Removes and returns held KV (NIXL pull). */
  Transfer take(String key) {
    synchronized (held) {
      return held.remove("req:" + key);
    }
  }

  /** Waits for KV held under {@code key} (Mooncake, SGLang) and takes it. */
  Transfer await(String key, Duration timeout) throws InterruptedException {
    CompletableFuture<Transfer> f = rendezvous.computeIfAbsent(key, k -> new CompletableFuture<>());
    try {
      return f.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException | ExecutionException e) {
      return null;
    } finally {
      rendezvous.remove(key, f);
    }
  }

  private void hold(String key, Transfer t) {
    if (key.startsWith("req:")) {
      List<Transfer> expired = new ArrayList<>();
      synchronized (held) {
        long now = b.nanoClock.getAsLong();
        Iterator<Transfer> it = held.values().iterator();
        while (it.hasNext()) {
          Transfer x = it.next();
          if (held.size() >= b.maxPendingTransfers || x.deadline - now <= 0) {
            it.remove();
            expired.add(x);
          } else {
            break;
          }
        }
        held.put(key, t);
      }
      expired.forEach(Transfer::release);
      return;
    }
    CompletableFuture<Transfer> f = rendezvous.computeIfAbsent(key, k -> new CompletableFuture<>());
    if (!f.complete(t)) {
      t.release();
      return;
    }
    // The decode takes the transfer within transferTimeout; otherwise release it.
    CompletableFuture.delayedExecutor(b.transferTimeout.toNanos(), TimeUnit.NANOSECONDS)
        .execute(
            () -> {
              if (rendezvous.remove(key, f)) {
                t.release();
              }
            });
  }

  private void run(HttpExchange ex, Gen g, SimFaults.Decision fault, long arrival)
      throws IOException, InterruptedException {
    Plan plan = null;
    waiting.incrementAndGet();
    if (g.lora != null) {
      waitingLoras.computeIfAbsent(g.lora, k -> new AtomicInteger()).incrementAndGet();
    }
    boolean admitted = false;
    BlockPool.Seq seq = new BlockPool.Seq(g.prompt, g.extras, g.loraId, g.lora);
    BlockPool.Hit hit;
    try {
      try {
        plan = plan(g);
      } catch (BadRequest e) {
        countError();
        sendError(ex, e.status, errorType(e.status), e.getMessage());
        return;
      }
      slots.acquire();
      admitted = true;
      int total = g.prompt.length + g.maxTokens;
      while (true) {
        hit = pool.lookup(seq);
        if (pool.allocate(seq, hit.gpuTokens(), total)) {
          break;
        }
        if (isClosed()) {
          throw new AbortConnection();
        }
        pool.awaitFree(TimeUnit.MILLISECONDS.toNanos(20));
      }
    } catch (InterruptedException | RuntimeException e) {
      if (admitted) {
        slots.release();
      }
      if (plan != null && plan.incoming != null) {
        plan.incoming.release();
      }
      throw e;
    } finally {
      waiting.decrementAndGet();
      if (g.lora != null) {
        waitingLoras.get(g.lora).decrementAndGet();
      }
    }
    running.incrementAndGet();
    if (g.lora != null) {
      runningLoras.computeIfAbsent(g.lora, k -> new AtomicInteger()).incrementAndGet();
    }
    boolean heldForTransfer = false;
    boolean finished = false;
    try {
      int promptLen = g.prompt.length;
      int cached = hit.tokens();
      if (plan.incoming != null) {
        int common = commonPrefix(plan.incoming.prompt, g.prompt);
        cached = Math.max(cached, Math.min(common, promptLen - 1));
        plan.incoming.release();
      } else if (b.protocol == KvTransferProtocol.SHARED_STORAGE && b.role.consumer()) {
        List<BlockHash> hashes = pool.hashesOf(seq, promptLen - 1);
        List<Long> u64 = new ArrayList<>(hashes.size());
        hashes.forEach(h -> u64.add(h.u64()));
        int stored = b.sharedStore.prefixLength(u64) * b.blockSize;
        cached = Math.max(cached, stored);
      }
      int uncached = promptLen - cached;
      double threshold = g.body.path("cache_hit_threshold").asDouble(0);
      if (threshold > 0 && (double) cached / promptLen < threshold) {
        // llm-d's cache_hit_threshold (vLLM RFC #24256): refuse without computing
        long ttftNanos = b.nanoClock.getAsLong() - arrival;
        Responder r = new Responder(ex, g, fault.closeAfterChunks());
        r.begin();
        r.token("", "cache_threshold");
        countSuccess(promptLen, cached, 0, ttftNanos);
        finished = true;
        finishRequest(g, seq, false);
        r.finish("", "cache_threshold", usage(promptLen, 0, cached), null);
        return;
      }
      b.sleeper.sleep(b.latency.prefillNanos(uncached) + fault.extraNanos());
      pool.cacheFullBlocks(seq, promptLen);
      if (b.protocol == KvTransferProtocol.SHARED_STORAGE && b.role.producer()) {
        List<Long> u64 = new ArrayList<>();
        pool.hashesOf(seq, promptLen).forEach(h -> u64.add(h.u64()));
        b.sharedStore.save(u64);
      }
      long ttftNanos = b.nanoClock.getAsLong() - arrival;
      int outTokens = fault.stop() ? 1 : g.maxTokens;
      String finish = fault.stop() ? "stop" : "length";
      long seed = fingerprint(g.prompt);
      ObjectNode ktpOut = null;
      if (plan.nixlProducer && "length".equals(finish) && outTokens == 1) {
        ktpOut = nixlParams(g, seq);
      } else if (b.protocol == KvTransferProtocol.SHARED_STORAGE
          && g.body.path("kv_transfer_params").path("ret_first_tok").asBoolean(false)) {
        // LMCache's own PD proxy reads the prefill's first token from kv_transfer_params
        ktpOut = NF.objectNode();
        ktpOut.put("first_tok", tokenizer.encodeText(SimTokenizer.outputPiece(seed, 0))[0]);
      }
      Responder r = new Responder(ex, g, fault.closeAfterChunks());
      r.begin();
      StringBuilder text = new StringBuilder();
      for (int i = 0; i < outTokens; i++) {
        if (i > 0) {
          b.sleeper.sleep(b.latency.perOutputToken().toNanos());
        }
        String piece = SimTokenizer.outputPiece(seed, i);
        for (int id : tokenizer.encodeText(piece)) {
          seq.append(id);
        }
        pool.cacheFullBlocks(seq, seq.numTokens() - 1);
        text.append(piece);
        r.token(piece, i == outTokens - 1 ? finish : null);
      }
      if (ktpOut != null) {
        heldForTransfer = true;
        hold(
            "req:" + g.internalId,
            new Transfer(
                this, seq, g.prompt, b.nanoClock.getAsLong() + b.transferTimeout.toNanos()));
      } else if (plan.holdKey != null) {
        heldForTransfer = true;
        hold(
            plan.holdKey,
            new Transfer(
                this, seq, g.prompt, b.nanoClock.getAsLong() + b.transferTimeout.toNanos()));
      }
      ObjectNode usage = usage(promptLen, outTokens, cached);
      // account before the last bytes go out, so a client that saw the response sees the stats
      countSuccess(promptLen, cached, outTokens, ttftNanos);
      finished = true;
      finishRequest(g, seq, heldForTransfer);
      r.finish(text.toString(), finish, usage, ktpOut);
    } finally {
      if (!finished) {
        finishRequest(g, seq, heldForTransfer);
      }
    }
  }

  private void finishRequest(Gen g, BlockPool.Seq seq, boolean heldForTransfer) {
    if (!heldForTransfer) {
      pool.free(seq);
    }
    running.decrementAndGet();
    if (g.lora != null) {
      runningLoras.get(g.lora).decrementAndGet();
    }
    slots.release();
  }

  private ObjectNode nixlParams(Gen g, BlockPool.Seq seq) {
    ObjectNode k = NF.objectNode();
    k.put("do_remote_prefill", true);
    k.put("do_remote_decode", false);
    ArrayNode ids = k.putArray("remote_block_ids");
    for (int id : pool.blockIds(seq)) {
      ids.add(id);
    }
    k.put("remote_engine_id", b.engineId);
    k.put("remote_request_id", g.internalId);
    k.put("remote_host", b.sideChannelHost);
    k.put("remote_port", b.sideChannelPort);
    k.put("tp_size", 1);
    return k;
  }

  private static int commonPrefix(int[] a, int[] c) {
    int n = Math.min(a.length, c.length);
    int i = 0;
    while (i < n && a[i] == c[i]) {
      i++;
    }
    return i;
  }

  private static long fingerprint(int[] tokens) {
    long h = 0xcbf29ce484222325L;
    for (int t : tokens) {
      h ^= t;
      h *= 0x100000001b3L;
    }
    return h;
  }

  private static ObjectNode usage(int prompt, int completion, int cached) {
    ObjectNode u = NF.objectNode();
    u.put("prompt_tokens", prompt);
    u.put("total_tokens", prompt + completion);
    u.put("completion_tokens", completion);
    u.putObject("prompt_tokens_details").put("cached_tokens", cached);
    return u;
  }

  /** Writes one response, streaming (vLLM SSE framing) or not. */
  private final class Responder {
    private final HttpExchange ex;
    private final Gen g;
    private final int closeAfter;
    private final long created = b.clock.millis() / 1000;
    private OutputStream out;
    private int events;

    Responder(HttpExchange ex, Gen g, int closeAfter) {
      this.ex = ex;
      this.g = g;
      this.closeAfter = closeAfter;
    }

    void begin() throws IOException {
      if (!g.stream) {
        return;
      }
      ex.getResponseHeaders().set("content-type", "text/event-stream; charset=utf-8");
      ex.sendResponseHeaders(200, 0);
      out = ex.getResponseBody();
      if (g.chat) {
        ObjectNode c = chunkHead();
        ObjectNode choice = c.putArray("choices").addObject();
        choice.put("index", 0);
        ObjectNode delta = choice.putObject("delta");
        delta.put("role", "assistant");
        delta.put("content", "");
        choice.putNull("logprobs");
        choice.putNull("finish_reason");
        event(c);
      }
    }

    private ObjectNode chunkHead() {
      ObjectNode c = NF.objectNode();
      c.put("id", g.id);
      c.put("object", g.chat ? "chat.completion.chunk" : "text_completion");
      c.put("created", created);
      c.put("model", g.model);
      return c;
    }

    private void event(JsonNode node) throws IOException {
      if (closeAfter >= 0 && events >= closeAfter) {
        out.flush();
        throw new AbortConnection();
      }
      out.write("data: ".getBytes(StandardCharsets.UTF_8));
      out.write(JSON.writeValueAsBytes(node));
      out.write("\n\n".getBytes(StandardCharsets.UTF_8));
      out.flush();
      events++;
    }

    void token(String piece, String finish) throws IOException {
      if (!g.stream) {
        return;
      }
      ObjectNode c = chunkHead();
      ObjectNode choice = c.putArray("choices").addObject();
      choice.put("index", 0);
      if (g.chat) {
        choice.putObject("delta").put("content", piece);
        choice.putNull("logprobs");
        if (finish == null) {
          choice.putNull("finish_reason");
        } else {
          choice.put("finish_reason", finish);
          choice.putNull("stop_reason");
        }
      } else {
        choice.put("text", piece);
        choice.putNull("logprobs");
        if (finish == null) {
          choice.putNull("finish_reason");
        } else {
          choice.put("finish_reason", finish);
        }
        choice.putNull("stop_reason");
      }
      event(c);
    }

    void finish(String text, String finish, ObjectNode usage, ObjectNode ktp) throws IOException {
      if (g.stream) {
        if (g.includeUsage) {
          ObjectNode c = chunkHead();
          c.putArray("choices");
          c.set("usage", usage);
          event(c);
        }
        if (closeAfter >= 0 && events >= closeAfter) {
          out.flush();
          throw new AbortConnection();
        }
        out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
        out.flush();
        return;
      }
      ObjectNode root = NF.objectNode();
      root.put("id", g.id);
      root.put("object", g.chat ? "chat.completion" : "text_completion");
      root.put("created", created);
      root.put("model", g.model);
      ObjectNode choice = root.putArray("choices").addObject();
      choice.put("index", 0);
      if (g.chat) {
        ObjectNode msg = choice.putObject("message");
        msg.put("role", "assistant");
        msg.put("content", text);
        msg.putNull("refusal");
        msg.putNull("annotations");
        msg.putNull("audio");
        msg.putNull("function_call");
        msg.putArray("tool_calls");
        msg.putNull("reasoning_content");
        choice.putNull("logprobs");
        choice.put("finish_reason", finish);
        choice.putNull("stop_reason");
      } else {
        choice.put("text", text);
        choice.putNull("logprobs");
        choice.put("finish_reason", finish);
        choice.putNull("stop_reason");
        choice.putNull("prompt_logprobs");
      }
      root.putNull("service_tier");
      root.putNull("system_fingerprint");
      root.set("usage", usage);
      root.putNull("prompt_logprobs");
      if (ktp == null) {
        root.putNull("kv_transfer_params");
      } else {
        root.set("kv_transfer_params", ktp);
      }
      byte[] bytes = JSON.writeValueAsBytes(root);
      ex.getResponseHeaders().set("content-type", "application/json");
      if (closeAfter >= 0) {
        ex.sendResponseHeaders(200, bytes.length);
        ex.getResponseBody().write(bytes, 0, Math.min(bytes.length, 8));
        ex.getResponseBody().flush();
        throw new AbortConnection();
      }
      ex.sendResponseHeaders(200, bytes.length);
      try (OutputStream os = ex.getResponseBody()) {
        os.write(bytes);
      }
    }
  }
}
