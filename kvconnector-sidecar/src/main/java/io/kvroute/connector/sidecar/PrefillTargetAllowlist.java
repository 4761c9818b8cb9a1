package io.kvroute.connector.sidecar;

import io.kvroute.connector.ConnectorException.ForbiddenTargetException;
import io.kvroute.connector.ConnectorException.InvalidRequestException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * SSRF protection for gateways and sidecars that take the prefill target from a request header
 * ({@code x-prefiller-host-port}, as llm-d's routing sidecar does; spec §3 and §8.17): only
 * endpoints on the allowlist may be named.
 *
 * <p>The rules:
 *
 * <ul>
 *   <li>The header value is {@code host:port}; an {@code http://} (or {@code https://}) prefix and
 *       a trailing {@code /} are tolerated and normalised away. Repeated or comma-separated values:
 *       the first is used. IPv6 hosts are written in brackets ({@code [fd00::1]:8000}). Host names
 *       are compared case-insensitively, without a trailing dot.
 *   <li>An allowed <em>endpoint</em> matches host and port and resolves to that {@link Endpoint}
 *       itself (same id, scheme and labels, so circuit breakers and metrics key on it). An allowed
 *       <em>host</em> ({@link Builder#allowHost}) matches any port on that host, as llm-d's sidecar
 *       does, and resolves to a new endpoint {@code host:port} with role {@code PREFILL}.
 *   <li>A value that is not {@code host:port} fails with {@link InvalidRequestException} (400); a
 *       well-formed target that is not allowed fails with {@link ForbiddenTargetException} (403,
 *       "prefill target not allowed by SSRF protection") and is reported as {@code
 *       connectorEvent(type, "ssrf_blocked")}.
 *   <li>The header must only be trusted from the gateway: connectors never forward it to a model
 *       server ({@code AbstractHttpConnector.ROUTING_HEADERS}).
 * </ul>
 *
 * <p>The endpoint set follows pool membership: {@link #update} replaces it atomically (pods come
 * and go); hosts given to the builder stay. Thread-safe: lookups read an immutable snapshot through
 * a volatile field and never block.
 *
 * <pre>{@code
 * PrefillTargetAllowlist allow = PrefillTargetAllowlist.builder()
 *     .endpoints(prefillPods)
 *     .listener(listener, "nixl")
 *     .build();
 * Optional<Endpoint> prefill = allow.prefillTarget(request.headers());  // 403 when not allowed
 * }</pre>
 */
public final class PrefillTargetAllowlist {

  /** The header naming the prefill target. */
  public static final String HEADER = "x-prefiller-host-port";

  /** The legacy header name, still read when {@link #HEADER} is absent. */
  public static final String LEGACY_HEADER = "x-prefiller-url";

  /** The event reported when a target is refused. */
  public static final String EVENT_BLOCKED = "ssrf_blocked";

  private final Set<String> hosts;
  private final ConnectorListener listener;
  private final String connectorType;
  private volatile Map<String, Endpoint> endpoints;

  private PrefillTargetAllowlist(Builder b) {
    this.hosts = Set.copyOf(b.hosts);
    this.listener = b.listener;
    this.connectorType = b.connectorType;
    this.endpoints = index(b.endpoints);
  }

  /** A builder of an empty allowlist (which refuses every target). */
  public static Builder builder() {
    return new Builder();
  }

  private static Map<String, Endpoint> index(Collection<Endpoint> eps) {
    Map<String, Endpoint> m = new HashMap<>();
    for (Endpoint e : eps) {
      m.put(key(normaliseHost(e.host()), e.port()), e);
    }
    return Map.copyOf(m);
  }

  private static String key(String host, int port) {
    return host + "|" + port;
  }

  /** Replaces the allowed endpoints (for example on every pool membership change). */
  public void update(Collection<Endpoint> allowed) {
    endpoints = index(List.copyOf(Objects.requireNonNull(allowed, "allowed")));
  }

  /**
   * The prefill target named by {@code headers} ({@link #HEADER}, else {@link #LEGACY_HEADER};
   * names matched case-insensitively), or empty when neither is present (decode only).
   *
   * @throws InvalidRequestException when the value is not {@code host:port}
   * @throws ForbiddenTargetException when the target is not allowed
   */
  public Optional<Endpoint> prefillTarget(Map<String, List<String>> headers) {
    String value = first(headers, HEADER);
    if (value == null) {
      value = first(headers, LEGACY_HEADER);
    }
    return value == null ? Optional.empty() : Optional.of(check(value));
  }

  private static String first(Map<String, List<String>> headers, String name) {
    for (Map.Entry<String, List<String>> e : headers.entrySet()) {
      if (e.getKey() != null && e.getKey().equalsIgnoreCase(name)) {
        for (String v : e.getValue()) {
          for (String part : v.split(",")) {
            if (!part.isBlank()) {
              return part.trim();
            }
          }
        }
      }
    }
    return null;
  }

  /**
   * Normalises and checks one target ({@code host:port}, optionally with an {@code http://}
   * prefix).
   *
   * @return the allowed endpoint
   * @throws InvalidRequestException when the value is not {@code host:port}
   * @throws ForbiddenTargetException when the target is not allowed
   */
  public Endpoint check(String target) {
    Objects.requireNonNull(target, "target");
    String v = target.trim();
    String scheme = "http";
    String lower = v.toLowerCase(Locale.ROOT);
    if (lower.startsWith("http://")) {
      v = v.substring(7);
    } else if (lower.startsWith("https://")) {
      v = v.substring(8);
      scheme = "https";
    }
    if (v.endsWith("/")) {
      v = v.substring(0, v.length() - 1);
    }
    int colon = v.lastIndexOf(':');
    String host;
    String portText;
    if (v.startsWith("[")) {
      int close = v.indexOf(']');
      if (close < 0 || close + 1 >= v.length() || v.charAt(close + 1) != ':') {
        throw malformed(target);
      }
      host = v.substring(1, close);
      portText = v.substring(close + 2);
    } else {
      if (colon <= 0 || v.indexOf(':') != colon) {
        throw malformed(target);
      }
      host = v.substring(0, colon);
      portText = v.substring(colon + 1);
    }
    int port;
    try {
      port = Integer.parseInt(portText);
    } catch (NumberFormatException e) {
      throw malformed(target);
    }
    if (port < 1 || port > 65535 || host.isEmpty() || !validHost(host)) {
      throw malformed(target);
    }
    String h = normaliseHost(host);
    Endpoint known = endpoints.get(key(h, port));
    if (known != null) {
      return known;
    }
    if (hosts.contains(h)) {
      return Endpoint.builder((h.indexOf(':') >= 0 ? "[" + h + "]" : h) + ":" + port, h, port)
          .scheme(scheme)
          .role(Endpoint.Role.PREFILL)
          .build();
    }
    listener.connectorEvent(connectorType, EVENT_BLOCKED);
    throw new ForbiddenTargetException(
        "Forbidden: prefill target not allowed by SSRF protection: " + sanitize(target));
  }

  /** True when {@code host:port} is allowed (no event is reported). */
  public boolean allows(String host, int port) {
    String h = normaliseHost(host);
    return endpoints.containsKey(key(h, port)) || hosts.contains(h);
  }

  private static boolean validHost(String host) {
    for (int i = 0; i < host.length(); i++) {
      char c = host.charAt(i);
      boolean ok =
          (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9')
              || c == '-'
              || c == '.'
              || c == ':'
              || c == '_';
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  private static String normaliseHost(String host) {
    String h = host.trim().toLowerCase(Locale.ROOT);
    if (h.startsWith("[") && h.endsWith("]")) {
      h = h.substring(1, h.length() - 1);
    }
    if (h.endsWith(".")) {
      h = h.substring(0, h.length() - 1);
    }
    if (h.indexOf(':') >= 0 && validHost(h)) {
      // An IPv6 literal (never a name, so no DNS lookup happens): one canonical spelling.
      try {
        h = java.net.InetAddress.getByName(h).getHostAddress();
      } catch (java.net.UnknownHostException e) {
        // leave as written; it will simply not match
      }
    }
    return h;
  }

  private static InvalidRequestException malformed(String target) {
    return new InvalidRequestException(
        HEADER
            + " must be host:port (an http:// prefix is tolerated), was \""
            + sanitize(target)
            + "\"");
  }

  private static String sanitize(String s) {
    String t = s.length() > 200 ? s.substring(0, 200) + "..." : s;
    StringBuilder b = new StringBuilder(t.length());
    for (int i = 0; i < t.length(); i++) {
      char c = t.charAt(i);
      b.append(c < ' ' || c == 127 ? '?' : c);
    }
    return b.toString();
  }

  /** Builds a {@link PrefillTargetAllowlist}; not thread-safe. */
  public static final class Builder {
    private final Set<String> hosts = new HashSet<>();
    private final List<Endpoint> endpoints = new java.util.ArrayList<>();
    private ConnectorListener listener = ConnectorListener.NONE;
    private String connectorType = "sidecar";

    private Builder() {}

    /** Allows {@code endpoint} (its host and port). */
    public Builder endpoint(Endpoint endpoint) {
      endpoints.add(Objects.requireNonNull(endpoint, "endpoint"));
      return this;
    }

    /** Allows each of {@code allowed}. */
    public Builder endpoints(Collection<Endpoint> allowed) {
      allowed.forEach(this::endpoint);
      return this;
    }

    /**
     * Allows any port on {@code host} (an IP literal or a name, e.g. a pod name), as llm-d's
     * sidecar does.
     */
    public Builder allowHost(String host) {
      Objects.requireNonNull(host, "host");
      if (host.isBlank()) {
        throw new IllegalArgumentException("allowHost: host must not be blank");
      }
      hosts.add(normaliseHost(host));
      return this;
    }

    /**
     * Where {@code ssrf_blocked} events go, under which connector type (default {@code sidecar}).
     */
    public Builder listener(ConnectorListener listener, String connectorType) {
      this.listener = Objects.requireNonNull(listener, "listener");
      this.connectorType = Objects.requireNonNull(connectorType, "connectorType");
      return this;
    }

    /** The allowlist. */
    public PrefillTargetAllowlist build() {
      return new PrefillTargetAllowlist(this);
    }
  }
}
