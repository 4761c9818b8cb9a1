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
import io.kvroute.connector.InferenceRequest;
import java.io.IOException;
import java.util.List;

/**
 * JSON handling shared by the HTTP-based connectors: strict parsing of client bodies and the
 * prefill-leg rewrite of an OpenAI request.
 *
 * <p>Parsing keeps what a proxy must not change: key order, integers of any size ({@code seed},
 * {@code bootstrap_room} above 2^53) and decimal numbers exactly as written. Bodies that are not
 * one JSON object, have trailing data or duplicate keys are rejected with {@link
 * InvalidRequestException} (status 400; 413 for size).
 *
 * <p>Stateless and thread-safe.
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

  private OpenAiJson() {}

  /**
   * Parses a client body that must be one JSON object of at most {@code maxBytes}.
   *
   * @throws InvalidRequestException with status 413 when too large, 400 otherwise
   */
  public static ObjectNode parseObject(byte[] body, int maxBytes) {
    if (body.length > maxBytes) {
      throw new InvalidRequestException(
          "request body is " + body.length + " bytes; the limit is " + maxBytes, 413);
    }
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

  /** True when the client asked for a streamed response ({@code "stream": true}). */
  public static boolean isStreaming(ObjectNode body) {
    JsonNode s = body.get("stream");
    return s != null && s.isBoolean() && s.booleanValue();
  }
}
