package io.kvroute.connector;

import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * Runs one prefill/decode (PD) disaggregated request in the protocol of one KV-transfer family
 * (plain HTTP two-step, NIXL, LMCache, Mooncake, SGLang, ...).
 *
 * <p>Two ways to run a request:
 *
 * <ul>
 *   <li>{@link #prepareDecode}: the two-phase form, for gateways that send the decode request with
 *       their own HTTP machinery. It runs whatever must happen before decode (for sequential
 *       families, the whole prefill leg; for concurrent ones such as SGLang, it starts the prefill)
 *       and returns the decode request to send.
 *   <li>{@link #proxy}: the full form. It also sends the decode leg and returns its streaming
 *       response; cancelling the response cancels both legs.
 * </ul>
 *
 * <p>Implementations are thread-safe and stateless per request; futures complete on transport
 * threads. Errors are {@link ConnectorException}s, usually {@link UpstreamException} naming the leg
 * and endpoint. A connector never retries by itself: {@code io.kvroute.pd.PdOrchestrator} does.
 */
public interface KVConnector extends AutoCloseable {

  /** The stable type name this connector is configured by, e.g. {@code http} or {@code nixl}. */
  String type();

  /** Runs the steps before decode and returns the decode request for the gateway to send. */
  CompletableFuture<DecodeRequest> prepareDecode(PdRequest request);

  /**
   * Runs the whole request and returns the decode leg's response once its head has arrived with a
   * 2xx status. A non-2xx decode status fails the future with {@link UpstreamException}.
   */
  CompletableFuture<StreamingResponse> proxy(PdRequest request);

  /**
   * Checks that an endpoint can serve this connector's protocol; the default asks nothing and
   * answers healthy.
   */
  default CompletableFuture<Boolean> checkHealth(Endpoint endpoint) {
    return CompletableFuture.completedFuture(Boolean.TRUE);
  }

  /** Releases what the connector holds; the shared transport is closed by its owner. */
  @Override
  default void close() {}

  /**
   * One disaggregated request: the client's request, the chosen prefill endpoint (absent for
   * decode-only requests) and the decode endpoint.
   *
   * @param request the client's request; its request id is used on both legs
   * @param prefill the prefill endpoint, or {@code null} to run decode only
   * @param decode the decode endpoint
   */
  record PdRequest(InferenceRequest request, Endpoint prefill, Endpoint decode) {
    /** Validates. */
    public PdRequest {
      Objects.requireNonNull(request, "request");
      Objects.requireNonNull(decode, "decode");
    }

    /** A decode-only request (no prefill leg). */
    public static PdRequest decodeOnly(InferenceRequest request, Endpoint decode) {
      return new PdRequest(request, null, decode);
    }

    /** True when a prefill leg runs. */
    public boolean disaggregated() {
      return prefill != null;
    }
  }

  /** The decode leg as the gateway should send it. Immutable; built with {@link #builder}. */
  final class DecodeRequest {
    private final Endpoint endpoint;
    private final String path;
    private final Map<String, List<String>> headers;
    private final byte[] body;
    private final Map<String, String> attributes;
    private final EngineUsage prefillUsage;

    private DecodeRequest(Builder b) {
      this(b.endpoint, b.path, b.headers, b.body, b.attributes, b.prefillUsage);
    }

    private DecodeRequest(
        Endpoint endpoint,
        String path,
        Map<String, List<String>> headers,
        byte[] body,
        Map<String, String> attributes,
        EngineUsage prefillUsage) {
      this.endpoint = endpoint;
      this.path = path;
      this.headers = headers;
      this.body = body;
      this.attributes = attributes;
      this.prefillUsage = prefillUsage;
    }

    /**
     * A builder of the decode request {@code POST path} of {@code body} to {@code endpoint}.
     *
     * @param path the path, e.g. {@code /v1/chat/completions}
     * @param body the rewritten JSON body (copied)
     */
    public static Builder builder(Endpoint endpoint, String path, byte[] body) {
      return new Builder(endpoint, path, Objects.requireNonNull(body, "body").clone());
    }

    /**
     * A builder of the decode request {@code POST path} of the body held by {@code body}'s
     * remaining bytes (copied; the buffer's position is not moved): for a body serialised into a
     * reused buffer.
     *
     * @param path the path, e.g. {@code /v1/chat/completions}
     * @param body the rewritten JSON body
     */
    public static Builder builder(Endpoint endpoint, String path, java.nio.ByteBuffer body) {
      return new Builder(endpoint, path, HttpTransport.Outbound.copyOf(body));
    }

    /**
     * A builder of the decode request that sends the client's body as it came: {@code POST} of
     * {@code request}'s body to {@code endpoint} on {@code request}'s API path. The body is shared
     * with {@code request}, not copied (both are immutable).
     *
     * @param endpoint the decode endpoint
     * @param request the client's request
     */
    public static Builder builder(Endpoint endpoint, InferenceRequest request) {
      return new Builder(endpoint, request.api().path(), request.sharedBody());
    }

    /** A builder starting from this request. */
    public Builder toBuilder() {
      return new Builder(endpoint, path, body)
          .headers(headers)
          .attributes(attributes)
          .prefillUsage(prefillUsage);
    }

    /**
     * This request reporting {@code usage} as its {@link #prefillUsage()} (the body is shared, not
     * copied).
     */
    public DecodeRequest withPrefillUsage(EngineUsage usage) {
      return new DecodeRequest(endpoint, path, headers, body, attributes, usage);
    }

    /** The decode endpoint. */
    public Endpoint endpoint() {
      return endpoint;
    }

    /** The path, e.g. {@code /v1/chat/completions}. */
    public String path() {
      return path;
    }

    /** The headers to send (includes {@code X-Request-Id}). */
    public Map<String, List<String>> headers() {
      return headers;
    }

    /** A copy of the rewritten JSON body. */
    public byte[] body() {
      return body.clone();
    }

    /** The body length in bytes. */
    public int bodyLength() {
      return body.length;
    }

    /**
     * A builder of the {@link HttpTransport.Outbound} that sends this request: {@code POST} of its
     * body to its endpoint and path with its headers, the body and headers shared, not copied (all
     * are immutable). The leg, timeout and streaming are the caller's to set.
     */
    public HttpTransport.Outbound.Builder toOutbound() {
      return HttpTransport.Outbound.post(endpoint, path, body, headers);
    }

    /** Facts about the prefill for logs and metrics (e.g. {@code kv_transfer_params=absent}). */
    public Map<String, String> attributes() {
      return attributes;
    }

    /**
     * The usage block of the prefill leg's answer, when a prefill ran before this decode request
     * was made and its answer carried one (see {@link StreamingResponse#prefillUsage()}).
     */
    public java.util.Optional<EngineUsage> prefillUsage() {
      return java.util.Optional.ofNullable(prefillUsage);
    }

    /** The full URL to send the decode request to. */
    public String url() {
      return endpoint.baseUrl() + path;
    }

    @Override
    public String toString() {
      return "DecodeRequest{" + url() + ", bodyBytes=" + body.length + ", " + attributes + "}";
    }

    /** Builds a {@link DecodeRequest}; not thread-safe. */
    public static final class Builder {
      private final Endpoint endpoint;
      private final String path;
      private final byte[] body;
      private Map<String, List<String>> headers = Map.of();
      private Map<String, String> attributes = Map.of();
      private EngineUsage prefillUsage;

      /** {@code body} is this builder's from now on (a copy, or an immutable value's). */
      private Builder(Endpoint endpoint, String path, byte[] body) {
        this.endpoint = Objects.requireNonNull(endpoint, "endpoint");
        this.path = Objects.requireNonNull(path, "path");
        this.body = body;
      }

      /** The headers to send (default none); names are matched case-insensitively. */
      public Builder headers(Map<String, List<String>> headers) {
        this.headers = HttpTransport.Outbound.headerCopy(headers);
        return this;
      }

      /** Facts about the prefill (default none). */
      public Builder attributes(Map<String, String> attributes) {
        this.attributes = Map.copyOf(Objects.requireNonNull(attributes, "attributes"));
        return this;
      }

      /** The prefill leg's usage, when one ran and reported it (default none; null: none). */
      public Builder prefillUsage(EngineUsage usage) {
        this.prefillUsage = usage;
        return this;
      }

      /** The request. */
      public DecodeRequest build() {
        return new DecodeRequest(this);
      }
    }
  }
}
