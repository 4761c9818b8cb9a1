package io.kvroute.connector;

import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;

/**
 * Sends one HTTP request to an endpoint and streams the response back. Every kvroute component that
 * calls an engine or a service goes through it (both legs of every connector, health probes, {@code
 * /tokenize}, {@code /metrics} scrapes, bootstrap queries, the KV-cache manager client), so one
 * decorator — TLS per leg, an allowlist, tracing — applies everywhere. {@code kvconnector-http}
 * provides the OkHttp implementation (found by {@link HttpTransports}); tests may supply their own.
 *
 * <p>Implementations are thread-safe. The returned future completes on a transport thread when the
 * response head has arrived, or exceptionally with {@link UpstreamException} (connection failure,
 * timeout). Any status completes the future normally: classifying statuses is the caller's job.
 * Cancelling the future cancels the call; the response must then be read or cancelled (see {@link
 * StreamingResponse}).
 */
public interface HttpTransport extends AutoCloseable {

  /** Sends {@code request}. */
  CompletableFuture<StreamingResponse> send(Outbound request);

  /** Releases connections and threads. */
  @Override
  void close();

  /** The HTTP methods kvroute sends. */
  enum Method {
    /** A {@code GET} without a body. */
    GET,
    /** A {@code POST} of a JSON body. */
    POST
  }

  /**
   * One request to an upstream. Immutable; built with {@link #get} or {@link #post}.
   *
   * <pre>{@code
   * transport.send(Outbound.post(endpoint, "/v1/completions", body)
   *     .leg(Leg.PREFILL).headers(headers).timeout(Duration.ofSeconds(30)).build());
   * }</pre>
   */
  final class Outbound {
    private static final byte[] EMPTY = new byte[0];

    /** Names matched case-insensitively, without allocating a lower-case copy per header. */
    private static final java.util.Set<String> NOT_FORWARDED_ANY_CASE =
        anyCase(
            "connection",
            "keep-alive",
            "proxy-authenticate",
            "proxy-authorization",
            "proxy-connection",
            "te",
            "trailer",
            "transfer-encoding",
            "upgrade",
            "host",
            "content-length",
            "accept-encoding",
            "content-type",
            "expect");

    private static java.util.Set<String> anyCase(String... names) {
      java.util.TreeSet<String> s = new java.util.TreeSet<>(String.CASE_INSENSITIVE_ORDER);
      s.addAll(List.of(names));
      return java.util.Collections.unmodifiableSet(s);
    }

    private final Method method;
    private final Leg leg;
    private final Endpoint endpoint;
    private final String path;
    private final Map<String, List<String>> headers;
    private final byte[] body;
    private final Duration timeout;
    private final boolean streaming;

    private Outbound(Builder b) {
      this.method = b.method;
      this.leg = b.leg;
      this.endpoint = b.endpoint;
      this.path = b.path;
      this.headers = b.headers;
      this.body = b.body;
      this.timeout = b.timeout;
      this.streaming = b.streaming;
    }

    private Outbound(Outbound o, Map<String, List<String>> headers) {
      this.method = o.method;
      this.leg = o.leg;
      this.endpoint = o.endpoint;
      this.path = o.path;
      this.headers = headers;
      this.body = o.body;
      this.timeout = o.timeout;
      this.streaming = o.streaming;
    }

    /**
     * A copy with {@code set} added to the headers, each replacing any value of the same name
     * (case-insensitively), for transport decorators (a tracing decorator sets {@code
     * traceparent}). The body is shared, not copied.
     */
    public Outbound withHeaders(Map<String, String> set) {
      Objects.requireNonNull(set, "set");
      Map<String, List<String>> h = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      h.putAll(headers);
      set.forEach(
          (k, v) ->
              h.put(
                  Objects.requireNonNull(k, "header name"), List.of(Objects.requireNonNull(v, k))));
      return new Outbound(this, java.util.Collections.unmodifiableMap(h));
    }

    /** A {@code GET path} to {@code endpoint}. */
    public static Builder get(Endpoint endpoint, String path) {
      return new Builder(Method.GET, endpoint, path, EMPTY);
    }

    /** A {@code POST path} of the JSON {@code body} to {@code endpoint}. */
    public static Builder post(Endpoint endpoint, String path, byte[] body) {
      return new Builder(Method.POST, endpoint, path, Objects.requireNonNull(body, "body").clone());
    }

    /**
     * A {@code POST path} of the JSON body held by {@code body}'s remaining bytes (copied; the
     * buffer's position is not moved): for a body serialised into a reused buffer.
     */
    public static Builder post(Endpoint endpoint, String path, java.nio.ByteBuffer body) {
      return new Builder(Method.POST, endpoint, path, copyOf(body));
    }

    /** The remaining bytes of {@code body}, copied, its position unmoved. */
    static byte[] copyOf(java.nio.ByteBuffer body) {
      Objects.requireNonNull(body, "body");
      byte[] b = new byte[body.remaining()];
      body.get(body.position(), b);
      return b;
    }

    /**
     * A {@code POST} of an immutable value's body and headers ({@link
     * KVConnector.DecodeRequest#toOutbound()}): both shared, not copied; {@code headers} is an
     * unmodifiable case-insensitive map made by {@link #headerCopy}.
     */
    static Builder post(
        Endpoint endpoint, String path, byte[] body, Map<String, List<String>> headers) {
      Builder b = new Builder(Method.POST, endpoint, path, body);
      b.headers = headers;
      return b;
    }

    /**
     * An unmodifiable copy of {@code headers} whose names are matched case-insensitively, each list
     * of values copied (an immutable list is kept as it is).
     */
    static Map<String, List<String>> headerCopy(Map<String, List<String>> headers) {
      Map<String, List<String>> h = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      Objects.requireNonNull(headers, "headers").forEach((k, v) -> h.put(k, List.copyOf(v)));
      return java.util.Collections.unmodifiableMap(h);
    }

    /** The method. */
    public Method method() {
      return method;
    }

    /** The leg, for errors and metrics (and per-leg transports). */
    public Leg leg() {
      return leg;
    }

    /** Where to send it. */
    public Endpoint endpoint() {
      return endpoint;
    }

    /** The path and query, e.g. {@code /v1/completions}. */
    public String path() {
      return path;
    }

    /** {@code endpoint().baseUrl() + path()}. */
    public String url() {
      return endpoint.baseUrl() + path;
    }

    /** Headers to send (hop-by-hop headers are dropped by the transport). */
    public Map<String, List<String>> headers() {
      return headers;
    }

    /**
     * Calls {@code sink} with each header value a transport sends upstream, in order: every header
     * of {@link #headers()} except hop-by-hop ones and those the transport sets itself ({@code
     * Host}, {@code Content-Length}, {@code Content-Type}, {@code Accept-Encoding}, {@code
     * Expect}), and except names or values that could split the request (a control character, a
     * colon in a name, a non-ASCII byte). Every transport forwards the same headers this way.
     */
    public void forEachForwardedHeader(java.util.function.BiConsumer<String, String> sink) {
      for (Map.Entry<String, List<String>> e : headers.entrySet()) {
        String name = e.getKey();
        if (NOT_FORWARDED_ANY_CASE.contains(name) || !safeName(name)) {
          continue;
        }
        for (String v : e.getValue()) {
          if (safeValue(v)) {
            sink.accept(name, v);
          }
        }
      }
    }

    private static boolean safeName(String name) {
      if (name.isEmpty()) {
        return false;
      }
      for (int i = 0; i < name.length(); i++) {
        char c = name.charAt(i);
        if (c <= ' ' || c >= 127 || c == ':') {
          return false;
        }
      }
      return true;
    }

    private static boolean safeValue(String value) {
      for (int i = 0; i < value.length(); i++) {
        char c = value.charAt(i);
        if ((c < ' ' && c != '\t') || c >= 127) {
          return false;
        }
      }
      return true;
    }

    /** A copy of the body (empty for {@code GET}). */
    public byte[] body() {
      return body.clone();
    }

    /**
     * The body as a read-only buffer over the request's own bytes, not a copy (empty for {@code
     * GET}): what a transport writes, without copying the body per call. Each call returns a new
     * buffer, positioned at 0.
     */
    public java.nio.ByteBuffer bodyBuffer() {
      return java.nio.ByteBuffer.wrap(body).asReadOnlyBuffer();
    }

    /** The body length in bytes. */
    public int bodyLength() {
      return body.length;
    }

    /**
     * For the whole call when not {@link #streaming()}; for the response head and each gap between
     * body chunks when streaming.
     */
    public Duration timeout() {
      return timeout;
    }

    /** Whether the body is consumed as a stream (as it arrives) rather than read whole. */
    public boolean streaming() {
      return streaming;
    }

    @Override
    public String toString() {
      return method + " " + url() + " (" + leg.name().toLowerCase(Locale.ROOT) + ")";
    }

    /** Builds an {@link Outbound}; not thread-safe. */
    public static final class Builder {
      private final Method method;
      private final Endpoint endpoint;
      private final String path;
      private final byte[] body;
      private Leg leg = Leg.AUXILIARY;
      private Map<String, List<String>> headers = Map.of();
      private Duration timeout = Duration.ofSeconds(30);
      private boolean streaming;

      private Builder(Method method, Endpoint endpoint, String path, byte[] body) {
        this.method = method;
        this.endpoint = Objects.requireNonNull(endpoint, "endpoint");
        this.path = Objects.requireNonNull(path, "path");
        if (!path.startsWith("/")) {
          throw new IllegalArgumentException("path must start with /, was \"" + path + "\"");
        }
        this.body = body; // this builder's: a copy, or an immutable value's
      }

      /** The leg (default {@link Leg#AUXILIARY}). */
      public Builder leg(Leg leg) {
        this.leg = Objects.requireNonNull(leg, "leg");
        return this;
      }

      /** The headers to send (default none); names are matched case-insensitively. */
      public Builder headers(Map<String, List<String>> headers) {
        this.headers = headerCopy(headers);
        return this;
      }

      /** The timeout (default 30 s; see {@link Outbound#timeout()}). */
      public Builder timeout(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative() || timeout.isZero()) {
          throw new IllegalArgumentException("timeout must be > 0, was " + timeout);
        }
        this.timeout = timeout;
        return this;
      }

      /** Whether the response body is streamed (default false). */
      public Builder streaming(boolean streaming) {
        this.streaming = streaming;
        return this;
      }

      /** The request. */
      public Outbound build() {
        return new Outbound(this);
      }
    }
  }
}
