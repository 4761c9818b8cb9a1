package io.kvroute.kubernetes.internal;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.kvroute.connector.Endpoint;
import io.kvroute.router.KvEventFeed;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pure functions from a pod to the endpoints it serves: readiness, role, one endpoint per
 * data-parallel rank, and the KV-event publisher of each rank.
 */
public final class PodEndpoints {
  private static final Logger log = LoggerFactory.getLogger(PodEndpoints.class);

  /** Pod name and role value already warned about (bounded: cleared when it grows large). */
  private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

  private PodEndpoints() {}

  /** An endpoint and where it publishes KV events (null for none). */
  public record Target(Endpoint endpoint, KvEventFeed.Source events) {
    /** Validates. */
    public Target {
      Objects.requireNonNull(endpoint, "endpoint");
    }

    /** A copy with one more label. */
    public Target withLabel(String key, String value) {
      Map<String, String> labels = new TreeMap<>(endpoint.labels());
      labels.put(key, value);
      return new Target(endpoint.withLabels(labels), events);
    }
  }

  /**
   * How a pod's endpoints are derived.
   *
   * @param roleLabel the label naming the role ({@code prefill}, {@code decode}, {@code both})
   * @param httpPorts the HTTP port of each data-parallel rank (one entry: no ranks)
   * @param kvEventsPort the KV-event publisher port of rank 0 (rank r: + r); 0 for none
   */
  public record Options(String roleLabel, List<Integer> httpPorts, int kvEventsPort) {
    /** Validates. */
    public Options {
      Objects.requireNonNull(roleLabel, "roleLabel");
      httpPorts = List.copyOf(httpPorts);
      if (httpPorts.isEmpty()) {
        throw new IllegalArgumentException("httpPorts must not be empty");
      }
    }
  }

  /**
   * True when the pod takes traffic: not being deleted, a pod IP, and the condition {@code
   * Ready=True}.
   */
  public static boolean ready(Pod pod) {
    if (pod.getMetadata() == null || pod.getMetadata().getDeletionTimestamp() != null) {
      return false;
    }
    if (pod.getStatus() == null || blank(pod.getStatus().getPodIP())) {
      return false;
    }
    List<PodCondition> conditions = pod.getStatus().getConditions();
    if (conditions == null) {
      return false;
    }
    for (PodCondition c : conditions) {
      if ("Ready".equals(c.getType()) && "True".equals(c.getStatus())) {
        return true;
      }
    }
    return false;
  }

  /** True when every entry of {@code selector} is among the pod's labels. */
  public static boolean matches(Pod pod, Map<String, String> selector) {
    Map<String, String> labels =
        pod.getMetadata() == null || pod.getMetadata().getLabels() == null
            ? Map.of()
            : pod.getMetadata().getLabels();
    for (Map.Entry<String, String> e : selector.entrySet()) {
      if (!e.getValue().equals(labels.get(e.getKey()))) {
        return false;
      }
    }
    return true;
  }

  /**
   * The role the pod's label names ({@code prefill}, {@code decode}, {@code both}, {@code
   * prefill-decode}, {@code encode-prefill}, {@code encode-prefill-decode}); {@link
   * Endpoint.Role#BOTH} when absent or not understood (logged once per pod and value).
   */
  public static Endpoint.Role role(Pod pod, String roleLabel) {
    Map<String, String> labels = pod.getMetadata().getLabels();
    String value = labels == null ? null : labels.get(roleLabel);
    if (value == null || value.isBlank()) {
      return Endpoint.Role.BOTH;
    }
    String v = value.trim().toLowerCase(Locale.ROOT);
    // llm-d's encode roles: what they can do of prefill and decode (as the scheduler's role
    // filter).
    if (v.equals("encode-prefill")) {
      return Endpoint.Role.PREFILL;
    }
    if (v.equals("encode-prefill-decode")) {
      return Endpoint.Role.BOTH;
    }
    try {
      return Endpoint.Role.parse(v);
    } catch (IllegalArgumentException e) {
      if (WARNED.size() > 1000) {
        WARNED.clear();
      }
      if (!WARNED.add(pod.getMetadata().getName() + "=" + value)) {
        return Endpoint.Role.BOTH;
      }
      log.warn(
          "kvroute-kubernetes: pod {} has {}={}, not prefill, decode or both; taken as both",
          pod.getMetadata().getName(),
          roleLabel,
          value);
      return Endpoint.Role.BOTH;
    }
  }

  /**
   * The endpoints of a ready pod: its name as the id (with {@code -rank<N>} when it serves several
   * data-parallel ranks), {@code http://<podIP>:<port>}, its labels, its role.
   */
  public static List<Target> targets(Pod pod, Options o) {
    String name = pod.getMetadata().getName();
    String ip = pod.getStatus().getPodIP();
    Map<String, String> labels =
        pod.getMetadata().getLabels() == null ? Map.of() : pod.getMetadata().getLabels();
    Endpoint.Role role = role(pod, o.roleLabel());
    int ranks = o.httpPorts().size();
    List<Target> out = new ArrayList<>(ranks);
    for (int r = 0; r < ranks; r++) {
      String id = ranks == 1 ? name : name + "-rank" + r;
      Endpoint e = Endpoint.builder(id, ip, o.httpPorts().get(r)).role(role).labels(labels).build();
      KvEventFeed.Source events =
          o.kvEventsPort() == 0
              ? null
              : new KvEventFeed.Source(
                  "tcp://" + hostLiteral(ip) + ":" + (o.kvEventsPort() + r), null, "");
      out.add(new Target(e, events));
    }
    return out;
  }

  private static String hostLiteral(String ip) {
    return ip.indexOf(':') >= 0 && !ip.startsWith("[") ? "[" + ip + "]" : ip;
  }

  private static boolean blank(String s) {
    return s == null || s.isBlank();
  }
}
