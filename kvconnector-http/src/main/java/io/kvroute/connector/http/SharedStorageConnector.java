package io.kvroute.connector.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.http.internal.PeekedStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The {@code shared-storage} connector: llm-d's sidecar protocol for engines that share KV through
 * storage (vLLM's shared-storage example connector, LMCache with a shared store). It is the
 * two-step flow of {@link HttpConnector} plus {@code cache_hit_threshold} (vLLM RFC #24256, spec
 * §2.2(a)):
 *
 * <ul>
 *   <li><b>Decode first.</b> When the client body carries {@code cache_hit_threshold} (or the
 *       connector is configured with a default, below), {@link #proxy} sends the request to the
 *       decoder first. A decoder whose prefix-cache hit rate for the prompt is below the threshold
 *       answers at once with {@code finish_reason: "cache_threshold"} and computes nothing; the
 *       connector then discards that answer and falls back to prefill-then-decode. Any other answer
 *       is the client's: non-streaming answers are read whole and inspected; streaming answers are
 *       read until their first complete SSE event, inspected, and replayed followed by the rest of
 *       the stream. A decoder error status is returned as an error, without fallback (as llm-d
 *       does).
 *   <li><b>Prefill then decode.</b> Prefill gets the {@link HttpConnector} prefill body ({@code
 *       max_tokens=1}, {@code stream=false}, ...) with {@code cache_hit_threshold=0}; decode gets
 *       the client's body with {@code cache_hit_threshold=0}, so the decoder never refuses after a
 *       prefill.
 * </ul>
 *
 * <p>{@link #prepareDecode} (the two-phase form, where the gateway sends decode itself) always runs
 * prefill then decode: deciding on the decoder's first answer needs {@link #proxy}.
 *
 * <p>Upstream vLLM does not implement the RFC (its pull request was closed); llm-d's simulator and
 * kvroute's {@code testkit} do. Against an engine that ignores the field, decode-first is a plain
 * decode-only request and no prefill happens, so enable it only for engines that honour it.
 *
 * <p>Parameters (the {@code config:} block): {@link Parameters}. Connector events: {@code
 * decode_first_hit} and {@code decode_first_refused}.
 *
 * <p>Thread-safe and stateless per request.
 */
public final class SharedStorageConnector extends AbstractHttpConnector {

  /** The type name. */
  public static final String TYPE = "shared-storage";

  /** The request field (and the finish reason) of the decode-first protocol. */
  public static final String FIELD = "cache_hit_threshold";

  /** The finish reason of a decoder that refused for too few cached tokens. */
  public static final String REFUSED = "cache_threshold";

  private static final int MAX_PEEK = 256 * 1024;

  private final Double defaultThreshold;
  private final int maxDecodeFirstBytes;

  /**
   * The parameters of {@code shared-storage}.
   *
   * @param cacheHitThreshold a default {@code cache_hit_threshold} in (0, 1] for clients that send
   *     none (default: none, so only clients that send the field get decode-first)
   * @param maxDecodeFirstBytes the largest non-streaming decode-first answer read before deciding,
   *     in bytes (default 16 MiB, at least 1024)
   * @param maxPrefillResponseBytes as in {@link HttpParameters}
   */
  public record Parameters(
      Double cacheHitThreshold, Integer maxDecodeFirstBytes, Integer maxPrefillResponseBytes) {
    /** Fills in the defaults and checks the values. */
    public Parameters {
      if (cacheHitThreshold != null && !(cacheHitThreshold > 0 && cacheHitThreshold <= 1)) {
        throw new io.kvroute.config.ConfigException(
            "cacheHitThreshold", "must be a number in (0, 1], was " + cacheHitThreshold);
      }
      maxDecodeFirstBytes = maxDecodeFirstBytes == null ? 16 * 1024 * 1024 : maxDecodeFirstBytes;
      io.kvroute.config.Checks.range(
          "maxDecodeFirstBytes", maxDecodeFirstBytes, 1024, Integer.MAX_VALUE);
      HttpParameters http = HttpParameters.of(maxPrefillResponseBytes);
      maxPrefillResponseBytes = http.maxPrefillResponseBytes();
    }

    /** The common HTTP parameters. */
    public HttpParameters http() {
      return HttpParameters.of(maxPrefillResponseBytes);
    }
  }

  /** A connector in {@code context}; its {@code config:} block binds to {@link Parameters}. */
  public SharedStorageConnector(KVConnectorProvider.Context context) {
    this(context, ConnectorParameters.bind(context.config(), Parameters.class));
  }

  /** A connector in {@code context} with {@code parameters}. */
  public SharedStorageConnector(KVConnectorProvider.Context context, Parameters parameters) {
    super(context, parameters.http());
    this.defaultThreshold = parameters.cacheHitThreshold();
    this.maxDecodeFirstBytes = parameters.maxDecodeFirstBytes();
  }

  @Override
  public String type() {
    return TYPE;
  }

  @Override
  public CompletableFuture<DecodeRequest> prepareDecode(PdRequest pd) {
    return withClientBody(pd, body -> prefillThenDecode(pd, body));
  }

  private CompletableFuture<DecodeRequest> prefillThenDecode(PdRequest pd, ObjectNode body) {
    if (!pd.disaggregated()) {
      return CompletableFuture.completedFuture(
          decodeRequest(pd, body, Map.of("mode", "decode_only")));
    }
    ObjectNode prefill = OpenAiJson.prefillBody(body, pd.request().api());
    prefill.put(FIELD, 0);
    ObjectNode decode = body.deepCopy();
    decode.put(FIELD, 0);
    return afterPrefill(
        pd, prefill, ignored -> decodeRequest(pd, decode, Map.of("mode", "prefill_decode")));
  }

  @Override
  public CompletableFuture<StreamingResponse> proxy(PdRequest pd) {
    return withClientBody(pd, body -> proxy(pd, body));
  }

  private CompletableFuture<StreamingResponse> proxy(PdRequest pd, ObjectNode body) {
    JsonNode given = body.get(FIELD);
    boolean decodeFirst =
        pd.disaggregated()
            && (given != null
                ? given.isNumber() && given.asDouble() > 0
                : defaultThreshold != null);
    if (!decodeFirst) {
      return cancellable(prefillThenDecode(pd, body), this::sendDecodeReporting);
    }
    ObjectNode attempt = body;
    if (given == null) {
      attempt = body.deepCopy();
      attempt.put(FIELD, defaultThreshold);
    }
    boolean streaming = OpenAiJson.isStreaming(body);
    DecodeRequest first = decodeRequest(pd, attempt, Map.of("mode", "decode_first"));
    CompletableFuture<StreamingResponse> decided =
        cancellable(
            sendDecode(first), resp -> streaming ? inspectStream(resp) : inspectWhole(pd, resp));
    return cancellable(
        decided,
        resp -> {
          if (resp != null) {
            listener.connectorEvent(TYPE, "decode_first_hit");
            return CompletableFuture.completedFuture(resp);
          }
          listener.connectorEvent(TYPE, "decode_first_refused");
          return cancellable(prefillThenDecode(pd, body), this::sendDecodeReporting);
        });
  }

  /** The answer if the decoder served it, or null if it refused (then the stream is cancelled). */
  private CompletableFuture<StreamingResponse> inspectStream(StreamingResponse resp) {
    return PeekedStream.peek(resp, SharedStorageConnector::hasCompleteDataEvent, MAX_PEEK)
        .thenApply(
            peeked -> {
              if (refusedInSse(peeked.prefix())) {
                peeked.cancel();
                return null;
              }
              return peeked;
            });
  }

  private CompletableFuture<StreamingResponse> inspectWhole(PdRequest pd, StreamingResponse resp) {
    return resp.readAll(maxDecodeFirstBytes)
        .thenApply(
            bytes -> {
              JsonNode n;
              try {
                n = OpenAiJson.readTree(bytes);
              } catch (IOException e) {
                throw UpstreamException.protocol(
                    Leg.DECODE,
                    pd.decode().id(),
                    "decode-first answer from " + pd.decode().baseUrl() + " is not JSON",
                    e);
              }
              if (refused(n)) {
                return null;
              }
              return StreamingResponse.of(resp.status(), resp.headers(), bytes);
            });
  }

  /** Whether {@code choices[0].finish_reason} is {@code cache_threshold}. */
  static boolean refused(JsonNode answer) {
    return answer != null
        && REFUSED.equals(answer.path("choices").path(0).path("finish_reason").asText(null));
  }

  /** The {@code data:} payloads of the complete SSE events in {@code sse}, in order. */
  static java.util.List<String> completeEventData(byte[] sse) {
    String s = new String(sse, StandardCharsets.UTF_8).replace("\r\n", "\n");
    java.util.List<String> out = new java.util.ArrayList<>();
    int from = 0;
    int end;
    while ((end = s.indexOf("\n\n", from)) >= 0) {
      for (String line : s.substring(from, end).split("\n", -1)) {
        if (line.startsWith("data:")) {
          out.add(line.substring(5).trim());
        }
      }
      from = end + 2;
    }
    return out;
  }

  /** True once the bytes hold a complete SSE event with a {@code data:} line. */
  static boolean hasCompleteDataEvent(byte[] sse) {
    return !completeEventData(sse).isEmpty();
  }

  /** Whether any complete SSE event in {@code sse} is a {@code cache_threshold} refusal. */
  static boolean refusedInSse(byte[] sse) {
    for (String data : completeEventData(sse)) {
      if (data.isEmpty() || data.equals("[DONE]")) {
        continue;
      }
      try {
        if (refused(OpenAiJson.readTree(data))) {
          return true;
        }
      } catch (IOException e) {
        // not JSON: not a refusal
      }
    }
    return false;
  }

  /** The ServiceLoader provider of {@code shared-storage}. */
  public static final class Provider extends TypedConnectorProvider<Parameters> {
    /** For ServiceLoader. */
    public Provider() {
      super(
          TYPE,
          "llm-d shared-storage: decode first when cache_hit_threshold is set, falling back to"
              + " prefill (max_tokens=1) then decode",
          Parameters.class,
          SharedStorageConnector::new);
    }
  }
}
