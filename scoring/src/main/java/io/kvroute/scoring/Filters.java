package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.function.Predicate;

/**
 * The built-in {@link Filter}s. Each factory takes the instance name first; the no-name overloads
 * use the upstream type name. All are thread-safe and keep the candidates' order.
 */
public final class Filters {

  /** The label llm-d puts the role in. */
  public static final String ROLE_LABEL = "llm-d.ai/role";

  /** The label listing LoRA adapters an endpoint serves, comma-separated (kvroute). */
  public static final String LORA_LABEL = "kvroute.io/lora-adapters";

  private static final Set<String> DECODE_ROLES =
      Set.of("decode", "prefill-decode", "both", "encode-prefill-decode", "pd");
  private static final Set<String> PREFILL_ROLES =
      Set.of("prefill", "encode-prefill", "prefill-decode", "both", "encode-prefill-decode", "pd");

  private Filters() {}

  /**
   * Role filter. Keeps endpoints that can do {@code role}'s work: for {@link Endpoint.Role#DECODE}
   * those whose role label ({@code labelKey}, default {@code llm-d.ai/role}) is one of decode,
   * prefill-decode, both, encode-prefill-decode; for {@link Endpoint.Role#PREFILL} one of prefill,
   * encode-prefill, prefill-decode, both, encode-prefill-decode; for {@link Endpoint.Role#BOTH}
   * those that can do both. An endpoint without the label is judged by {@link Endpoint#role()}
   * (upstream's decode filter keeps unlabelled pods and its prefill filter drops them; kvroute
   * endpoints always carry a role, so it is honoured instead).
   */
  public static Filter role(String name, Endpoint.Role role, String labelKey) {
    Objects.requireNonNull(role, "role");
    String key = labelKey == null || labelKey.isBlank() ? ROLE_LABEL : labelKey;
    return simple(
        name,
        e -> {
          String v = e.label(key);
          if (v == null) {
            return switch (role) {
              case DECODE -> e.role().canDecode();
              case PREFILL -> e.role().canPrefill();
              case BOTH -> e.role() == Endpoint.Role.BOTH;
            };
          }
          String r = v.trim().toLowerCase(Locale.ROOT);
          return switch (role) {
            case DECODE -> DECODE_ROLES.contains(r);
            case PREFILL -> PREFILL_ROLES.contains(r);
            case BOTH -> DECODE_ROLES.contains(r) && PREFILL_ROLES.contains(r);
          };
        });
  }

  /** {@code decode-filter}. */
  public static Filter decode() {
    return role("decode-filter", Endpoint.Role.DECODE, ROLE_LABEL);
  }

  /** {@code prefill-filter}. */
  public static Filter prefill() {
    return role("prefill-filter", Endpoint.Role.PREFILL, ROLE_LABEL);
  }

  /** An operator of a {@link LabelRequirement}, as in Kubernetes label selectors. */
  public enum Operator {
    /** The label is present with one of the values. */
    IN,
    /** The label is absent, or present with none of the values. */
    NOT_IN,
    /** The label is present. */
    EXISTS,
    /** The label is absent. */
    DOES_NOT_EXIST
  }

  /**
   * One {@code matchExpressions} entry.
   *
   * @param key the label key
   * @param operator the operator
   * @param values the values (non-empty for IN / NOT_IN, empty for EXISTS / DOES_NOT_EXIST)
   */
  public record LabelRequirement(String key, Operator operator, Set<String> values) {
    /** Validates the requirement. */
    public LabelRequirement {
      Objects.requireNonNull(key, "key");
      Objects.requireNonNull(operator, "operator");
      values = Set.copyOf(values == null ? Set.of() : values);
      boolean needsValues = operator == Operator.IN || operator == Operator.NOT_IN;
      if (needsValues && values.isEmpty()) {
        throw new IllegalArgumentException(
            "matchExpressions[" + key + "]: operator " + operator + " needs values");
      }
      if (!needsValues && !values.isEmpty()) {
        throw new IllegalArgumentException(
            "matchExpressions[" + key + "]: operator " + operator + " takes no values");
      }
    }

    boolean matches(Endpoint e) {
      String v = e.label(key);
      return switch (operator) {
        case IN -> v != null && values.contains(v);
        case NOT_IN -> v == null || !values.contains(v);
        case EXISTS -> v != null;
        case DOES_NOT_EXIST -> v == null;
      };
    }
  }

  /**
   * Kubernetes-style label selector: every {@code matchLabels} pair and every requirement must
   * hold.
   */
  public static Filter labelSelector(
      String name, Map<String, String> matchLabels, List<LabelRequirement> matchExpressions) {
    Map<String, String> labels = Map.copyOf(matchLabels == null ? Map.of() : matchLabels);
    List<LabelRequirement> exprs =
        List.copyOf(matchExpressions == null ? List.of() : matchExpressions);
    return simple(
        name,
        e -> {
          for (Map.Entry<String, String> l : labels.entrySet()) {
            if (!l.getValue().equals(e.label(l.getKey()))) {
              return false;
            }
          }
          for (LabelRequirement r : exprs) {
            if (!r.matches(e)) {
              return false;
            }
          }
          return true;
        });
  }

  /**
   * PD pairing filter (Kthena's {@code pdGroup.groupKey}): in a second PD stage, keeps the
   * candidates whose {@code groupKey} label equals the peer's (the decode endpoint's). Passes all
   * when there is no peer (first stage) or the peer has no such label.
   */
  public static Filter pdPairing(String name, String groupKey) {
    if (groupKey == null || groupKey.isBlank()) {
      throw new IllegalArgumentException(name + ".groupKey must not be blank");
    }
    return new NamedPlugin.NamedFilter(name) {
      @Override
      public List<Endpoint> filter(SchedulingContext ctx, List<Endpoint> candidates) {
        Optional<Endpoint> peer = ctx.peer();
        if (peer.isEmpty()) {
          return candidates;
        }
        String group = peer.get().label(groupKey);
        if (group == null) {
          return candidates;
        }
        return keep(candidates, e -> group.equals(e.label(groupKey)));
      }
    };
  }

  /**
   * Health filter. Drops endpoints that {@code isDown} reports (circuit breakers, an active {@link
   * HealthProbe}, ...) and, when {@code dropStaleMetrics}, endpoints whose metrics went stale
   * (never-scraped endpoints pass).
   */
  public static Filter health(String name, boolean dropStaleMetrics, Predicate<String> isDown) {
    Predicate<String> down = isDown == null ? id -> false : isDown;
    return new NamedPlugin.NamedFilter(name) {
      @Override
      public List<Endpoint> filter(SchedulingContext ctx, List<Endpoint> candidates) {
        return keep(
            candidates,
            e -> {
              if (down.test(e.id())) {
                return false;
              }
              if (dropStaleMetrics && ctx instanceof CycleContext cc) {
                return cc.freshness(e) != MetricsStore.Freshness.STALE;
              }
              return true;
            });
      }
    };
  }

  /** {@code health-filter}: drops stale endpoints and those in {@code ejectedIds} (live view). */
  public static Filter health(Set<String> ejectedIds) {
    Set<String> ids = ejectedIds == null ? Set.of() : ejectedIds;
    return health("health-filter", true, ids::contains);
  }

  /**
   * Session-affinity filter (hard pin): when the request's session endpoint is a candidate, only it
   * passes; otherwise all pass. Never empties the set.
   */
  public static Filter sessionAffinity(String name, SessionAffinity affinity) {
    return new SessionFilter(name, affinity);
  }

  static final class SessionFilter extends NamedPlugin.SessionPlugin implements Filter {
    SessionFilter(String name, SessionAffinity affinity) {
      super(name, affinity);
    }

    @Override
    public List<Endpoint> filter(SchedulingContext ctx, List<Endpoint> candidates) {
      Optional<String> pinned = pinned(ctx);
      if (pinned.isPresent()) {
        for (Endpoint e : candidates) {
          if (e.id().equals(pinned.get())) {
            return List.of(e);
          }
        }
      }
      return candidates;
    }
  }

  /**
   * LoRA-availability filter: for a request with a LoRA adapter, keeps endpoints known to have it —
   * listed in the {@code labelKey} label (comma-separated, default {@code
   * kvroute.io/lora-adapters}) or running or waiting in the engine's metrics. When none qualifies:
   * all pass if {@code failOpen} (vLLM only reports adapters with requests in flight, so an idle
   * loaded adapter is invisible), else none.
   */
  public static Filter loraAvailability(String name, String labelKey, boolean failOpen) {
    String key = labelKey == null || labelKey.isBlank() ? LORA_LABEL : labelKey;
    return new NamedPlugin.NamedFilter(name) {
      @Override
      public List<Endpoint> filter(SchedulingContext ctx, List<Endpoint> candidates) {
        Optional<String> lora = ctx.request().lora();
        if (lora.isEmpty()) {
          return candidates;
        }
        String a = lora.get();
        List<Endpoint> out =
            keep(
                candidates,
                e -> {
                  String l = e.label(key);
                  if (l != null) {
                    for (String s : l.split(",")) {
                      if (s.trim().equals(a)) {
                        return true;
                      }
                    }
                  }
                  EndpointMetrics m = Scorers.metricsOf(ctx, e);
                  return m != null
                      && (m.runningLoras().contains(a) || m.waitingLoras().contains(a));
                });
        return out.isEmpty() && failOpen ? candidates : out;
      }
    };
  }

  /** {@code lora-availability-filter}, failing open. */
  public static Filter loraAvailability() {
    return loraAvailability("lora-availability-filter", LORA_LABEL, true);
  }

  /** A filter from a per-endpoint predicate. */
  public static Filter simple(String name, Predicate<Endpoint> keep) {
    return new PredicateFilter(name, keep);
  }

  private static final class PredicateFilter extends NamedPlugin.NamedFilter {
    private final Predicate<Endpoint> keep;

    PredicateFilter(String name, Predicate<Endpoint> keep) {
      super(name);
      this.keep = Objects.requireNonNull(keep, "keep");
    }

    @Override
    public List<Endpoint> filter(SchedulingContext ctx, List<Endpoint> candidates) {
      return keep(candidates, keep);
    }
  }

  static List<Endpoint> keep(List<Endpoint> candidates, Predicate<Endpoint> p) {
    int n = candidates.size();
    int i = 0;
    while (i < n && p.test(candidates.get(i))) {
      i++;
    }
    if (i == n) {
      return candidates; // all pass: no copy
    }
    List<Endpoint> out = new ArrayList<>(n);
    for (int j = 0; j < i; j++) {
      out.add(candidates.get(j));
    }
    for (int j = i + 1; j < n; j++) {
      Endpoint e = candidates.get(j);
      if (p.test(e)) {
        out.add(e);
      }
    }
    return out;
  }
}
