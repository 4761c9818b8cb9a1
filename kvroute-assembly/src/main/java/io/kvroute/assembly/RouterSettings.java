package io.kvroute.assembly;

import io.kvroute.config.Checks;
import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.pd.ConnectorConfigs;
import io.kvroute.router.KvEventFeed;
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
 * @param fleet the gateway replicas share their in-flight counts and speculative entries through
 *     the index's Redis (default: each replica its own; needs {@code index.backend: redis})
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
    Fleet fleet) {

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
    return new RouterSettings(null, null, null, null, null, null, null, null, null, null, null);
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
        fleet);
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
   */
  public record Index(Integer blockSize, String backend, Redis redis) {
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
   * replica that dies leaves the counts within {@code leaseTtl}) and speculative prefix entries
   * (where a replica just sent a prompt, before the engine's KV events arrive). Scoring reads the
   * fleet-wide view once per request, within {@code viewTimeout}, else this replica's own.
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
   */
  public record Fleet(
      String name,
      String replicaId,
      Duration leaseTtl,
      Duration speculativeTtl,
      Integer speculativeStride,
      Duration viewTimeout,
      Duration viewBackoff) {
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
}
