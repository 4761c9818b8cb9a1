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
 * <p>Thread-safe; the only state is the count of client bodies parsed, and per thread a scratch
 * buffer that {@link #withBytes} serialises into (kept up to {@value #SCRATCH_KEPT} bytes: a body
 * that needs more gets a buffer of its own, dropped after use).
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

  /** The largest scratch buffer a thread keeps between {@link #withBytes} calls. */
  static final int SCRATCH_KEPT = 256 << 10;

  private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

  /**
   * Serialises {@code node} into this thread's scratch buffer and lends its bytes to {@code use}:
   * the buffer is valid only during the call ({@code use} copies what it keeps, as {@code
   * Outbound.post} and {@code DecodeRequest.builder} of a {@link java.nio.ByteBuffer} do). A leg's
   * body is thus copied once, into the request that owns it, instead of being grown in chunks,
   * joined into an array and copied again by the request's builder.
   */
  static <T> T withBytes(JsonNode node, java.util.function.Function<java.nio.ByteBuffer, T> use) {
    Scratch s = SCRATCH.get();
    if (s.busy) {
      s = new Scratch(); // a nested call: a buffer of its own
    }
    s.busy = true;
    s.count = 0;
    try {
      MAPPER.writeValue(s, node);
      return use.apply(java.nio.ByteBuffer.wrap(s.buf, 0, s.count).asReadOnlyBuffer());
    } catch (IOException e) {
      throw new IllegalStateException("cannot serialise JSON", e);
    } finally {
      s.busy = false;
      if (s.buf.length > SCRATCH_KEPT) {
        s.buf = new byte[Scratch.INITIAL];
      }
    }
  }

  /** A growable byte sink, reused by one thread. */
  private static final class Scratch extends java.io.OutputStream {
    static final int INITIAL = 4096;
    byte[] buf = new byte[INITIAL];
    int count;
    boolean busy;

    private void ensure(int more) {
      int need = count + more;
      if (need > buf.length) {
        buf = java.util.Arrays.copyOf(buf, Math.max(need, buf.length * 2));
      }
    }

    @Override
    public void write(int b) {
      ensure(1);
      buf[count++] = (byte) b;
    }

    @Override
    public void write(byte[] b, int off, int len) {
      ensure(len);
      System.arraycopy(b, off, buf, count, len);
      count += len;
    }
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
   * The prefill leg of a request: a copy of {@code original} with {@code stream=false}, a one-token
   * output budget in the API's own field, and without {@code stream_options}, {@code min_tokens},
   * {@code min_completion_tokens} (vLLM rejects {@code min_tokens > max_tokens}) or client transfer
   * fields. The budget: {@code max_tokens=1} for completions and Anthropic's Messages API ({@code
   * max_tokens} is Messages' only output field; vLLM turns it into both of its chat fields), for
   * chat also {@code max_completion_tokens=1} (chat prefers it over {@code max_tokens}), and {@code
   * max_output_tokens=1} for the Responses API, whose prefill leg is also not stored ({@code
   * store=false}: vLLM stores responses by default) nor run in the background.
   */
  public static ObjectNode prefillBody(ObjectNode original, InferenceRequest.Api api) {
    ObjectNode p = original.deepCopy();
    stripTransferFields(p);
    p.put("stream", false);
    p.remove("stream_options");
    p.remove("min_tokens");
    p.remove("min_completion_tokens");
    oneTokenBudget(p, api, true);
    return p;
  }

  /**
   * The prefill leg as vLLM's and SGLang's reference proxies build it: a copy of {@code body}
   * (which must already be free of client transfer fields) with {@code kv_transfer_params} set to
   * {@code kvTransferParams} when that is not null, {@code stream=false}, {@code max_tokens=1},
   * {@code max_completion_tokens=1} only when the client sent it, and without {@code
   * stream_options}, {@code min_tokens} and {@code min_completion_tokens}; in that key order. For a
   * completion or chat request; {@link #oneTokenPrefill(ObjectNode, ObjectNode,
   * InferenceRequest.Api)} for the other APIs.
   */
  public static ObjectNode oneTokenPrefill(ObjectNode body, ObjectNode kvTransferParams) {
    return oneTokenPrefill(body, kvTransferParams, InferenceRequest.Api.CHAT_COMPLETIONS);
  }

  /**
   * {@link #oneTokenPrefill(ObjectNode, ObjectNode)} for a request of {@code api}: the one-token
   * budget is written in the API's own field, as llm-d's routing sidecar does it ({@code
   * max_tokens=1} for completions, chat and Anthropic's Messages; {@code max_output_tokens=1},
   * {@code store=false} and no {@code background} for the Responses API).
   */
  public static ObjectNode oneTokenPrefill(
      ObjectNode body, ObjectNode kvTransferParams, InferenceRequest.Api api) {
    ObjectNode p = body.deepCopy();
    if (kvTransferParams != null) {
      p.set("kv_transfer_params", kvTransferParams);
    }
    p.put("stream", false);
    oneTokenBudget(p, api, false);
    p.remove("stream_options");
    p.remove("min_tokens");
    p.remove("min_completion_tokens");
    return p;
  }

  /** Writes the one-token output budget of {@code api} into {@code p}. */
  private static void oneTokenBudget(ObjectNode p, InferenceRequest.Api api, boolean chatBoth) {
    switch (api) {
      case RESPONSES:
        p.put("max_output_tokens", 1);
        p.put("store", false);
        p.remove("background");
        break;
      case CHAT_COMPLETIONS:
        p.put("max_tokens", 1);
        if (chatBoth || p.has("max_completion_tokens")) {
          p.put("max_completion_tokens", 1);
        }
        break;
      default: // completions and Messages: max_tokens is their only output budget
        p.put("max_tokens", 1);
        break;
    }
  }

  /**
   * The usage block of an engine's JSON answer, or null when it has none: OpenAI's {@code
   * usage.prompt_tokens} and {@code usage.prompt_tokens_details.cached_tokens}; the Responses API's
   * {@code usage.input_tokens} and {@code usage.input_tokens_details.cached_tokens}; Anthropic's
   * Messages usage, whose {@code input_tokens} excludes the cached part (the prompt is {@code
   * input_tokens + cache_read_input_tokens + cache_creation_input_tokens}, the cached tokens {@code
   * cache_read_input_tokens}, as vLLM writes them).
   */
  public static EngineUsage usage(JsonNode answer) {
    JsonNode u = answer == null ? null : answer.get("usage");
    if (u == null || !u.isObject()) {
      return null;
    }
    if (u.has("prompt_tokens")) {
      long p = count(u.get("prompt_tokens"));
      long c = count(u.path("prompt_tokens_details").get("cached_tokens"));
      return p < 0 && c < 0 ? null : new EngineUsage(p, c);
    }
    if (u.has("input_tokens_details")) { // Responses
      long p = count(u.get("input_tokens"));
      long c = count(u.path("input_tokens_details").get("cached_tokens"));
      return p < 0 && c < 0 ? null : new EngineUsage(p, c);
    }
    long input = count(u.get("input_tokens")); // Messages
    long read = count(u.get("cache_read_input_tokens"));
    long created = count(u.get("cache_creation_input_tokens"));
    if (input < 0) {
      return null;
    }
    return new EngineUsage(input + Math.max(read, 0) + Math.max(created, 0), read);
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
