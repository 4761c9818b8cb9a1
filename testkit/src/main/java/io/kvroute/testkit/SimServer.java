package io.kvroute.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import io.kvroute.testkit.internal.BlockPool;
import io.kvroute.testkit.internal.RequestLog;
import io.kvroute.testkit.internal.Responder;
import io.kvroute.testkit.internal.SimHttp;
import io.kvroute.testkit.internal.SimHttp.AbortConnection;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The simulator's HTTP front end and lifecycle: binds the servers and the event publisher, routes
 * each endpoint, and serves the simple ones ({@code /v1/models}, {@code /health}, {@code
 * /tokenize}, the render endpoints, {@code /metrics}, {@code /reset_prefix_cache}, the bootstrap
 * query). Generation is {@link Generation}'s, PD transfers {@link KvTransfers}', accounting {@link
 * SimMetrics}'.
 *
 * <p>Thread-safe; see {@link VllmSimulator}.
 */
final class SimServer {
  private static final Logger LOG = LoggerFactory.getLogger(SimServer.class);

  final VllmSimulator.Builder b;
  final BlockPool pool;
  final SimFaults faults;
  private final EngineTokenizer endpointTokenizer;
  private final SimMetrics metrics;
  private final KvTransfers transfers;
  private final RequestLog log;
  private final Generation generation;
  private boolean closed;
  private volatile EventChannel events;
  private HttpServer http;
  private HttpServer bootstrap;
  private P2pNcclAgent p2p;
  private ExecutorService executor;
  private volatile String topic;
  private volatile boolean started;

  SimServer(VllmSimulator.Builder b) {
    this.b = b;
    this.endpointTokenizer = b.endpointTokenizer;
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
            },
            b.kvCacheGroups);
    this.metrics = new SimMetrics(b, pool);
    this.transfers = new KvTransfers(b, pool);
    this.log = new RequestLog(b.maxRecordedRequests);
    this.generation = new Generation(b, pool, faults, metrics, transfers, log);
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
    http.createContext("/v1/completions", ex -> serve(ex, () -> generation.serve(ex, false)));
    http.createContext("/v1/chat/completions", ex -> serve(ex, () -> generation.serve(ex, true)));
    http.createContext(
        "/v1/messages", ex -> serve(ex, () -> exactly(ex, Responder.Framing.MESSAGES)));
    http.createContext(
        "/v1/responses", ex -> serve(ex, () -> exactly(ex, Responder.Framing.RESPONSES)));
    http.createContext(
        "/v1/messages/render", ex -> serve(ex, () -> render(ex, Responder.Framing.MESSAGES)));
    http.createContext(
        "/v1/responses/render", ex -> serve(ex, () -> render(ex, Responder.Framing.RESPONSES)));
    http.createContext("/v1/models", ex -> serve(ex, () -> models(ex)));
    http.createContext(
        "/health", ex -> serve(ex, () -> SimHttp.send(ex, 200, "text/plain", new byte[0])));
    http.createContext("/tokenize", ex -> serve(ex, () -> tokenize(ex)));
    http.createContext(
        "/v1/chat/completions/render", ex -> serve(ex, () -> render(ex, Responder.Framing.CHAT)));
    http.createContext(
        "/v1/completions/render", ex -> serve(ex, () -> render(ex, Responder.Framing.COMPLETION)));
    http.createContext("/metrics", ex -> serve(ex, () -> metrics(ex)));
    http.createContext("/reset_prefix_cache", ex -> serve(ex, () -> resetEndpoint(ex)));
    http.createContext("/", ex -> serve(ex, () -> notFound(ex)));
    http.start();
    topic = b.topic != null ? b.topic : "kv@" + hostPort() + "@" + b.model;
    if (b.events) {
      events = new EventChannel(b, topic, faults);
      EventChannel ch = events;
      faults.onRelease(ch::releaseHeld);
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
      transfers.registerBootstrap(b.host + ":" + bootstrap.getAddress().getPort());
    }
    if (b.protocol == KvTransferProtocol.P2P_NCCL) {
      try {
        p2p = new P2pNcclAgent(b, faults, hostPort());
      } catch (IllegalStateException e) {
        close();
        throw e;
      }
      transfers.registerP2p(p2p.kvAddress());
      p2p.start();
    }
    transfers.registerEngine();
    started = true;
    LOG.debug("simulator {} started on {}", b.name, hostPort());
  }

  void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      generation.close();
    }
    faults.releaseHung();
    transfers.unregisterEngine();
    if (p2p != null) {
      transfers.unregisterP2p(p2p.kvAddress());
      p2p.close();
    }
    if (bootstrap != null) {
      transfers.unregisterBootstrap(b.host + ":" + bootstrap.getAddress().getPort());
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
    transfers.releaseHeld();
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

  String p2pNcclKvAddress() {
    return p2p == null ? null : p2p.kvAddress();
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
    return metrics.stats();
  }

  void resetStats() {
    metrics.resetStats();
  }

  List<RecordedRequest> requests() {
    return log.snapshot();
  }

  void clearRequests() {
    log.clear();
  }

  String metricsText() {
    return metrics.text();
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
        SimHttp.sendError(ex, 500, String.valueOf(e.getMessage()));
      } catch (IOException | RuntimeException ignored) {
        // headers may already be sent
      }
    } finally {
      if (!abort) {
        ex.close();
      }
    }
  }

  /** Generation at exactly the context's path; other paths under it are not served. */
  private void exactly(HttpExchange ex, Responder.Framing framing) throws IOException {
    String path = ex.getRequestURI().getPath();
    if (!path.equals(ex.getHttpContext().getPath())) {
      notFound(ex);
      return;
    }
    generation.serve(ex, framing);
  }

  private void notFound(HttpExchange ex) throws IOException {
    SimHttp.sendError(ex, 404, "Not Found: " + ex.getRequestURI().getPath());
  }

  // ---------------------------------------------------------------- simple endpoints

  private void models(HttpExchange ex) throws IOException {
    if (!SimHttp.requireMethod(ex, "GET")) {
      return;
    }
    long created = b.clock.millis() / 1000;
    ObjectNode root = SimHttp.NODES.objectNode();
    root.put("object", "list");
    ArrayNode data = root.putArray("data");
    data.add(modelCard(b.model, null, created));
    for (String lora : b.loras) {
      data.add(modelCard(lora, b.model, created));
    }
    SimHttp.sendJson(ex, 200, root);
  }

  private ObjectNode modelCard(String id, String parent, long created) {
    ObjectNode m = SimHttp.NODES.objectNode();
    m.put("id", id);
    m.put("object", "model");
    m.put("created", created);
    m.put("owned_by", "vllm");
    m.put("root", id);
    m.put("parent", parent); // null for the base model
    m.put("max_model_len", b.maxModelLen);
    return m;
  }

  private void bootstrapQuery(HttpExchange ex) throws IOException {
    ObjectNode root = SimHttp.NODES.objectNode();
    ObjectNode rank = root.putObject("0");
    rank.put("engine_id", b.engineId);
    rank.put("host", b.host);
    rank.put("http_port", http.getAddress().getPort());
    rank.put("dp_rank", 0);
    rank.put("tp_size", 1);
    SimHttp.sendJson(ex, 200, root);
  }

  private void resetEndpoint(HttpExchange ex) throws IOException {
    if (!SimHttp.requireMethod(ex, "POST")) {
      return;
    }
    log.record(ex, SimHttp.readBody(ex));
    resetPrefixCache();
    SimHttp.send(ex, 200, "text/plain", new byte[0]);
  }

  private void tokenize(HttpExchange ex) throws IOException {
    if (!SimHttp.requireMethod(ex, "POST")) {
      return;
    }
    JsonNode req = log.record(ex, SimHttp.readBody(ex));
    if (req == null || !req.isObject()) {
      SimHttp.sendError(ex, 400, "request body must be a JSON object");
      return;
    }
    int[] tokens;
    try {
      if (req.has("messages")) {
        tokens = endpointTokenizer.encodeChat(req);
      } else if (req.path("prompt").isTextual()) {
        tokens = endpointTokenizer.encodePrompt(req.get("prompt").asText());
      } else {
        SimHttp.sendError(ex, 400, "either prompt (string) or messages is required");
        return;
      }
    } catch (IllegalArgumentException e) {
      SimHttp.sendError(ex, 400, e.getMessage());
      return;
    }
    ObjectNode root = SimHttp.NODES.objectNode();
    root.put("count", tokens.length);
    root.put("max_model_len", b.maxModelLen);
    ArrayNode arr = root.putArray("tokens");
    for (int t : tokens) {
      arr.add(t);
    }
    root.putNull("token_strs");
    SimHttp.sendJson(ex, 200, root);
  }

  /**
   * vLLM's {@code POST /v1/chat/completions/render} ({@code chat}) and {@code POST
   * /v1/completions/render}: the request rendered to token ids, answered as vLLM's {@code
   * GenerateRequest} (one object for a chat, a list with one per prompt for completions), with
   * vLLM's 404 for an unknown model and 400 for a malformed or too long request.
   */
  private void render(HttpExchange ex, Responder.Framing framing) throws IOException {
    if (!SimHttp.requireMethod(ex, "POST")) {
      return;
    }
    boolean chat = framing != Responder.Framing.COMPLETION;
    JsonNode req = log.record(ex, SimHttp.readBody(ex));
    if (req == null || !req.isObject()) {
      SimHttp.sendError(ex, 400, "request body must be a JSON object");
      return;
    }
    if (framing == Responder.Framing.RESPONSES && req.hasNonNull("previous_response_id")) {
      SimHttp.sendError(
          ex, 400, "previous_response_id is not supported by the stateless render endpoint.");
      return;
    }
    if (framing == Responder.Framing.MESSAGES || framing == Responder.Framing.RESPONSES) {
      try {
        req =
            framing == Responder.Framing.MESSAGES
                ? ApiChats.fromMessages(req)
                : ApiChats.fromResponses(req);
      } catch (io.kvroute.testkit.internal.BadRequest e) {
        SimHttp.sendError(ex, e.status(), e.getMessage());
        return;
      }
    }
    if (req.path("model").isTextual()) {
      String model = req.get("model").asText();
      if (!model.equals(b.model) && !b.loras.contains(model)) {
        SimHttp.sendError(ex, 404, "The model `" + model + "` does not exist.");
        return;
      }
    }
    java.util.List<int[]> prompts = new java.util.ArrayList<>();
    try {
      if (chat) {
        if (!req.path("messages").isArray()) {
          SimHttp.sendError(ex, 400, "messages must be an array");
          return;
        }
        prompts.add(endpointTokenizer.encodeChat(req));
      } else {
        JsonNode p = req.get("prompt");
        if (p != null && p.isTextual()) {
          prompts.add(endpointTokenizer.encodePrompt(p.asText()));
        } else if (p != null && p.isArray() && p.size() > 0 && p.get(0).isIntegralNumber()) {
          prompts.add(ids(p));
        } else if (p != null && p.isArray() && p.size() > 0) {
          for (JsonNode one : p) {
            if (one.isTextual()) {
              prompts.add(endpointTokenizer.encodePrompt(one.asText()));
            } else if (one.isArray()) {
              prompts.add(ids(one));
            } else {
              throw new IllegalArgumentException(
                  "prompt must be a string, a list of strings, token ids or lists of token ids");
            }
          }
        } else {
          throw new IllegalArgumentException(
              "prompt must be a string, a list of strings, token ids or lists of token ids");
        }
      }
    } catch (IllegalArgumentException e) {
      SimHttp.sendError(ex, 400, e.getMessage());
      return;
    }
    ArrayNode list = SimHttp.NODES.arrayNode();
    for (int[] tokens : prompts) {
      if (tokens.length == 0) {
        SimHttp.sendError(ex, 400, "No token_ids rendered");
        return;
      }
      if (tokens.length >= b.maxModelLen) {
        SimHttp.sendError(
            ex,
            400,
            "This model's maximum context length is "
                + b.maxModelLen
                + " tokens. However, your request has "
                + tokens.length
                + " input tokens.");
        return;
      }
      list.add(generateRequest(req, chat, tokens));
    }
    SimHttp.sendJson(ex, 200, chat ? list.get(0) : list);
  }

  private static int[] ids(JsonNode arr) {
    int[] ids = new int[arr.size()];
    for (int i = 0; i < ids.length; i++) {
      JsonNode v = arr.get(i);
      if (!v.canConvertToInt() || v.asInt() < 0) {
        throw new IllegalArgumentException("prompt token ids must be non-negative ints");
      }
      ids[i] = v.asInt();
    }
    return ids;
  }

  /** vLLM's {@code GenerateRequest} for one rendered prompt (features null: no multimodal). */
  private ObjectNode generateRequest(JsonNode req, boolean chat, int[] tokens) {
    ObjectNode g = SimHttp.NODES.objectNode();
    g.put(
        "request_id",
        (chat ? "chatcmpl-" : "cmpl-") + java.util.UUID.randomUUID().toString().replace("-", ""));
    ArrayNode ids = g.putArray("token_ids");
    for (int t : tokens) {
      ids.add(t);
    }
    g.putNull("features");
    ObjectNode sampling = g.putObject("sampling_params");
    JsonNode mt =
        chat && req.hasNonNull("max_completion_tokens")
            ? req.get("max_completion_tokens")
            : req.get("max_tokens");
    int room = b.maxModelLen - tokens.length;
    sampling.put(
        "max_tokens", mt != null && mt.canConvertToInt() ? Math.min(mt.asInt(), room) : room);
    sampling.put("temperature", req.path("temperature").asDouble(1.0));
    if (req.path("model").isTextual()) {
      g.put("model", req.get("model").asText());
    } else {
      g.putNull("model");
    }
    g.put("stream", req.path("stream").asBoolean(false));
    g.putNull("stream_options");
    if (req.path("cache_salt").isTextual()) {
      g.put("cache_salt", req.get("cache_salt").asText());
    } else {
      g.putNull("cache_salt");
    }
    g.put("priority", req.path("priority").asInt(0));
    g.putNull("kv_transfer_params");
    return g;
  }

  private void metrics(HttpExchange ex) throws IOException {
    if (!SimHttp.requireMethod(ex, "GET")) {
      return;
    }
    SimHttp.send(
        ex,
        200,
        "text/plain; version=0.0.4; charset=utf-8",
        metricsText().getBytes(StandardCharsets.UTF_8));
  }
}
