package io.kvroute.router;

import com.fasterxml.jackson.core.io.JsonStringEncoder;
import io.kvroute.connector.AllAttemptsFailedException;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.UpstreamException;
import io.kvroute.router.flow.RequestDroppedException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/**
 * How kvroute answers a client whose request failed: the one table every front uses ({@code kvroute
 * gateway} and {@code kvroute proxy}, the Spring Cloud Gateway filter, the Envoy endpoint picker),
 * documented in {@code docs/http-edge.md}. {@link #of} maps a failure to the status, the
 * OpenAI-style JSON body ({@code {"error":{"message","type","param","code"}}}), the {@code
 * Retry-After} header; {@link #sseEvent} gives the event that ends an SSE stream which fails after
 * its first byte. For a request of Anthropic's Messages API ({@link #of(Throwable,
 * InferenceRequest.Api)}, {@link #sseEvent(Throwable, InferenceRequest.Api)}) the same answer has
 * Anthropic's error shape.
 *
 * <table>
 *   <caption>The table</caption>
 *   <tr><th>failure</th><th>status</th><th>type</th><th>Retry-After</th></tr>
 *   <tr><td>the client's body is not a usable request (or too large where it was read)</td>
 *       <td>400 (413)</td><td>{@value #INVALID_REQUEST}</td><td></td></tr>
 *   <tr><td>an upstream 4xx (but 429)</td><td>the same, the engine's JSON body relayed</td>
 *       <td>{@value #INVALID_REQUEST}</td><td></td></tr>
 *   <tr><td>an upstream 429 or 503, after the retries</td><td>503</td>
 *       <td>{@value #UPSTREAM_UNAVAILABLE}</td><td>the engine's, at least 1 s</td></tr>
 *   <tr><td>another upstream status, a reset, a body cut short, a protocol violation</td>
 *       <td>502</td><td>{@value #UPSTREAM_ERROR}</td><td></td></tr>
 *   <tr><td>an upstream timeout</td><td>504</td><td>{@value #UPSTREAM_TIMEOUT}</td><td></td></tr>
 *   <tr><td>no endpoint serves the model (none, or all ejected)</td><td>503</td>
 *       <td>{@value #NO_ENDPOINT}</td><td></td></tr>
 *   <tr><td>endpoints serve it but the scheduler refused them all (saturated)</td><td>429</td>
 *       <td>{@value #SATURATED}</td><td>1 s</td></tr>
 *   <tr><td>flow control dropped the request ({@link RequestDroppedException}: queue-full,
 *       ttl-expired, shed-lower-priority, slo-unattainable)</td><td>429</td>
 *       <td>{@value #DROPPED}</td><td>flow control's, 1 s by default; and {@value
 *       RequestDroppedException#HEADER} naming the reason</td></tr>
 *   <tr><td>a prefill target refused by the sidecar allowlist</td><td>403</td>
 *       <td>{@value #FORBIDDEN_TARGET}</td><td></td></tr>
 *   <tr><td>another kvroute error</td><td>its status</td><td>{@value #ROUTING_ERROR}</td>
 *       <td></td></tr>
 *   <tr><td>anything else</td><td>500</td><td>{@value #INTERNAL_ERROR}</td><td></td></tr>
 *   <tr><td>the client went away</td><td colspan="3">nothing: {@link #of} is empty</td></tr>
 * </table>
 *
 * <p>Every attempt's failure is retried over other (prefill, decode) pairs first; the table answers
 * what is left. An upstream 429 is answered 503, not 429: the engines said they are overloaded,
 * after every pair was tried, which is what OpenAI's own API answers with 503 ("the engine is
 * currently overloaded"); OpenAI clients read a 429 as their own rate limit or quota. A 429 is
 * kvroute's own refusal of a request it chose not to send anywhere now (the Gateway API Inference
 * Extension's answer for a shed request). Both carry {@code Retry-After}, and both are retried by
 * OpenAI's clients.
 *
 * <p>Immutable and thread-safe.
 */
public final class FailureAnswer {
  /** The client's request is unusable, or an engine refused it (4xx). */
  public static final String INVALID_REQUEST = "invalid_request_error";

  /** A prefill target refused by the sidecar's allowlist (403). */
  public static final String FORBIDDEN_TARGET = "forbidden_target";

  /** No endpoint serves the request's model, or every one is ejected (503). */
  public static final String NO_ENDPOINT = "no_endpoint_available";

  /** Endpoints serve the model but the scheduler refused them all for now (429). */
  public static final String SATURATED = "endpoints_saturated";

  /**
   * Flow control dropped the request: its queue was full, it waited too long, a higher band's
   * request evicted it, or no endpoint can meet its latency objective (429, with {@value
   * RequestDroppedException#HEADER}).
   */
  public static final String DROPPED = "request_dropped";

  /** The engines answered 429 or 503 on every pair tried (503). */
  public static final String UPSTREAM_UNAVAILABLE = "upstream_unavailable";

  /** An engine failed: another status, a reset, a body cut short, a protocol violation (502). */
  public static final String UPSTREAM_ERROR = "upstream_error";

  /** An engine did not answer in time (504). */
  public static final String UPSTREAM_TIMEOUT = "upstream_timeout";

  /** Another kvroute error, with its own status. */
  public static final String ROUTING_ERROR = "routing_error";

  /** A failure kvroute did not expect (500). */
  public static final String INTERNAL_ERROR = "internal_error";

  private static final Duration ONE_SECOND = Duration.ofSeconds(1);

  private final int status;
  private final String type;
  private final String message;
  private final Duration retryAfter;
  private final byte[] body;
  private final boolean relayed;
  private final String droppedReason;

  private FailureAnswer(
      int status, String type, String message, Duration retryAfter, byte[] relayedBody) {
    this(status, type, message, retryAfter, relayedBody, null);
  }

  private FailureAnswer(
      int status,
      String type,
      String message,
      Duration retryAfter,
      byte[] relayedBody,
      String droppedReason) {
    this.droppedReason = droppedReason;
    this.status = status;
    this.type = type;
    this.message = message;
    this.retryAfter = retryAfter;
    this.relayed = relayedBody != null;
    this.body = relayedBody != null ? relayedBody : json(status, type, message);
  }

  /**
   * The answer to a request that failed with {@code failure} (a {@link CompletionException} or
   * {@link ExecutionException} is unwrapped first); empty when the request was cancelled, since the
   * client is gone and nothing can be answered.
   */
  public static Optional<FailureAnswer> of(Throwable failure) {
    Throwable cause = unwrap(Objects.requireNonNull(failure, "failure"));
    if (cause instanceof CancellationException
        || (cause instanceof UpstreamException u && u.kind() == UpstreamException.Kind.CANCELLED)) {
      return Optional.empty();
    }
    return Optional.of(answer(cause, message(cause)));
  }

  /**
   * {@link #of(Throwable)} for a request of {@code api} (null for a request of no known API): the
   * same status, type and {@code Retry-After}, with the body in the API's error shape. Anthropic's
   * Messages API gets Anthropic's, {@code {"type":"error","error":{"type":...,"message":...}}}, its
   * {@code error.type} named after the status ({@link #anthropicType}); an engine's own 4xx body is
   * relayed when it already has that shape, else its message is rewrapped. The OpenAI APIs
   * (Responses included) get OpenAI's.
   */
  public static Optional<FailureAnswer> of(Throwable failure, InferenceRequest.Api api) {
    Optional<FailureAnswer> a = of(failure);
    if (api != InferenceRequest.Api.MESSAGES || a.isEmpty()) {
      return a;
    }
    FailureAnswer o = a.get();
    byte[] body = null;
    if (o.relayed) {
      String engine = new String(o.body, StandardCharsets.UTF_8);
      body = isAnthropicError(engine) ? o.body : null;
    }
    if (body == null) {
      body = anthropicJson(o.status, anthropicType(o.status), o.message);
    }
    return Optional.of(new FailureAnswer(o.status, o.type, o.message, o.retryAfter, body));
  }

  /**
   * Anthropic's {@code error.type} for an HTTP status: {@code invalid_request_error} (400 and other
   * 4xx), {@code authentication_error} (401), {@code permission_error} (403), {@code
   * not_found_error} (404), {@code request_too_large} (413), {@code rate_limit_error} (429), {@code
   * timeout_error} (504), {@code overloaded_error} (503, 529), {@code api_error} (other 5xx).
   */
  public static String anthropicType(int status) {
    switch (status) {
      case 401:
        return "authentication_error";
      case 403:
        return "permission_error";
      case 404:
        return "not_found_error";
      case 413:
        return "request_too_large";
      case 429:
        return "rate_limit_error";
      case 503:
      case 529:
        return "overloaded_error";
      case 504:
        return "timeout_error";
      default:
        return status < 500 ? "invalid_request_error" : "api_error";
    }
  }

  /** Anthropic's error body: {@code {"type":"error","error":{"type":...,"message":...}}}. */
  public static byte[] anthropicJson(int status, String type, String message) {
    JsonStringEncoder enc = JsonStringEncoder.getInstance();
    StringBuilder b = new StringBuilder(64 + message.length());
    b.append("{\"type\":\"error\",\"error\":{\"type\":\"")
        .append(enc.quoteAsString(type))
        .append("\",\"message\":\"")
        .append(enc.quoteAsString(message))
        .append("\"}}");
    return b.toString().getBytes(StandardCharsets.UTF_8);
  }

  private static boolean isAnthropicError(String body) {
    String t = body.replaceAll("\\s+", "");
    return t.startsWith("{") && t.contains("\"type\":\"error\"") && t.contains("\"error\":{");
  }

  private static FailureAnswer answer(Throwable cause, String message) {
    if (cause instanceof AllAttemptsFailedException all && !all.attempts().isEmpty()) {
      // Answered as its last attempt failed, with every attempt in the message.
      FailureAnswer last = answer(all.attempts().get(all.attempts().size() - 1).cause(), message);
      return last.relayed
          ? last
          : new FailureAnswer(last.status, last.type, message, last.retryAfter, null);
    }
    if (cause instanceof ConnectorException.InvalidRequestException e) {
      return new FailureAnswer(clamp(e.httpStatus()), INVALID_REQUEST, message, null, null);
    }
    if (cause instanceof RequestDroppedException d) {
      return new FailureAnswer(
          429, DROPPED, message, d.retryAfter().orElse(ONE_SECOND), null, d.reason().header());
    }
    if (cause instanceof ConnectorException.ForbiddenTargetException) {
      return new FailureAnswer(403, FORBIDDEN_TARGET, message, null, null);
    }
    if (cause instanceof ConnectorException.NoAvailableEndpointException e) {
      return e.saturated()
          ? new FailureAnswer(429, SATURATED, message, ONE_SECOND, null)
          : new FailureAnswer(503, NO_ENDPOINT, message, null, null);
    }
    if (cause instanceof UpstreamException u) {
      return upstream(u, message);
    }
    if (cause instanceof ConnectorException e) {
      int s = clamp(e.httpStatus());
      return new FailureAnswer(s, s < 500 ? INVALID_REQUEST : ROUTING_ERROR, message, null, null);
    }
    return new FailureAnswer(500, INTERNAL_ERROR, "internal error: " + cause, null, null);
  }

  private static FailureAnswer upstream(UpstreamException u, String message) {
    switch (u.kind()) {
      case TIMEOUT:
        return new FailureAnswer(504, UPSTREAM_TIMEOUT, message, null, null);
      case STATUS:
        int s = u.upstreamStatus();
        if (s == 429 || s == 503) {
          Duration after =
              u.retryAfter().filter(d -> d.compareTo(ONE_SECOND) > 0).orElse(ONE_SECOND);
          return new FailureAnswer(503, UPSTREAM_UNAVAILABLE, message, after, null);
        }
        if (s >= 400 && s < 500) {
          byte[] engine =
              u.upstreamBody()
                  .filter(FailureAnswer::looksLikeJson)
                  .map(b -> b.getBytes(StandardCharsets.UTF_8))
                  .orElse(null);
          return new FailureAnswer(s, INVALID_REQUEST, message, null, engine);
        }
        return new FailureAnswer(502, UPSTREAM_ERROR, message, null, null);
      default:
        return new FailureAnswer(502, UPSTREAM_ERROR, message, null, null);
    }
  }

  /**
   * The SSE event that ends a stream which failed after its first byte (no {@code data: [DONE]}
   * follows): {@code data: {"error":{...,"type":"upstream_error","code":502}}} and a blank line. A
   * response of another content type that fails after its first byte ends with a broken connection
   * instead, never a short body that looks complete.
   */
  public static byte[] sseEvent(Throwable failure) {
    String m = "upstream stream failed: " + message(unwrap(failure));
    return ("data: " + new String(json(502, UPSTREAM_ERROR, m), StandardCharsets.UTF_8) + "\n\n")
        .getBytes(StandardCharsets.UTF_8);
  }

  /**
   * {@link #sseEvent(Throwable)} in the event format of {@code api}'s stream: for Anthropic's
   * Messages its {@code event: error} with {@code
   * {"type":"error","error":{"type":"api_error",...}}}; for the Responses API its {@code event:
   * error} with {@code {"type":"error","code": "upstream_error","message":...,"param":null}};
   * OpenAI's chat and completions as {@link #sseEvent(Throwable)}.
   */
  public static byte[] sseEvent(Throwable failure, InferenceRequest.Api api) {
    if (api != InferenceRequest.Api.MESSAGES && api != InferenceRequest.Api.RESPONSES) {
      return sseEvent(failure);
    }
    String m = "upstream stream failed: " + message(unwrap(failure));
    String data;
    if (api == InferenceRequest.Api.MESSAGES) {
      data = new String(anthropicJson(502, "api_error", m), StandardCharsets.UTF_8);
    } else {
      JsonStringEncoder enc = JsonStringEncoder.getInstance();
      data =
          "{\"type\":\"error\",\"code\":\""
              + UPSTREAM_ERROR
              + "\",\"message\":\""
              + new String(enc.quoteAsString(m))
              + "\",\"param\":null}";
    }
    return ("event: error\ndata: " + data + "\n\n").getBytes(StandardCharsets.UTF_8);
  }

  /**
   * The OpenAI-style error body every front writes: {@code
   * {"error":{"message":...,"type":...,"param":null,"code":status}}}.
   */
  public static byte[] json(int status, String type, String message) {
    JsonStringEncoder enc = JsonStringEncoder.getInstance();
    StringBuilder b = new StringBuilder(64 + message.length());
    b.append("{\"error\":{\"message\":\"")
        .append(enc.quoteAsString(message))
        .append("\",\"type\":\"")
        .append(enc.quoteAsString(type))
        .append("\",\"param\":null,\"code\":")
        .append(status)
        .append("}}");
    return b.toString().getBytes(StandardCharsets.UTF_8);
  }

  /** The HTTP status to answer with. */
  public int status() {
    return status;
  }

  /** The OpenAI error {@code type}, one of this class's constants. */
  public String type() {
    return type;
  }

  /** The error message. */
  public String message() {
    return message;
  }

  /** How long the client should wait before retrying, when the answer says. */
  public Optional<Duration> retryAfter() {
    return Optional.ofNullable(retryAfter);
  }

  /**
   * Why flow control dropped the request ({@code queue-full}, {@code ttl-expired}, {@code
   * shed-lower-priority}, {@code slo-unattainable}), when it did.
   */
  public Optional<String> droppedReason() {
    return Optional.ofNullable(droppedReason);
  }

  /**
   * The headers to answer with: {@code Content-Type: application/json}; when set, {@code
   * Retry-After} in whole seconds (rounded up); when flow control dropped the request, {@value
   * RequestDroppedException#HEADER} naming the reason.
   */
  public Map<String, String> headers() {
    Map<String, String> h = new LinkedHashMap<>();
    h.put("Content-Type", "application/json");
    if (retryAfter != null) {
      long s = retryAfter.getSeconds() + (retryAfter.getNano() > 0 ? 1 : 0);
      h.put("Retry-After", Long.toString(Math.max(1, s)));
    }
    if (droppedReason != null) {
      h.put(RequestDroppedException.HEADER, droppedReason);
    }
    return h;
  }

  /**
   * The JSON body: the OpenAI-style error ({@link #json}), or the engine's own JSON error body when
   * an engine refused the request with a 4xx ({@link #relaysEngineBody()}).
   */
  public byte[] body() {
    return body.clone();
  }

  /** True when {@link #body()} is the engine's own error body, relayed as the engine wrote it. */
  public boolean relaysEngineBody() {
    return relayed;
  }

  @Override
  public String toString() {
    return "FailureAnswer{"
        + status
        + " "
        + type
        + (droppedReason == null ? "" : " (" + droppedReason + ")")
        + (retryAfter == null ? "" : ", retry after " + retryAfter)
        + "}";
  }

  private static int clamp(int status) {
    return status >= 400 && status <= 599 ? status : 500;
  }

  private static boolean looksLikeJson(String s) {
    String t = s.strip();
    return t.startsWith("{") && t.endsWith("}");
  }

  private static String message(Throwable t) {
    return t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
  }

  private static Throwable unwrap(Throwable t) {
    Throwable x = t;
    while ((x instanceof CompletionException || x instanceof ExecutionException)
        && x.getCause() != null) {
      x = x.getCause();
    }
    return x;
  }
}
