package io.kvroute.spring.gateway;

import io.kvroute.config.Checks;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.Endpoint;
import io.kvroute.pd.ConnectorConfigs;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.util.unit.DataSize;
import org.springframework.validation.Errors;
import org.springframework.validation.Validator;

/**
 * The {@code kvroute.*} properties: the same model as {@code kvroute gateway}'s configuration file
 * (see {@code docs/configuration.md}), in Spring's kebab-case form.
 *
 * <pre>{@code
 * kvroute:
 *   mode: relay                       # relay (kvroute runs the request) or route (SCG proxies it)
 *   observability-headers: true       # x-kvroute-* response headers
 *   default-connector: { type: http }
 *   models:
 *     "[Qwen/Qwen3-0.6B]":            # brackets keep the '/' in a map key
 *       kv-connector: { type: nixl, timeouts: { prefill: 30s } }
 *       tokenizer: { path: /models/hub/models--Qwen--Qwen3-0.6B }
 *   index: { block-size: 16 }          # precise prefix scoring from KV events
 *   scheduler: /etc/kvroute/picker.yaml
 *   endpoints:
 *     - { id: p0, url: "http://10.0.0.5:8000", role: prefill }
 *     - id: d0
 *       url: "http://10.0.0.6:8000"
 *       role: decode
 *       kv-events: { publisher: "tcp://10.0.0.6:5557", replay: "tcp://10.0.0.6:5558" }
 * }</pre>
 *
 * <p>A {@code kv-connector} section is passed to kvroute's connector binder as it is, so its keys
 * are kvroute's own ({@code timeouts.prefill}, {@code retry.maxAttempts}, ...), not kebab-case.
 *
 * <p>The properties validate themselves when bound (Spring calls {@link #validate}): a wrong value
 * stops the application at start-up with a message naming the property, for example {@code
 * kvroute.endpoints[1].url: not an http(s) URL: "http//x"}.
 */
@ConfigurationProperties(prefix = KvRouteProperties.PREFIX)
public class KvRouteProperties implements Validator {

  /** The properties' prefix. */
  public static final String PREFIX = "kvroute";

  /** What {@link KvRouteGlobalFilter} does with a routed request. */
  public enum Mode {
    /**
     * kvroute runs the request through the model's connector (prefill, then decode, with retries
     * over pairs) and streams the decode response back; the route's own URI is not used.
     */
    RELAY,
    /**
     * kvroute only decides: the route's request URL becomes the chosen decode endpoint and the
     * decision's headers ({@code x-prefiller-host-port} for a decode-side PD sidecar) are added;
     * Spring Cloud Gateway proxies the request.
     */
    ROUTE
  }

  /** Whether the starter is active (default true). */
  private boolean enabled = true;

  /** What the filter does with a request to an OpenAI path (default relay). */
  private Mode mode = Mode.RELAY;

  /** The largest request body the filter reads; larger ones are answered 413 (default 16MB). */
  private DataSize maxRequestSize = DataSize.ofMegabytes(16);

  /** Add x-kvroute-* response headers (chosen endpoints, cached tokens, scheduling time). */
  private boolean observabilityHeaders;

  /** Poll each endpoint's /metrics this often (default: not at all). */
  private Duration scrapeMetrics;

  /** How long closing the router waits for requests in flight (default 30s). */
  private Duration drainTimeout = Duration.ofSeconds(30);

  /**
   * The kvConnector section of models without their own (default {@code type: http}), in kvroute's
   * own keys: type, config, timeouts, retry, resources.
   */
  private Map<String, Object> defaultConnector = new LinkedHashMap<>();

  /** Per-model settings, keyed by the served model name. */
  private Map<String, Model> models = new LinkedHashMap<>();

  /** An EndpointPickerConfig file (YAML) for the scheduler (default: kvroute's profiles). */
  private String scheduler;

  /** Precise prefix scoring from the endpoints' KV events; off unless a property is set. */
  private Index index;

  /** The model servers. */
  private List<EndpointSpec> endpoints = new ArrayList<>();

  /** Whether the starter is active. */
  public boolean isEnabled() {
    return enabled;
  }

  /** Sets whether the starter is active. */
  public void setEnabled(boolean enabled) {
    this.enabled = enabled;
  }

  /** The filter's mode. */
  public Mode getMode() {
    return mode;
  }

  /** Sets the filter's mode. */
  public void setMode(Mode mode) {
    this.mode = mode;
  }

  /** The largest request body read. */
  public DataSize getMaxRequestSize() {
    return maxRequestSize;
  }

  /** Sets the largest request body read. */
  public void setMaxRequestSize(DataSize maxRequestSize) {
    this.maxRequestSize = maxRequestSize;
  }

  /** Whether x-kvroute-* response headers are added. */
  public boolean isObservabilityHeaders() {
    return observabilityHeaders;
  }

  /** Sets whether x-kvroute-* response headers are added. */
  public void setObservabilityHeaders(boolean observabilityHeaders) {
    this.observabilityHeaders = observabilityHeaders;
  }

  /** The metrics scrape interval, or null. */
  public Duration getScrapeMetrics() {
    return scrapeMetrics;
  }

  /** Sets the metrics scrape interval. */
  public void setScrapeMetrics(Duration scrapeMetrics) {
    this.scrapeMetrics = scrapeMetrics;
  }

  /** How long closing waits for requests in flight. */
  public Duration getDrainTimeout() {
    return drainTimeout;
  }

  /** Sets how long closing waits for requests in flight. */
  public void setDrainTimeout(Duration drainTimeout) {
    this.drainTimeout = drainTimeout;
  }

  /** The default kvConnector section (empty: {@code type: http}). */
  public Map<String, Object> getDefaultConnector() {
    return defaultConnector;
  }

  /** Sets the default kvConnector section. */
  public void setDefaultConnector(Map<String, Object> defaultConnector) {
    this.defaultConnector = defaultConnector;
  }

  /** Per-model settings. */
  public Map<String, Model> getModels() {
    return models;
  }

  /** Sets the per-model settings. */
  public void setModels(Map<String, Model> models) {
    this.models = models;
  }

  /** The scheduler configuration file, or null. */
  public String getScheduler() {
    return scheduler;
  }

  /** Sets the scheduler configuration file. */
  public void setScheduler(String scheduler) {
    this.scheduler = scheduler;
  }

  /** The index settings, or null when precise prefix scoring is off. */
  public Index getIndex() {
    return index;
  }

  /** Sets the index settings. */
  public void setIndex(Index index) {
    this.index = index;
  }

  /** The model servers. */
  public List<EndpointSpec> getEndpoints() {
    return endpoints;
  }

  /** Sets the model servers. */
  public void setEndpoints(List<EndpointSpec> endpoints) {
    this.endpoints = endpoints;
  }

  // ---------------------------------------------------------------- validation

  @Override
  public boolean supports(Class<?> clazz) {
    return KvRouteProperties.class.isAssignableFrom(clazz);
  }

  /**
   * Checks every property, reporting each problem at its property path with a message that names
   * the full property ({@code kvroute.endpoints[1].url: ...}).
   */
  @Override
  public void validate(Object target, Errors errors) {
    KvRouteProperties p = (KvRouteProperties) target;
    check(errors, "max-request-size", () -> positive(p.maxRequestSize));
    check(
        errors,
        "scrape-metrics",
        () -> {
          if (p.scrapeMetrics != null
              && (p.scrapeMetrics.isNegative() || p.scrapeMetrics.isZero())) {
            throw new ConfigException("", "must be > 0, was " + p.scrapeMetrics);
          }
        });
    check(
        errors,
        "drain-timeout",
        () -> {
          if (p.drainTimeout == null || p.drainTimeout.isNegative()) {
            throw new ConfigException("", "must be >= 0, was " + p.drainTimeout);
          }
        });
    check(
        errors,
        "default-connector",
        () -> ConnectorConfigs.bind(connectorSection(p.defaultConnector), ""));
    p.models.forEach(
        (name, m) -> {
          String at = "models[" + name + "]";
          if (m == null) {
            return;
          }
          if (m.kvConnector != null && !m.kvConnector.isEmpty()) {
            check(errors, at + ".kv-connector", () -> ConnectorConfigs.bind(m.kvConnector, ""));
          }
          if (m.tokenizer != null) {
            check(
                errors,
                at + ".tokenizer.path",
                () ->
                    Checks.required("", m.tokenizer.path, "the directory of the tokenizer files"));
          }
        });
    if (p.index != null) {
      check(
          errors,
          "index.block-size",
          () -> Checks.range("", p.index.blockSize, 1, Integer.MAX_VALUE));
    }
    Map<String, Integer> ids = new LinkedHashMap<>();
    for (int i = 0; i < p.endpoints.size(); i++) {
      EndpointSpec e = p.endpoints.get(i);
      String at = "endpoints[" + i + "]";
      if (e == null) {
        continue;
      }
      if (!check(errors, at + ".url", () -> Checks.httpUrl("", e.url))) {
        continue;
      }
      if (!check(errors, at + ".role", () -> role(e.role))) {
        continue;
      }
      if (e.id != null && e.id.isBlank()) {
        reject(errors, at + ".id", "must not be blank");
        continue;
      }
      if (e.kvEvents != null) {
        check(
            errors,
            at + ".kv-events.publisher",
            () -> Checks.zmqEndpoint("", e.kvEvents.publisher));
        if (e.kvEvents.replay != null) {
          check(errors, at + ".kv-events.replay", () -> Checks.zmqEndpoint("", e.kvEvents.replay));
        }
      }
      Endpoint ep;
      try {
        ep = e.endpoint();
      } catch (IllegalArgumentException ex) {
        reject(errors, at + ".url", ex.getMessage());
        continue;
      }
      Integer first = ids.putIfAbsent(ep.id(), i);
      if (first != null) {
        reject(
            errors,
            at + ".id",
            "duplicate id \""
                + ep.id()
                + "\" (also "
                + PREFIX
                + ".endpoints["
                + first
                + "]"
                + (e.id == null ? "; an id defaults to the URL's host:port" : "")
                + ")");
      }
    }
  }

  /** The section with {@code type: http} filled in when it names no type. */
  static Map<String, Object> connectorSection(Map<String, Object> section) {
    Map<String, Object> s = new LinkedHashMap<>(section == null ? Map.of() : section);
    s.putIfAbsent("type", "http");
    return s;
  }

  private static void positive(DataSize size) {
    if (size == null || size.toBytes() < 1 || size.toBytes() > Integer.MAX_VALUE) {
      throw new ConfigException("", "must be in [1B, 2GB), was " + size);
    }
  }

  static Endpoint.Role role(String role) {
    try {
      return Endpoint.Role.parse(role == null ? "both" : role.toLowerCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new ConfigException(
          "", "must be one of prefill, decode, both; was \"" + role + "\"", e);
    }
  }

  /** Runs a check; on a ConfigException rejects {@code field}. True when it passed. */
  private static boolean check(Errors errors, String field, Runnable check) {
    try {
      check.run();
      return true;
    } catch (ConfigException e) {
      reject(errors, ConfigException.join(field, e.path()), e.problem());
      return false;
    } catch (IllegalArgumentException e) {
      reject(errors, field, String.valueOf(e.getMessage()));
      return false;
    }
  }

  private static void reject(Errors errors, String field, String problem) {
    // The whole property name is in the message: it is what a user searches their files for.
    String message = PREFIX + "." + field + ": " + problem;
    String bindable = field.replaceAll("\\[([^\\]0-9][^\\]]*)]", ".$1");
    try {
      errors.rejectValue(bindable, "invalidProperty", message);
    } catch (RuntimeException e) {
      // the path may name a map entry the errors object cannot read: report it globally
      errors.reject("invalidProperty", message);
    }
  }

  // ---------------------------------------------------------------- nested types

  /** {@code kvroute.models.<name>}: a model's own connector, its local tokenizer, or both. */
  public static class Model {
    /** The model's kvConnector section (default: kvroute.default-connector). */
    private Map<String, Object> kvConnector;

    /** Tokenize the model's prompts in process (default: the pods' /tokenize). */
    private LocalTokenizer tokenizer;

    /** The model's kvConnector section, or null. */
    public Map<String, Object> getKvConnector() {
      return kvConnector;
    }

    /** Sets the model's kvConnector section. */
    public void setKvConnector(Map<String, Object> kvConnector) {
      this.kvConnector = kvConnector;
    }

    /** The model's local tokenizer, or null. */
    public LocalTokenizer getTokenizer() {
      return tokenizer;
    }

    /** Sets the model's local tokenizer. */
    public void setTokenizer(LocalTokenizer tokenizer) {
      this.tokenizer = tokenizer;
    }
  }

  /** {@code kvroute.models.<name>.tokenizer}: where the model's tokenizer files are. */
  public static class LocalTokenizer {
    /** A model directory or a Hugging Face cache directory models--org--name. */
    private String path;

    /** The snapshot of a Hugging Face cache directory (default main). */
    private String revision;

    /** A Jinja chat template file replacing the model's. */
    private String chatTemplate;

    /** Send prompts to the pods' /tokenize when local tokenization fails (default true). */
    private boolean fallback = true;

    /** The tokenizer directory. */
    public String getPath() {
      return path;
    }

    /** Sets the tokenizer directory. */
    public void setPath(String path) {
      this.path = path;
    }

    /** The cache snapshot, or null. */
    public String getRevision() {
      return revision;
    }

    /** Sets the cache snapshot. */
    public void setRevision(String revision) {
      this.revision = revision;
    }

    /** The chat template file, or null. */
    public String getChatTemplate() {
      return chatTemplate;
    }

    /** Sets the chat template file. */
    public void setChatTemplate(String chatTemplate) {
      this.chatTemplate = chatTemplate;
    }

    /** Whether the pods' /tokenize is the fallback. */
    public boolean isFallback() {
      return fallback;
    }

    /** Sets whether the pods' /tokenize is the fallback. */
    public void setFallback(boolean fallback) {
      this.fallback = fallback;
    }
  }

  /** {@code kvroute.index}: precise prefix scoring from KV events. */
  public static class Index {
    /** Tokens per block, as the engines' --block-size. */
    private int blockSize = 16;

    /** Tokens per block. */
    public int getBlockSize() {
      return blockSize;
    }

    /** Sets the tokens per block. */
    public void setBlockSize(int blockSize) {
      this.blockSize = blockSize;
    }
  }

  /** {@code kvroute.endpoints[i]}: a model server. */
  public static class EndpointSpec {
    /** The endpoint's id (default: the URL's host:port). */
    private String id;

    /** The model server's base URL. */
    private String url;

    /** prefill, decode or both (default both). */
    private String role;

    /** Labels the scheduler's filters read (kvroute.io/model names the model served). */
    private Map<String, String> labels = new LinkedHashMap<>();

    /** Where the endpoint publishes KV events (none by default). */
    private KvEvents kvEvents;

    /** The id, or null. */
    public String getId() {
      return id;
    }

    /** Sets the id. */
    public void setId(String id) {
      this.id = id;
    }

    /** The base URL. */
    public String getUrl() {
      return url;
    }

    /** Sets the base URL. */
    public void setUrl(String url) {
      this.url = url;
    }

    /** The role, or null for both. */
    public String getRole() {
      return role;
    }

    /** Sets the role. */
    public void setRole(String role) {
      this.role = role;
    }

    /** The labels. */
    public Map<String, String> getLabels() {
      return labels;
    }

    /** Sets the labels. */
    public void setLabels(Map<String, String> labels) {
      this.labels = labels;
    }

    /** The KV-event source, or null. */
    public KvEvents getKvEvents() {
      return kvEvents;
    }

    /** Sets the KV-event source. */
    public void setKvEvents(KvEvents kvEvents) {
      this.kvEvents = kvEvents;
    }

    /**
     * The endpoint described.
     *
     * @throws IllegalArgumentException when the URL or role is invalid (validation reports it
     *     first)
     */
    public Endpoint endpoint() {
      Endpoint ep = Endpoint.of(url.trim(), role(role));
      return (id == null ? ep : ep.withId(id)).withLabels(labels == null ? Map.of() : labels);
    }
  }

  /** {@code kvroute.endpoints[i].kv-events}: an engine's ZMQ KV-event publisher. */
  public static class KvEvents {
    /** The publisher, tcp://host:port or ipc://path. */
    private String publisher;

    /** Its replay (ROUTER) endpoint, if any. */
    private String replay;

    /** The subscription topic (default: all). */
    private String topic;

    /** The publisher. */
    public String getPublisher() {
      return publisher;
    }

    /** Sets the publisher. */
    public void setPublisher(String publisher) {
      this.publisher = publisher;
    }

    /** The replay endpoint, or null. */
    public String getReplay() {
      return replay;
    }

    /** Sets the replay endpoint. */
    public void setReplay(String replay) {
      this.replay = replay;
    }

    /** The topic, or null. */
    public String getTopic() {
      return topic;
    }

    /** Sets the topic. */
    public void setTopic(String topic) {
      this.topic = topic;
    }
  }
}
