package io.kvroute.assembly;

import io.kvroute.config.Checks;
import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.parity.HashSettings;
import io.kvroute.pd.ConnectorConfigs;
import io.kvroute.router.KvEventFeed;
import io.kvroute.router.flow.FlowControlConfig;
import io.kvroute.scoring.LatencySlo;
import io.kvroute.scoring.Tokenizers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What a kvroute router is made of: its endpoints (listed, or discovered in Kubernetes), the
 * connector of each model, the scheduler, the KV-event index (in memory or on Redis), local
 * tokenizers, tracing. The one settings record every front builds from ({@link RouterAssembly}):
 * the top level of {@code kvroute gateway}'s and {@code kvroute epp}'s file, and the {@code
 * kvroute.*} properties of the Spring Cloud Gateway starter. Bound strictly by {@link
 * ConfigBinder}; every key is in {@code docs/configuration.md}, checked against this record by the
 * tests.
 *
 * <p>A missing key arrives as null and gets its default here; values are checked as they are bound
 * ({@link ConfigException} naming the key's path relative to this record). Immutable.
 *
 * @param observabilityHeaders add {@code x-kvroute-*} response headers (default false)
 * @param scrapeMetrics poll each endpoint's {@code /metrics} this often (default: not at all)
 * @param drainTimeout how long closing the router waits for requests in flight (default 30s)
 * @param defaultConnector the {@code kvConnector} section used for models without their own
 *     (default: {@code type: http})
 * @param models per-model settings: a {@code kvConnector} section, a local tokenizer, or both
 * @param index precise prefix scoring from KV events (default: off)
 * @param tracing OpenTelemetry traces of routed requests (default: off)
 * @param scheduler an {@code EndpointPickerConfig}: a file name (relative to the base directory) or
 *     the mapping itself (default: kvroute's default profiles)
 * @param endpoints the model servers
 * @param discovery endpoints found at run time (default: none)
 * @param flowControl admission before scheduling: priority bands, tenant fairness, saturation,
 *     bounded queues (default: off; the section turns it on)
 * @param fleet the gateway replicas share their in-flight counts and speculative entries through
 *     the index's Redis (default: each replica its own; needs {@code index.backend: redis})
 * @param tokenizer how prompts are tokenized where no model names a local tokenizer: the pods'
 *     {@code /tokenize} (the default) or vLLM's render endpoints
 */
public record RouterSettings(
    Boolean observabilityHeaders,
    Duration scrapeMetrics,
    Duration drainTimeout,
    Map<String, Object> defaultConnector,
    Map<String, Model> models,
    Index index,
    Tracing tracing,
    Object scheduler,
    List<EndpointSpec> endpoints,
    Discovery discovery,
    FlowControl flowControl,
    Fleet fleet,
    Tokenizer tokenizer) {

  /** Validates and applies the defaults. */
  public RouterSettings {
    observabilityHeaders = observabilityHeaders != null && observabilityHeaders;
    if (scrapeMetrics != null && (scrapeMetrics.isNegative() || scrapeMetrics.isZero())) {
      throw new ConfigException("scrapeMetrics", "must be > 0, was " + scrapeMetrics);
    }
    drainTimeout = drainTimeout == null ? Duration.ofSeconds(30) : drainTimeout;
    if (drainTimeout.isNegative()) {
      throw new ConfigException("drainTimeout", "must be >= 0, was " + drainTimeout);
    }
    tokenizer = tokenizer == null ? new Tokenizer(null, null) : tokenizer;
    defaultConnector = defaultConnector == null ? Map.of("type", "http") : defaultConnector;
    ConnectorConfigs.bind(withType(defaultConnector), "defaultConnector");
    models = models == null ? Map.of() : new LinkedHashMap<>(models);
    tracing = tracing == null ? new Tracing(false) : tracing;
    if (scheduler != null && !(scheduler instanceof String) && !(scheduler instanceof Map)) {
      throw new ConfigException(
          "scheduler", "must be a file name or an EndpointPickerConfig mapping");
    }
    endpoints = endpoints == null ? List.of() : List.copyOf(endpoints);
    if (fleet != null && (index == null || index.redis() == null)) {
      throw new ConfigException(
          "fleet",
          "is shared through the index's Redis: set index.backend: redis (and index.redis)");
    }
    Map<String, Integer> ids = new LinkedHashMap<>();
    for (int i = 0; i < endpoints.size(); i++) {
      String id = endpoints.get(i).endpoint().id();
      Integer first = ids.putIfAbsent(id, i);
      if (first != null) {
        throw new ConfigException(
            "endpoints[" + i + "].id",
            "duplicate id \""
                + id
                + "\" (also endpoints["
                + first
                + "]"
                + (endpoints.get(i).id() == null ? "; an id defaults to the URL's host:port" : "")
                + ")");
      }
    }
  }

  /**
   * Settings with every default: no endpoint, the {@code http} connector, kvroute's default
   * scheduler profiles, no index.
   */
  public static RouterSettings defaults() {
    return new RouterSettings(
        null, null, null, null, null, null, null, null, null, null, null, null, null);
  }

  /** These settings with {@code endpoints} instead of their own. */
  public RouterSettings withEndpoints(List<EndpointSpec> endpoints) {
    return new RouterSettings(
        observabilityHeaders,
        scrapeMetrics,
        drainTimeout,
        defaultConnector,
        models,
        index,
        tracing,
        scheduler,
        endpoints,
        discovery,
        flowControl,
        fleet,
        tokenizer);
  }

  /** The connector of models without a section of their own. */
  public ConnectorConfig defaultConnectorConfig() {
    return ConnectorConfigs.bind(withType(defaultConnector), "defaultConnector");
  }

  /** The models with a connector of their own, and their connectors. */
  public Map<String, ConnectorConfig> modelConnectors() {
    Map<String, ConnectorConfig> out = new LinkedHashMap<>();
    models.forEach(
        (name, m) -> {
          if (m.kvConnector() != null) {
            out.put(name, m.connector());
          }
        });
    return out;
  }

  /** The models with a local tokenizer, and their tokenizers. */
  public Map<String, LocalTokenizer> tokenizers() {
    Map<String, LocalTokenizer> out = new LinkedHashMap<>();
    models.forEach(
        (name, m) -> {
          if (m.tokenizer() != null) {
            out.put(name, m.tokenizer());
          }
        });
    return out;
  }

  /**
   * Whether prefill/decode disaggregation is on: an endpoint has the {@code prefill} role, or the
   * discovered pods' roles are declared to need it ({@code discovery.kubernetes.pdDisaggregation}),
   * or P2pNccl instances register ({@code discovery.p2pnccl}).
   */
  public boolean pdEnabled() {
    return endpoints.stream().anyMatch(e -> e.endpoint().role() == Endpoint.Role.PREFILL)
        || (discovery != null && discovery.pdDisaggregation());
  }

  /** {@code path} resolved against {@code dir} (null: the working directory) unless absolute. */
  public static Path resolve(String path, Path dir) {
    Path p = Path.of(path);
    return p.isAbsolute() || dir == null ? p : dir.resolve(p);
  }

  /** A connector section with {@code type: http} filled in when it names no type. */
  static Map<String, Object> withType(Map<String, Object> section) {
    if (section.containsKey("type")) {
      return section;
    }
    Map<String, Object> s = new LinkedHashMap<>(section);
    s.put("type", ConnectorConfig.DEFAULT_TYPE);
    return s;
  }

  /**
   * {@code models.<name>}: the model's own connector, its local tokenizer, or both.
   *
   * @param kvConnector the model's connector section (default: {@code defaultConnector})
   * @param tokenizer tokenize the model's prompts in process (default: the pods' {@code /tokenize})
   */
  public record Model(Map<String, Object> kvConnector, LocalTokenizer tokenizer) {
    /** Validates. */
    public Model {
      if (kvConnector == null && tokenizer == null) {
        throw new ConfigException(
            "", "needs a kvConnector or a tokenizer section (or leave it out)");
      }
      if (kvConnector != null) {
        ConnectorConfigs.bind(withType(kvConnector), "kvConnector");
      }
    }

    /** The model's connector; requires {@link #kvConnector()}. */
    public ConnectorConfig connector() {
      return ConnectorConfigs.bind(withType(kvConnector), "kvConnector");
    }
  }

  /**
   * {@code models.<name>.tokenizer}: where the model's tokenizer files are ({@code
   * kvroute-tokenizer-hf}).
   *
   * @param path a model directory or a Hugging Face cache directory {@code models--org--name}
   *     (relative to the base directory)
   * @param revision the snapshot of a Hugging Face cache directory (default {@code main})
   * @param chatTemplate a Jinja chat template file replacing the model's (relative to the base
   *     directory)
   * @param fallback send prompts to the pods' {@code /tokenize} when local tokenization fails
   *     (default true)
   */
  public record LocalTokenizer(
      String path, String revision, String chatTemplate, Boolean fallback) {
    /** Validates and applies the defaults. */
    public LocalTokenizer {
      Checks.required("path", path, "the directory of the model's tokenizer files");
      fallback = fallback == null || fallback;
    }
  }

  /**
   * {@code tokenizer}: the engines' own tokenization of prompts, used for models without a local
   * tokenizer ({@code models.<name>.tokenizer}) and as their fallback.
   *
   * @param api {@code tokenize} (vLLM's {@code POST /tokenize}, the default) or {@code render}
   *     (vLLM's render endpoints: {@code /v1/chat/completions/render}, {@code
   *     /v1/completions/render}, and those of Messages and Responses, which render a request
   *     exactly as the engine will; vLLM 0.29 and later)
   * @param timeout per call (default 2s)
   */
  public record Tokenizer(String api, Duration timeout) {
    /** Validates and applies the defaults. */
    public Tokenizer {
      api = api == null ? "tokenize" : api;
      if (!api.equals("tokenize") && !api.equals("render")) {
        throw new ConfigException("api", "must be tokenize or render, was \"" + api + "\"");
      }
      timeout = timeout == null ? Duration.ofSeconds(2) : timeout;
      if (timeout.isNegative() || timeout.isZero()) {
        throw new ConfigException("timeout", "must be > 0, was " + timeout);
      }
    }

    /** The {@link Tokenizers.VllmApi} {@link #api} names. */
    public Tokenizers.VllmApi vllmApi() {
      return api.equals("render") ? Tokenizers.VllmApi.RENDER : Tokenizers.VllmApi.TOKENIZE;
    }
  }

  /**
   * {@code tracing}.
   *
   * @param enabled trace routed requests through {@code GlobalOpenTelemetry} (the OpenTelemetry
   *     Java agent's, or whatever the process installed; a no-op without one) and send each leg's
   *     {@code traceparent} to the engines (default false; needs {@code kvroute-opentelemetry})
   */
  public record Tracing(Boolean enabled) {
    /** Applies the default. */
    public Tracing {
      enabled = enabled != null && enabled;
    }
  }

  /**
   * {@code index}: precise prefix scoring from the endpoints' KV events.
   *
   * @param blockSize tokens per block, as the engines' {@code --block-size} (default 16)
   * @param backend {@code memory} (each replica its own index, the default) or {@code redis} (one
   *     index shared by every replica on Redis or Valkey; needs {@code kvindex-redis})
   * @param redis the Redis backend's settings (with {@code backend: redis})
   * @param hashAlgorithm the engines' {@code --prefix-caching-hash-algo}: {@code sha256} (vLLM's
   *     default), {@code sha256_cbor}, {@code xxhash}, {@code xxhash_cbor}; what the parity check
   *     and {@code kvroute doctor --config} expect
   * @param pythonHashSeed the engines' {@code PYTHONHASHSEED} (default: unset, as a default vLLM);
   *     required with {@code xxhash} and {@code xxhash_cbor} unless the parity check is off
   * @param parity the parity check of kvroute's predicted block hashes against the engines' events
   *     (default: on)
   */
  public record Index(
      Integer blockSize,
      String backend,
      Redis redis,
      String hashAlgorithm,
      String pythonHashSeed,
      Parity parity) {
    /** Validates and applies the defaults. */
    public Index {
      blockSize = blockSize == null ? 16 : blockSize;
      Checks.range("blockSize", blockSize, 1, Integer.MAX_VALUE);
      backend = backend == null ? "memory" : backend;
      if (!backend.equals("memory") && !backend.equals("redis")) {
        throw new ConfigException("backend", "must be memory or redis, was \"" + backend + "\"");
      }
      if (redis != null && backend.equals("memory")) {
        throw new ConfigException("redis", "is set but backend is memory (add backend: redis)");
      }
      if (backend.equals("redis") && redis == null) {
        redis = new Redis(null, null, null, null, null, null, null, null);
      }
      hashAlgorithm = hashAlgorithm == null ? HashAlgorithm.SHA256.vllmName() : hashAlgorithm;
      HashAlgorithm algorithm;
      try {
        algorithm = HashAlgorithm.fromVllmName(hashAlgorithm);
      } catch (IllegalArgumentException e) {
        throw new ConfigException("hashAlgorithm", e.getMessage());
      }
      parity = parity == null ? new Parity(null, null, null, null, null, null, null, null) : parity;
      if (parity.enabled()
          && !HashSettings.of(algorithm, blockSize, pythonHashSeed).reproducible()) {
        throw new ConfigException(
            "pythonHashSeed",
            "is required with hashAlgorithm "
                + hashAlgorithm
                + ": without PYTHONHASHSEED vLLM draws that NONE_HASH at random per process, so"
                + " no one can predict the engines' block hashes; start the engines with"
                + " PYTHONHASHSEED set and give the same value here, or turn the parity check off"
                + " (parity.enabled: false)");
      }
    }

    /** What the engines are expected to hash with: block size, algorithm and seed. */
    public HashSettings hashSettings() {
      return HashSettings.of(HashAlgorithm.fromVllmName(hashAlgorithm), blockSize, pythonHashSeed);
    }
  }

  /**
   * {@code index.parity}: the parity check of kvroute's predicted block hashes against the engines'
   * KV events ({@code io.kvroute.router.ParityMonitor}; see {@code docs/routing.md}).
   *
   * @param enabled check parity (default true)
   * @param threshold the share of predicted block hashes the engines must publish, below which a
   *     model's parity fails (default 0.8)
   * @param minSamples checked requests a model needs before a verdict (default 10)
   * @param window checked requests the share covers, per model (default 64)
   * @param grace how long after an engine answered its events are awaited (default 1s)
   * @param samplesPerSecond requests sampled per second, at most (default 50)
   * @param maxPending samples waiting at once, at most (default 1024)
   * @param degrade route a model whose parity failed with approximate scoring until it returns
   *     (default true)
   */
  public record Parity(
      Boolean enabled,
      Double threshold,
      Integer minSamples,
      Integer window,
      Duration grace,
      Double samplesPerSecond,
      Integer maxPending,
      Boolean degrade) {
    /** Validates and applies the defaults. */
    public Parity {
      enabled = enabled == null || enabled;
      threshold = threshold == null ? 0.8 : threshold;
      if (!(threshold > 0 && threshold <= 1)) {
        throw new ConfigException("threshold", "must be in (0, 1], was " + threshold);
      }
      window = window == null ? 64 : window;
      Checks.range("window", window, 1, 1_000_000);
      minSamples = minSamples == null ? Math.min(10, window) : minSamples;
      Checks.range("minSamples", minSamples, 1, window);
      grace = grace == null ? Duration.ofSeconds(1) : grace;
      if (grace.isNegative()) {
        throw new ConfigException("grace", "must be >= 0, was " + grace);
      }
      samplesPerSecond = samplesPerSecond == null ? 50.0 : samplesPerSecond;
      if (!(samplesPerSecond > 0)) {
        throw new ConfigException("samplesPerSecond", "must be > 0, was " + samplesPerSecond);
      }
      maxPending = maxPending == null ? 1024 : maxPending;
      Checks.range("maxPending", maxPending, 1, 1_000_000);
      degrade = degrade == null || degrade;
    }
  }

  /**
   * {@code index.redis}: the shared index on Redis or Valkey ({@code kvindex-redis}).
   *
   * @param url the server, {@code redis://[user:password@]host:port[/db]} or {@code rediss://}
   *     (default {@code redis://127.0.0.1:6379})
   * @param keyPrefix the first part of every key's hash tag (default {@code kvroute})
   * @param ingestMode {@code leased} (one replica writes a pod's events, the default) or {@code
   *     all-replicas} (every replica writes them, idempotently)
   * @param entryTtl time to live of a cached block's entry, refreshed by stores and hits (default
   *     6h; 0s: none)
   * @param lookupTimeout a lookup slower than this answers "no cache information" (default 100ms)
   * @param replicaId this replica's name in pod leases (default: random)
   * @param cluster the URL names Redis Cluster nodes, several separated by commas (default false)
   * @param podGroups pods split into this many groups by a hash of the pod id, each under its own
   *     hash tag, so one model's keys spread over a Cluster's shards (default 1)
   */
  public record Redis(
      String url,
      String keyPrefix,
      String ingestMode,
      Duration entryTtl,
      Duration lookupTimeout,
      String replicaId,
      Boolean cluster,
      Integer podGroups) {
    /** Validates and applies the defaults. */
    public Redis {
      url = url == null ? "redis://127.0.0.1:6379" : url;
      cluster = cluster != null && cluster;
      String[] urls = url.split(",", -1);
      if (urls.length > 1 && !cluster) {
        throw new ConfigException(
            "url", "names " + urls.length + " servers: set cluster: true for a Redis Cluster");
      }
      for (String u : urls) {
        String t = u.trim();
        if (!t.startsWith("redis://") && !t.startsWith("rediss://") && !t.startsWith("valkey://")) {
          throw new ConfigException(
              "url", "not a redis://, rediss:// or valkey:// URL: \"" + t + "\"");
        }
      }
      podGroups = podGroups == null ? 1 : podGroups;
      Checks.range("podGroups", podGroups, 1, 1024);
      ingestMode = ingestMode == null ? "leased" : ingestMode;
      if (!ingestMode.equals("leased") && !ingestMode.equals("all-replicas")) {
        throw new ConfigException(
            "ingestMode", "must be leased or all-replicas, was \"" + ingestMode + "\"");
      }
      if (entryTtl != null && entryTtl.isNegative()) {
        throw new ConfigException("entryTtl", "must be >= 0, was " + entryTtl);
      }
      if (lookupTimeout != null && (lookupTimeout.isNegative() || lookupTimeout.isZero())) {
        throw new ConfigException("lookupTimeout", "must be > 0, was " + lookupTimeout);
      }
    }
  }

  /**
   * {@code fleet}: this gateway is one replica of a fleet whose replicas share, through the index's
   * Redis ({@code kvindex-redis}), the requests and tokens in flight per endpoint (leased: a
   * replica that dies leaves the counts within {@code leaseTtl}), speculative prefix entries (where
   * a replica just sent a prompt, before the engine's KV events arrive), the routing memory (where
   * any replica sent a prompt, for {@code memoryTtl}) and where each replica sent its cold
   * requests. Scoring reads the fleet-wide view once per request, within {@code viewTimeout}, else
   * this replica's own.
   *
   * @param name the fleet's name: replicas sharing state use the same one (default {@code default})
   * @param replicaId this replica's name, unique in the fleet (default: {@code
   *     index.redis.replicaId}, else random)
   * @param leaseTtl a silent replica's counts leave the view at most this long after its last
   *     heartbeat (default 10s)
   * @param speculativeTtl how long a speculative entry counts (default 2s)
   * @param speculativeStride a speculative entry every this many request keys (default 8; 1: exact)
   * @param viewTimeout a fleet view's deadline; past it the local view answers (default 20ms)
   * @param viewBackoff after a failed or late view, views stay local this long (default 1s)
   * @param memoryTtl how long the routing memory keeps where a replica sent a prompt (default 5m;
   *     0s: not shared)
   */
  public record Fleet(
      String name,
      String replicaId,
      Duration leaseTtl,
      Duration speculativeTtl,
      Integer speculativeStride,
      Duration viewTimeout,
      Duration viewBackoff,
      Duration memoryTtl) {
    /** Validates and applies the defaults. */
    public Fleet {
      name = name == null ? "default" : name;
      // checked by the builder the assembly uses, with the same messages (the fields are not
      // assigned yet in a compact constructor: pass the parameters)
      config(
          name,
          replicaId,
          leaseTtl,
          speculativeTtl,
          speculativeStride,
          viewTimeout,
          viewBackoff,
          memoryTtl,
          null);
    }

    /**
     * The {@link FleetConfig} these settings describe, with {@code defaultReplicaId} when no {@code
     * replicaId} is given (null: random).
     *
     * @throws ConfigException naming the key
     */
    public FleetConfig config(String defaultReplicaId) {
      return config(
          name,
          replicaId,
          leaseTtl,
          speculativeTtl,
          speculativeStride,
          viewTimeout,
          viewBackoff,
          memoryTtl,
          defaultReplicaId);
    }

    private static FleetConfig config(
        String name,
        String replicaId,
        Duration leaseTtl,
        Duration speculativeTtl,
        Integer speculativeStride,
        Duration viewTimeout,
        Duration viewBackoff,
        Duration memoryTtl,
        String defaultReplicaId) {
      FleetConfig.Builder b = FleetConfig.builder().fleet(name);
      String id = replicaId != null ? replicaId : defaultReplicaId;
      if (id != null) {
        b.replicaId(id);
      }
      if (leaseTtl != null) {
        b.leaseTtl(leaseTtl);
      }
      if (speculativeTtl != null) {
        b.speculativeTtl(speculativeTtl);
      }
      if (speculativeStride != null) {
        b.speculativeStride(speculativeStride);
      }
      if (viewTimeout != null) {
        b.viewTimeout(viewTimeout);
      }
      if (viewBackoff != null) {
        b.viewBackoff(viewBackoff);
      }
      if (memoryTtl != null) {
        b.memoryTtl(memoryTtl);
      }
      try {
        return b.build();
      } catch (IllegalArgumentException e) {
        String msg = e.getMessage();
        int sp = msg.indexOf(' ');
        String key = sp > 0 && msg.startsWith("fleet.") ? msg.substring(6, sp) : "";
        throw new ConfigException(key, msg.substring(sp + 1), e);
      }
    }
  }

  /**
   * {@code endpoints[]}, and the body of the gateway's {@code POST /admin/endpoints}.
   *
   * @param id the endpoint's id (default: the URL's host:port)
   * @param url the model server's base URL
   * @param role {@code prefill}, {@code decode} or {@code both} (default both)
   * @param labels labels the scheduler's filters read
   * @param kvEvents where the endpoint publishes KV events (none by default)
   */
  public record EndpointSpec(
      String id, String url, String role, Map<String, String> labels, KvEvents kvEvents) {
    /** Validates. */
    public EndpointSpec {
      Checks.httpUrl("url", url);
      if (id != null && id.isBlank()) {
        throw new ConfigException("id", "must not be blank");
      }
      labels = labels == null ? Map.of() : new LinkedHashMap<>(labels);
      endpoint(id, url, role, labels);
    }

    /** The endpoint described. */
    public Endpoint endpoint() {
      return endpoint(id, url, role, labels);
    }

    /** Where it publishes KV events, or null. */
    public KvEventFeed.Source events() {
      return kvEvents == null
          ? null
          : new KvEventFeed.Source(kvEvents.publisher(), kvEvents.replay(), kvEvents.topic());
    }

    private static Endpoint endpoint(
        String id, String url, String role, Map<String, String> labels) {
      Endpoint.Role r;
      try {
        r = Endpoint.Role.parse(role == null ? "both" : role);
      } catch (IllegalArgumentException e) {
        throw new ConfigException(
            "role", "must be one of prefill, decode, both; was \"" + role + "\"");
      }
      Endpoint ep;
      try {
        ep = Endpoint.of(url.trim(), r);
      } catch (IllegalArgumentException e) {
        throw new ConfigException("url", e.getMessage());
      }
      return (id == null ? ep : ep.withId(id)).withLabels(labels);
    }
  }

  /**
   * {@code endpoints[].kvEvents}.
   *
   * @param publisher the engine's ZMQ publisher, {@code tcp://host:port} or {@code ipc://path}
   * @param replay its replay (ROUTER) endpoint, if any
   * @param topic the subscription topic (default: all)
   */
  public record KvEvents(String publisher, String replay, String topic) {
    /** Validates. */
    public KvEvents {
      Checks.zmqEndpoint("publisher", publisher);
      if (replay != null) {
        Checks.zmqEndpoint("replay", replay);
      }
    }
  }

  /**
   * {@code discovery}: endpoints found at run time, beside (or instead of) {@code endpoints}.
   *
   * @param kubernetes ready pods from the Kubernetes API ({@code kvroute-kubernetes})
   * @param p2pnccl vLLM P2pNccl instances that register themselves ({@code kvconnector-p2pnccl})
   */
  public record Discovery(Kubernetes kubernetes, P2pNccl p2pnccl) {
    /** Validates. */
    public Discovery {
      if (kubernetes == null && p2pnccl == null) {
        throw new ConfigException(
            "kubernetes", "is required (the kubernetes section), unless p2pnccl is given");
      }
    }

    /** Whether the discovered endpoints' roles call for prefill/decode disaggregation. */
    public boolean pdDisaggregation() {
      return p2pnccl != null || (kubernetes != null && kubernetes.pdDisaggregation());
    }
  }

  /**
   * {@code discovery.p2pnccl}: vLLM P2pNccl (xPyD) instances registering over ZMQ, as with vLLM's
   * reference proxy; see {@code docs/connectors.md}.
   *
   * @param registry where to bind the registration socket, e.g. {@code tcp://0.0.0.0:30001}
   * @param ttl how long an instance stays after its last heartbeat (default 5 s)
   * @param allowHosts hosts a registration may name (default: loopback only)
   * @param maxInstances the most instances kept (default 1024)
   */
  public record P2pNccl(
      String registry, Duration ttl, List<String> allowHosts, Integer maxInstances) {
    /** Validates and applies the defaults. */
    public P2pNccl {
      Checks.zmqEndpoint("registry", registry);
      ttl = ttl == null ? Duration.ofSeconds(5) : ttl;
      if (ttl.isNegative() || ttl.isZero()) {
        throw new ConfigException("ttl", "must be > 0, was " + ttl);
      }
      allowHosts = allowHosts == null ? List.of() : List.copyOf(allowHosts);
      for (int i = 0; i < allowHosts.size(); i++) {
        if (allowHosts.get(i) == null || allowHosts.get(i).isBlank()) {
          throw new ConfigException("allowHosts[" + i + "]", "must not be blank");
        }
      }
      maxInstances = maxInstances == null ? 1024 : maxInstances;
      Checks.range("maxInstances", maxInstances, 1, 1_000_000);
    }
  }

  /**
   * {@code discovery.kubernetes}: see {@code docs/kubernetes.md}.
   *
   * @param namespace the pods' namespace (default: the service account's, else {@code default})
   * @param selector follow the pods with these labels (or {@code inferencePool})
   * @param inferencePool follow the pods this InferencePool selects, on its target ports
   * @param roleLabel the pod label naming the role (default {@code llm-d.ai/role})
   * @param port the pods' HTTP port (default 8000; an InferencePool's target port wins)
   * @param kvEventsPort the pods' KV-event publisher port (default 5557; 0: no KV events)
   * @param dataParallelSize data-parallel ranks per pod, at consecutive ports (default 1)
   * @param loraAdapters read each pod's LoRA adapters from {@code /v1/models} (default false)
   * @param pdDisaggregation turn prefill/decode disaggregation on (default false)
   */
  public record Kubernetes(
      String namespace,
      Map<String, String> selector,
      String inferencePool,
      String roleLabel,
      Integer port,
      Integer kvEventsPort,
      Integer dataParallelSize,
      Boolean loraAdapters,
      Boolean pdDisaggregation) {
    /** Validates and applies the defaults. */
    public Kubernetes {
      selector = selector == null ? Map.of() : new LinkedHashMap<>(selector);
      if (selector.isEmpty() == (inferencePool == null)) {
        throw new ConfigException(
            selector.isEmpty() ? "selector" : "inferencePool",
            "give exactly one of selector (pod labels) and inferencePool");
      }
      if (namespace != null && namespace.isBlank()) {
        throw new ConfigException("namespace", "must not be blank");
      }
      if (inferencePool != null && inferencePool.isBlank()) {
        throw new ConfigException("inferencePool", "must not be blank");
      }
      roleLabel = roleLabel == null ? "llm-d.ai/role" : roleLabel;
      if (roleLabel.isBlank()) {
        throw new ConfigException("roleLabel", "must not be blank");
      }
      port = port == null ? 8000 : port;
      Checks.range("port", port, 1, 65535);
      kvEventsPort = kvEventsPort == null ? 5557 : kvEventsPort;
      Checks.range("kvEventsPort", kvEventsPort, 0, 65535);
      dataParallelSize = dataParallelSize == null ? 1 : dataParallelSize;
      Checks.range("dataParallelSize", dataParallelSize, 1, 1024);
      loraAdapters = loraAdapters != null && loraAdapters;
      pdDisaggregation = pdDisaggregation != null && pdDisaggregation;
      if (port + dataParallelSize - 1 > 65535) {
        throw new ConfigException(
            "dataParallelSize", "rank " + (dataParallelSize - 1) + " would be at a port > 65535");
      }
      if (kvEventsPort != 0 && kvEventsPort + dataParallelSize - 1 > 65535) {
        throw new ConfigException(
            "dataParallelSize",
            "rank " + (dataParallelSize - 1) + " would publish KV events at a port > 65535");
      }
    }
  }

  /**
   * {@code flowControl}: admission before scheduling ({@code io.kvroute.router.flow}); present, it
   * is on. See {@code docs/routing.md}.
   *
   * @param defaultPriority the priority of requests without {@code x-kvroute-priority} and whose
   *     model's objective gives none (default 0)
   * @param bands the priority bands (default {@code critical} 100, {@code standard} 0, {@code
   *     sheddable} −100)
   * @param fairness between the tenants of a band: {@code round-robin} (default), {@code vtc}
   *     (virtual token counter) or {@code none}
   * @param tenantHeader the request header naming the tenant (default none)
   * @param tenantFromApiKey a request without it is its API key's tenant, hashed (default true)
   * @param maxQueued requests waiting in all (default 10000)
   * @param retryAfter the {@code Retry-After} of a dropped request (default 1s)
   * @param saturation when the fleet counts as saturated
   * @param objectives per model: its requests' priority and latency objective (llm-d's {@code
   *     InferenceObjective})
   * @param sloAdmission hold a request with a TTFT objective while no endpoint is predicted to meet
   *     it, refuse it when none can (default true)
   * @param recheckInterval how often waiting requests are looked at while the fleet stays saturated
   *     (default 20ms)
   */
  public record FlowControl(
      Integer defaultPriority,
      List<Band> bands,
      String fairness,
      String tenantHeader,
      Boolean tenantFromApiKey,
      Integer maxQueued,
      Duration retryAfter,
      Saturation saturation,
      Map<String, Objective> objectives,
      Boolean sloAdmission,
      Duration recheckInterval) {
    /** Validates and applies the defaults. */
    public FlowControl {
      defaultPriority = defaultPriority == null ? 0 : defaultPriority;
      bands = bands == null ? null : List.copyOf(bands);
      if (bands != null) {
        if (bands.isEmpty()) {
          throw new ConfigException("bands", "must not be empty (leave it out for the defaults)");
        }
        Map<String, Integer> names = new LinkedHashMap<>();
        Map<Integer, Integer> priorities = new LinkedHashMap<>();
        for (int i = 0; i < bands.size(); i++) {
          Integer a = names.putIfAbsent(bands.get(i).name(), i);
          if (a != null) {
            throw new ConfigException(
                "bands[" + i + "].name", "duplicate name (also bands[" + a + "])");
          }
          Integer b = priorities.putIfAbsent(bands.get(i).priority(), i);
          if (b != null) {
            throw new ConfigException(
                "bands[" + i + "].priority", "duplicate priority (also bands[" + b + "])");
          }
        }
      }
      fairness = fairness == null ? "round-robin" : fairness;
      try {
        FlowControlConfig.Fairness.parse(fairness);
      } catch (IllegalArgumentException e) {
        throw new ConfigException("fairness", e.getMessage());
      }
      if (tenantHeader != null && tenantHeader.isBlank()) {
        throw new ConfigException("tenantHeader", "must not be blank");
      }
      tenantFromApiKey = tenantFromApiKey == null || tenantFromApiKey;
      maxQueued = maxQueued == null ? 10_000 : maxQueued;
      Checks.range("maxQueued", maxQueued, 0, 10_000_000);
      retryAfter = retryAfter == null ? Duration.ofSeconds(1) : retryAfter;
      if (retryAfter.isNegative() || retryAfter.isZero()) {
        throw new ConfigException("retryAfter", "must be > 0, was " + retryAfter);
      }
      saturation = saturation == null ? new Saturation(null, null, null, null) : saturation;
      objectives = objectives == null ? Map.of() : new LinkedHashMap<>(objectives);
      sloAdmission = sloAdmission == null || sloAdmission;
      recheckInterval = recheckInterval == null ? Duration.ofMillis(20) : recheckInterval;
      if (recheckInterval.isNegative() || recheckInterval.isZero()) {
        throw new ConfigException("recheckInterval", "must be > 0, was " + recheckInterval);
      }
    }

    /** The flow-control configuration of {@code io.kvroute.router.flow}. */
    public FlowControlConfig config() {
      FlowControlConfig.Builder b =
          FlowControlConfig.builder()
              .defaultPriority(defaultPriority)
              .fairness(FlowControlConfig.Fairness.parse(fairness))
              .tenantHeader(tenantHeader)
              .tenantFromApiKey(tenantFromApiKey)
              .maxQueued(maxQueued)
              .retryAfter(retryAfter)
              .saturation(saturation.limits())
              .sloAdmission(sloAdmission)
              .recheckInterval(recheckInterval);
      if (bands != null) {
        b.bands(bands.stream().map(Band::band).toList());
      }
      objectives.forEach((model, o) -> b.objective(model, o.objective()));
      return b.build();
    }
  }

  /**
   * {@code flowControl.bands[]}: one priority band.
   *
   * @param name its name in metrics (required)
   * @param priority requests of this priority and above, up to the next band, join it (required)
   * @param maxQueueLength requests it may hold waiting (default 1000)
   * @param ttl how long a request may wait in it (default 30s)
   * @param ordering {@code fcfs} (default) or {@code edf} (earliest deadline first)
   * @param maxSaturation its requests are admitted while the fleet's saturation is below this
   *     (default 1; lower keeps headroom for the bands above)
   * @param sheddable its waiting requests may be evicted for higher bands' (default: when its
   *     priority is negative)
   */
  public record Band(
      String name,
      Integer priority,
      Integer maxQueueLength,
      Duration ttl,
      String ordering,
      Double maxSaturation,
      Boolean sheddable) {
    /** Validates and applies the defaults. */
    public Band {
      Checks.required("name", name, "the band's name");
      if (name.isBlank()) {
        throw new ConfigException("name", "must not be blank");
      }
      Checks.required("priority", priority, "the band's priority (an integer)");
      maxQueueLength = maxQueueLength == null ? 1000 : maxQueueLength;
      Checks.range("maxQueueLength", maxQueueLength, 0, 10_000_000);
      ttl = ttl == null ? Duration.ofSeconds(30) : ttl;
      if (ttl.isNegative() || ttl.isZero()) {
        throw new ConfigException("ttl", "must be > 0, was " + ttl);
      }
      ordering = ordering == null ? "fcfs" : ordering;
      try {
        FlowControlConfig.Ordering.parse(ordering);
      } catch (IllegalArgumentException e) {
        throw new ConfigException("ordering", e.getMessage());
      }
      maxSaturation = maxSaturation == null ? 1.0 : maxSaturation;
      if (!(maxSaturation > 0 && maxSaturation <= 100)) {
        throw new ConfigException("maxSaturation", "must be in (0, 100], was " + maxSaturation);
      }
      sheddable = sheddable == null ? priority < 0 : sheddable;
    }

    FlowControlConfig.Band band() {
      return new FlowControlConfig.Band(
          name,
          priority,
          maxQueueLength,
          ttl,
          FlowControlConfig.Ordering.parse(ordering),
          maxSaturation,
          sheddable);
    }
  }

  /**
   * {@code flowControl.saturation}: when a model's endpoints count as saturated (the largest of the
   * terms reaching 1).
   *
   * @param queueDepth engine waiting requests at which an endpoint is saturated (default 5)
   * @param kvCacheUtilization KV-cache usage at which an endpoint is saturated (default 0.8)
   * @param maxInFlightPerEndpoint requests in flight per endpoint at saturation (default 0: no
   *     limit)
   * @param maxPrefillTokensPerEndpoint uncached prompt tokens awaiting their first token per
   *     endpoint at saturation (default 0: no limit)
   */
  public record Saturation(
      Integer queueDepth,
      Double kvCacheUtilization,
      Integer maxInFlightPerEndpoint,
      Long maxPrefillTokensPerEndpoint) {
    /** Validates and applies the defaults. */
    public Saturation {
      queueDepth = queueDepth == null ? 5 : queueDepth;
      Checks.range("queueDepth", queueDepth, 1, 1_000_000);
      kvCacheUtilization = kvCacheUtilization == null ? 0.8 : kvCacheUtilization;
      if (!(kvCacheUtilization > 0 && kvCacheUtilization <= 1)) {
        throw new ConfigException(
            "kvCacheUtilization", "must be in (0, 1], was " + kvCacheUtilization);
      }
      maxInFlightPerEndpoint = maxInFlightPerEndpoint == null ? 0 : maxInFlightPerEndpoint;
      Checks.range("maxInFlightPerEndpoint", maxInFlightPerEndpoint, 0, 1_000_000);
      maxPrefillTokensPerEndpoint =
          maxPrefillTokensPerEndpoint == null ? 0 : maxPrefillTokensPerEndpoint;
      Checks.range("maxPrefillTokensPerEndpoint", maxPrefillTokensPerEndpoint, 0, Long.MAX_VALUE);
    }

    FlowControlConfig.Saturation limits() {
      return new FlowControlConfig.Saturation(
          queueDepth, kvCacheUtilization, maxInFlightPerEndpoint, maxPrefillTokensPerEndpoint);
    }
  }

  /**
   * {@code flowControl.objectives.<model>}: the model's objective, as llm-d's {@code
   * InferenceObjective}.
   *
   * @param priority its requests' priority when they carry no {@code x-kvroute-priority} (default
   *     {@code defaultPriority})
   * @param ttft their time-to-first-token objective when they carry no {@code
   *     x-kvroute-slo-ttft-ms} (default none)
   * @param tpot their time-per-output-token objective when they carry no {@code
   *     x-kvroute-slo-tpot-ms} (default none)
   */
  public record Objective(Integer priority, Duration ttft, Duration tpot) {
    /** Validates. */
    public Objective {
      if (ttft != null && (ttft.isNegative() || ttft.isZero())) {
        throw new ConfigException("ttft", "must be > 0, was " + ttft);
      }
      if (tpot != null && (tpot.isNegative() || tpot.isZero())) {
        throw new ConfigException("tpot", "must be > 0, was " + tpot);
      }
    }

    FlowControlConfig.Objective objective() {
      return new FlowControlConfig.Objective(priority, LatencySlo.of(ttft, tpot));
    }
  }
}
