package io.kvroute.testkit;

import io.kvroute.kvindex.event.EventSchema;
import io.kvroute.kvindex.hash.HashAlgorithm;
import java.time.Clock;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.UUID;
import java.util.function.DoubleSupplier;
import java.util.function.LongSupplier;

/**
 * An in-process simulator that behaves toward a gateway like one vLLM server with prefix caching
 * on: OpenAI completions and chat (streaming in vLLM's SSE framing, with {@code
 * usage.prompt_tokens_details.cached_tokens}), {@code /v1/models}, {@code /health}, {@code
 * /tokenize}, the render endpoints, Prometheus {@code /metrics} with vLLM's names, a vLLM-exact
 * block pool (hashing, LRU eviction, optional CPU tier), a real JeroMQ KV-event publisher with
 * replay, PD roles per connector family, and fault injection.
 *
 * <pre>{@code
 * try (VllmSimulator sim = VllmSimulator.builder().model("m").latency(LatencyModel.ZERO).build().start()) {
 *   URI base = sim.baseUrl();              // http://127.0.0.1:<port>
 *   String pub = sim.eventsEndpoint();     // tcp://127.0.0.1:<port>
 *   sim.faults().failNext(1, 503);
 * }
 * }</pre>
 *
 * <p>Endpoints: {@code POST /v1/completions}, {@code POST /v1/chat/completions}, {@code GET
 * /v1/models}, {@code GET /health}, {@code POST /tokenize}, {@code POST
 * /v1/chat/completions/render} and {@code POST /v1/completions/render} (vLLM's render endpoints: a
 * {@code GenerateRequest} with the prompt's {@code token_ids}, a list of them for completions),
 * {@code GET /metrics}, {@code POST /reset_prefix_cache}; a separate bootstrap server ({@code GET
 * /query}) for Mooncake and SGLang producers.
 *
 * <p>Thread-safe: requests are served concurrently on the simulator's own threads; all accessors
 * and fault methods may be called from any thread.
 */
public final class VllmSimulator implements AutoCloseable {

  private final SimServer server;

  private VllmSimulator(Builder b) {
    this.server = new SimServer(b);
  }

  /** A builder with defaults suitable for tests (free loopback ports, small latencies). */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Binds the HTTP server, the event publisher and (if needed) the bootstrap server.
   *
   * @return this
   * @throws IllegalStateException if already started or a port cannot be bound
   */
  public VllmSimulator start() {
    server.start();
    return this;
  }

  /** Stops every server and publisher, releasing hung requests. Idempotent. */
  @Override
  public void close() {
    server.close();
  }

  /** The pod name (builder {@code name}, default {@code "sim-<n>"}). */
  public String name() {
    return server.b.name;
  }

  /** The served base model name. */
  public String model() {
    return server.b.model;
  }

  /** The PD role. */
  public SimRole role() {
    return server.b.role;
  }

  /** The KV-transfer protocol. */
  public KvTransferProtocol protocol() {
    return server.b.protocol;
  }

  /** Labels given at build time plus {@code llm-d.ai/role}. */
  public Map<String, String> labels() {
    return server.labels();
  }

  /** The engine id (NIXL {@code remote_engine_id}, Mooncake {@code engine_id}). */
  public String engineId() {
    return server.b.engineId;
  }

  /** {@code http://127.0.0.1:<port>} (no trailing slash). Only after {@link #start()}. */
  public java.net.URI baseUrl() {
    return server.baseUrl();
  }

  /** {@code host:port} of the HTTP server. */
  public String hostPort() {
    return server.hostPort();
  }

  /** The ZMQ PUB endpoint to connect a SUB socket to, or null when events are disabled. */
  public String eventsEndpoint() {
    return server.eventsEndpoint();
  }

  /** The ZMQ ROUTER replay endpoint, or null when replay or events are disabled. */
  public String replayEndpoint() {
    return server.replayEndpoint();
  }

  /** The first frame of every event message (default {@code kv@<host:port>@<model>}). */
  public String topic() {
    return server.topic();
  }

  /** The bootstrap server's base URL (Mooncake/SGLang producers), or null. */
  public java.net.URI bootstrapUrl() {
    return server.bootstrapUrl();
  }

  /**
   * The P2pNccl KV address ({@code zmq_address}, {@code host:port}) of a {@link
   * KvTransferProtocol#P2P_NCCL} pod, or null.
   */
  public String p2pNcclKvAddress() {
    return server.p2pNcclKvAddress();
  }

  /** The bootstrap server's port, or -1. */
  public int bootstrapPort() {
    return server.bootstrapPort();
  }

  /** Fault injection for this simulator. */
  public SimFaults faults() {
    return server.faults;
  }

  /** Counters since start or the last {@link #resetStats()}. */
  public SimStats stats() {
    return server.stats();
  }

  /** Zeroes the counters and TTFT samples. */
  public void resetStats() {
    server.resetStats();
  }

  /** Requests received (POSTs, in arrival order; at most {@code maxRecordedRequests}). */
  public List<RecordedRequest> requests() {
    return server.requests();
  }

  /** Forgets recorded requests. */
  public void clearRequests() {
    server.clearRequests();
  }

  /** vLLM's {@code reset_prefix_cache}: emits {@code AllBlocksCleared}. */
  public void resetPrefixCache() {
    server.resetPrefixCache();
  }

  /** Event-form (u64) hashes of the GPU blocks currently cached. */
  public List<Long> cachedBlockHashes() {
    return server.pool.cachedHashes();
  }

  /** Fraction of GPU KV blocks in use (0..1), as {@code vllm:kv_cache_usage_perc}. */
  public double kvCacheUsage() {
    return server.pool.usage();
  }

  /** Event batches produced so far (sent, dropped or corrupted). */
  public long eventBatches() {
    return server.eventBatches();
  }

  /** The current {@code /metrics} text. */
  public String metricsText() {
    return server.metricsText();
  }

  @Override
  public String toString() {
    return "VllmSimulator{"
        + name()
        + ", "
        + role().label()
        + ", "
        + server.hostPortOrUnbound()
        + "}";
  }

  /** What a decode does when a KV transfer cannot be completed ({@code kv_load_failure_policy}). */
  public enum KvLoadFailurePolicy {
    /** Fail the request with a 500 (vLLM's default). */
    FAIL,
    /** Prefill locally. */
    RECOMPUTE
  }

  /** Validating builder of {@link VllmSimulator}; not thread-safe. Every option has a default. */
  public static final class Builder {
    private static final java.util.concurrent.atomic.AtomicInteger NAMES =
        new java.util.concurrent.atomic.AtomicInteger();

    String name;
    String model = "sim-model";
    List<String> loras = List.of();
    int maxLoras = 4;
    String host = "127.0.0.1";
    int port;
    int blockSize = 16;
    int gpuBlocks = 2048;
    int cpuBlocks;
    HashAlgorithm hashAlgorithm = HashAlgorithm.SHA256;
    String hashSeed;
    int maxModelLen = 32_768;
    int defaultMaxTokens = 16;
    SimRole role = SimRole.BOTH;
    KvTransferProtocol protocol = KvTransferProtocol.NONE;
    SharedKvStore sharedStore;
    boolean events = true;
    String eventsEndpoint;
    String replayEndpoint;
    boolean replay = true;
    String topic;
    EventSchema eventSchema = EventSchema.values()[EventSchema.values().length - 1];
    int replayBufferSteps = 10_000;
    LatencyModel latency = LatencyModel.DEFAULT;
    io.kvroute.testkit.engine.CostModel costModel;
    int maxNumBatchedTokens = 8192;
    Sleeper sleeper = Sleeper.SYSTEM;
    LongSupplier nanoClock = System::nanoTime;
    Clock clock = Clock.systemUTC();
    DoubleSupplier random;
    int maxRunning = 64;
    String engineId;
    String sideChannelHost = "localhost";
    int sideChannelPort = 5600;
    int bootstrapPort;
    String p2pNcclProxy;
    Duration p2pNcclPing = Duration.ofSeconds(3);
    int p2pNcclKvPort;
    Duration transferTimeout = Duration.ofSeconds(30);
    KvLoadFailurePolicy kvLoadFailurePolicy = KvLoadFailurePolicy.FAIL;
    int maxRecordedRequests = 1000;
    int maxPendingTransfers = 1024;
    Map<String, String> labels = new LinkedHashMap<>();
    EngineTokenizer tokenizer = EngineTokenizer.simulated();
    EngineTokenizer endpointTokenizer;
    List<io.kvroute.kvindex.hybrid.GroupSpec> kvCacheGroups = List.of();

    private Builder() {}

    /**
     * Hybrid mode: the engine's KV-cache groups, by group number (default none: one plain
     * full-attention group, as before). Group 0 must be full attention and is the block pool
     * itself; each further group (sliding window or mamba, all of {@link #blockSize(int)}-token
     * blocks) keeps its own cache of the same capacity, publishes its own events ({@code
     * group_idx}, {@code kv_cache_spec_kind}, {@code kv_cache_spec_sliding_window}) and evicts as
     * vLLM's managers free: a sliding-window group frees the blocks that left the window first, a
     * mamba group caches only the state at the end of each computed span. The prefix a request
     * reuses (its {@code cached_tokens}) follows vLLM's hybrid rule over all groups ({@link
     * io.kvroute.kvindex.hybrid.HybridPrefixRule}).
     */
    public Builder kvCacheGroups(List<io.kvroute.kvindex.hybrid.GroupSpec> groups) {
      this.kvCacheGroups = List.copyOf(groups);
      return this;
    }

    /**
     * A tokenizer for {@code /tokenize} and the render endpoints other than the one generation (and
     * so the KV events) uses: an engine whose tokenization endpoints disagree with what it caches,
     * as when a server-side chat template or default template options reach chat requests but not
     * those endpoints; for testing parity checks (default: {@link #tokenizer(EngineTokenizer)}'s).
     */
    public Builder endpointTokenizer(EngineTokenizer tokenizer) {
      this.endpointTokenizer = Objects.requireNonNull(tokenizer, "endpointTokenizer");
      return this;
    }

    /**
     * How prompts become token ids (default {@link EngineTokenizer#simulated()}); a real model's
     * tokenizer makes the pod's KV events and {@code /tokenize} match that model.
     */
    public Builder tokenizer(EngineTokenizer tokenizer) {
      this.tokenizer = Objects.requireNonNull(tokenizer, "tokenizer");
      return this;
    }

    /** Pod name used in logs, labels and cluster output (default {@code sim-<n>}). */
    public Builder name(String name) {
      this.name = Objects.requireNonNull(name, "name");
      return this;
    }

    /** Served base model name (default {@code sim-model}). */
    public Builder model(String model) {
      this.model = Objects.requireNonNull(model, "model");
      return this;
    }

    /** LoRA adapters served besides the base model (ids 1, 2, ... in this order). */
    public Builder loras(List<String> loraNames) {
      this.loras = List.copyOf(loraNames);
      return this;
    }

    /** {@code max_lora} reported in {@code vllm:lora_requests_info} (default 4). */
    public Builder maxLoras(int maxLoras) {
      this.maxLoras = maxLoras;
      return this;
    }

    /** HTTP bind host (default {@code 127.0.0.1}). */
    public Builder host(String host) {
      this.host = Objects.requireNonNull(host, "host");
      return this;
    }

    /** HTTP port (default 0: a free port). */
    public Builder port(int port) {
      this.port = port;
      return this;
    }

    /** Tokens per KV block (default 16). */
    public Builder blockSize(int blockSize) {
      this.blockSize = blockSize;
      return this;
    }

    /** GPU KV blocks (default 2048). */
    public Builder gpuBlocks(int gpuBlocks) {
      this.gpuBlocks = gpuBlocks;
      return this;
    }

    /** CPU offload tier size in blocks (default 0: no offload tier). */
    public Builder cpuBlocks(int cpuBlocks) {
      this.cpuBlocks = cpuBlocks;
      return this;
    }

    /** vLLM {@code --prefix-caching-hash-algo} (default {@code sha256}). */
    public Builder hashAlgorithm(HashAlgorithm algorithm) {
      this.hashAlgorithm = Objects.requireNonNull(algorithm, "hashAlgorithm");
      return this;
    }

    /**
     * {@code PYTHONHASHSEED} (default {@code null}: the pod runs as a vLLM without {@code
     * PYTHONHASHSEED}, its {@code NONE_HASH} from {@code "vllm-none-hash"}, which needs {@code
     * sha256} or {@code sha256_cbor}: vLLM draws the others at random; kvroute's default parity
     * settings expect this).
     */
    public Builder hashSeed(String pythonHashSeed) {
      this.hashSeed = pythonHashSeed;
      return this;
    }

    /** {@code max_model_len} (default 32768). */
    public Builder maxModelLen(int maxModelLen) {
      this.maxModelLen = maxModelLen;
      return this;
    }

    /** Output tokens when a request sets no limit (default 16, vLLM's completions default). */
    public Builder defaultMaxTokens(int defaultMaxTokens) {
      this.defaultMaxTokens = defaultMaxTokens;
      return this;
    }

    /** PD role (default {@link SimRole#BOTH}). */
    public Builder role(SimRole role) {
      this.role = Objects.requireNonNull(role, "role");
      return this;
    }

    /** KV-transfer protocol (default {@link KvTransferProtocol#NONE}). */
    public Builder protocol(KvTransferProtocol protocol) {
      this.protocol = Objects.requireNonNull(protocol, "protocol");
      return this;
    }

    /** The shared store for {@link KvTransferProtocol#SHARED_STORAGE} (required with it). */
    public Builder sharedStore(SharedKvStore store) {
      this.sharedStore = store;
      return this;
    }

    /** Whether to publish KV events (default true). */
    public Builder events(boolean enabled) {
      this.events = enabled;
      return this;
    }

    /** PUB bind endpoint (default {@code tcp://<host>:<free port>}). */
    public Builder eventsEndpoint(String endpoint) {
      this.eventsEndpoint = endpoint;
      return this;
    }

    /** ROUTER replay bind endpoint (default {@code tcp://<host>:<free port>}). */
    public Builder replayEndpoint(String endpoint) {
      this.replayEndpoint = endpoint;
      return this;
    }

    /** Whether to run the replay ROUTER (default true). */
    public Builder replay(boolean enabled) {
      this.replay = enabled;
      return this;
    }

    /** Event topic (default {@code kv@<host:port>@<model>}). */
    public Builder topic(String topic) {
      this.topic = topic;
      return this;
    }

    /** Event schema family (default: the newest {@link EventSchema}). */
    public Builder eventSchema(EventSchema schema) {
      this.eventSchema = Objects.requireNonNull(schema, "eventSchema");
      return this;
    }

    /** Replay buffer size in batches (default 10 000, vLLM's {@code buffer_steps}). */
    public Builder replayBufferSteps(int steps) {
      this.replayBufferSteps = steps;
      return this;
    }

    /** Latency model (default {@link LatencyModel#DEFAULT}; tests: {@link LatencyModel#ZERO}). */
    public Builder latency(LatencyModel latency) {
      this.latency = Objects.requireNonNull(latency, "latency");
      return this;
    }

    /**
     * Times prefill and decode with an engine {@link io.kvroute.testkit.engine.CostModel} instead
     * of the {@link LatencyModel}: a request's prefill sleeps what its uncached prompt costs in
     * steps of {@code maxNumBatchedTokens} (default 8192), each output token what a one-sequence
     * decode step at its context costs. The virtual-time {@link
     * io.kvroute.testkit.engine.EngineModel} uses the same model (with batching).
     */
    public Builder costModel(io.kvroute.testkit.engine.CostModel costModel) {
      this.costModel = Objects.requireNonNull(costModel, "costModel");
      return this;
    }

    /**
     * Takes an engine profile's block size, KV blocks, {@code max_num_seqs} (as {@link
     * #maxRunning}), {@code max_model_len}, token budget and cost model.
     */
    public Builder engineProfile(io.kvroute.testkit.engine.EngineProfile profile) {
      Objects.requireNonNull(profile, "engineProfile");
      this.blockSize = profile.blockSize();
      this.gpuBlocks = profile.kvBlocks();
      this.maxRunning = profile.maxNumSeqs();
      this.maxModelLen = profile.maxModelLen();
      this.maxNumBatchedTokens = profile.maxNumBatchedTokens();
      this.costModel = profile.costModel();
      return this;
    }

    /** How simulated time is waited (default {@link Sleeper#SYSTEM}). */
    public Builder sleeper(Sleeper sleeper) {
      this.sleeper = Objects.requireNonNull(sleeper, "sleeper");
      return this;
    }

    /** Monotonic clock for TTFT and timeouts (default {@link System#nanoTime()}). */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /** Wall clock for {@code created} and event {@code ts} (default UTC system clock). */
    public Builder clock(Clock clock) {
      this.clock = Objects.requireNonNull(clock, "clock");
      return this;
    }

    /** Randomness for {@link SimFaults#errorRate} (default a {@link Random} seeded 42). */
    public Builder random(DoubleSupplier random) {
      this.random = Objects.requireNonNull(random, "random");
      return this;
    }

    /** Concurrently running requests; more wait in the queue (default 64). */
    public Builder maxRunning(int maxRunning) {
      this.maxRunning = maxRunning;
      return this;
    }

    /** Engine id (default a random UUID). */
    public Builder engineId(String engineId) {
      this.engineId = Objects.requireNonNull(engineId, "engineId");
      return this;
    }

    /** NIXL {@code remote_host} reported (default {@code localhost}, vLLM's default). */
    public Builder sideChannelHost(String host) {
      this.sideChannelHost = Objects.requireNonNull(host, "sideChannelHost");
      return this;
    }

    /** NIXL {@code remote_port} reported (default 5600). */
    public Builder sideChannelPort(int port) {
      this.sideChannelPort = port;
      return this;
    }

    /** Bootstrap server port for Mooncake/SGLang producers (default 0: a free port). */
    public Builder bootstrapPort(int port) {
      this.bootstrapPort = port;
      return this;
    }

    /**
     * Where a {@link KvTransferProtocol#P2P_NCCL} pod registers: the proxy's registration socket,
     * {@code host:port} ({@code kv_connector_extra_config.proxy_ip}/{@code proxy_port}) or {@code
     * tcp://host:port} (default: none, the pod does not register).
     */
    public Builder p2pNcclProxy(String proxy) {
      this.p2pNcclProxy = Objects.requireNonNull(proxy, "p2pNcclProxy");
      return this;
    }

    /** How often a P2pNccl pod sends its registration (default 3 s, as vLLM). */
    public Builder p2pNcclPing(Duration interval) {
      this.p2pNcclPing = Objects.requireNonNull(interval, "p2pNcclPing");
      return this;
    }

    /** The P2pNccl KV port ({@code kv_port}; default 0: a free port). */
    public Builder p2pNcclKvPort(int port) {
      this.p2pNcclKvPort = port;
      return this;
    }

    /**
     * How long held prefill KV waits for its decode, and a decode for its prefill (default 30 s).
     */
    public Builder transferTimeout(Duration timeout) {
      this.transferTimeout = Objects.requireNonNull(timeout, "transferTimeout");
      return this;
    }

    /** What a decode does when its KV transfer fails (default {@link KvLoadFailurePolicy#FAIL}). */
    public Builder kvLoadFailurePolicy(KvLoadFailurePolicy policy) {
      this.kvLoadFailurePolicy = Objects.requireNonNull(policy, "kvLoadFailurePolicy");
      return this;
    }

    /** Bound of the recorded-request list (default 1000; oldest dropped). */
    public Builder maxRecordedRequests(int max) {
      this.maxRecordedRequests = max;
      return this;
    }

    /** Bound of prefill KV held for decodes (default 1024; oldest released). */
    public Builder maxPendingTransfers(int max) {
      this.maxPendingTransfers = max;
      return this;
    }

    /** Adds a label (reported by {@link VllmSimulator#labels()}). */
    public Builder label(String key, String value) {
      labels.put(Objects.requireNonNull(key, "key"), Objects.requireNonNull(value, "value"));
      return this;
    }

    private static void positive(int v, String name) {
      if (v <= 0) {
        throw new IllegalArgumentException(name + " must be > 0, was " + v);
      }
    }

    private static void nonNegative(int v, String name) {
      if (v < 0) {
        throw new IllegalArgumentException(name + " must be >= 0, was " + v);
      }
    }

    /**
     * Validates and builds (nothing is bound until {@link VllmSimulator#start()}).
     *
     * @throws IllegalArgumentException naming the offending option
     */
    public VllmSimulator build() {
      positive(blockSize, "blockSize");
      positive(gpuBlocks, "gpuBlocks");
      nonNegative(cpuBlocks, "cpuBlocks");
      positive(maxModelLen, "maxModelLen");
      positive(defaultMaxTokens, "defaultMaxTokens");
      positive(maxRunning, "maxRunning");
      positive(replayBufferSteps, "replayBufferSteps");
      positive(maxRecordedRequests, "maxRecordedRequests");
      positive(maxPendingTransfers, "maxPendingTransfers");
      nonNegative(maxLoras, "maxLoras");
      if (port < 0 || port > 65535) {
        throw new IllegalArgumentException("port must be in 0..65535, was " + port);
      }
      if (bootstrapPort < 0 || bootstrapPort > 65535) {
        throw new IllegalArgumentException(
            "bootstrapPort must be in 0..65535, was " + bootstrapPort);
      }
      if (p2pNcclKvPort < 0 || p2pNcclKvPort > 65535) {
        throw new IllegalArgumentException(
            "p2pNcclKvPort must be in 0..65535, was " + p2pNcclKvPort);
      }
      if (p2pNcclPing.isNegative() || p2pNcclPing.isZero()) {
        throw new IllegalArgumentException("p2pNcclPing must be > 0, was " + p2pNcclPing);
      }
      if (transferTimeout.isNegative() || transferTimeout.isZero()) {
        throw new IllegalArgumentException("transferTimeout must be > 0, was " + transferTimeout);
      }
      if (protocol == KvTransferProtocol.SHARED_STORAGE && sharedStore == null) {
        throw new IllegalArgumentException(
            "sharedStore must be set when protocol is SHARED_STORAGE (SharedKvStore.create(n))");
      }
      if (hashSeed == null
          && hashAlgorithm != HashAlgorithm.SHA256
          && hashAlgorithm != HashAlgorithm.SHA256_CBOR) {
        throw new IllegalArgumentException(
            "hashSeed must be set for "
                + hashAlgorithm.vllmName()
                + " (vLLM draws its NONE_HASH at random without PYTHONHASHSEED)");
      }
      if (loras.contains(model)) {
        throw new IllegalArgumentException("loras must not contain the base model name " + model);
      }
      io.kvroute.testkit.internal.BlockPool.checkGroups(kvCacheGroups, blockSize);
      Builder copy = copy();
      return new VllmSimulator(copy);
    }

    private Builder copy() {
      Builder c = new Builder();
      c.name = name == null ? "sim-" + NAMES.getAndIncrement() : name;
      c.model = model;
      c.loras = loras;
      c.maxLoras = maxLoras;
      c.host = host;
      c.port = port;
      c.blockSize = blockSize;
      c.gpuBlocks = gpuBlocks;
      c.cpuBlocks = cpuBlocks;
      c.hashAlgorithm = hashAlgorithm;
      c.hashSeed = hashSeed;
      c.maxModelLen = maxModelLen;
      c.defaultMaxTokens = defaultMaxTokens;
      c.role = role;
      c.protocol = protocol;
      c.sharedStore = sharedStore;
      c.events = events;
      c.eventsEndpoint = eventsEndpoint;
      c.replayEndpoint = replayEndpoint;
      c.replay = replay;
      c.topic = topic;
      c.eventSchema = eventSchema;
      c.replayBufferSteps = replayBufferSteps;
      c.latency = latency;
      c.costModel = costModel;
      c.maxNumBatchedTokens = maxNumBatchedTokens;
      c.sleeper = sleeper;
      c.nanoClock = nanoClock;
      c.clock = clock;
      Random r = new Random(42);
      c.random = random != null ? random : r::nextDouble;
      c.maxRunning = maxRunning;
      c.tokenizer = tokenizer;
      c.endpointTokenizer = endpointTokenizer != null ? endpointTokenizer : tokenizer;
      c.engineId = engineId != null ? engineId : UUID.randomUUID().toString();
      c.sideChannelHost = sideChannelHost;
      c.sideChannelPort = sideChannelPort;
      c.bootstrapPort = bootstrapPort;
      c.p2pNcclProxy = p2pNcclProxy;
      c.p2pNcclPing = p2pNcclPing;
      c.p2pNcclKvPort = p2pNcclKvPort;
      c.transferTimeout = transferTimeout;
      c.kvLoadFailurePolicy = kvLoadFailurePolicy;
      c.maxRecordedRequests = maxRecordedRequests;
      c.maxPendingTransfers = maxPendingTransfers;
      c.labels = new LinkedHashMap<>(labels);
      c.kvCacheGroups = kvCacheGroups;
      return c;
    }
  }
}
