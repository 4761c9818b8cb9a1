package io.kvroute.scoring.internal;

import com.fasterxml.jackson.annotation.JsonCreator;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.Endpoint;
import io.kvroute.scoring.Filters;
import io.kvroute.scoring.SchedulerPlugin;
import io.kvroute.scoring.SessionAffinity;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * kvroute's filter plugins, registered through {@code META-INF/services} like any other. Each
 * nested provider pairs a type name with its parameters record (defaults and validation in the
 * compact constructor); {@code docs/configuration.md} documents every parameter and is checked
 * against these records.
 */
public final class BuiltinFilters {
  private BuiltinFilters() {}

  /**
   * {@code decode-filter} and {@code prefill-filter}.
   *
   * @param roleLabel the label holding an endpoint's role (default {@code llm-d.ai/role})
   */
  public record RoleLabel(String roleLabel) {
    /** Applies the default. */
    public RoleLabel {
      roleLabel = roleLabel == null ? Filters.ROLE_LABEL : roleLabel;
    }
  }

  /** {@code decode-filter}: endpoints that can decode. */
  public static final class DecodeFilter extends Builtin<RoleLabel> {
    /** The provider. */
    public DecodeFilter() {
      super(
          "decode-filter",
          RoleLabel.class,
          (p, c) ->
              SchedulerPlugin.filter(Filters.role(c.name(), Endpoint.Role.DECODE, p.roleLabel())));
    }
  }

  /** {@code prefill-filter}: endpoints that can prefill. */
  public static final class PrefillFilter extends Builtin<RoleLabel> {
    /** The provider. */
    public PrefillFilter() {
      super(
          "prefill-filter",
          RoleLabel.class,
          (p, c) ->
              SchedulerPlugin.filter(Filters.role(c.name(), Endpoint.Role.PREFILL, p.roleLabel())));
    }
  }

  /**
   * {@code role-filter}.
   *
   * @param role {@code prefill}, {@code decode} or {@code both} (required)
   * @param label the role label (default {@code llm-d.ai/role})
   */
  public record Role(String role, String label) {
    /** Validates and applies the default. */
    public Role {
      if (role == null) {
        throw new ConfigException("role", "is required (prefill, decode or both)");
      }
      parse(role);
      label = label == null ? Filters.ROLE_LABEL : label;
    }

    static Endpoint.Role parse(String role) {
      try {
        return Endpoint.Role.parse(role);
      } catch (IllegalArgumentException e) {
        throw new ConfigException(
            "role", "must be one of prefill, decode, both; was \"" + role + "\"");
      }
    }
  }

  /** {@code role-filter}: endpoints that can do one role's work. */
  public static final class RoleFilter extends Builtin<Role> {
    /** The provider. */
    public RoleFilter() {
      super(
          "role-filter",
          Role.class,
          (p, c) ->
              SchedulerPlugin.filter(Filters.role(c.name(), Role.parse(p.role()), p.label())));
    }
  }

  /**
   * {@code label-selector-filter}: a Kubernetes label selector.
   *
   * @param matchLabels labels that must all be equal
   * @param matchExpressions requirements that must all hold
   */
  public record LabelSelector(Map<String, String> matchLabels, List<Requirement> matchExpressions) {
    /** Applies the defaults. */
    public LabelSelector {
      matchLabels = matchLabels == null ? Map.of() : Map.copyOf(matchLabels);
      matchExpressions = matchExpressions == null ? List.of() : List.copyOf(matchExpressions);
    }

    Filters.LabelRequirement[] requirements() {
      return matchExpressions.stream()
          .map(Requirement::toRequirement)
          .toArray(Filters.LabelRequirement[]::new);
    }
  }

  /**
   * One {@code matchExpressions} entry.
   *
   * @param key the label
   * @param operator {@code In}, {@code NotIn}, {@code Exists} or {@code DoesNotExist} (any case)
   * @param values the values ({@code In}, {@code NotIn} only)
   */
  public record Requirement(String key, String operator, List<String> values) {
    /** Validates. */
    public Requirement {
      if (key == null || key.isBlank()) {
        throw new ConfigException("key", "is required");
      }
      if (operator == null) {
        throw new ConfigException("operator", "is required (In, NotIn, Exists or DoesNotExist)");
      }
      values = values == null ? List.of() : List.copyOf(values);
      toRequirement(key, operator, values);
    }

    Filters.LabelRequirement toRequirement() {
      return toRequirement(key, operator, values);
    }

    private static Filters.LabelRequirement toRequirement(
        String key, String operator, List<String> values) {
      Filters.Operator op =
          switch (operator.toLowerCase(Locale.ROOT)) {
            case "in" -> Filters.Operator.IN;
            case "notin" -> Filters.Operator.NOT_IN;
            case "exists" -> Filters.Operator.EXISTS;
            case "doesnotexist" -> Filters.Operator.DOES_NOT_EXIST;
            default ->
                throw new ConfigException(
                    "operator",
                    "must be In, NotIn, Exists or DoesNotExist, was \"" + operator + "\"");
          };
      boolean needsValues = op == Filters.Operator.IN || op == Filters.Operator.NOT_IN;
      if (needsValues == values.isEmpty()) {
        throw new ConfigException(
            "values",
            "operator " + operator + (needsValues ? " needs values" : " takes no values"));
      }
      return new Filters.LabelRequirement(key, op, new LinkedHashSet<>(values));
    }
  }

  /** {@code label-selector-filter}. */
  public static final class LabelSelectorFilter extends Builtin<LabelSelector> {
    /** The provider. */
    public LabelSelectorFilter() {
      super(
          "label-selector-filter",
          LabelSelector.class,
          (p, c) ->
              SchedulerPlugin.filter(
                  Filters.labelSelector(c.name(), p.matchLabels(), List.of(p.requirements()))));
    }
  }

  /** {@code by-label-selector}: the old name of {@code label-selector-filter}. */
  public static final class ByLabelSelector extends Builtin<LabelSelector> {
    /** The provider. */
    public ByLabelSelector() {
      super(
          "by-label-selector",
          LabelSelector.class,
          (p, c) -> new LabelSelectorFilter().create(p, c));
    }
  }

  /**
   * {@code pd-pairing-filter}.
   *
   * @param groupKey the label whose value a prefill endpoint must share with the decode one
   */
  public record PdPairing(String groupKey) {
    /** Validates. */
    public PdPairing {
      if (groupKey == null || groupKey.isBlank()) {
        throw new ConfigException("groupKey", "is required");
      }
    }
  }

  /** {@code pd-pairing-filter}: prefill endpoints in the decode endpoint's group. */
  public static final class PdPairingFilter extends Builtin<PdPairing> {
    /** The provider. */
    public PdPairingFilter() {
      super(
          "pd-pairing-filter",
          PdPairing.class,
          (p, c) -> SchedulerPlugin.filter(Filters.pdPairing(c.name(), p.groupKey())));
    }
  }

  /**
   * {@code health-filter}.
   *
   * @param dropStaleMetrics also drop endpoints whose metrics went stale (default true)
   */
  public record Health(Boolean dropStaleMetrics) {
    /** Applies the default. */
    public Health {
      dropStaleMetrics = dropStaleMetrics == null || dropStaleMetrics;
    }
  }

  /** {@code health-filter}: drops endpoints that are down or silent. */
  public static final class HealthFilter extends Builtin<Health> {
    /** The provider. */
    public HealthFilter() {
      super(
          "health-filter",
          Health.class,
          (p, c) ->
              SchedulerPlugin.filter(Filters.health(c.name(), p.dropStaleMetrics(), c.isDown())));
    }
  }

  /**
   * Session affinity, shared by {@code session-affinity-filter} and {@code
   * session-affinity-scorer}.
   *
   * @param strategy {@code encoded_endpoint_header} (default) or {@code session_id}
   * @param encodedEndpointHeaderConfig the header of the stateless strategy
   * @param sessionIdConfig the headers of the stateful strategy
   * @param evictionTtlSeconds how long a session stays pinned (session_id; default 300)
   * @param maxSessions bound on remembered sessions (session_id; default 100,000)
   * @param profileName accepted for llm-d compatibility, ignored
   * @param evictionSweepSeconds accepted for llm-d compatibility, ignored
   */
  public record Session(
      String strategy,
      HeaderConfig encodedEndpointHeaderConfig,
      SessionIdConfig sessionIdConfig,
      Integer evictionTtlSeconds,
      Integer maxSessions,
      String profileName,
      Object evictionSweepSeconds) {
    /** Validates and applies the defaults. */
    public Session {
      strategy = strategy == null ? "encoded_endpoint_header" : strategy;
      if (!strategy.equals("encoded_endpoint_header") && !strategy.equals("session_id")) {
        throw new ConfigException(
            "strategy", "must be encoded_endpoint_header or session_id, was \"" + strategy + "\"");
      }
      encodedEndpointHeaderConfig =
          encodedEndpointHeaderConfig == null
              ? new HeaderConfig(null)
              : encodedEndpointHeaderConfig;
      sessionIdConfig = sessionIdConfig == null ? new SessionIdConfig(null) : sessionIdConfig;
      evictionTtlSeconds = evictionTtlSeconds == null ? 300 : evictionTtlSeconds;
      if (evictionTtlSeconds < 1) {
        throw new ConfigException("evictionTtlSeconds", "must be >= 1, was " + evictionTtlSeconds);
      }
      maxSessions = maxSessions == null ? 100_000 : maxSessions;
      if (maxSessions < 1) {
        throw new ConfigException("maxSessions", "must be >= 1, was " + maxSessions);
      }
    }

    SessionAffinity affinity() {
      if (strategy.equals("encoded_endpoint_header")) {
        return SessionAffinity.encodedEndpointHeader(encodedEndpointHeaderConfig.header());
      }
      List<String> headers = new ArrayList<>();
      sessionIdConfig.sources().forEach(s -> headers.add(s.name()));
      return SessionAffinity.sessionId(
          headers.isEmpty() ? List.of(SessionAffinity.DEFAULT_SESSION_ID_HEADER) : headers,
          Duration.ofSeconds(evictionTtlSeconds),
          maxSessions);
    }
  }

  /**
   * {@code encodedEndpointHeaderConfig}.
   *
   * @param header the request and response header (default {@code x-session-token})
   */
  public record HeaderConfig(String header) {
    /** Validates and applies the default. */
    public HeaderConfig {
      header = header == null ? SessionAffinity.DEFAULT_TOKEN_HEADER : header;
      if (header.isBlank()) {
        throw new ConfigException("header", "must not be blank");
      }
    }
  }

  /**
   * {@code sessionIdConfig}.
   *
   * @param sources where the session id is found, tried in order (default: header {@code
   *     x-session-id})
   */
  public record SessionIdConfig(List<Source> sources) {
    /** Applies the default. */
    public SessionIdConfig {
      sources = sources == null ? List.of() : List.copyOf(sources);
    }
  }

  /**
   * A session-id source: a header name, or {@code {type: header, name: ...}}.
   *
   * @param type {@code header} (the only type supported)
   * @param name the header
   */
  public record Source(String type, String name) {
    /** Validates. */
    public Source {
      type = type == null ? "header" : type;
      if (!type.equals("header")) {
        throw new ConfigException(
            "type", "only header sources are supported, was \"" + type + "\"");
      }
      if (name == null || name.isBlank()) {
        throw new ConfigException("name", "is required (the header's name)");
      }
    }

    /** A header source written as its name alone. */
    @JsonCreator(mode = JsonCreator.Mode.DELEGATING)
    public static Source of(String header) {
      return new Source("header", header);
    }
  }

  /** {@code session-affinity-filter}: pins a session to its endpoint. */
  public static final class SessionAffinityFilter extends Builtin<Session> {
    /** The provider. */
    public SessionAffinityFilter() {
      super(
          "session-affinity-filter",
          Session.class,
          (p, c) -> SchedulerPlugin.filter(Filters.sessionAffinity(c.name(), p.affinity())));
    }
  }

  /**
   * {@code lora-availability-filter}.
   *
   * @param label the label listing an endpoint's adapters (default {@code
   *     kvroute.io/lora-adapters})
   * @param failOpen keep every endpoint when none is known to have the adapter (default true)
   */
  public record Lora(String label, Boolean failOpen) {
    /** Applies the defaults. */
    public Lora {
      label = label == null ? Filters.LORA_LABEL : label;
      failOpen = failOpen == null || failOpen;
    }
  }

  /** {@code lora-availability-filter}: endpoints that have the request's adapter. */
  public static final class LoraAvailabilityFilter extends Builtin<Lora> {
    /** The provider. */
    public LoraAvailabilityFilter() {
      super(
          "lora-availability-filter",
          Lora.class,
          (p, c) ->
              SchedulerPlugin.filter(Filters.loraAvailability(c.name(), p.label(), p.failOpen())));
    }
  }
}
