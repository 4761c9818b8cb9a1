package io.kvroute.service.internal;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.edge.Exchange;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.service.CacheState;
import io.kvroute.service.PodState;
import io.kvroute.service.ServiceConfig;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The service's HTTP routes on kvroute's Netty edge ({@code io.kvroute.edge.EdgeServer}): the
 * score, state, pod and reuse APIs, health, readiness, Prometheus metrics and the dashboard.
 *
 * <p>Thread-safe: handlers run on the server's event loops; per-thread buffers (parsed request,
 * request keys, lookup result, response bytes) are reused through thread-locals, so a score request
 * over token ids or block keys allocates little. Requests with {@code prompt} text complete on the
 * tokenizer's HTTP client thread.
 */
public final class HttpApi implements io.kvroute.edge.Handler {
  private static final Logger log = LoggerFactory.getLogger(HttpApi.class);
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final String JSON_TYPE = "application/json";
  private static final byte[] HEALTHY = "{\"status\":\"ok\"}".getBytes(StandardCharsets.US_ASCII);
  private static final String PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8";

  private final ServiceConfig config;
  private final BlockIndex index;
  private final PodTracker tracker;
  private final ZmqEventFeed feed;
  private final RemoteTokenizer tokenizer;
  private final Supplier<String> scrape;
  private final Supplier<List<String>> notReady;
  private final java.time.Clock wallClock;
  private final MeterRegistry registry;
  private final Map<String, Timer> timers = new ConcurrentHashMap<>();
  private final Map<String, Timer[]> timerRows = new ConcurrentHashMap<>();
  private final Map<String, byte[]> assets;
  private final double gpuWeight;
  private final int maxBlocks;
  private final ReuseTally reuse;

  private final ThreadLocal<Buffers> buffers = ThreadLocal.withInitial(Buffers::new);

  /** Per-thread reusable buffers. */
  private static final class Buffers {
    final ScoreCodec.Parsed parsed = new ScoreCodec.Parsed();
    final PrefixMatch match = new PrefixMatch();
    long[] keys = new long[512];
    final ScoreCodec.Bytes out = new ScoreCodec.Bytes();
  }

  /**
   * The routes.
   *
   * @param config the configuration (limits, block size, model)
   * @param index the block index
   * @param tracker per-pod activity
   * @param feed the event feed (gaps, replays)
   * @param tokenizer the prompt tokenizer, or {@code null} if none is configured
   * @param scrape Prometheus text of the service's registry
   * @param notReady configured pods neither heard from nor timed out
   * @param wallClock clock of the reported instants
   * @param registry where {@code kvroute_service_http_requests} goes
   */
  public HttpApi(
      ServiceConfig config,
      BlockIndex index,
      PodTracker tracker,
      ZmqEventFeed feed,
      RemoteTokenizer tokenizer,
      Supplier<String> scrape,
      Supplier<List<String>> notReady,
      java.time.Clock wallClock,
      MeterRegistry registry) {
    this.config = config;
    this.index = index;
    this.tracker = tracker;
    this.feed = feed;
    this.tokenizer = tokenizer;
    this.scrape = scrape;
    this.notReady = notReady;
    this.wallClock = wallClock;
    this.registry = registry;
    this.gpuWeight = Math.max(1e-9, index.config().tierWeight("GPU"));
    this.maxBlocks = Math.max(1, config.maxTokens() / config.blockSize());
    this.reuse = new ReuseTally(registry, config.blockSize());
    this.assets =
        Map.of(
            "/", asset("index.html"),
            "/index.html", asset("index.html"),
            "/dashboard.js", asset("dashboard.js"),
            "/dashboard.css", asset("dashboard.css"));
  }

  private static byte[] asset(String name) {
    String path = "/io/kvroute/service/dashboard/" + name;
    try (InputStream in = HttpApi.class.getResourceAsStream(path)) {
      if (in == null) {
        throw new IllegalStateException("missing classpath resource " + path);
      }
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public void handle(Exchange ex) {
    long start = System.nanoTime();
    String route = "other";
    int status = 500;
    try {
      String path = ex.path();
      String method = ex.method();
      if (path.equals("/api/v1/score")) {
        route = "score";
        requireMethod(method, "POST");
        status = score(ex, start);
        return;
      }
      requireGetOrHead(method, path);
      if (path.equals("/api/v1/cache/state")) {
        route = "state";
        status = sendJson(ex, 200, state());
      } else if (path.equals("/api/v1/reuse")) {
        route = "reuse";
        status = sendJson(ex, 200, reuse.snapshot());
      } else if (path.equals("/api/v1/cache/pods")) {
        route = "pods";
        List<PodState> all = new ArrayList<>();
        for (String id : tracker.ids()) {
          PodState s = podState(id);
          if (s != null) {
            all.add(s);
          }
        }
        status = sendJson(ex, 200, Map.of("pods", all));
      } else if (path.startsWith("/api/v1/cache/pod/")) {
        route = "pod";
        String id =
            URLDecoder.decode(
                path.substring("/api/v1/cache/pod/".length()), StandardCharsets.UTF_8);
        PodState s = id.isEmpty() ? null : podState(id);
        if (s == null) {
          throw new ApiException(404, "pod_id", "unknown pod \"" + id + "\"");
        }
        status = sendJson(ex, 200, s);
      } else if (path.equals("/healthz")) {
        route = "healthz";
        status = send(ex, 200, JSON_TYPE, HEALTHY);
      } else if (path.equals("/readyz")) {
        route = "readyz";
        List<String> waiting = notReady.get();
        status =
            waiting.isEmpty()
                ? sendJson(ex, 200, Map.of("ready", true))
                : sendJson(ex, 503, Map.of("ready", false, "waiting_for", waiting));
      } else if (path.equals("/metrics")) {
        route = "metrics";
        status = send(ex, 200, PROMETHEUS_TYPE, scrape.get().getBytes(StandardCharsets.UTF_8));
      } else if (assets.containsKey(path)) {
        route = "dashboard";
        String type =
            path.endsWith(".js")
                ? "text/javascript; charset=utf-8"
                : path.endsWith(".css") ? "text/css; charset=utf-8" : "text/html; charset=utf-8";
        status = send(ex, 200, type, assets.get(path));
      } else {
        throw new ApiException(404, null, "no route " + path);
      }
    } catch (ApiException e) {
      status = sendError(ex, e.status(), e.field(), e.getMessage());
    } catch (IOException | RuntimeException e) {
      log.warn("internal error on {} {}", ex.method(), ex.path(), e);
      status = sendError(ex, 500, null, "internal error: " + e.getClass().getSimpleName());
    } finally {
      if (status != 0) {
        record(route, status, System.nanoTime() - start);
      }
    }
  }

  private void record(String route, int status, long nanos) {
    Timer t = null;
    int slot = status >= 100 && status < 600 ? status - 100 : -1;
    Timer[] row = slot < 0 ? null : timerRows.get(route);
    if (row != null) {
      t = row[slot];
    }
    if (t == null) {
      String key = route + ' ' + status;
      t =
          timers.computeIfAbsent(
              key,
              k ->
                  Timer.builder("kvroute.service.http.requests")
                      .tag("route", route)
                      .tag("status", Integer.toString(status))
                      .register(registry));
      if (slot >= 0) {
        timerRows.computeIfAbsent(route, r -> new Timer[500])[slot] = t; // benign race
      }
    }
    t.record(nanos, java.util.concurrent.TimeUnit.NANOSECONDS);
  }

  private static void requireMethod(String method, String allowed) {
    if (!method.equals(allowed)) {
      throw new ApiException(405, null, "method " + method + " not allowed; use " + allowed);
    }
  }

  private static void requireGetOrHead(String method, String path) {
    if (!method.equals("GET") && !method.equals("HEAD")) {
      throw new ApiException(405, null, "method " + method + " not allowed on " + path);
    }
  }

  // ------------------------------------------------------------------ score

  /** Returns the status sent, or 0 when the answer will be sent asynchronously. */
  private int score(Exchange ex, long start) throws IOException {
    Buffers b = buffers.get();
    if (ex.bodyLength() == 0) {
      throw ApiException.badRequest("body", "the body must be a JSON object, was empty");
    }
    ScoreCodec.Parsed req = b.parsed;
    ScoreCodec.parse(
        ex.body(),
        0,
        ex.bodyLength(),
        req,
        config.maxTokens(),
        maxBlocks,
        config.maxCandidatePods());
    if (req.numBlocks >= 0) {
      return answer(ex, b, req.blocks, req.numBlocks, req);
    }
    if (req.numTokens >= 0) {
      int n = req.numTokens / config.blockSize();
      if (b.keys.length < n) {
        b.keys = new long[Math.max(n, b.keys.length * 2)];
      }
      int k = index.keyHasher().requestKeys(req.tokens, req.numTokens, req.keyRoot(), b.keys);
      return answer(ex, b, b.keys, k, req);
    }
    if (tokenizer == null) {
      throw ApiException.badRequest(
          "prompt",
          "prompt: no tokenizer is configured; send token_ids or prompt_blocks, or set"
              + " tokenizer.url in the service configuration");
    }
    ScoreCodec.Parsed detached = req.detach();
    String model = req.model != null ? req.model : config.model();
    tokenizer
        .tokenize(model, req.prompt)
        .whenComplete(
            (tokens, err) -> {
              int status;
              if (err != null) {
                Throwable c = err.getCause() != null ? err.getCause() : err;
                if (c instanceof RemoteTokenizer.TokenizerException te) {
                  status = sendError(ex, te.status(), "prompt", te.getMessage());
                } else {
                  status = sendError(ex, 502, "prompt", "tokenizer failed: " + c);
                }
              } else {
                try {
                  Buffers tb = buffers.get();
                  long[] keys = index.requestKeys(tokens, detached.keyRoot());
                  status = answer(ex, tb, keys, keys.length, detached);
                } catch (ApiException e) {
                  status = sendError(ex, e.status(), e.field(), e.getMessage());
                } catch (RuntimeException e) {
                  log.warn("score answer failed", e);
                  status = sendError(ex, 500, null, "internal error: " + e.getClass().getName());
                }
              }
              record("score", status, System.nanoTime() - start);
            });
    return 0;
  }

  private int answer(Exchange ex, Buffers b, long[] keys, int numKeys, ScoreCodec.Parsed req) {
    List<String> pods = req.hasCandidates ? req.candidates : tracker.ids();
    PrefixMatch m = index.lookup(keys, numKeys, pods, b.match);
    ScoreCodec.Bytes out = b.out;
    out.reset();
    int best = ScoreCodec.writeScores(out, m, numKeys, gpuWeight, config.blockSize());
    int available = 0;
    for (int i = 0, n = m.size(); i < n; i++) {
      available = Math.max(available, m.matchedBlocks(i));
    }
    reuse.record(numKeys, available, best < 0 ? 0 : m.matchedBlocks(best));
    return send(ex, 200, JSON_TYPE, out.buf, out.size);
  }

  // ------------------------------------------------------------------ state

  private CacheState state() {
    IndexStats s = index.stats();
    List<String> ids = tracker.ids();
    int reporting = 0;
    double utilSum = 0;
    int utilPods = 0;
    for (String id : ids) {
      PodTracker.Pod p = tracker.get(id);
      if (p == null) {
        continue;
      }
      if (p.heardFrom()) {
        reporting++;
      }
      long cap = p.spec().capacityBlocks();
      if (cap > 0) {
        utilSum += Math.min(1.0, gpuBlocks(index.podEntries(id)) / (double) cap);
        utilPods++;
      }
    }
    long dropped = 0;
    for (long v : s.dropped().values()) {
      dropped += v;
    }
    long last = tracker.lastEventMillis();
    return new CacheState(
        s.entries(),
        s.keys(),
        ids.size(),
        reporting,
        utilPods == 0 ? null : ScoreCodec.round4(utilSum / utilPods),
        last < 0 ? null : Instant.ofEpochMilli(last).toString(),
        tracker.eventsTotal(),
        dropped,
        config.blockSize(),
        config.model(),
        notReady.get().isEmpty());
  }

  private static long gpuBlocks(Map<String, Long> entries) {
    Long v = entries.get("GPU");
    return v == null ? 0 : v;
  }

  private PodState podState(String id) {
    PodTracker.Pod p = tracker.get(id);
    if (p == null) {
      return null;
    }
    Map<String, Long> entries = index.podEntries(id);
    long total = 0;
    for (long v : entries.values()) {
      total += v;
    }
    long now = tracker.nanoTime();
    String status;
    if (!p.heardFrom()) {
      status = now - p.addedNanos() >= config.readyTimeout().toNanos() ? "timed_out" : "waiting";
    } else if (p.lastGapNanos() != 0 && now - p.lastGapNanos() < 60_000_000_000L) {
      status = "degraded";
    } else {
      status = "healthy";
    }
    long cap = p.spec().capacityBlocks();
    long last = p.lastEventMillis();
    return new PodState(
        id,
        status,
        total,
        entries,
        cap > 0 ? ScoreCodec.round4(Math.min(1.0, gpuBlocks(entries) / (double) cap)) : null,
        ScoreCodec.round2(p.eventsPerSecond(now)),
        p.events(),
        p.stored(),
        p.removed(),
        ScoreCodec.round2(p.removalsPerSecond(now)),
        last < 0 ? null : Instant.ofEpochMilli(last).toString(),
        feed.gaps(id),
        feed.replays(id),
        feed.restarts(id),
        p.spec().events());
  }

  // ------------------------------------------------------------------ sending

  private int sendJson(Exchange ex, int status, Object value) throws IOException {
    return send(ex, status, JSON_TYPE, MAPPER.writeValueAsBytes(value));
  }

  private static int sendError(Exchange ex, int status, String field, String message) {
    if (status == 413) {
      ex.closeAfterResponse();
    }
    return send(ex, status, JSON_TYPE, errorBody(status, field, message));
  }

  private static int send(Exchange ex, int status, String type, byte[] body) {
    ex.respond(status, type, body);
    return status;
  }

  private static int send(Exchange ex, int status, String type, byte[] body, int len) {
    ex.respond(status, type, java.util.Arrays.copyOf(body, len));
    return status;
  }

  /**
   * The service's error body, {@code {"error":"…","field":"…","status":N}}; the edge's own refusals
   * (413, 408, 431, …) use it too.
   */
  public static byte[] errorBody(int status, String field, String message) {
    ScoreCodec.Bytes b = new ScoreCodec.Bytes(128 + message.length());
    b.ascii("{\"error\":").jsonString(message);
    if (field != null) {
      b.ascii(",\"field\":").jsonString(field);
    }
    b.ascii(",\"status\":").number(status).ascii("}");
    return java.util.Arrays.copyOf(b.buf, b.size);
  }
}
