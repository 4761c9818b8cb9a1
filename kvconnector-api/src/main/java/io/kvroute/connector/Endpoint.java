package io.kvroute.connector;

import java.net.URI;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * One model-server instance a gateway can route to: a vLLM or SGLang pod (or one data-parallel rank
 * of it).
 *
 * <pre>{@code
 * Endpoint e = Endpoint.builder("vllm-0", "10.0.0.7", 8000).role(Endpoint.Role.DECODE).build();
 * Endpoint f = Endpoint.of("http://10.0.0.8:8000", Endpoint.Role.PREFILL); // id "10.0.0.8:8000"
 * }</pre>
 *
 * <p>Immutable and thread-safe. Two endpoints are equal when all their fields are equal; the {@link
 * #id()} is what circuit breakers, metrics and the KV index key on, so keep it stable for the life
 * of the pod (for example the pod name).
 */
public final class Endpoint {
  private final String id;
  private final String scheme;
  private final String host;
  private final int port;
  private final Role role;
  private final Map<String, String> labels;

  /** The work an endpoint does in a prefill/decode disaggregated deployment. */
  public enum Role {
    /** Runs prefill legs only. */
    PREFILL,
    /** Runs decode legs only. */
    DECODE,
    /** Runs both (aggregated serving, or either leg). */
    BOTH;

    /** True when the endpoint may run a prefill leg. */
    public boolean canPrefill() {
      return this != DECODE;
    }

    /** True when the endpoint may run a decode leg. */
    public boolean canDecode() {
      return this != PREFILL;
    }

    /**
     * Parses {@code prefill}, {@code decode}, {@code both} (any case; {@code prefill-decode} and
     * {@code pd} also mean both).
     *
     * @throws IllegalArgumentException naming the accepted values
     */
    public static Role parse(String value) {
      switch (Objects.requireNonNull(value, "role").trim().toLowerCase(Locale.ROOT)) {
        case "prefill":
          return PREFILL;
        case "decode":
          return DECODE;
        case "both":
        case "pd":
        case "prefill-decode":
          return BOTH;
        default:
          throw new IllegalArgumentException(
              "role must be one of prefill, decode, both; was \"" + value + "\"");
      }
    }
  }

  private Endpoint(
      String id, String scheme, String host, int port, Role role, Map<String, String> labels) {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(scheme, "scheme");
    Objects.requireNonNull(host, "host");
    Objects.requireNonNull(role, "role");
    if (id.isBlank()) {
      throw new IllegalArgumentException("endpoint id must not be blank");
    }
    if (!scheme.equals("http") && !scheme.equals("https")) {
      throw new IllegalArgumentException(
          "endpoint scheme must be http or https, was \"" + scheme + "\"");
    }
    if (host.isBlank()) {
      throw new IllegalArgumentException("endpoint host must not be blank");
    }
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    if (port < 1 || port > 65535) {
      throw new IllegalArgumentException("endpoint port must be in 1..65535, was " + port);
    }
    this.id = id;
    this.scheme = scheme;
    this.host = host;
    this.port = port;
    this.role = role;
    this.labels = labels == null ? Map.of() : Map.copyOf(new TreeMap<>(labels));
  }

  /**
   * A builder of the endpoint {@code id} at {@code host:port}; the scheme defaults to {@code http},
   * the role to {@link Role#BOTH}, the labels to none.
   */
  public static Builder builder(String id, String host, int port) {
    return new Builder(id, host, port);
  }

  /** A builder starting from this endpoint's fields. */
  public Builder toBuilder() {
    return new Builder(id, host, port).scheme(scheme).role(role).labels(labels);
  }

  /**
   * An endpoint from a base URL such as {@code http://10.0.0.7:8000}; the id is {@code host:port}.
   *
   * @throws IllegalArgumentException if the URL has no host, a path other than {@code /}, or a
   *     scheme other than http or https
   */
  public static Endpoint of(String url, Role role) {
    URI uri;
    try {
      uri = URI.create(url.contains("://") ? url.trim() : "http://" + url.trim());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("not a valid endpoint URL: \"" + url + "\"", e);
    }
    if (uri.getHost() == null) {
      throw new IllegalArgumentException("endpoint URL has no host: \"" + url + "\"");
    }
    if (uri.getPath() != null && !uri.getPath().isEmpty() && !uri.getPath().equals("/")) {
      throw new IllegalArgumentException(
          "endpoint URL must not have a path (got \"" + uri.getPath() + "\"): \"" + url + "\"");
    }
    String scheme = uri.getScheme() == null ? "http" : uri.getScheme().toLowerCase(Locale.ROOT);
    int port = uri.getPort() != -1 ? uri.getPort() : scheme.equals("https") ? 443 : 80;
    String host = uri.getHost();
    Endpoint e = new Endpoint("x", scheme, host, port, role, Map.of());
    return new Endpoint(e.hostPort(), scheme, e.host(), port, role, Map.of());
  }

  /** Returns a copy with the given id. */
  public Endpoint withId(String newId) {
    return new Endpoint(newId, scheme, host, port, role, labels);
  }

  /** Returns a copy with the given labels (replacing the current ones). */
  public Endpoint withLabels(Map<String, String> newLabels) {
    return new Endpoint(id, scheme, host, port, role, newLabels);
  }

  /** Stable identity of the endpoint, unique within a router. */
  public String id() {
    return id;
  }

  /** {@code http} or {@code https}. */
  public String scheme() {
    return scheme;
  }

  /** Host name or IP literal (IPv6 without brackets). */
  public String host() {
    return host;
  }

  /** TCP port, 1 to 65535. */
  public int port() {
    return port;
  }

  /** Whether the endpoint prefills, decodes, or does both. */
  public Role role() {
    return role;
  }

  /** Free-form labels (for example {@code llm-d.ai/role}, a PD group key), sorted by key. */
  public Map<String, String> labels() {
    return labels;
  }

  /** {@code host:port}, with IPv6 literals bracketed. */
  public String hostPort() {
    return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port;
  }

  /** The base URL without a trailing slash, e.g. {@code http://10.0.0.7:8000}. */
  public String baseUrl() {
    return scheme + "://" + hostPort();
  }

  /** A label value, or {@code null} when absent. */
  public String label(String key) {
    return labels.get(key);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Endpoint e
        && port == e.port
        && id.equals(e.id)
        && scheme.equals(e.scheme)
        && host.equals(e.host)
        && role == e.role
        && labels.equals(e.labels);
  }

  @Override
  public int hashCode() {
    return Objects.hash(id, scheme, host, port, role, labels);
  }

  @Override
  public String toString() {
    return "Endpoint[id="
        + id
        + ", scheme="
        + scheme
        + ", host="
        + host
        + ", port="
        + port
        + ", role="
        + role
        + ", labels="
        + labels
        + "]";
  }

  /** Builds an {@link Endpoint}; not thread-safe. */
  public static final class Builder {
    private final String id;
    private final String host;
    private final int port;
    private String scheme = "http";
    private Role role = Role.BOTH;
    private Map<String, String> labels = new TreeMap<>();

    private Builder(String id, String host, int port) {
      this.id = id;
      this.host = host;
      this.port = port;
    }

    /** {@code http} (default) or {@code https}. */
    public Builder scheme(String scheme) {
      this.scheme = scheme;
      return this;
    }

    /** The role (default {@link Role#BOTH}). */
    public Builder role(Role role) {
      this.role = role;
      return this;
    }

    /** Replaces the labels. */
    public Builder labels(Map<String, String> labels) {
      this.labels = new TreeMap<>(Objects.requireNonNull(labels, "labels"));
      return this;
    }

    /** Adds one label. */
    public Builder label(String key, String value) {
      labels.put(Objects.requireNonNull(key, "key"), Objects.requireNonNull(value, "value"));
      return this;
    }

    /**
     * The endpoint.
     *
     * @throws IllegalArgumentException naming the field that is invalid
     */
    public Endpoint build() {
      return new Endpoint(id, scheme, host, port, role, labels);
    }
  }
}
