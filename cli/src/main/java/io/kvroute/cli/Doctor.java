package io.kvroute.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import io.kvroute.kvindex.parity.HashSettings;
import io.kvroute.kvindex.parity.ParityCheck;
import io.kvroute.kvindex.parity.ParityDiagnosis;
import io.kvroute.kvindex.parity.ParityEvidence;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import io.kvroute.kvindex.zmq.PodEndpoint;
import io.kvroute.scoring.SchedulingRequest;
import io.kvroute.scoring.Tokenizer;
import io.kvroute.scoring.Tokenizers;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * {@code kvroute doctor}'s checks against one running engine: it sends a probe chat and a probe
 * completion with unique prompts, follows the engine's KV events, and compares what the engine
 * cached (the events' block size, hashes and token ids) with what kvroute expects and computes. The
 * hash comparison is {@link ParityCheck}'s, the same the router's parity check uses.
 *
 * <p>Not thread-safe: one {@link #run()} per instance (the event listener runs on the subscriber's
 * thread and hands batches over under a lock).
 */
final class Doctor {
  /** The outcome of one check. */
  enum Status {
    PASS,
    FAIL,
    SKIP
  }

  /**
   * One line of the checklist.
   *
   * @param check what was checked
   * @param status the outcome
   * @param detail what was observed
   * @param fix what to change (empty unless failed)
   */
  record Line(String check, Status status, String detail, String fix) {}

  /**
   * What to check.
   *
   * @param engine the engine's base URL
   * @param events its KV-event publisher
   * @param replay its replay endpoint, or null
   * @param topic the subscription's topic prefix
   * @param model the model to probe, or null for the engine's first
   * @param expected the hashing kvroute expects (block size, algorithm, seed)
   * @param localTokenizer the local tokenizer kvroute uses for a model, or null
   * @param localTokenizerName how the local tokenizer is named in the checklist
   * @param timeout how long to wait for an answer or for events
   * @param maxClockSkew the largest tolerated difference between event {@code ts} and this clock
   * @param clock this machine's wall clock
   * @param nonces unique strings for the probe prompts
   */
  record Options(
      URI engine,
      String events,
      String replay,
      String topic,
      String model,
      HashSettings expected,
      Function<String, Tokenizer> localTokenizer,
      String localTokenizerName,
      Duration timeout,
      Duration maxClockSkew,
      Clock clock,
      Supplier<String> nonces) {}

  static final String TOKENIZE = "/tokenize";
  static final String RENDER = "render endpoints";
  private static final int MAX_BATCHES = 20_000;
  private static final int PROBE_OUTPUT_TOKENS = 128;
  private static final Duration QUIET = Duration.ofMillis(500);

  private static final String FILLER_CHAT =
      "You check that a gateway and a model server agree on every token of this conversation."
          + " The gateway routes each request to the server that already holds the longest"
          + " prefix of its prompt in its key-value cache, so both must split the same text into"
          + " the same token ids, through the same chat template, and hash the same blocks the"
          + " same way. Read the question and answer it in a single word.";
  private static final String FILLER_COMPLETION =
      " Once upon a time a careful engineer measured how often a cache was hit, wrote the"
          + " numbers in a notebook, and compared them with what the router had predicted for"
          + " each request. Where they differed she looked for the cause: a block size, a seed,"
          + " an algorithm or a template. The story continues:";

  private final Options o;
  private final HttpClient http;
  private final ObjectMapper json = new ObjectMapper();
  private final Object lock = new Object();
  private final List<Received> received = new ArrayList<>();
  private long lastBatchNanos;
  private long lastSeq = -1;

  /** A live batch and when it arrived. */
  private record Received(long nanos, long wallMillis, long seq, KvEventBatch batch) {}

  /** One probe request and what was learnt about it. */
  private static final class Probe {
    final String kind;
    final SchedulingRequest request;
    final ObjectNode body;
    final String path;
    final Map<String, int[]> tokens = new LinkedHashMap<>();
    final Map<String, String> tokenErrors = new LinkedHashMap<>();
    int promptLength = -1;
    String requestError;
    long sentNanos;
    ProbeChains.Attribution attribution;

    Probe(String kind, SchedulingRequest request, ObjectNode body, String path) {
      this.kind = kind;
      this.request = request;
      this.body = body;
      this.path = path;
    }

    List<KvEvent.BlockStored> events() {
      return attribution == null ? List.of() : attribution.chain().events();
    }
  }

  Doctor(Options options) {
    this.o = Objects.requireNonNull(options, "options");
    this.http = HttpClient.newBuilder().connectTimeout(options.timeout()).build();
  }

  /** Runs every check and returns the checklist. */
  List<Line> run() throws InterruptedException {
    List<Line> lines = new ArrayList<>();
    List<String> models;
    try {
      models = models();
    } catch (IOException | RuntimeException e) {
      lines.add(
          new Line(
              "engine answers",
              Status.FAIL,
              "GET " + o.engine() + "/v1/models: " + message(e),
              "check --engine: the engine's base URL (http://host:port), reachable from here"));
      return lines;
    }
    String model = o.model() != null ? o.model() : models.get(0);
    if (!models.contains(model)) {
      lines.add(
          new Line(
              "engine answers",
              Status.FAIL,
              "the engine serves " + models + ", not \"" + model + "\"",
              "pass one of the served models with --model"));
      return lines;
    }
    lines.add(new Line("engine answers", Status.PASS, "serves " + String.join(", ", models), ""));

    Map<String, Tokenizer> sources = new LinkedHashMap<>();
    Tokenizer local = o.localTokenizer() == null ? null : o.localTokenizer().apply(model);
    if (local != null) {
      sources.put(o.localTokenizerName(), local);
    }
    sources.put(
        TOKENIZE, Tokenizers.vllm().baseUrl(o.engine()).timeout(o.timeout()).cache(0, 0).build());
    sources.put(
        RENDER,
        Tokenizers.vllmRender().baseUrl(o.engine()).timeout(o.timeout()).cache(0, 0).build());
    String used = local != null ? o.localTokenizerName() : TOKENIZE;

    List<Probe> probes = List.of(chatProbe(model), completionProbe(model));
    boolean live;
    ReplayProbe.Result replay = null;
    try (KvEventSubscriber sub =
        KvEventSubscriber.builder()
            .sink(KvEventSink.NOOP)
            .listener(listener())
            .topic(o.topic())
            .shards(1)
            .build()
            .start()) {
      try {
        sub.addPod(PodEndpoint.of("engine", o.events()))
            .get(o.timeout().toMillis(), TimeUnit.MILLISECONDS);
      } catch (ExecutionException | TimeoutException e) {
        throw new Main.CliException("cannot subscribe to " + o.events() + ": " + message(e));
      }
      live = warmUp(model);
      if (live) {
        awaitQuiet(); // the warm-up's last events, before the probes
      }
      for (Probe p : probes) {
        tokenize(p, sources);
        send(p);
        if (live && p.requestError == null) {
          settle(p);
        }
      }
      if (o.replay() != null) {
        long from;
        synchronized (lock) {
          from = Math.max(0, lastSeq);
        }
        replay = ReplayProbe.run(o.replay(), from, min(o.timeout(), Duration.ofSeconds(5)));
      }
    } finally {
      if (local instanceof AutoCloseable c) {
        try {
          c.close();
        } catch (Exception e) {
          // nothing to do: the process ends
        }
      }
    }

    lines.add(eventsLine(live, probes));
    List<KvEvent.BlockStored> probeEvents = new ArrayList<>();
    for (Probe p : probes) {
      probeEvents.addAll(p.events());
    }
    Integer engineBlockSize = engineBlockSize(probeEvents.isEmpty() ? allStored() : probeEvents);
    lines.add(blockSizeLine(engineBlockSize));
    lines.add(hashLine(probes, probeEvents, engineBlockSize, used));
    for (String source : sources.keySet()) {
      for (Probe p : probes) {
        lines.add(tokensLine(source, source.equals(used), p, live));
      }
    }
    lines.add(parityLine(probes, used));
    lines.add(replayLine(replay));
    lines.add(clockLine());
    return lines;
  }

  // ---------------------------------------------------------------- the engine

  private List<String> models() throws IOException, InterruptedException {
    HttpResponse<String> r =
        http.send(
            HttpRequest.newBuilder(URI.create(o.engine() + "/v1/models"))
                .timeout(o.timeout())
                .GET()
                .build(),
            HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() != 200) {
      throw new IOException("HTTP " + r.statusCode());
    }
    List<String> ids = new ArrayList<>();
    for (JsonNode m : json.readTree(r.body()).path("data")) {
      if (m.path("id").isTextual()) {
        ids.add(m.get("id").asText());
      }
    }
    if (ids.isEmpty()) {
      throw new IOException("no model in the answer");
    }
    return ids;
  }

  private Probe chatProbe(String model) {
    String nonce = o.nonces().get();
    String system = "kvroute doctor probe " + nonce + ". " + FILLER_CHAT;
    String user = "Probe " + nonce + ": which word comes after cache?";
    ObjectNode body = json.createObjectNode();
    body.put("model", model);
    com.fasterxml.jackson.databind.node.ArrayNode messages = body.putArray("messages");
    messages.addObject().put("role", "system").put("content", system);
    messages.addObject().put("role", "user").put("content", user);
    outputOptions(body);
    SchedulingRequest r =
        SchedulingRequest.builder()
            .model(model)
            .messages(
                List.of(
                    new SchedulingRequest.ChatMessage("system", system),
                    new SchedulingRequest.ChatMessage("user", user)))
            .build();
    return new Probe("chat", r, body, "/v1/chat/completions");
  }

  private Probe completionProbe(String model) {
    String prompt = "kvroute doctor probe " + o.nonces().get() + "." + FILLER_COMPLETION;
    ObjectNode body = json.createObjectNode();
    body.put("model", model);
    body.put("prompt", prompt);
    outputOptions(body);
    SchedulingRequest r = SchedulingRequest.builder().model(model).prompt(prompt).build();
    return new Probe("completion", r, body, "/v1/completions");
  }

  /** Enough output to fill the prompt's last block, so its tokens show in the events. */
  private static void outputOptions(ObjectNode body) {
    body.put("max_tokens", PROBE_OUTPUT_TOKENS);
    body.put("temperature", 0);
    body.put("ignore_eos", true);
  }

  private void tokenize(Probe p, Map<String, Tokenizer> sources) throws InterruptedException {
    for (Map.Entry<String, Tokenizer> s : sources.entrySet()) {
      try {
        int[] ids =
            s.getValue()
                .tokenize(p.request)
                .toCompletableFuture()
                .get(o.timeout().toMillis(), TimeUnit.MILLISECONDS);
        p.tokens.put(s.getKey(), ids);
      } catch (ExecutionException | TimeoutException | RuntimeException e) {
        p.tokenErrors.put(s.getKey(), message(e));
      }
    }
  }

  private void send(Probe p) throws InterruptedException {
    p.sentNanos = System.nanoTime();
    try {
      HttpResponse<String> r = post(p.path, p.body);
      if (r.statusCode() != 200) {
        p.requestError = "HTTP " + r.statusCode() + ": " + errorMessage(r.body());
        return;
      }
      JsonNode usage = json.readTree(r.body()).path("usage").path("prompt_tokens");
      p.promptLength = usage.canConvertToInt() ? usage.asInt() : -1;
    } catch (IOException e) {
      p.requestError = message(e);
    }
  }

  private HttpResponse<String> post(String path, JsonNode body)
      throws IOException, InterruptedException {
    return http.send(
        HttpRequest.newBuilder(URI.create(o.engine() + path))
            .timeout(o.timeout())
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json.writeValueAsString(body)))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private String errorMessage(String body) {
    try {
      JsonNode m = json.readTree(body).path("error").path("message");
      if (m.isTextual()) {
        return m.asText();
      }
    } catch (IOException notJson) {
      // the body as it is
    }
    return body.length() > 200 ? body.substring(0, 200) + "..." : body;
  }

  // ---------------------------------------------------------------- events

  private KvEventListener listener() {
    return new KvEventListener() {
      @Override
      public void onBatch(
          String pod, String topic, long seq, KvEventBatch batch, boolean replayed) {
        if (replayed) {
          return;
        }
        synchronized (lock) {
          long now = System.nanoTime();
          if (received.size() < MAX_BATCHES) {
            received.add(new Received(now, o.clock().millis(), seq, batch));
          }
          lastBatchNanos = now;
          lastSeq = seq;
          lock.notifyAll();
        }
      }
    };
  }

  /**
   * Waits for the first live batch, sending a small unique completion now and then (a SUB socket
   * misses what is published before it has joined, so a quiet engine is poked until one arrives).
   */
  private boolean warmUp(String model) throws InterruptedException {
    long deadline = System.nanoTime() + o.timeout().toNanos();
    long nextPoke = System.nanoTime();
    while (true) {
      synchronized (lock) {
        if (!received.isEmpty()) {
          return true;
        }
      }
      long now = System.nanoTime();
      if (now - deadline >= 0) {
        return false;
      }
      if (now - nextPoke >= 0) {
        ObjectNode body = json.createObjectNode();
        body.put("model", model);
        body.put(
            "prompt",
            "kvroute doctor warm-up " + o.nonces().get() + ": are the KV events flowing yet?");
        body.put("max_tokens", 1);
        try {
          post("/v1/completions", body);
        } catch (IOException e) {
          // the probes will report it
        }
        nextPoke = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
      }
      awaitBatch(Math.min(deadline, nextPoke) - System.nanoTime());
    }
  }

  /** Waits until no batch has arrived for a while (at most the timeout). */
  private void awaitQuiet() throws InterruptedException {
    long deadline = System.nanoTime() + o.timeout().toNanos();
    while (true) {
      long now = System.nanoTime();
      long last;
      synchronized (lock) {
        last = lastBatchNanos;
      }
      if (now - last >= QUIET.toNanos() || now - deadline >= 0) {
        return;
      }
      awaitBatch(Math.min(deadline, last + QUIET.toNanos()) - now);
    }
  }

  /**
   * Waits until the probe's blocks have arrived: every full block of the prompt when the chain is
   * placed by token ids (or no new batch for a while after part of them), a quiet stream when it is
   * placed by arrival only; at most the timeout.
   */
  private void settle(Probe p) throws InterruptedException {
    long deadline = System.nanoTime() + o.timeout().toNanos();
    while (true) {
      List<KvEvent.BlockStored> events = storedSince(p.sentNanos);
      ProbeChains.Attribution a =
          ProbeChains.attribute(ProbeChains.chains(events), p.tokens, p.promptLength);
      p.attribution = a;
      long now = System.nanoTime();
      long quietSince;
      synchronized (lock) {
        quietSince = lastBatchNanos;
      }
      boolean byTokens = a != null && a.how().equals("token ids");
      if (byTokens && covers(a, p)) {
        return;
      }
      long quiet = byTokens ? 4 * QUIET.toNanos() : QUIET.toNanos();
      if (now - deadline >= 0 || (a != null && now - quietSince >= quiet)) {
        return;
      }
      awaitBatch(Math.min(deadline - now, TimeUnit.MILLISECONDS.toNanos(100)));
    }
  }

  /**
   * Whether the chain reaches past the prompt's last token: its last, partial block filled by
   * generated tokens, so a difference at the very end of the prompt (a generation prompt) shows.
   */
  private static boolean covers(ProbeChains.Attribution a, Probe p) {
    int length = p.promptLength;
    if (length < 0) {
      for (int[] t : p.tokens.values()) {
        length = Math.max(length, t.length);
      }
    }
    int bs = a.chain().blockSize();
    return a.offset() + a.chain().tokens().length >= (length + bs - 1) / bs * bs;
  }

  private void awaitBatch(long nanos) throws InterruptedException {
    if (nanos <= 0) {
      return;
    }
    synchronized (lock) {
      TimeUnit.NANOSECONDS.timedWait(lock, nanos);
    }
  }

  private List<KvEvent.BlockStored> storedSince(long nanos) {
    List<KvEvent.BlockStored> out = new ArrayList<>();
    synchronized (lock) {
      for (Received r : received) {
        if (r.nanos() - nanos >= 0) {
          for (KvEvent e : r.batch().events()) {
            if (e instanceof KvEvent.BlockStored s) {
              out.add(s);
            }
          }
        }
      }
    }
    return out;
  }

  private List<KvEvent.BlockStored> allStored() {
    return storedSince(Long.MIN_VALUE / 2);
  }

  private static Integer engineBlockSize(List<KvEvent.BlockStored> events) {
    Integer best = null;
    int most = 0;
    for (Map.Entry<Integer, Integer> e : ProbeChains.blockSizes(events).entrySet()) {
      if (e.getValue() > most) {
        best = e.getKey();
        most = e.getValue();
      }
    }
    return best;
  }

  // ---------------------------------------------------------------- the checklist

  private Line eventsLine(boolean live, List<Probe> probes) {
    String check = "KV events arrive";
    if (!live) {
      return new Line(
          check,
          Status.FAIL,
          "no KV-event batch from "
              + o.events()
              + (o.topic().isEmpty() ? "" : " (topic " + o.topic() + "*)")
              + " within "
              + o.timeout().toMillis()
              + " ms, though probes were sent",
          "start vLLM with prefix caching and --kv-events-config"
              + " '{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", \"endpoint\":"
              + " \"tcp://*:5557\"}'; check that --events is that publisher, reachable from here,"
              + " and that --topic is a prefix of the engine's topic");
    }
    int batches;
    synchronized (lock) {
      batches = received.size();
    }
    List<String> found = new ArrayList<>();
    List<String> missing = new ArrayList<>();
    for (Probe p : probes) {
      if (p.requestError != null) {
        missing.add(p.kind + " (" + p.path + " answered " + p.requestError + ")");
      } else if (p.attribution == null) {
        missing.add(p.kind);
      } else {
        found.add(
            p.kind
                + " "
                + p.attribution.chain().blocks()
                + " block(s)"
                + (p.attribution.how().equals("arrival")
                    ? " (placed by arrival: no tokenizer's ids match them)"
                    : ""));
      }
    }
    if (!missing.isEmpty()) {
      return new Line(
          check,
          Status.FAIL,
          batches + " batch(es) arrived, but none with the blocks of the probe " + missing,
          "check that the probe requests succeed, that prefix caching is on"
              + " (--enable-prefix-caching), and that --events is this engine's publisher");
    }
    return new Line(
        check,
        Status.PASS,
        batches + " batch(es); the probes' blocks: " + String.join(", ", found),
        "");
  }

  private Line blockSizeLine(Integer engine) {
    String check = "block size";
    int configured = o.expected().blockSize();
    if (engine == null) {
      return new Line(check, Status.SKIP, "no BlockStored event to read it from", "");
    }
    if (engine == configured) {
      return new Line(check, Status.PASS, engine + " tokens, as configured", "");
    }
    return new Line(
        check,
        Status.FAIL,
        "the engine's events carry block_size "
            + engine
            + "; kvroute is configured with "
            + configured,
        "set index.blockSize: "
            + engine
            + " in the gateway configuration (the engine's --block-size), or start vLLM with"
            + " --block-size "
            + configured);
  }

  private Line hashLine(
      List<Probe> probes, List<KvEvent.BlockStored> events, Integer engineBlockSize, String used) {
    String check = "hash algorithm and seed";
    if (events.isEmpty()) {
      return new Line(check, Status.SKIP, "no BlockStored event of the probes to hash", "");
    }
    HashSettings expected =
        engineBlockSize == null ? o.expected() : o.expected().withBlockSize(engineBlockSize);
    ParityEvidence.Builder ev = ParityEvidence.builder();
    events.forEach(ev::storedEvent);
    for (Probe p : probes) {
      if (p.attribution != null && p.tokens.containsKey(used)) {
        ev.promptTokens(p.tokens.get(used));
        break;
      }
    }
    ParityDiagnosis d = ParityCheck.of(expected).diagnose(ev.build());
    if (d.engineSettings().isEmpty()) {
      return new Line(
          check,
          Status.FAIL,
          "no algorithm with PYTHONHASHSEED "
              + seedsTried(expected)
              + " reproduces the engine's block hashes",
          "an engine running xxhash or xxhash_cbor without PYTHONHASHSEED hashes at random per"
              + " process: start it with PYTHONHASHSEED set; otherwise pass the engine's"
              + " PYTHONHASHSEED with --hash-seed");
    }
    HashSettings engine = d.engineSettings().get();
    boolean sameSeed =
        engine
            .pythonHashSeed()
            .orElse(VllmBlockHasher.DEFAULT_NONE_HASH_SEED)
            .equals(expected.pythonHashSeed().orElse(VllmBlockHasher.DEFAULT_NONE_HASH_SEED));
    String engineSays = engine.algorithm().vllmName() + ", " + engine.describeSeed();
    if (engine.algorithm() == expected.algorithm() && sameSeed) {
      return new Line(check, Status.PASS, engineSays + ", as expected", "");
    }
    return new Line(
        check,
        Status.FAIL,
        "the engine hashes with "
            + engineSays
            + "; kvroute expects "
            + expected.algorithm().vllmName()
            + ", "
            + expected.describeSeed(),
        "start vLLM as kvroute expects ("
            + expected.vllmCommandLine()
            + "), or configure kvroute with the engine's --prefix-caching-hash-algo "
            + engine.algorithm().vllmName()
            + " and "
            + engine.describeSeed()
            + " (here: --hash-algo "
            + engine.algorithm().vllmName()
            + engine.pythonHashSeed().map(s -> " --hash-seed '" + s + "'").orElse("")
            + ")");
  }

  private Line tokensLine(String source, boolean used, Probe p, boolean live) {
    String check = "tokens: " + source + ", " + p.kind + (used ? " (kvroute's)" : "");
    String error = p.tokenErrors.get(source);
    if (!live) {
      return new Line(
          check,
          Status.SKIP,
          "no KV events to compare with"
              + (error == null ? "" : " (tokenizing failed: " + error + ")"),
          "");
    }
    if (error != null) {
      if (source.equals(RENDER) && error.matches(".*answered HTTP (404|405|501).*")) {
        return new Line(check, Status.SKIP, "the engine does not serve them (" + error + ")", "");
      }
      return new Line(
          check,
          Status.FAIL,
          "tokenizing the probe failed: " + error,
          source.equals(TOKENIZE) || source.equals(RENDER)
              ? "check that the engine serves " + source + " for this model"
              : "check the local tokenizer's files (kvroute tokenize --model-dir DIR)");
    }
    if (p.requestError != null) {
      return new Line(check, Status.SKIP, "the probe failed: " + p.requestError, "");
    }
    int[] mine = p.tokens.get(source);
    if (p.attribution == null) {
      return new Line(
          check, Status.SKIP, mine.length + " tokens; no KV events of the probe to compare", "");
    }
    int end = p.promptLength >= 0 ? p.promptLength : mine.length;
    int offset = p.attribution.offset();
    int[] engine = p.attribution.tokensUpTo(end);
    int mismatch = -1;
    for (int i = 0; i < engine.length; i++) {
      if (offset + i >= mine.length || mine[offset + i] != engine[i]) {
        mismatch = offset + i;
        break;
      }
    }
    String fix = tokensFix(source);
    if (mismatch >= 0) {
      String at =
          mismatch < mine.length
              ? "kvroute has " + mine[mismatch] + ", the engine cached " + engine[mismatch - offset]
              : "kvroute's ids end there";
      return new Line(
          check,
          Status.FAIL,
          "differs from the tokens the engine cached from token " + mismatch + " (" + at + ")",
          fix);
    }
    if (p.promptLength >= 0 && mine.length != p.promptLength) {
      return new Line(
          check,
          Status.FAIL,
          mine.length
              + " tokens, the engine's prompt had "
              + p.promptLength
              + " (usage.prompt_tokens): they differ after token "
              + Math.min(mine.length, p.promptLength),
          fix);
    }
    return new Line(
        check,
        Status.PASS,
        mine.length
            + " tokens, as the engine cached them ("
            + engine.length
            + " compared with its events"
            + (offset > 0 ? ", from token " + offset : "")
            + ")",
        "");
  }

  private String tokensFix(String source) {
    if (source.equals(TOKENIZE) || source.equals(RENDER)) {
      return "the engine's "
          + source
          + " disagrees with what it caches (a server-side chat template or default template"
          + " options that reach chat requests but not "
          + source
          + "): give kvroute a local tokenizer with the engine's tokenizer files and chat template"
          + " (models.<name>.tokenizer), or start vLLM so that both render alike";
    }
    return "make "
        + source
        + " the engine's: the same tokenizer files (path, revision) and chat template (chatTemplate:"
        + " the file given to vLLM's --chat-template, or none to use the model's own)";
  }

  private Line parityLine(List<Probe> probes, String used) {
    String check = "parity of kvroute's predictions";
    HashSettings expected = o.expected();
    if (!expected.reproducible()) {
      return new Line(
          check,
          Status.FAIL,
          "kvroute expects "
              + expected.describe()
              + ": vLLM draws that NONE_HASH at random per process",
          "start the engine with PYTHONHASHSEED set and pass the same value with --hash-seed");
    }
    ParityCheck parity = ParityCheck.of(expected);
    List<String> ok = new ArrayList<>();
    for (Probe p : probes) {
      int[] mine = p.tokens.get(used);
      if (mine == null || p.attribution == null) {
        continue;
      }
      ParityEvidence.Builder ev = ParityEvidence.builder().promptTokens(mine);
      p.events().forEach(ev::storedEvent);
      int[] cached = p.attribution.chain().tokens();
      if (p.attribution.offset() == 0 && p.promptLength > 0 && cached.length >= p.promptLength) {
        // the engine's whole prompt, as it cached it
        ev.engineTokens(Arrays.copyOf(cached, p.promptLength), "the engine's KV events");
      }
      ParityDiagnosis d = parity.diagnose(ev.build());
      boolean cachedBefore =
          d.cause() == ParityDiagnosis.Cause.PARTIAL
              && p.attribution.offset() > 0
              && d.predictedBlocks() - d.matchedBlocks()
                  == p.attribution.offset() / expected.blockSize();
      if (!d.matches() && !cachedBefore) {
        return new Line(
            check, Status.FAIL, p.kind + ": " + d.cause() + ": " + d.message(), d.fix());
      }
      ok.add(p.kind + " " + d.matchedBlocks() + "/" + d.predictedBlocks());
    }
    if (ok.isEmpty()) {
      return new Line(check, Status.SKIP, "no probe with both kvroute's ids and KV events", "");
    }
    return new Line(
        check,
        Status.PASS,
        "the block hashes kvroute predicts ("
            + used
            + ", "
            + expected.describe()
            + ") are the engine's: "
            + String.join(", ", ok),
        "");
  }

  private Line replayLine(ReplayProbe.Result r) {
    String check = "replay endpoint answers";
    if (r == null) {
      return new Line(
          check,
          Status.SKIP,
          "no --replay given (vLLM's replay is off by default; without it kvroute resynchronises"
              + " a pod after lost events instead of replaying them)",
          "");
    }
    if (r.complete() && r.undecodable() == 0) {
      return new Line(
          check, Status.PASS, o.replay() + " replayed " + r.batches() + " batch(es)", "");
    }
    return new Line(
        check,
        Status.FAIL,
        o.replay()
            + ": "
            + (r.problem() != null
                ? r.problem()
                : r.undecodable() + " replayed batch(es) did not decode"),
        "set replay_endpoint in the engine's --kv-events-config (for example \"tcp://*:5558\");"
            + " check that --replay is that endpoint, reachable from here");
  }

  private Line clockLine() {
    String check = "clock skew of the events' ts";
    List<Long> skews = new ArrayList<>();
    synchronized (lock) {
      for (Received r : received) {
        skews.add(r.wallMillis() - Math.round(r.batch().ts() * 1000));
      }
    }
    if (skews.isEmpty()) {
      return new Line(check, Status.SKIP, "no batch received", "");
    }
    long[] sorted = skews.stream().mapToLong(Long::longValue).toArray();
    Arrays.sort(sorted);
    long median = sorted[sorted.length / 2];
    String detail =
        "the events' ts are "
            + Math.abs(median)
            + " ms "
            + (median >= 0 ? "behind" : "ahead of")
            + " this machine's clock (median of "
            + sorted.length
            + " batch(es))";
    if (Math.abs(median) <= o.maxClockSkew().toMillis()) {
      return new Line(check, Status.PASS, detail, "");
    }
    return new Line(
        check,
        Status.FAIL,
        detail + ", more than " + o.maxClockSkew().toMillis() + " ms",
        "synchronise the engine's and the gateway's clocks (NTP, chrony): event ages, lag metrics"
            + " and timeouts read ts against the gateway's clock");
  }

  // ---------------------------------------------------------------- helpers

  private static String seedsTried(HashSettings expected) {
    List<String> seeds = new ArrayList<>();
    expected.pythonHashSeed().ifPresent(s -> seeds.add("\"" + s + "\""));
    seeds.add("unset");
    for (String s : ParityCheck.DEFAULT_CANDIDATE_SEEDS) {
      if (!seeds.contains("\"" + s + "\"")) {
        seeds.add("\"" + s + "\"");
      }
    }
    return "in {" + String.join(", ", seeds) + "}";
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
  }

  private static String message(Throwable e) {
    Throwable t = e;
    while ((t instanceof ExecutionException
            || t instanceof java.util.concurrent.CompletionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    String m = t.getMessage();
    return m == null || m.isBlank() ? t.getClass().getSimpleName() : m;
  }
}
