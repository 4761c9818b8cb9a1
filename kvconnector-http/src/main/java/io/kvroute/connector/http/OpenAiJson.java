package io.kvroute.connector.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.ConnectorException.InvalidRequestException;
import io.kvroute.connector.EngineUsage;
import io.kvroute.connector.InferenceRequest;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

/**
 * JSON handling shared by the HTTP-based connectors and the router: the one parse of a client's
 * body ({@link #clientBody}), the prefill-leg rewrite of an OpenAI request and the usage block of
 * an engine's answer.
 *
 * <p>Parsing keeps what a proxy must not change: key order, integers of any size ({@code seed},
 * {@code bootstrap_room} above 2^53) and decimal numbers exactly as written. Bodies that are not
 * one JSON object, have trailing data or duplicate keys are rejected with {@link
 * InvalidRequestException} (status 400). The body's size is not checked here: it was bounded where
 * it was read (the HTTP edge's {@code maxBodyBytes}, the Spring filter's {@code max-request-size},
 * the Envoy picker's {@code maxRequestBytes}).
 *
 * <p>Thread-safe; the only state is the count of client bodies parsed.
 */
public final class OpenAiJson {

  /** Fields a client must never set itself: they steer KV transfer between pods. */
  public static final List<String> TRANSFER_FIELDS =
      List.of(
          "kv_transfer_params",
          "bootstrap_host",
          "bootstrap_port",
          "bootstrap_room",
          "disaggregated_params");

  /** Exact numbers, strict duplicate detection, no trailing tokens; never handed out. */
  private static final ObjectMapper MAPPER =
      JsonMapper.builder()
          .nodeFactory(JsonNodeFactory.instance)
          .disable(
              com.fasterxml.jackson.databind.cfg.JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES)
          .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
          .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .disable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
          .build();

  static {
    MAPPER
        .getFactory()
        .setStreamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(200).build());
  }

  private static final LongAdder CLIENT_BODIES_PARSED = new LongAdder();

  /**
   * The parse of a client's body that the router (to schedule it) and the connectors (to rewrite
   * it) share through {@link InferenceRequest#parsedBody}: {@link #parseObject}.
   */
  public static final InferenceRequest.BodyParser<ObjectNode> CLIENT_BODY =
      body -> {
        CLIENT_BODIES_PARSED.increment();
        return parseObject(body);
      };

  private OpenAiJson() {}

  /**
   * The client's body of {@code request} as one JSON object, parsed once per request whoever asks
   * first ({@link InferenceRequest#parsedBody} with {@link #CLIENT_BODY}): every attempt of a
   * retried request reads the same tree. It is shared: read it, or {@link #clientBodyCopy copy} it
   * to rewrite it.
   *
   * @throws InvalidRequestException (400) when the body is not one JSON object
   */
  public static ObjectNode clientBody(InferenceRequest request) {
    return request.parsedBody(CLIENT_BODY);
  }

  /**
   * A copy of {@link #clientBody} that the caller may change, without the client-sent transfer
   * fields ({@link #TRANSFER_FIELDS}).
   *
   * @throws InvalidRequestException (400) when the body is not one JSON object
   */
  public static ObjectNode clientBodyCopy(InferenceRequest request) {
    return stripTransferFields(clientBody(request).deepCopy());
  }

  /**
   * How many client bodies {@link #CLIENT_BODY} has parsed in this process (a diagnostic: with one
   * router or connector per request it grows by one per request, retries included).
   */
  public static long clientBodiesParsed() {
    return CLIENT_BODIES_PARSED.sum();
  }

  /**
   * Parses a client body that must be one JSON object. Prefer {@link #clientBody}, which parses a
   * request's body once for all its readers.
   *
   * @throws InvalidRequestException (400) when it is empty or not one JSON object
   */
  public static ObjectNode parseObject(byte[] body) {
    if (body.length == 0) {
      throw new InvalidRequestException("request body is empty; expected a JSON object");
    }
    JsonNode node;
    try {
      node = MAPPER.readTree(body);
    } catch (JsonProcessingException e) {
      throw new InvalidRequestException(
          "request body is not valid JSON: " + e.getOriginalMessage() + locate(e));
    } catch (IOException e) {
      throw new InvalidRequestException("request body could not be read: " + e.getMessage());
    }
    if (node == null || node.isMissingNode()) {
      throw new InvalidRequestException("request body is empty; expected a JSON object");
    }
    if (!node.isObject()) {
      throw new InvalidRequestException(
          "request body must be a JSON object, was " + node.getNodeType().name().toLowerCase());
    }
    return (ObjectNode) node;
  }

  private static String locate(JsonProcessingException e) {
    return e.getLocation() == null
        ? ""
        : " (at line "
            + e.getLocation().getLineNr()
            + ", column "
            + e.getLocation().getColumnNr()
            + ")";
  }

  /**
   * Parses JSON with this class's rules (exact numbers, duplicate keys and trailing data rejected).
   *
   * @return the tree, or {@link com.fasterxml.jackson.databind.node.MissingNode} for empty input
   * @throws IOException when the bytes are not valid JSON
   */
  public static JsonNode readTree(byte[] json) throws IOException {
    return MAPPER.readTree(json);
  }

  /** {@link #readTree(byte[])} of a string. */
  public static JsonNode readTree(String json) throws IOException {
    return MAPPER.readTree(json);
  }

  /** A new empty object node. */
  public static ObjectNode objectNode() {
    return MAPPER.createObjectNode();
  }

  /** Serialises a node to UTF-8 bytes. */
  public static byte[] toBytes(JsonNode node) {
    try {
      return MAPPER.writeValueAsBytes(node);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot serialise JSON", e);
    }
  }

  /** Removes client-supplied KV-transfer fields ({@link #TRANSFER_FIELDS}) in place. */
  public static ObjectNode stripTransferFields(ObjectNode body) {
    body.remove(TRANSFER_FIELDS);
    return body;
  }

  /**
   * The prefill leg of an OpenAI request: a copy of {@code original} with {@code stream=false},
   * {@code max_tokens=1}, for chat also {@code max_completion_tokens=1} (chat prefers it over
   * {@code max_tokens}), and without {@code stream_options}, {@code min_tokens}, {@code
   * min_completion_tokens} (vLLM rejects {@code min_tokens > max_tokens}) or client transfer
   * fields.
   */
  public static ObjectNode prefillBody(ObjectNode original, InferenceRequest.Api api) {
    ObjectNode p = original.deepCopy();
    stripTransferFields(p);
    p.put("stream", false);
    p.remove("stream_options");
    p.remove("min_tokens");
    p.remove("min_completion_tokens");
    p.put("max_tokens", 1);
    if (api == InferenceRequest.Api.CHAT_COMPLETIONS) {
      p.put("max_completion_tokens", 1);
    }
    return p;
  }

  /**
   * The prefill leg as vLLM's and SGLang's reference proxies build it: a copy of {@code body}
   * (which must already be free of client transfer fields) with {@code kv_transfer_params} set to
   * {@code kvTransferParams} when that is not null, {@code stream=false}, {@code max_tokens=1},
   * {@code max_completion_tokens=1} only when the client sent it, and without {@code
   * stream_options}, {@code min_tokens} and {@code min_completion_tokens}; in that key order.
   */
  public static ObjectNode oneTokenPrefill(ObjectNode body, ObjectNode kvTransferParams) {
    ObjectNode p = body.deepCopy();
    if (kvTransferParams != null) {
      p.set("kv_transfer_params", kvTransferParams);
    }
    p.put("stream", false);
    p.put("max_tokens", 1);
    if (p.has("max_completion_tokens")) {
      p.put("max_completion_tokens", 1);
    }
    p.remove("stream_options");
    p.remove("min_tokens");
    p.remove("min_completion_tokens");
    return p;
  }

  /**
   * The usage block of an engine's JSON answer ({@code usage.prompt_tokens} and {@code
   * usage.prompt_tokens_details.cached_tokens}), or null when it has none.
   */
  public static EngineUsage usage(JsonNode answer) {
    JsonNode u = answer == null ? null : answer.get("usage");
    if (u == null || !u.isObject()) {
      return null;
    }
    JsonNode prompt = u.get("prompt_tokens");
    JsonNode cached = u.path("prompt_tokens_details").get("cached_tokens");
    long p = count(prompt);
    long c = count(cached);
    return p < 0 && c < 0 ? null : new EngineUsage(p, c);
  }

  /** A token count: a non-negative integer, else -1. */
  private static long count(JsonNode n) {
    return n != null && n.isIntegralNumber() && n.canConvertToLong() && n.asLong() >= 0
        ? n.asLong()
        : -1;
  }

  /** True when the client asked for a streamed response ({@code "stream": true}). */
  public static boolean isStreaming(ObjectNode body) {
    JsonNode s = body.get("stream");
    return s != null && s.isBoolean() && s.booleanValue();
  }
}
