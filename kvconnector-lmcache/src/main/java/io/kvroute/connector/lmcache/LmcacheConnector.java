package io.kvroute.connector.lmcache;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.http.ConnectorParameters;
import io.kvroute.connector.http.HttpConnector;
import io.kvroute.connector.http.HttpParameters;
import io.kvroute.connector.http.OpenAiJson;
import io.kvroute.connector.http.TypedConnectorProvider;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The {@code lmcache} connector: vLLM with {@code LMCacheConnectorV1}, where the KV moves below the
 * HTTP layer (LMCache's own NIXL channel configured in its YAML with {@code enable_pd}, or a shared
 * Redis/disk store). The gateway-visible protocol is the sequential two-step of vLLM's bundled
 * LMCache proxy ({@code examples/others/lmcache/disagg_prefill_lmcache_v1/disagg_proxy_server.py}),
 * llm-d's {@code lmcache}/{@code shared-storage} sidecar connectors and Kthena's {@code lmcache}
 * (spec §2.2(a)):
 *
 * <ol>
 *   <li><b>Prefill leg</b>, blocking: the client's body with {@code max_tokens=1} (for chat also
 *       {@code max_completion_tokens=1}), {@code stream=false}, and without {@code stream_options},
 *       {@code min_tokens}, {@code min_completion_tokens}. The answer is checked for a 2xx status
 *       and discarded. (The reference proxy leaves {@code stream} as the client sent it and drains
 *       the stream; forcing {@code false} returns the same KV with one small JSON answer, spec
 *       §8.7.)
 *   <li><b>Decode leg</b>: the client's original body, streamed back as it arrives. No transfer
 *       fields: the decoder finds the KV in LMCache by the prompt's tokens, so both legs must
 *       tokenize identically (same body, same {@code PYTHONHASHSEED} on both engines).
 * </ol>
 *
 * <p>Both legs carry the same {@code X-Request-Id}; client-supplied {@code kv_transfer_params},
 * {@code bootstrap_*} and {@code disaggregated_params} are removed from both. On the wire this is
 * the same flow as the {@code http} connector; the separate type names the deployment (and keeps a
 * configuration that says {@code lmcache} meaning this).
 *
 * <p><b>First-token mode</b> ({@code firstToken: true}): the flow of LMCache's {@code 1p1d} proxy
 * that takes the first token from the prefiller (spec §2.2(b), {@code
 * disagg_proxy_server_first_token_from_prefiller.py}), for {@code /v1/completions} through {@link
 * #proxy}:
 *
 * <ol>
 *   <li>the prompt text is tokenized by the prefill pod's {@code POST /tokenize} (a prompt given as
 *       token ids is used as it is);
 *   <li>prefill gets the token ids, {@code max_tokens=1}, {@code stream=false}, no {@code
 *       stream_options} and {@code kv_transfer_params={"ret_first_tok": true}}; its answer must
 *       carry {@code kv_transfer_params.first_tok};
 *   <li>decode gets the token ids plus that token, {@code max_tokens} one less, no {@code
 *       kv_transfer_params};
 *   <li>a streaming client first gets a synthetic chunk with the prefill's text (built as the
 *       reference builds it), then the decode stream.
 * </ol>
 *
 * Where the reference proxy fails, this one answers: a client that did not ask to stream gets one
 * JSON answer (the decode's, with the prefill's text in front and usage counting that token as a
 * completion token, not a prompt token) instead of an SSE stream labelled JSON; a missing {@code
 * max_tokens} means vLLM's default of 16 rather than an error; when the first token already ends
 * the answer ({@code max_tokens=1}, or finish reason {@code stop}) decode is skipped. Chat
 * requests, batch prompts, decode-only requests and {@link #prepareDecode} (where the gateway sends
 * decode and could not emit the first chunk) use the two-step flow above. The {@code disagg_spec}
 * variant, with its ZMQ "done" wait, is not implemented: it needs LMCache's proxy-side receiver.
 * llm-d's {@code cache_hit_threshold} decode-first variant is the {@code shared-storage} connector
 * ({@code io.kvroute.connector.http.SharedStorageConnector}).
 *
 * <p>Parameters (the {@code config:} block; {@link Parameters}): {@code firstToken} (default false)
 * and {@code maxPrefillResponseBytes} (default 4 MiB; also bounds the {@code /tokenize} answer and,
 * in first-token mode, a non-streamed decode answer).
 *
 * <p>Thread-safe and stateless per request.
 */
public final class LmcacheConnector extends HttpConnector {

  /** The type name. */
  public static final String TYPE = "lmcache";

  /** vLLM's default {@code max_tokens} for completions. */
  static final int VLLM_DEFAULT_MAX_TOKENS = 16;

  private final boolean firstToken;

  /**
   * The parameters of {@code lmcache}.
   *
   * @param firstToken LMCache's first-token proxy flow for completions (default false)
   * @param maxPrefillResponseBytes as in {@link HttpParameters}; also bounds the {@code /tokenize}
   *     answer and, in first-token mode, a non-streamed decode answer
   */
  public record Parameters(Boolean firstToken, Integer maxPrefillResponseBytes) {
    /** Fills in the defaults and checks the values. */
    public Parameters {
      firstToken = firstToken != null && firstToken;
      HttpParameters http = HttpParameters.of(maxPrefillResponseBytes);
      maxPrefillResponseBytes = http.maxPrefillResponseBytes();
    }

    /** The common HTTP parameters. */
    public HttpParameters http() {
      return HttpParameters.of(maxPrefillResponseBytes);
    }
  }

  /** A connector in {@code context}; its {@code config:} block binds to {@link Parameters}. */
  public LmcacheConnector(KVConnectorProvider.Context context) {
    this(context, ConnectorParameters.bind(context.config(), Parameters.class));
  }

  /** A connector in {@code context} with {@code parameters}. */
  public LmcacheConnector(KVConnectorProvider.Context context, Parameters parameters) {
    super(context, TYPE, parameters.http());
    this.firstToken = parameters.firstToken();
  }

  @Override
  public CompletableFuture<StreamingResponse> proxy(PdRequest pd) {
    if (!firstToken
        || !pd.disaggregated()
        || pd.request().api() != InferenceRequest.Api.COMPLETIONS) {
      return super.proxy(pd);
    }
    return withClientBody(pd, body -> proxyFirstToken(pd, body));
  }

  /** The first-token flow of a single-prompt completions request with client body {@code body}. */
  private CompletableFuture<StreamingResponse> proxyFirstToken(PdRequest pd, ObjectNode body) {
    JsonNode prompt = body.get("prompt");
    boolean ids = prompt != null && prompt.isArray() && allIntegers(prompt);
    if (prompt == null || !(prompt.isTextual() || ids)) {
      return super.proxy(pd); // batch prompts: the two-step flow
    }
    JsonNode mt = body.get("max_tokens");
    if (mt != null && !mt.isNull() && !(mt.canConvertToInt() && mt.asInt() >= 1)) {
      return failed(
          new ConnectorException("max_tokens must be an integer >= 1, was " + mt, 400, null));
    }
    int maxTokens = mt == null || mt.isNull() ? VLLM_DEFAULT_MAX_TOKENS : mt.asInt();
    CompletableFuture<ArrayNode> tokens;
    if (ids) {
      tokens = CompletableFuture.completedFuture((ArrayNode) prompt);
    } else {
      ObjectNode req = OpenAiJson.objectNode();
      req.set("prompt", prompt);
      tokens =
          requestJson(
                  Leg.PREFILL,
                  pd.prefill(),
                  "/tokenize",
                  legHeaders(pd.request()),
                  req,
                  context.prefillTimeout())
              .thenApply(
                  t -> {
                    JsonNode arr = t.get("tokens");
                    if (arr == null || !arr.isArray() || !allIntegers(arr)) {
                      throw protocol(pd, "its /tokenize answer has no \"tokens\" array");
                    }
                    return (ArrayNode) arr;
                  });
    }
    return cancellable(
        tokens,
        t -> {
          ObjectNode prefill = OpenAiJson.prefillBody(body, InferenceRequest.Api.COMPLETIONS);
          prefill.set("prompt", t.deepCopy());
          prefill.putObject("kv_transfer_params").put("ret_first_tok", true);
          return cancellable(
              sendPrefill(pd, prefill),
              answer ->
                  cancellable(
                      continueFrom(pd, body, t, maxTokens, answer),
                      r ->
                          CompletableFuture.completedFuture(
                              StreamingResponse.withPrefillUsage(r, OpenAiJson.usage(answer)))));
        });
  }

  private CompletableFuture<StreamingResponse> continueFrom(
      PdRequest pd, ObjectNode body, ArrayNode tokens, int maxTokens, ObjectNode prefill) {
    JsonNode first = prefill.path("kv_transfer_params").path("first_tok");
    if (!first.canConvertToLong()) {
      return failed(
          protocol(
              pd,
              "its answer has no kv_transfer_params.first_tok (is LMCache's ret_first_tok"
                  + " support enabled on the prefiller?)"));
    }
    boolean streaming = OpenAiJson.isStreaming(body);
    JsonNode choice = prefill.path("choices").path(0);
    String finish = choice.path("finish_reason").asText("");
    if (maxTokens == 1 || finish.equals("stop")) {
      prefill.remove("kv_transfer_params");
      listener.connectorEvent(TYPE, "first_token_only");
      return CompletableFuture.completedFuture(
          streaming
              ? StreamingResponse.of(
                  200,
                  Map.of("Content-Type", List.of("text/event-stream")),
                  concat(headChunk(prefill, finish), "data: [DONE]\n\n"))
              : StreamingResponse.of(
                  200,
                  Map.of("Content-Type", List.of("application/json")),
                  OpenAiJson.toBytes(prefill)));
    }
    ObjectNode decode = body.deepCopy();
    ArrayNode prompt = tokens.deepCopy();
    prompt.add(first);
    decode.set("prompt", prompt);
    decode.put("max_tokens", maxTokens - 1);
    DecodeRequest req = decodeRequest(pd, decode, Map.of("mode", "first_token"));
    String prefillText = choice.path("text").asText("");
    return cancellable(
        sendDecode(req),
        resp -> {
          if (streaming) {
            return CompletableFuture.completedFuture(prependChunk(headChunk(prefill, null), resp));
          }
          return resp.readAll(maxPrefillResponseBytes())
              .thenApply(bytes -> merged(pd, resp, bytes, prefillText));
        });
  }

  /** The decode answer with the prefill's token in front, counted as a completion token. */
  private StreamingResponse merged(
      PdRequest pd, StreamingResponse resp, byte[] bytes, String prefillText) {
    JsonNode n;
    try {
      n = OpenAiJson.readTree(bytes);
    } catch (IOException e) {
      n = null;
    }
    if (n == null || !n.isObject() || !n.path("choices").path(0).isObject()) {
      throw UpstreamException.protocol(
          Leg.DECODE,
          pd.decode().id(),
          "decode answer from " + pd.decode().baseUrl() + " is not a completion",
          null);
    }
    ObjectNode answer = (ObjectNode) n;
    ObjectNode c = (ObjectNode) answer.path("choices").path(0);
    c.put("text", prefillText + c.path("text").asText(""));
    JsonNode usage = answer.get("usage");
    if (usage instanceof ObjectNode u
        && u.path("prompt_tokens").canConvertToInt()
        && u.path("completion_tokens").canConvertToInt()) {
      u.put("prompt_tokens", u.get("prompt_tokens").asInt() - 1);
      u.put("completion_tokens", u.get("completion_tokens").asInt() + 1);
    }
    return StreamingResponse.of(resp.status(), resp.headers(), OpenAiJson.toBytes(answer));
  }

  /** The synthetic first SSE chunk, shaped as LMCache's proxy shapes it. */
  static byte[] headChunk(ObjectNode prefill, String finishReason) {
    ObjectNode h = OpenAiJson.objectNode();
    h.set("id", prefill.get("id"));
    h.put("object", "text_completion");
    h.set("created", prefill.get("created"));
    h.set("model", prefill.get("model"));
    ObjectNode c = h.putArray("choices").addObject();
    c.put("index", 0);
    c.put("text", prefill.path("choices").path(0).path("text").asText(""));
    c.putNull("logprobs");
    if (finishReason == null) {
      c.putNull("finish_reason");
    } else {
      c.put("finish_reason", finishReason);
    }
    c.putNull("stop_reason");
    h.putNull("usage");
    return concat(
        ("data: " + new String(OpenAiJson.toBytes(h), StandardCharsets.UTF_8) + "\n\n")
            .getBytes(StandardCharsets.UTF_8),
        "");
  }

  private static byte[] concat(byte[] a, String b) {
    byte[] tail = b.getBytes(StandardCharsets.UTF_8);
    byte[] out = java.util.Arrays.copyOf(a, a.length + tail.length);
    System.arraycopy(tail, 0, out, a.length, tail.length);
    return out;
  }

  private static boolean allIntegers(JsonNode arr) {
    for (JsonNode e : arr) {
      if (!e.isIntegralNumber()) {
        return false;
      }
    }
    return arr.size() > 0;
  }

  private static UpstreamException protocol(PdRequest pd, String what) {
    return UpstreamException.protocol(
        Leg.PREFILL,
        pd.prefill().id(),
        "prefill pod " + pd.prefill().baseUrl() + ": " + what,
        null);
  }

  /** The ServiceLoader provider of {@code lmcache}. */
  public static final class Provider extends TypedConnectorProvider<Parameters> {
    /** For ServiceLoader. */
    public Provider() {
      super(
          TYPE,
          "vLLM LMCacheConnectorV1 (shared store or LMCache PD channel): prefill (max_tokens=1)"
              + " then the original body to decode",
          Parameters.class,
          LmcacheConnector::new);
    }
  }
}
