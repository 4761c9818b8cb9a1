package io.kvroute.service;

import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import io.kvroute.service.internal.ServiceFile;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.function.Supplier;

/**
 * Immutable configuration of {@code kvroute serve} ({@link KvIndexService}), read from a JSON file
 * ({@link #load(Path)}) or built with {@link #builder()}.
 *
 * <pre>{@code
 * {
 *   "model": "meta-llama/Llama-3.1-8B-Instruct",
 *   "http": {"host": "0.0.0.0", "port": 8080, "max_body_bytes": 1048576, "threads": 2,
 *            "max_connections": 1024, "request_timeout_ms": 10000, "idle_timeout_ms": 60000},
 *   "index": {"block_size": 16, "hash_seed": "", "max_keys": 10000000,
 *             "tier_weights": {"GPU": 1.0, "CPU": 0.8}},
 *   "events": {"ready_timeout_ms": 30000, "topic": ""},
 *   "tokenizer": {"url": "http://vllm-0:8000", "timeout_ms": 2000,
 *                 "cache_entries": 1024, "cache_max_tokens": 8388608},
 *   "limits": {"max_tokens": 131072, "max_candidate_pods": 4096},
 *   "pods": [{"id": "vllm-0", "events": "tcp://10.0.0.5:5557", "replay": "tcp://10.0.0.5:5558",
 *             "http": "http://10.0.0.5:8000", "capacity_blocks": 8192}],
 *   "pods_file": "pods.json", "pods_file_poll_ms": 2000
 * }
 * }</pre>
 *
 * <p>{@code pods} and {@code pods_file} may both be given (ids must then be distinct); the pods
 * file (a JSON array of pod objects, or an object with a {@code pods} array) is re-read when it
 * changes. {@code tokenizer.url} may be {@code "pods"}: each prompt is then tokenized by a
 * configured pod's {@code http} URL, in rotation. {@code tokenizer.path} (a model directory or a
 * Hugging Face cache directory {@code models--org--name}, with an optional {@code revision})
 * tokenizes in process instead ({@code kvroute serve} loads it with kvroute-tokenizer-hf; an
 * embedding passes {@link KvIndexService.Builder#localTokenizer}); {@code url} is then optional and
 * serves as the fallback. The file is bound strictly by kvroute's {@link ConfigBinder} (YAML is
 * accepted too): unknown or duplicate keys and values of the wrong type are errors. {@code
 * docs/configuration.md} lists every key.
 *
 * <p>Validation errors are {@link ServiceConfigException}s whose message names the field's path,
 * e.g. {@code pods[2].events: must be a tcp:// or ipc:// endpoint such as "tcp://10.0.0.5:5557",
 * was "10.0.0.5:5557"}.
 */
public final class ServiceConfig {
  private static final ConfigBinder BINDER = ConfigBinder.snakeCase();

  /** Most pods one service follows (the index's default pod bound). */
  public static final int MAX_PODS = 16_384;

  private final String model;
  private final String host;
  private final int port;
  private final int maxBodyBytes;
  private final int threads;
  private final int maxConnections;
  private final Duration requestTimeout;
  private final Duration idleTimeout;
  private final int blockSize;
  private final String hashSeed;
  private final int maxKeys;
  private final Map<String, Double> tierWeights;
  private final Duration readyTimeout;
  private final String topic;
  private final Optional<TokenizerSettings> tokenizer;
  private final int maxTokens;
  private final int maxCandidatePods;
  private final List<PodSpec> pods;
  private final Optional<Path> podsFile;
  private final Duration podsFilePoll;

  private ServiceConfig(Builder b) {
    this.model = b.model;
    this.host = b.host;
    this.port = b.port;
    this.maxBodyBytes = b.maxBodyBytes;
    this.threads = b.threads;
    this.maxConnections = b.maxConnections;
    this.requestTimeout = b.requestTimeout;
    this.idleTimeout = b.idleTimeout;
    this.blockSize = b.blockSize;
    this.hashSeed = b.hashSeed;
    this.maxKeys = b.maxKeys;
    this.tierWeights = Collections.unmodifiableMap(new LinkedHashMap<>(b.tierWeights));
    this.readyTimeout = b.readyTimeout;
    this.topic = b.topic;
    this.tokenizer = Optional.ofNullable(b.tokenizer);
    this.maxTokens = b.maxTokens;
    this.maxCandidatePods = b.maxCandidatePods;
    this.pods = List.copyOf(b.pods);
    this.podsFile = Optional.ofNullable(b.podsFile);
    this.podsFilePoll = b.podsFilePoll;
  }

  /** A builder with defaults (port 8080 on 127.0.0.1, block size 16, no pods). */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Reads a configuration file (JSON; YAML is accepted too); a relative {@code pods_file} is
   * resolved against the file's directory.
   *
   * @throws ServiceConfigException if the file cannot be read or a field is invalid
   */
  public static ServiceConfig load(Path file) {
    Path dir = file.toAbsolutePath().getParent();
    return bound(
        () -> {
          ServiceConfig.Builder b = builder();
          BINDER.read(file, ServiceFile.class).apply(b, dir);
          return b.build();
        },
        file.toString());
  }

  /**
   * Parses JSON configuration text.
   *
   * @param json the document
   * @param baseDir directory against which a relative {@code pods_file} is resolved
   * @throws ServiceConfigException naming the first invalid field
   */
  public static ServiceConfig parse(byte[] json, Path baseDir) {
    return bound(
        () -> {
          ServiceConfig.Builder b = builder();
          BINDER
              .readJson(new String(json, StandardCharsets.UTF_8), ServiceFile.class)
              .apply(b, baseDir);
          return b.build();
        },
        "");
  }

  /**
   * Parses a pods file: a JSON array of pod objects, or an object with a {@code pods} array.
   *
   * @param source name used in error messages (the file name)
   * @throws ServiceConfigException naming the first invalid field
   */
  public static List<PodSpec> parsePodsFile(byte[] json, String source) {
    String text = new String(json, StandardCharsets.UTF_8);
    return bound(
        () ->
            text.stripLeading().startsWith("[")
                ? ServiceFile.specs(BINDER.readJson(text, ServiceFile.Pod[].class))
                : BINDER.readJson(text, ServiceFile.PodsFile.class).pods().stream()
                    .map(ServiceFile.Pod::spec)
                    .toList(),
        source);
  }

  /** Runs a binding step, reporting its errors as {@link ServiceConfigException}s. */
  private static <T> T bound(Supplier<T> step, String source) {
    try {
      return step.get();
    } catch (ConfigException e) {
      throw new ServiceConfigException(
          source.isEmpty() ? e.source() : source, e.path(), e.problem(), e);
    }
  }

  /** Base model name (the root of non-LoRA request keys). */
  public String model() {
    return model;
  }

  /** Address the HTTP server binds. */
  public String host() {
    return host;
  }

  /** HTTP port (0: any free port). */
  public int port() {
    return port;
  }

  /** Largest accepted request body in bytes (beyond: 413). */
  public int maxBodyBytes() {
    return maxBodyBytes;
  }

  /**
   * HTTP event-loop threads; handlers run on them. 0 means one loop (kept for configurations
   * written for the earlier server, where 0 meant "on the dispatcher thread").
   */
  public int threads() {
    return threads;
  }

  /** Open HTTP connections allowed; beyond, new connections get 503 and are closed. */
  public int maxConnections() {
    return maxConnections;
  }

  /** Time allowed to receive one request (beyond: 408 and close) or to write one answer. */
  public Duration requestTimeout() {
    return requestTimeout;
  }

  /** How long an idle keep-alive connection is kept open. */
  public Duration idleTimeout() {
    return idleTimeout;
  }

  /** Tokens per index block. */
  public int blockSize() {
    return blockSize;
  }

  /** Seed of the index's request-key chain. */
  public String hashSeed() {
    return hashSeed;
  }

  /** Maximum request keys the index keeps. */
  public int maxKeys() {
    return maxKeys;
  }

  /** Score weight per storage tier (upper-case names). */
  public Map<String, Double> tierWeights() {
    return tierWeights;
  }

  /** How long {@code /readyz} waits for a silent pod before counting it as timed out. */
  public Duration readyTimeout() {
    return readyTimeout;
  }

  /** ZMQ subscription topic (empty: all). */
  public String topic() {
    return topic;
  }

  /** The tokenizer for {@code prompt} text, if configured. */
  public Optional<TokenizerSettings> tokenizer() {
    return tokenizer;
  }

  /** Largest accepted {@code token_ids} length (and {@code prompt_blocks} × block size). */
  public int maxTokens() {
    return maxTokens;
  }

  /** Largest accepted {@code candidate_pods} length. */
  public int maxCandidatePods() {
    return maxCandidatePods;
  }

  /** Pods listed in the configuration itself. */
  public List<PodSpec> pods() {
    return pods;
  }

  /** The pods file, re-read when it changes. */
  public Optional<Path> podsFile() {
    return podsFile;
  }

  /** How often the pods file is checked for changes. */
  public Duration podsFilePoll() {
    return podsFilePoll;
  }

  /** A builder initialised from this configuration. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.model = model;
    b.host = host;
    b.port = port;
    b.maxBodyBytes = maxBodyBytes;
    b.threads = threads;
    b.maxConnections = maxConnections;
    b.requestTimeout = requestTimeout;
    b.idleTimeout = idleTimeout;
    b.blockSize = blockSize;
    b.hashSeed = hashSeed;
    b.maxKeys = maxKeys;
    b.tierWeights.clear();
    b.tierWeights.putAll(tierWeights);
    b.readyTimeout = readyTimeout;
    b.topic = topic;
    b.tokenizer = tokenizer.orElse(null);
    b.maxTokens = maxTokens;
    b.maxCandidatePods = maxCandidatePods;
    b.pods.addAll(pods);
    b.podsFile = podsFile.orElse(null);
    b.podsFilePoll = podsFilePoll;
    return b;
  }

  @Override
  public String toString() {
    return "ServiceConfig{model="
        + model
        + ", http="
        + host
        + ":"
        + port
        + ", blockSize="
        + blockSize
        + ", pods="
        + pods.size()
        + podsFile.map(p -> ", podsFile=" + p).orElse("")
        + ", tokenizer="
        + tokenizer.map(Object::toString).orElse("none")
        + "}";
  }

  /**
   * One model-server pod: its id, the ZMQ endpoints of its KV-event publisher, and optionally its
   * HTTP base URL (for {@code /tokenize}) and KV capacity in blocks (for utilisation).
   *
   * @param id pod identifier (as used in {@code candidate_pods})
   * @param events the publisher's PUB endpoint, e.g. {@code tcp://10.0.0.5:5557}
   * @param replay the publisher's replay (ROUTER) endpoint, if it has one
   * @param http the pod's HTTP base URL, if known
   * @param capacityBlocks GPU KV capacity in blocks (0: unknown)
   */
  public record PodSpec(
      String id, String events, Optional<String> replay, Optional<URI> http, long capacityBlocks) {
    /** Validates non-null components. */
    public PodSpec {
      Objects.requireNonNull(id, "id");
      Objects.requireNonNull(events, "events");
      Objects.requireNonNull(replay, "replay");
      Objects.requireNonNull(http, "http");
    }

    /** A pod with only an id and an events endpoint. */
    public static PodSpec of(String id, String events) {
      return new PodSpec(id, events, Optional.empty(), Optional.empty(), 0);
    }
  }

  /**
   * How {@code prompt} text is tokenized: vLLM's {@code POST /tokenize} on a fixed URL or on the
   * pods' {@code http} URLs, with a timeout and a bounded cache.
   *
   * @param url the tokenizer server, empty when {@code fromPods}
   * @param fromPods whether the pods' own {@code http} URLs are used in rotation
   * @param timeout per-call timeout
   * @param cacheEntries cached prompts (0: no cache)
   * @param cacheMaxTokens total tokens held by the cache
   * @param path local tokenizer files (tokenized in process; the URL, if any, is the fallback)
   * @param revision the snapshot of a Hugging Face cache directory {@code path}
   */
  public record TokenizerSettings(
      Optional<URI> url,
      boolean fromPods,
      Duration timeout,
      int cacheEntries,
      long cacheMaxTokens,
      Optional<Path> path,
      Optional<String> revision) {
    /** Validates non-null components. */
    public TokenizerSettings {
      Objects.requireNonNull(url, "url");
      Objects.requireNonNull(timeout, "timeout");
      Objects.requireNonNull(path, "path");
      Objects.requireNonNull(revision, "revision");
    }

    /** True when prompts can also be sent to a {@code /tokenize} endpoint. */
    public boolean hasRemote() {
      return url.isPresent() || fromPods;
    }

    /** A builder (timeout 2 s, 1024 entries, 8 Mi tokens). */
    public static Builder builder() {
      return new Builder();
    }

    /** Validating builder of {@link TokenizerSettings}; not thread-safe. */
    public static final class Builder {
      private URI url;
      private boolean fromPods;
      private Duration timeout = Duration.ofSeconds(2);
      private int cacheEntries = 1024;
      private long cacheMaxTokens = 8L << 20;
      private Path path;
      private String revision;

      private Builder() {}

      /** Local tokenizer files (a model directory or a Hugging Face cache directory). */
      public Builder path(Path path) {
        this.path = Objects.requireNonNull(path, "path");
        return this;
      }

      /** The snapshot of a Hugging Face cache directory (default {@code main}). */
      public Builder revision(String revision) {
        this.revision = revision;
        return this;
      }

      /** A fixed tokenizer server, e.g. {@code http://vllm-0:8000}. */
      public Builder url(URI url) {
        this.url = Objects.requireNonNull(url, "url");
        this.fromPods = false;
        return this;
      }

      /** Use the pods' own {@code http} URLs in rotation. */
      public Builder fromPods() {
        this.fromPods = true;
        this.url = null;
        return this;
      }

      /** Per-call timeout (default 2 s). */
      public Builder timeout(Duration timeout) {
        this.timeout = Objects.requireNonNull(timeout, "timeout");
        return this;
      }

      /** Cached prompts (default 1024; 0 disables the cache). */
      public Builder cacheEntries(int entries) {
        this.cacheEntries = entries;
        return this;
      }

      /** Total cached tokens (default 8 Mi). */
      public Builder cacheMaxTokens(long tokens) {
        this.cacheMaxTokens = tokens;
        return this;
      }

      /**
       * Builds the settings.
       *
       * @throws ServiceConfigException naming the invalid field
       */
      public TokenizerSettings build() {
        if (url == null && !fromPods && path == null) {
          throw new ServiceConfigException(
              "",
              "tokenizer.url",
              "is required (a URL or \"pods\") unless tokenizer.path names local tokenizer files",
              null);
        }
        if (timeout.isNegative() || timeout.isZero()) {
          throw new ServiceConfigException(
              "", "tokenizer.timeout_ms", "must be > 0, was " + timeout.toMillis(), null);
        }
        if (cacheEntries < 0) {
          throw new ServiceConfigException(
              "", "tokenizer.cache_entries", "must be >= 0, was " + cacheEntries, null);
        }
        if (cacheMaxTokens < 0) {
          throw new ServiceConfigException(
              "", "tokenizer.cache_max_tokens", "must be >= 0, was " + cacheMaxTokens, null);
        }
        return new TokenizerSettings(
            Optional.ofNullable(url),
            fromPods,
            timeout,
            cacheEntries,
            cacheMaxTokens,
            Optional.ofNullable(path),
            Optional.ofNullable(revision));
      }
    }
  }

  /** Validating builder of {@link ServiceConfig}; not thread-safe. */
  public static final class Builder {
    private String model;
    private String host = "127.0.0.1";
    private int port = 8080;
    private int maxBodyBytes = 1 << 20;
    private int threads = Runtime.getRuntime().availableProcessors();
    private int maxConnections = 1024;
    private Duration requestTimeout = Duration.ofSeconds(10);
    private Duration idleTimeout = Duration.ofSeconds(60);
    private int blockSize = 16;
    private String hashSeed = "";
    private int maxKeys = 10_000_000;
    private final Map<String, Double> tierWeights = new LinkedHashMap<>();
    private Duration readyTimeout = Duration.ofSeconds(30);
    private String topic = "";
    private TokenizerSettings tokenizer;
    private int maxTokens = 131_072;
    private int maxCandidatePods = 4096;
    private final List<PodSpec> pods = new ArrayList<>();
    private Path podsFile;
    private Duration podsFilePoll = Duration.ofSeconds(2);

    private Builder() {}

    /** Base model name (required). */
    public Builder model(String model) {
      this.model = model;
      return this;
    }

    /** Bind address (default 127.0.0.1). */
    public Builder host(String host) {
      this.host = Objects.requireNonNull(host, "host");
      return this;
    }

    /** HTTP port (default 8080; 0: any free port). */
    public Builder port(int port) {
      this.port = port;
      return this;
    }

    /** Largest accepted request body (default 1 MiB). */
    public Builder maxBodyBytes(int bytes) {
      this.maxBodyBytes = bytes;
      return this;
    }

    /** HTTP event-loop threads (default: the number of cores; 0 means 1). */
    public Builder threads(int threads) {
      this.threads = threads;
      return this;
    }

    /** Open HTTP connections allowed (default 1024). */
    public Builder maxConnections(int maxConnections) {
      this.maxConnections = maxConnections;
      return this;
    }

    /** Time allowed to receive one request or write one answer (default 10 s). */
    public Builder requestTimeout(Duration timeout) {
      this.requestTimeout = Objects.requireNonNull(timeout, "requestTimeout");
      return this;
    }

    /** How long an idle keep-alive connection is kept (default 60 s). */
    public Builder idleTimeout(Duration timeout) {
      this.idleTimeout = Objects.requireNonNull(timeout, "idleTimeout");
      return this;
    }

    /** Tokens per index block (default 16). */
    public Builder blockSize(int blockSize) {
      this.blockSize = blockSize;
      return this;
    }

    /** Seed of the request-key chain (default ""). */
    public Builder hashSeed(String hashSeed) {
      this.hashSeed = Objects.requireNonNull(hashSeed, "hashSeed");
      return this;
    }

    /** Maximum request keys kept by the index (default 10,000,000). */
    public Builder maxKeys(int maxKeys) {
      this.maxKeys = maxKeys;
      return this;
    }

    /** One tier's score weight (defaults of the index: GPU 1.0, CPU 0.8). */
    public Builder tierWeight(String tier, double weight) {
      this.tierWeights.put(Objects.requireNonNull(tier, "tier"), weight);
      return this;
    }

    /** How long readiness waits for a silent pod (default 30 s). */
    public Builder readyTimeout(Duration timeout) {
      this.readyTimeout = Objects.requireNonNull(timeout, "readyTimeout");
      return this;
    }

    /** ZMQ subscription topic (default "": all). */
    public Builder topic(String topic) {
      this.topic = Objects.requireNonNull(topic, "topic");
      return this;
    }

    /** Tokenizer for {@code prompt} text (default: none). */
    public Builder tokenizer(TokenizerSettings tokenizer) {
      this.tokenizer = tokenizer;
      return this;
    }

    /** Largest {@code token_ids} length (default 131,072). */
    public Builder maxTokens(int maxTokens) {
      this.maxTokens = maxTokens;
      return this;
    }

    /** Largest {@code candidate_pods} length (default 4096). */
    public Builder maxCandidatePods(int max) {
      this.maxCandidatePods = max;
      return this;
    }

    /** Adds a pod. */
    public Builder pod(PodSpec pod) {
      this.pods.add(Objects.requireNonNull(pod, "pod"));
      return this;
    }

    /** Replaces the pod list. */
    public Builder pods(List<PodSpec> pods) {
      this.pods.clear();
      this.pods.addAll(pods);
      return this;
    }

    /** A pods file re-read on change. */
    public Builder podsFile(Path podsFile) {
      this.podsFile = podsFile;
      return this;
    }

    /** How often the pods file is checked (default 2 s). */
    public Builder podsFilePoll(Duration poll) {
      this.podsFilePoll = Objects.requireNonNull(poll, "podsFilePoll");
      return this;
    }

    /**
     * Builds the configuration.
     *
     * @throws ServiceConfigException naming the first invalid field
     */
    public ServiceConfig build() {
      check(model != null && !model.isBlank(), "model", "is required (the served model's name)");
      check(port >= 0 && port <= 65535, "http.port", "must be in [0, 65535], was " + port);
      check(
          maxBodyBytes >= 1024 && maxBodyBytes <= (64 << 20),
          "http.max_body_bytes",
          "must be in [1024, 67108864], was " + maxBodyBytes);
      check(threads >= 0 && threads <= 256, "http.threads", "must be in [0, 256], was " + threads);
      check(
          maxConnections >= 1 && maxConnections <= 1_000_000,
          "http.max_connections",
          "must be in [1, 1000000], was " + maxConnections);
      check(
          requestTimeout.toMillis() >= 1,
          "http.request_timeout_ms",
          "must be >= 1, was " + requestTimeout.toMillis());
      check(
          idleTimeout.toMillis() >= 1,
          "http.idle_timeout_ms",
          "must be >= 1, was " + idleTimeout.toMillis());
      check(
          blockSize >= 1 && blockSize <= 4096,
          "index.block_size",
          "must be in [1, 4096], was " + blockSize);
      check(maxKeys >= 1, "index.max_keys", "must be >= 1, was " + maxKeys);
      for (Map.Entry<String, Double> e : tierWeights.entrySet()) {
        double w = e.getValue();
        check(
            w >= 0 && w <= 1 && !Double.isNaN(w),
            "index.tier_weights." + e.getKey(),
            "must be in [0, 1], was " + w);
      }
      check(
          !readyTimeout.isNegative(),
          "events.ready_timeout_ms",
          "must be >= 0, was " + readyTimeout.toMillis());
      check(maxTokens >= 1, "limits.max_tokens", "must be >= 1, was " + maxTokens);
      check(
          maxCandidatePods >= 1,
          "limits.max_candidate_pods",
          "must be >= 1, was " + maxCandidatePods);
      check(
          !podsFilePoll.isNegative() && !podsFilePoll.isZero(),
          "pods_file_poll_ms",
          "must be > 0, was " + podsFilePoll.toMillis());
      Set<String> ids = new HashSet<>();
      for (PodSpec p : pods) {
        check(ids.add(p.id()), "pods", "id \"" + p.id() + "\" is listed twice");
      }
      check(
          !pods.isEmpty() || podsFile != null,
          "pods",
          "pods or pods_file is required (the pods whose KV events to follow)");
      if (tokenizer != null && tokenizer.fromPods()) {
        boolean any = podsFile != null || pods.stream().anyMatch(p -> p.http().isPresent());
        check(any, "tokenizer.url", "is \"pods\" but no pod has an http URL");
      }
      return new ServiceConfig(this);
    }

    private static void check(boolean ok, String path, String problem) {
      if (!ok) {
        throw new ServiceConfigException("", path, problem, null);
      }
    }
  }
}
