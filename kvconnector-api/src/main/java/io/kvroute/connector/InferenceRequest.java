package io.kvroute.connector;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * A client's OpenAI-style inference request as the gateway received it: the API path, the raw JSON
 * body and the headers.
 *
 * <p>Immutable and thread-safe: the body array is copied in and out. The body is kept as bytes so
 * that connectors can rewrite it without losing number precision or key order. It is parsed once
 * per request, by whoever needs it first ({@link #parsedBody}): the router to schedule it, or the
 * connector that runs it when no router did; every later reader, each retry attempt included, gets
 * that same parse ({@link ConnectorException.InvalidRequestException} for bad JSON).
 */
public final class InferenceRequest {

  /**
   * Parses a request body into the form its readers share (a JSON tree, say). One instance per
   * form: {@link #parsedBody} remembers the value by the parser's identity, so keep the parser in a
   * constant.
   *
   * @param <T> the parsed form; its readers treat it as immutable
   */
  @FunctionalInterface
  public interface BodyParser<T> {
    /**
     * Parses {@code body}, which it must not modify.
     *
     * @throws ConnectorException.InvalidRequestException when the body is not a usable request
     */
    T parse(byte[] body);
  }

  /**
   * The body and its one remembered parse, shared by the copies that keep the body ({@link
   * #withRequestId}, {@link #withHeaders}). The first parser to finish takes the slot; a second
   * parser of the same request is served but not remembered.
   */
  private static final class Body {
    final byte[] bytes;
    volatile Parsed parsed;

    Body(byte[] bytes) {
      this.bytes = bytes;
    }
  }

  /** A parser and what it made of the body. */
  private record Parsed(BodyParser<?> parser, Object value) {}

  /**
   * The inference API a request targets: the OpenAI APIs vLLM serves, and Anthropic's Messages API
   * (which vLLM serves too). kvroute routes these precisely; any other path is passed through by
   * the fronts with load-only routing.
   */
  public enum Api {
    /** {@code POST /v1/completions}. */
    COMPLETIONS("/v1/completions"),
    /** {@code POST /v1/chat/completions}. */
    CHAT_COMPLETIONS("/v1/chat/completions"),
    /**
     * {@code POST /v1/messages}: Anthropic's Messages API. Its errors are answered in Anthropic's
     * shape ({@code {"type":"error","error":{"type","message"}}}).
     */
    MESSAGES("/v1/messages"),
    /** {@code POST /v1/responses}: OpenAI's Responses API. */
    RESPONSES("/v1/responses");

    private final String path;

    Api(String path) {
      this.path = path;
    }

    /** The HTTP path, e.g. {@code /v1/completions}. */
    public String path() {
      return path;
    }

    /** The API served at {@code path}, if it is one kvroute routes. */
    public static Optional<Api> fromPath(String path) {
      if (path == null) {
        return Optional.empty();
      }
      int q = path.indexOf('?');
      String p = q >= 0 ? path.substring(0, q) : path;
      if (p.endsWith("/") && p.length() > 1) {
        p = p.substring(0, p.length() - 1);
      }
      for (Api api : values()) {
        if (api.path.equals(p)) {
          return Optional.of(api);
        }
      }
      return Optional.empty();
    }
  }

  /** The header that carries the request id on both legs. */
  public static final String REQUEST_ID_HEADER = "X-Request-Id";

  private final Api api;
  private final Body body;
  private final Map<String, List<String>> headers;
  private final String requestId;

  private InferenceRequest(Api api, Body body, Map<String, List<String>> headers, String id) {
    this.api = api;
    this.body = body;
    this.headers = headers;
    this.requestId = id;
  }

  /**
   * A request with the given body and headers. Header names are matched case-insensitively. The
   * request id is taken from {@code X-Request-Id} when present and valid, else {@code fallbackId}.
   */
  public static InferenceRequest of(
      Api api, byte[] body, Map<String, List<String>> headers, String fallbackId) {
    Objects.requireNonNull(api, "api");
    Objects.requireNonNull(body, "body");
    Objects.requireNonNull(fallbackId, "fallbackId");
    Map<String, List<String>> h = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    if (headers != null) {
      headers.forEach(
          (k, v) -> {
            if (k != null && v != null) {
              h.merge(k, List.copyOf(v), (a, b) -> concat(a, b));
            }
          });
    }
    List<String> ids = h.get(REQUEST_ID_HEADER);
    String id = fallbackId;
    if (ids != null && !ids.isEmpty() && isValidRequestId(ids.get(0))) {
      id = ids.get(0);
    }
    return new InferenceRequest(
        api, new Body(body.clone()), java.util.Collections.unmodifiableMap(h), id);
  }

  /** A request with a JSON string body and no headers; convenient in tests. */
  public static InferenceRequest of(Api api, String json) {
    return of(
        api,
        json.getBytes(StandardCharsets.UTF_8),
        Map.of(),
        "kvr-" + Long.toHexString(System.nanoTime()));
  }

  /**
   * True for ids made of 1 to 128 characters from {@code [A-Za-z0-9._:-]}; anything else from a
   * client is replaced so it cannot smuggle header or log content.
   */
  public static boolean isValidRequestId(String id) {
    if (id == null || id.isEmpty() || id.length() > 128) {
      return false;
    }
    for (int i = 0; i < id.length(); i++) {
      char c = id.charAt(i);
      boolean ok =
          (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9')
              || c == '-'
              || c == '_'
              || c == '.'
              || c == ':';
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  private static List<String> concat(List<String> a, List<String> b) {
    String[] all = new String[a.size() + b.size()];
    for (int i = 0; i < a.size(); i++) {
      all[i] = a.get(i);
    }
    for (int i = 0; i < b.size(); i++) {
      all[a.size() + i] = b.get(i);
    }
    return List.of(all);
  }

  /** The API this request targets. */
  public Api api() {
    return api;
  }

  /** A copy of the raw JSON body. */
  public byte[] body() {
    return body.bytes.clone();
  }

  /** The body length in bytes. */
  public int bodyLength() {
    return body.bytes.length;
  }

  /** The body itself, not a copy: for this package's values that share it (never modified). */
  byte[] sharedBody() {
    return body.bytes;
  }

  /** The body as UTF-8 text (for debugging; never logged at INFO or above). */
  public String bodyAsString() {
    return new String(body.bytes, StandardCharsets.UTF_8);
  }

  /**
   * The body as {@code parser} parses it, parsed at most once for this request: the first call
   * parses and remembers the value, later calls with the same parser (on this request or on a copy
   * made by {@link #withRequestId} or {@link #withHeaders}, such as a retry attempt's) return that
   * same value. A failed parse is not remembered: its exception reaches every caller. The value is
   * shared, so callers must not modify it (copy it to rewrite it).
   *
   * <p>Thread-safe: two threads asking at once may both parse; one value is kept.
   *
   * @throws ConnectorException.InvalidRequestException when the body is not a usable request
   */
  @SuppressWarnings("unchecked")
  public <T> T parsedBody(BodyParser<T> parser) {
    Objects.requireNonNull(parser, "parser");
    Parsed p = body.parsed;
    if (p != null && p.parser() == parser) {
      return (T) p.value();
    }
    T value = parser.parse(body.bytes);
    if (p == null) {
      body.parsed = new Parsed(parser, value);
    }
    return value;
  }

  /** The client's headers, case-insensitive and unmodifiable. */
  public Map<String, List<String>> headers() {
    return headers;
  }

  /** The first value of a header, case-insensitively. */
  public Optional<String> header(String name) {
    List<String> v = headers.get(name);
    return v == null || v.isEmpty() ? Optional.empty() : Optional.of(v.get(0));
  }

  /** The request id sent as {@code X-Request-Id} on every leg. */
  public String requestId() {
    return requestId;
  }

  /** A copy with another request id (used to mint a fresh id per retry attempt). */
  public InferenceRequest withRequestId(String id) {
    if (!isValidRequestId(id)) {
      throw new IllegalArgumentException("invalid request id: " + id);
    }
    return new InferenceRequest(api, body, headers, id);
  }

  /**
   * A copy with {@code set} added to the headers, each replacing any value of the same name
   * (case-insensitively): for example a {@code traceparent} a tracing listener wants every leg to
   * carry. The request id is unchanged.
   */
  public InferenceRequest withHeaders(Map<String, String> set) {
    Objects.requireNonNull(set, "set");
    if (set.isEmpty()) {
      return this;
    }
    Map<String, List<String>> h = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    h.putAll(headers);
    set.forEach(
        (k, v) ->
            h.put(Objects.requireNonNull(k, "header name"), List.of(Objects.requireNonNull(v, k))));
    return new InferenceRequest(api, body, java.util.Collections.unmodifiableMap(h), requestId);
  }

  /** A copy with another body (parsed afresh when asked). */
  public InferenceRequest withBody(byte[] newBody) {
    return new InferenceRequest(api, new Body(newBody.clone()), headers, requestId);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof InferenceRequest r
        && r.api == api
        && r.requestId.equals(requestId)
        && Arrays.equals(r.body.bytes, body.bytes)
        && r.headers.equals(headers);
  }

  @Override
  public int hashCode() {
    return Objects.hash(api, requestId, Arrays.hashCode(body.bytes));
  }

  @Override
  public String toString() {
    return "InferenceRequest{"
        + api.name().toLowerCase(Locale.ROOT)
        + ", id="
        + requestId
        + ", bodyBytes="
        + body.bytes.length
        + "}";
  }
}
