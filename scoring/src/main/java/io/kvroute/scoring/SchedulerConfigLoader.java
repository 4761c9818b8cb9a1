package io.kvroute.scoring;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.kvroute.connector.Endpoint;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Loads a scheduler configuration from a YAML or JSON document shaped like llm-d's {@code
 * EndpointPickerConfig}: {@code plugins} (instances with {@code name}, {@code type}, {@code
 * parameters}) and {@code schedulingProfiles} (each a list of {@code pluginRef}s, scorers with an
 * optional {@code weight}, default 1). The result is a {@link Scheduler.Builder}, so code can still
 * add the index, metrics registry, clock and so on.
 *
 * <p>As upstream: with no {@code schedulingProfiles}, one {@code default} profile holds every
 * filter, scorer and picker in listing order; a profile without a picker gets {@code
 * max-score-picker}; a plugin's name defaults to its type. A {@code disagg-profile-handler} (or the
 * deprecated {@code pd-profile-handler}) enables PD when it names a decider; {@code enabled: false}
 * on it (a kvroute extension) switches PD off.
 *
 * <p>Errors are {@link SchedulerConfigException}s naming the plugin or profile and the field;
 * unknown plugin types and unknown parameters are errors (upstream parameters that have no meaning
 * here, such as the precise producer's {@code kvEventsConfig}, are accepted and ignored, as listed
 * in {@link #IGNORED_PARAMETERS}).
 *
 * <p>Instances are immutable and thread-safe.
 */
public final class SchedulerConfigLoader {

  /** Upstream parameters accepted for compatibility and ignored, by plugin type. */
  public static final Map<String, Set<String>> IGNORED_PARAMETERS =
      Map.of(
          "precise-prefix-cache-scorer",
          Set.of(
              "tokenProcessorConfig", "indexerConfig", "kvEventsConfig", "kvCacheBackendConfigs"),
          "prefix-cache-scorer",
          Set.of("prefixMatchInfoProducerName"),
          "no-hit-lru-scorer",
          Set.of("prefixMatchInfoProducerName", "prefixPluginType", "prefixPluginName"),
          "active-request-scorer",
          Set.of("requestTimeout", "inFlightLoadProducerName"),
          "approx-prefix-cache-producer",
          Set.of("autoTune", "blockSize"),
          "session-affinity-scorer",
          Set.of("profileName", "evictionSweepSeconds"),
          "session-affinity-filter",
          Set.of("profileName", "evictionSweepSeconds"),
          "pd-profile-handler",
          Set.of("hashBlockSize", "primaryPort"));

  private static final Set<String> FILTERS =
      Set.of(
          "decode-filter",
          "prefill-filter",
          "role-filter",
          "label-selector-filter",
          "by-label-selector",
          "pd-pairing-filter",
          "health-filter",
          "session-affinity-filter",
          "lora-availability-filter");
  private static final Set<String> SCORERS =
      Set.of(
          "precise-prefix-cache-scorer",
          "prefix-cache-scorer",
          "load-aware-scorer",
          "active-request-scorer",
          "queue-scorer",
          "running-requests-size-scorer",
          "kv-cache-utilization-scorer",
          "lora-affinity-scorer",
          "session-affinity-scorer",
          "no-hit-lru-scorer");
  private static final Set<String> PICKERS =
      Set.of("max-score-picker", "random-picker", "weighted-random-picker");
  private static final Set<String> HANDLERS =
      Set.of("single-profile-handler", "disagg-profile-handler", "pd-profile-handler");
  private static final Set<String> DECIDERS =
      Set.of("prefix-based-pd-decider", "always-disagg-pd-decider");
  private static final Set<String> PRODUCERS = Set.of("approx-prefix-cache-producer");

  private static final Pattern DURATION = Pattern.compile("(\\d+(?:\\.\\d+)?)(ms|s|m|h)?");

  private final Predicate<String> ejected;

  private SchedulerConfigLoader(Predicate<String> ejected) {
    this.ejected = ejected;
  }

  /** A loader whose {@code health-filter}s consult no external breaker state. */
  public static SchedulerConfigLoader create() {
    return new SchedulerConfigLoader(id -> false);
  }

  /**
   * A loader whose {@code health-filter}s also drop endpoints for which {@code isDown} is true
   * (circuit breakers of the connector layer, a {@link HealthProbe}, ...).
   */
  public static SchedulerConfigLoader create(Predicate<String> isDown) {
    return new SchedulerConfigLoader(Objects.requireNonNull(isDown, "isDown"));
  }

  /** Every plugin type this loader knows. */
  public static Set<String> knownTypes() {
    TreeSet<String> all = new TreeSet<>();
    all.addAll(FILTERS);
    all.addAll(SCORERS);
    all.addAll(PICKERS);
    all.addAll(HANDLERS);
    all.addAll(DECIDERS);
    all.addAll(PRODUCERS);
    return all;
  }

  /** Loads a file (YAML, or JSON, which is YAML too). */
  public Scheduler.Builder load(Path file) throws IOException {
    return load(Files.readString(file, StandardCharsets.UTF_8));
  }

  /**
   * Loads a document.
   *
   * @throws SchedulerConfigException when the document is malformed or invalid
   */
  public Scheduler.Builder load(String document) {
    JsonNode root;
    try {
      root = new ObjectMapper(new YAMLFactory()).readTree(document);
    } catch (JsonProcessingException e) {
      throw new SchedulerConfigException(
          "configuration is not valid YAML/JSON: " + e.getOriginalMessage(), e);
    }
    if (root == null || !root.isObject()) {
      throw new SchedulerConfigException("configuration must be a mapping (EndpointPickerConfig)");
    }
    return build((ObjectNode) root);
  }

  // ---------------------------------------------------------------------------------------------

  private static final Set<String> TOP_LEVEL =
      Set.of(
          "apiVersion",
          "kind",
          "featureGates",
          "plugins",
          "schedulingProfiles",
          "dataLayer",
          "flowControl",
          "requestHandler",
          "saturationDetector");

  private Scheduler.Builder build(ObjectNode root) {
    for (Iterator<String> it = root.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      if (!TOP_LEVEL.contains(f)) {
        throw new SchedulerConfigException(
            "unknown top-level field \"" + f + "\"; known: " + new TreeSet<>(TOP_LEVEL));
      }
    }
    JsonNode kind = root.get("kind");
    if (kind != null && !kind.asText().equals("EndpointPickerConfig")) {
      throw new SchedulerConfigException(
          "kind must be EndpointPickerConfig, was \"" + kind.asText() + "\"");
    }
    JsonNode plugins = root.get("plugins");
    if (plugins == null || !plugins.isArray() || plugins.isEmpty()) {
      throw new SchedulerConfigException("plugins must be a non-empty list");
    }
    Scheduler.Builder builder = Scheduler.builder();
    // name -> built object (Filter, Scorer, Picker, PdDecider, HandlerSpec, or Boolean for
    // producers)
    LinkedHashMap<String, Object> instances = new LinkedHashMap<>();
    Map<String, String> typeOf = new HashMap<>();
    for (int i = 0; i < plugins.size(); i++) {
      JsonNode p = plugins.get(i);
      if (!p.isObject()) {
        throw new SchedulerConfigException("plugins[" + i + "] must be a mapping");
      }
      for (Iterator<String> it = p.fieldNames(); it.hasNext(); ) {
        String f = it.next();
        if (!Set.of("name", "type", "parameters").contains(f)) {
          throw new SchedulerConfigException(
              "plugins[" + i + "]: unknown field \"" + f + "\"; known: name, parameters, type");
        }
      }
      JsonNode t = p.get("type");
      if (t == null || !t.isTextual() || t.asText().isBlank()) {
        throw new SchedulerConfigException("plugins[" + i + "]: type is required");
      }
      String type = t.asText();
      String name = p.hasNonNull("name") ? p.get("name").asText() : type;
      if (name.isBlank()) {
        throw new SchedulerConfigException("plugins[" + i + "]: name must not be blank");
      }
      if (instances.containsKey(name)) {
        throw new SchedulerConfigException(
            "plugins[" + i + "]: two plugins are named \"" + name + "\"");
      }
      if (!knownTypes().contains(type)) {
        throw new SchedulerConfigException(
            "plugin \"" + name + "\": unknown type \"" + type + "\"; known: " + knownTypes());
      }
      JsonNode params = p.get("parameters");
      if (params != null && !params.isNull() && !params.isObject()) {
        throw new SchedulerConfigException(
            "plugin \"" + name + "\" (" + type + "): parameters must be a mapping");
      }
      Params ps =
          new Params(name, type, params == null || params.isNull() ? null : (ObjectNode) params);
      Object built;
      try {
        built = create(type, name, ps, builder);
      } catch (SchedulerConfigException e) {
        throw e;
      } catch (IllegalArgumentException e) {
        String m = String.valueOf(e.getMessage());
        if (m.startsWith(name + ".")) { // factories name fields "<plugin>.<field>"
          m = "parameters." + m.substring(name.length() + 1);
        }
        throw new SchedulerConfigException(ps.where() + m, e);
      }
      ps.checkAllUsed();
      instances.put(name, built);
      typeOf.put(name, type);
    }

    // Profiles.
    List<Profile> profiles = new ArrayList<>();
    JsonNode sps = root.get("schedulingProfiles");
    if (sps == null || sps.isNull()) {
      Profile.Builder pb = Profile.builder("default");
      for (Map.Entry<String, Object> e : instances.entrySet()) {
        addToProfile(pb, "default", e.getKey(), e.getValue(), null, typeOf);
      }
      profiles.add(pb.build());
    } else {
      if (!sps.isArray() || sps.isEmpty()) {
        throw new SchedulerConfigException("schedulingProfiles must be a non-empty list");
      }
      Set<String> names = new HashSet<>();
      for (int i = 0; i < sps.size(); i++) {
        JsonNode sp = sps.get(i);
        String where = "schedulingProfiles[" + i + "]";
        if (!sp.isObject() || !sp.hasNonNull("name") || sp.get("name").asText().isBlank()) {
          throw new SchedulerConfigException(where + ": name is required");
        }
        String pname = sp.get("name").asText();
        where = where + " (\"" + pname + "\")";
        if (!names.add(pname)) {
          throw new SchedulerConfigException(where + ": two profiles are named \"" + pname + "\"");
        }
        for (Iterator<String> it = sp.fieldNames(); it.hasNext(); ) {
          String f = it.next();
          if (!f.equals("name") && !f.equals("plugins")) {
            throw new SchedulerConfigException(
                where + ": unknown field \"" + f + "\"; known: name, plugins");
          }
        }
        JsonNode refs = sp.get("plugins");
        if (refs == null || !refs.isArray() || refs.isEmpty()) {
          throw new SchedulerConfigException(where + ": plugins must be a non-empty list");
        }
        Profile.Builder pb = Profile.builder(pname);
        boolean picker = false;
        for (int j = 0; j < refs.size(); j++) {
          JsonNode ref = refs.get(j);
          String rwhere = where + ".plugins[" + j + "]";
          if (!ref.isObject() || !ref.hasNonNull("pluginRef")) {
            throw new SchedulerConfigException(rwhere + ": pluginRef is required");
          }
          for (Iterator<String> it = ref.fieldNames(); it.hasNext(); ) {
            String f = it.next();
            if (!f.equals("pluginRef") && !f.equals("weight")) {
              throw new SchedulerConfigException(
                  rwhere + ": unknown field \"" + f + "\"; known: pluginRef, weight");
            }
          }
          String refName = ref.get("pluginRef").asText();
          Object inst = instances.get(refName);
          if (inst == null) {
            throw new SchedulerConfigException(
                rwhere
                    + ": pluginRef \""
                    + refName
                    + "\" is not a plugin; known: "
                    + instances.keySet());
          }
          Double weight = null;
          if (ref.has("weight")) {
            JsonNode w = ref.get("weight");
            if (!w.isNumber()) {
              throw new SchedulerConfigException(
                  rwhere + " (\"" + refName + "\"): weight must be a number, was " + w);
            }
            weight = w.asDouble();
            if (!(inst instanceof Scorer)) {
              throw new SchedulerConfigException(
                  rwhere + " (\"" + refName + "\"): weight is only allowed on scorers");
            }
            if (!(weight >= 0) || weight.isInfinite()) {
              throw new SchedulerConfigException(
                  rwhere
                      + " (\""
                      + refName
                      + "\"): weight must be a finite number >= 0, was "
                      + weight);
            }
          }
          if (inst instanceof Picker) {
            if (picker) {
              throw new SchedulerConfigException(
                  rwhere + " (\"" + refName + "\"): a profile has at most one picker");
            }
            picker = true;
          }
          if (inst instanceof HandlerSpec || inst instanceof PdDecider || inst instanceof Boolean) {
            throw new SchedulerConfigException(
                rwhere
                    + " (\""
                    + refName
                    + "\"): a "
                    + typeOf.get(refName)
                    + " is not a filter, scorer or picker and cannot be in a profile");
          }
          try {
            addToProfile(pb, pname, refName, inst, weight, typeOf);
          } catch (IllegalArgumentException e) {
            throw new SchedulerConfigException(where + ": " + e.getMessage(), e);
          }
        }
        try {
          profiles.add(pb.build());
        } catch (IllegalArgumentException e) {
          throw new SchedulerConfigException(where + ": " + e.getMessage(), e);
        }
      }
    }
    profiles.forEach(builder::profile);

    // Profile handler.
    HandlerSpec handler = null;
    String handlerName = null;
    for (Map.Entry<String, Object> e : instances.entrySet()) {
      if (e.getValue() instanceof HandlerSpec h) {
        if (handler != null) {
          throw new SchedulerConfigException(
              "plugin \""
                  + e.getKey()
                  + "\": only one profile handler is allowed (\""
                  + handlerName
                  + "\" is another)");
        }
        handler = h;
        handlerName = e.getKey();
      }
    }
    Set<String> profileNames = new LinkedHashSet<>();
    profiles.forEach(p -> profileNames.add(p.name()));
    if (handler == null) {
      if (profiles.size() > 1) {
        throw new SchedulerConfigException(
            "schedulingProfiles has "
                + profiles.size()
                + " profiles but no profile handler plugin (disagg-profile-handler or"
                + " single-profile-handler) says which runs");
      }
      builder.primaryProfile(profiles.get(0).name());
    } else {
      String where = "plugin \"" + handlerName + "\" (" + handler.type + "): ";
      String decode = handler.decode != null ? handler.decode : profiles.get(0).name();
      if (!profileNames.contains(decode)) {
        throw new SchedulerConfigException(
            where
                + handler.decodeField
                + " \""
                + decode
                + "\" is not a profile; known: "
                + profileNames);
      }
      builder.primaryProfile(decode);
      if (handler.prefill != null) {
        if (!profileNames.contains(handler.prefill)) {
          if (handler.prefillExplicit) {
            throw new SchedulerConfigException(
                where
                    + handler.prefillField
                    + " \""
                    + handler.prefill
                    + "\" is not a profile; known: "
                    + profileNames);
          }
        } else {
          builder.prefillProfile(handler.prefill);
        }
      }
      if (handler.decider != null) {
        Object d = instances.get(handler.decider);
        if (!(d instanceof PdDecider pd)) {
          throw new SchedulerConfigException(
              where
                  + handler.deciderField
                  + " \""
                  + handler.decider
                  + "\" is not a PD decider plugin; known deciders: "
                  + instances.entrySet().stream()
                      .filter(x -> x.getValue() instanceof PdDecider)
                      .map(Map.Entry::getKey)
                      .toList());
        }
        if (handler.prefill == null || !profileNames.contains(handler.prefill)) {
          throw new SchedulerConfigException(
              where
                  + "a PD decider is set but the prefill profile \""
                  + handler.prefill
                  + "\" does not exist; known: "
                  + profileNames);
        }
        builder.pdDecider(pd);
        builder.pdEnabled(handler.enabled);
      } else if (handler.legacyThreshold != null) {
        // legacy llm-d pd-profile-handler: threshold 0 skipped the check (always prefill); else
        // prefill iff the uncached part >= threshold
        builder.pdDecider(
            handler.legacyThreshold == 0
                ? PdDecider.always()
                : PdDecider.prefixBased(handler.legacyThreshold));
        builder.pdEnabled(
            handler.enabled && handler.prefill != null && profileNames.contains(handler.prefill));
      }
    }
    return builder;
  }

  private static void addToProfile(
      Profile.Builder pb,
      String profile,
      String name,
      Object inst,
      Double weight,
      Map<String, String> typeOf) {
    if (inst instanceof Filter f) {
      pb.filter(f);
    } else if (inst instanceof Scorer s) {
      pb.scorer(s, weight == null ? 1.0 : weight);
    } else if (inst instanceof Picker p) {
      pb.picker(p);
    }
    // handlers, deciders and producers are not profile members
  }

  /** Parsed profile-handler parameters. */
  private static final class HandlerSpec {
    String type;
    String decode;
    String prefill;
    boolean prefillExplicit;
    String decider;
    Integer legacyThreshold;
    boolean enabled = true;
    String decodeField = "profiles.decode";
    String prefillField = "profiles.prefill";
    String deciderField = "deciders.prefill";
  }

  private Object create(String type, String name, Params p, Scheduler.Builder builder) {
    switch (type) {
      case "decode-filter":
        return Filters.role(name, Endpoint.Role.DECODE, p.string("roleLabel", Filters.ROLE_LABEL));
      case "prefill-filter":
        return Filters.role(name, Endpoint.Role.PREFILL, p.string("roleLabel", Filters.ROLE_LABEL));
      case "role-filter":
        {
          String role = p.requiredString("role");
          Endpoint.Role r;
          try {
            r = Endpoint.Role.parse(role);
          } catch (IllegalArgumentException e) {
            throw p.error("role", "must be one of prefill, decode, both; was \"" + role + "\"");
          }
          return Filters.role(name, r, p.string("label", Filters.ROLE_LABEL));
        }
      case "label-selector-filter":
      case "by-label-selector":
        return Filters.labelSelector(
            name, p.stringMap("matchLabels"), p.requirements("matchExpressions"));
      case "pd-pairing-filter":
        return Filters.pdPairing(name, p.requiredString("groupKey"));
      case "health-filter":
        return Filters.health(name, p.bool("dropStaleMetrics", true), ejected);
      case "session-affinity-filter":
        return Filters.sessionAffinity(name, session(p));
      case "lora-availability-filter":
        return Filters.loraAvailability(
            name, p.string("label", Filters.LORA_LABEL), p.bool("failOpen", true));

      case "precise-prefix-cache-scorer":
        {
          Scorer s =
              Scorers.precisePrefixCache(
                  name,
                  p.dbl("matchLengthWeight", 0.0),
                  p.integer("matchLengthScaleTokens", 8192),
                  p.bool("fallbackToApproximate", true));
          boolean spec = p.bool("speculativeIndexing", true);
          Duration ttl = p.duration("speculativeTTL", Duration.ofSeconds(2));
          int max = p.integer("speculativeMaxEntries", 1_000_000);
          builder.speculative(spec ? ttl : Duration.ZERO, max);
          return s;
        }
      case "prefix-cache-scorer":
        return Scorers.approximatePrefixCache(
            name, p.dbl("matchLengthWeight", 0.0), p.integer("matchLengthScaleTokens", 8192));
      case "load-aware-scorer":
        {
          int t = p.integer("threshold", 10);
          return Scorers.loadAware(name, t);
        }
      case "active-request-scorer":
        return Scorers.activeRequests(
            name, p.integer("idleThreshold", 0), p.dbl("maxBusyScore", 1.0));
      case "queue-scorer":
        return Scorers.queue(name);
      case "running-requests-size-scorer":
        return Scorers.runningRequests(name);
      case "kv-cache-utilization-scorer":
        return Scorers.kvCacheUtilization(name);
      case "lora-affinity-scorer":
        return Scorers.loraAffinity(name);
      case "session-affinity-scorer":
        return Scorers.sessionAffinity(name, session(p));
      case "no-hit-lru-scorer":
        return Scorers.noHitLru(name, p.integer("lruSize", 1024));

      case "max-score-picker":
        return Pickers.maxScore(name, p.integer("maxNumOfEndpoints", 1));
      case "random-picker":
        return Pickers.random(name, p.integer("maxNumOfEndpoints", 1));
      case "weighted-random-picker":
        return Pickers.weightedRandom(name, p.integer("maxNumOfEndpoints", 1));

      case "prefix-based-pd-decider":
        // llm-d's names, defaults (0 = off) and semantics (>= threshold); see
        // PdDecider.prefixBased(int, int)
        return PdDecider.prefixBased(p.integer("nonCachedTokens", 0), p.integer("promptTokens", 0));
      case "always-disagg-pd-decider":
        return PdDecider.always();

      case "approx-prefix-cache-producer":
        {
          int bs = p.integer("blockSizeTokens", 64);
          int maxBlocks = p.integer("maxPrefixBlocksToMatch", 2048);
          int maxTokens = p.integer("maxPrefixTokensToMatch", 131072);
          if (bs < 1) {
            throw p.error("blockSizeTokens", "must be >= 1, was " + bs);
          }
          int blocks = maxTokens > 0 ? maxTokens / bs : maxBlocks;
          builder.approximatePrefix(bs, blocks, p.integer("lruCapacityPerServer", 31_250));
          return Boolean.TRUE;
        }

      case "single-profile-handler":
        {
          HandlerSpec h = new HandlerSpec();
          h.type = type;
          h.decode = p.string("profile", null);
          h.decodeField = "profile";
          return h;
        }
      case "disagg-profile-handler":
        {
          HandlerSpec h = new HandlerSpec();
          h.type = type;
          ObjectNode profiles = p.object("profiles");
          Params pp = p.child("profiles", profiles);
          h.decode = pp.string("decode", Scheduler.DECODE_PROFILE);
          h.prefillExplicit = pp.has("prefill");
          h.prefill = pp.string("prefill", Scheduler.PREFILL_PROFILE);
          if (pp.has("encode")) {
            throw pp.error("encode", "encode disaggregation (E/P/D) is not supported");
          }
          pp.checkAllUsed();
          ObjectNode deciders = p.object("deciders");
          Params dp = p.child("deciders", deciders);
          h.decider = dp.string("prefill", null);
          if (dp.has("encode")) {
            throw dp.error("encode", "encode disaggregation (E/P/D) is not supported");
          }
          dp.checkAllUsed();
          String order = p.string("stageOrder", "decode-first");
          if (!order.equals("decode-first")) {
            throw p.error("stageOrder", "only decode-first is supported, was \"" + order + "\"");
          }
          h.enabled = p.bool("enabled", true);
          return h;
        }
      case "pd-profile-handler":
        {
          HandlerSpec h = new HandlerSpec();
          h.type = type;
          h.decodeField = "decodeProfile";
          h.prefillField = "prefillProfile";
          h.deciderField = "deciderPluginName";
          h.decode = p.string("decodeProfile", Scheduler.DECODE_PROFILE);
          h.prefillExplicit = p.has("prefillProfile");
          h.prefill = p.string("prefillProfile", Scheduler.PREFILL_PROFILE);
          h.decider = p.string("deciderPluginName", null);
          if (p.has("threshold")) {
            h.legacyThreshold = p.integer("threshold", 10);
          }
          h.enabled = p.bool("enabled", true);
          return h;
        }
      default:
        throw new SchedulerConfigException(p.where() + "unsupported type");
    }
  }

  private static SessionAffinity session(Params p) {
    String strategy = p.string("strategy", "encoded_endpoint_header");
    switch (strategy) {
      case "encoded_endpoint_header":
        {
          Params h =
              p.child("encodedEndpointHeaderConfig", p.object("encodedEndpointHeaderConfig"));
          String header = h.string("header", SessionAffinity.DEFAULT_TOKEN_HEADER);
          h.checkAllUsed();
          return SessionAffinity.encodedEndpointHeader(header);
        }
      case "session_id":
        {
          Params s = p.child("sessionIdConfig", p.object("sessionIdConfig"));
          List<String> headers = s.sources("sources");
          s.checkAllUsed();
          long ttl = p.integer("evictionTtlSeconds", 300);
          if (ttl < 1) {
            throw p.error("evictionTtlSeconds", "must be >= 1, was " + ttl);
          }
          return SessionAffinity.sessionId(
              headers.isEmpty() ? List.of(SessionAffinity.DEFAULT_SESSION_ID_HEADER) : headers,
              Duration.ofSeconds(ttl),
              p.integer("maxSessions", 100_000));
        }
      default:
        throw p.error(
            "strategy", "must be encoded_endpoint_header or session_id, was \"" + strategy + "\"");
    }
  }

  /** Typed access to one plugin's parameters, remembering which were read. */
  private static final class Params {
    final String plugin;
    final String type;
    final String prefix;
    final ObjectNode node;
    final Set<String> used = new HashSet<>();

    Params(String plugin, String type, ObjectNode node) {
      this(plugin, type, "parameters.", node);
    }

    Params(String plugin, String type, String prefix, ObjectNode node) {
      this.plugin = plugin;
      this.type = type;
      this.prefix = prefix;
      this.node = node;
    }

    Params child(String field, ObjectNode n) {
      return new Params(plugin, type, prefix + field + ".", n);
    }

    String where() {
      return "plugin \"" + plugin + "\" (" + type + "): ";
    }

    SchedulerConfigException error(String field, String what) {
      return new SchedulerConfigException(where() + prefix + field + " " + what);
    }

    boolean has(String f) {
      return node != null && node.has(f) && !node.get(f).isNull();
    }

    private JsonNode get(String f) {
      used.add(f);
      return node == null ? null : node.get(f);
    }

    String string(String f, String dflt) {
      JsonNode v = get(f);
      if (v == null || v.isNull()) {
        return dflt;
      }
      if (!v.isTextual()) {
        throw error(f, "must be a string, was " + v);
      }
      return v.asText();
    }

    String requiredString(String f) {
      String s = string(f, null);
      if (s == null || s.isBlank()) {
        throw error(f, "is required");
      }
      return s;
    }

    int integer(String f, int dflt) {
      JsonNode v = get(f);
      if (v == null || v.isNull()) {
        return dflt;
      }
      if (!v.isIntegralNumber() || !v.canConvertToInt()) {
        throw error(f, "must be an integer, was " + v);
      }
      return v.intValue();
    }

    double dbl(String f, double dflt) {
      JsonNode v = get(f);
      if (v == null || v.isNull()) {
        return dflt;
      }
      if (!v.isNumber()) {
        throw error(f, "must be a number, was " + v);
      }
      return v.doubleValue();
    }

    boolean bool(String f, boolean dflt) {
      JsonNode v = get(f);
      if (v == null || v.isNull()) {
        return dflt;
      }
      if (!v.isBoolean()) {
        throw error(f, "must be true or false, was " + v);
      }
      return v.booleanValue();
    }

    Duration duration(String f, Duration dflt) {
      JsonNode v = get(f);
      if (v == null || v.isNull()) {
        return dflt;
      }
      if (v.isNumber()) {
        return Duration.ofNanos((long) (v.doubleValue() * 1e9));
      }
      Matcher m = DURATION.matcher(v.asText().trim());
      if (!v.isTextual() || !m.matches()) {
        throw error(f, "must be a duration such as 2s or 500ms, was " + v);
      }
      double n = Double.parseDouble(m.group(1));
      String unit = m.group(2) == null ? "s" : m.group(2);
      double nanos =
          switch (unit) {
            case "ms" -> n * 1e6;
            case "m" -> n * 60e9;
            case "h" -> n * 3600e9;
            default -> n * 1e9;
          };
      return Duration.ofNanos((long) nanos);
    }

    ObjectNode object(String f) {
      JsonNode v = get(f);
      if (v == null || v.isNull()) {
        return null;
      }
      if (!v.isObject()) {
        throw error(f, "must be a mapping, was " + v);
      }
      return (ObjectNode) v;
    }

    Map<String, String> stringMap(String f) {
      ObjectNode o = object(f);
      Map<String, String> m = new LinkedHashMap<>();
      if (o != null) {
        for (Map.Entry<String, JsonNode> e : o.properties()) {
          if (!e.getValue().isValueNode() || e.getValue().isNull()) {
            throw error(f + "." + e.getKey(), "must be a string, was " + e.getValue());
          }
          m.put(e.getKey(), e.getValue().asText());
        }
      }
      return m;
    }

    List<Filters.LabelRequirement> requirements(String f) {
      JsonNode v = get(f);
      List<Filters.LabelRequirement> out = new ArrayList<>();
      if (v == null || v.isNull()) {
        return out;
      }
      if (!v.isArray()) {
        throw error(f, "must be a list, was " + v);
      }
      for (int i = 0; i < v.size(); i++) {
        JsonNode r = v.get(i);
        String at = f + "[" + i + "]";
        if (!r.isObject() || !r.hasNonNull("key") || !r.hasNonNull("operator")) {
          throw error(at, "needs key and operator");
        }
        String op = r.get("operator").asText();
        Filters.Operator o =
            switch (op.toLowerCase(Locale.ROOT)) {
              case "in" -> Filters.Operator.IN;
              case "notin" -> Filters.Operator.NOT_IN;
              case "exists" -> Filters.Operator.EXISTS;
              case "doesnotexist" -> Filters.Operator.DOES_NOT_EXIST;
              default ->
                  throw error(
                      at + ".operator",
                      "must be In, NotIn, Exists or DoesNotExist, was \"" + op + "\"");
            };
        Set<String> values = new LinkedHashSet<>();
        JsonNode vs = r.get("values");
        if (vs != null && !vs.isNull()) {
          if (!vs.isArray()) {
            throw error(at + ".values", "must be a list, was " + vs);
          }
          vs.forEach(x -> values.add(x.asText()));
        }
        try {
          out.add(new Filters.LabelRequirement(r.get("key").asText(), o, values));
        } catch (IllegalArgumentException e) {
          throw error(at, e.getMessage());
        }
      }
      return out;
    }

    List<String> sources(String f) {
      JsonNode v = get(f);
      List<String> out = new ArrayList<>();
      if (v == null || v.isNull()) {
        return out;
      }
      if (!v.isArray()) {
        throw error(f, "must be a list, was " + v);
      }
      for (int i = 0; i < v.size(); i++) {
        JsonNode s = v.get(i);
        if (s.isTextual()) {
          out.add(s.asText());
        } else if (s.isObject()) {
          String kind = s.hasNonNull("type") ? s.get("type").asText() : "header";
          if (!kind.equals("header")) {
            throw error(
                f + "[" + i + "].type", "only header sources are supported, was \"" + kind + "\"");
          }
          JsonNode n = s.hasNonNull("name") ? s.get("name") : s.get("header");
          if (n == null || n.asText().isBlank()) {
            throw error(f + "[" + i + "]", "needs a header name (name)");
          }
          out.add(n.asText());
        } else {
          throw error(f + "[" + i + "]", "must be a header name or {type, name}, was " + s);
        }
      }
      return out;
    }

    void checkAllUsed() {
      if (node == null) {
        return;
      }
      Set<String> ignored =
          prefix.equals("parameters.") ? IGNORED_PARAMETERS.getOrDefault(type, Set.of()) : Set.of();
      for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
        String f = it.next();
        if (!used.contains(f) && !ignored.contains(f)) {
          TreeSet<String> known = new TreeSet<>(used);
          known.addAll(ignored);
          throw new SchedulerConfigException(
              where()
                  + "unknown parameter \""
                  + prefix
                  + f
                  + "\"; known: "
                  + (known.isEmpty() ? "none" : known));
        }
      }
    }
  }
}
