package io.kvroute.connector.nixl;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.Leg;
import io.kvroute.connector.http.AbstractHttpConnector;
import io.kvroute.connector.http.ConnectorParameters;
import io.kvroute.connector.http.HttpParameters;
import io.kvroute.connector.http.OpenAiJson;
import io.kvroute.connector.http.TypedConnectorProvider;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * The {@code nixl} connector: vLLM's {@code NixlConnector} protocol, as spoken by vLLM's reference
 * proxy ({@code tests/v1/kv_connector/nixl_integration/toy_proxy_server.py}), llm-d's {@code
 * nixlv2} sidecar, Kthena's {@code nixl} and AIBrix's {@code shfs} agent.
 *
 * <ol>
 *   <li><b>Prefill leg</b>, blocking and non-streaming, to the client's path: the client's body
 *       (client-supplied transfer fields removed) with {@code kv_transfer_params =
 *       {do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null,
 *       remote_block_ids: null, remote_host: null, remote_port: null}}, {@code stream=false},
 *       {@code max_tokens=1}, {@code max_completion_tokens=1} only when the client sent it (chat
 *       prefers it over {@code max_tokens}), and without {@code stream_options}, {@code min_tokens}
 *       and {@code min_completion_tokens} (vLLM rejects {@code min_tokens > max_tokens}). Field by
 *       field and in key order this is the reference proxy's prefill body.
 *   <li><b>Decode leg</b>, streamed: the client's body with {@code kv_transfer_params} set to the
 *       prefill response's {@code kv_transfer_params}, verbatim, when that is a non-empty object.
 *   <li>When the prefill answered <b>without</b> {@code kv_transfer_params} (its single token was
 *       EOS or a stop string, or the prefiller does not run the NIXL connector), decode runs
 *       without them, the decoder prefills locally, the listener gets {@code connectorEvent("nixl",
 *       "prefill_without_kv_transfer_params")}, and the {@link KVConnector.DecodeRequest} carries
 *       the attributes {@code kv_transfer_params=absent} and {@code prefill_finish_reason=<reason>}
 *       ({@link FallbackConnector} uses them).
 * </ol>
 *
 * <p>Both legs carry the same {@code X-Request-Id} (the request's id; {@code
 * io.kvroute.pd.PdOrchestrator} mints a fresh one per attempt) and the client's headers minus
 * routing and hop-by-hop headers. Client-supplied {@code kv_transfer_params}, {@code bootstrap_*}
 * and {@code disaggregated_params} never reach either pod (the reference proxy would pass them on
 * when the prefill returns none; spec §8.3 says not to).
 *
 * <p>Parameters (the {@code config:} block of {@code kvConnector}; {@link Parameters}):
 *
 * <ul>
 *   <li>{@code remoteHostRewrite} (default {@code never}): what to do with the {@code remote_host}
 *       the prefiller reports. {@code never} forwards it verbatim; {@code localhost} replaces a
 *       loopback or unspecified value ({@code localhost}, {@code 127.0.0.1}, {@code ::1}, {@code
 *       0.0.0.0}; vLLM's default when {@code VLLM_NIXL_SIDE_CHANNEL_HOST} is unset) with the
 *       prefill endpoint's host; {@code always} replaces it unconditionally, as AIBrix does. Each
 *       rewrite is reported as {@code connectorEvent("nixl", "remote_host_rewritten")}.
 *   <li>{@code maxPrefillResponseBytes} (default 4 MiB): larger prefill answers fail the leg.
 * </ul>
 *
 * <p>Failures: a prefill non-2xx, timeout or connection failure fails the future with a {@link
 * io.kvroute.connector.UpstreamException} naming {@link Leg#PREFILL} (retryable on another pair
 * unless it is a client 4xx) and no decode is sent; a prefill answer that is not a JSON object is a
 * {@code PROTOCOL} failure. Decode failures are as for every {@link AbstractHttpConnector}.
 * Cancelling the returned future cancels whichever leg is running.
 *
 * <p>Thread-safe and stateless per request.
 */
public final class NixlConnector extends AbstractHttpConnector {

  /** The type name. */
  public static final String TYPE = "nixl";

  /** The event reported when the prefill answered without {@code kv_transfer_params}. */
  public static final String EVENT_NO_PARAMS = "prefill_without_kv_transfer_params";

  /** The event reported when {@code remote_host} was replaced by the prefill endpoint's host. */
  public static final String EVENT_HOST_REWRITTEN = "remote_host_rewritten";

  /**
   * How {@code remote_host} in the prefill's answer is treated (written in lower case: {@code
   * never}, {@code localhost}, {@code always}).
   */
  public enum RemoteHostRewrite {
    /** Forward the prefiller's {@code remote_host} verbatim. */
    NEVER,
    /** Replace a loopback or unspecified {@code remote_host} with the prefill endpoint's host. */
    LOCALHOST,
    /** Replace {@code remote_host} with the prefill endpoint's host unconditionally. */
    ALWAYS;

    /**
     * The mode named {@code name}, case-insensitively.
     *
     * @throws IllegalArgumentException naming the modes otherwise
     */
    @com.fasterxml.jackson.annotation.JsonCreator
    public static RemoteHostRewrite of(String name) {
      for (RemoteHostRewrite r : values()) {
        if (r.toString().equals(name.trim().toLowerCase(Locale.ROOT))) {
          return r;
        }
      }
      throw new io.kvroute.config.ConfigException(
          "", "must be one of never, localhost, always; was \"" + name + "\"");
    }

    /** The name as configurations write it. */
    @Override
    public String toString() {
      return name().toLowerCase(Locale.ROOT);
    }
  }

  /**
   * The parameters of {@code nixl}.
   *
   * @param remoteHostRewrite what to do with the {@code remote_host} the prefiller reports (default
   *     {@code never})
   * @param maxPrefillResponseBytes as in {@link HttpParameters}
   */
  public record Parameters(RemoteHostRewrite remoteHostRewrite, Integer maxPrefillResponseBytes) {
    /** Fills in the defaults and checks the values. */
    public Parameters {
      remoteHostRewrite = remoteHostRewrite == null ? RemoteHostRewrite.NEVER : remoteHostRewrite;
      HttpParameters http = HttpParameters.of(maxPrefillResponseBytes);
      maxPrefillResponseBytes = http.maxPrefillResponseBytes();
    }

    /** The common HTTP parameters. */
    public HttpParameters http() {
      return HttpParameters.of(maxPrefillResponseBytes);
    }
  }

  private static final Set<String> LOOPBACK =
      Set.of("localhost", "127.0.0.1", "::1", "0.0.0.0", "::", "localhost.localdomain");

  private final RemoteHostRewrite rewrite;

  /** A connector in {@code context}; its {@code config:} block binds to {@link Parameters}. */
  public NixlConnector(KVConnectorProvider.Context context) {
    this(context, ConnectorParameters.bind(context.config(), Parameters.class));
  }

  /** A connector in {@code context} with {@code parameters}. */
  public NixlConnector(KVConnectorProvider.Context context, Parameters parameters) {
    super(context, parameters.http());
    this.rewrite = parameters.remoteHostRewrite();
  }

  @Override
  public String type() {
    return TYPE;
  }

  /**
   * The prefill body for {@code body} (which must already be free of client transfer fields),
   * exactly as vLLM's reference NIXL proxy builds it.
   */
  static ObjectNode prefillBody(ObjectNode body) {
    ObjectNode params = JsonNodeFactory.instance.objectNode();
    params.put("do_remote_decode", true);
    params.put("do_remote_prefill", false);
    params.putNull("remote_engine_id");
    params.putNull("remote_block_ids");
    params.putNull("remote_host");
    params.putNull("remote_port");
    return OpenAiJson.oneTokenPrefill(body, params);
  }

  @Override
  public CompletableFuture<DecodeRequest> prepareDecode(PdRequest pd) {
    return prepareDisaggregated(
        pd, body -> afterPrefill(pd, prefillBody(body), answer -> decodeAfter(pd, body, answer)));
  }

  private DecodeRequest decodeAfter(PdRequest pd, ObjectNode body, ObjectNode answer) {
    Map<String, String> attrs = new LinkedHashMap<>();
    attrs.put("mode", "prefill_decode");
    JsonNode reason = answer.path("choices").path(0).path("finish_reason");
    if (reason.isTextual()) {
      attrs.put("prefill_finish_reason", reason.textValue());
    }
    if (answer.get("kv_transfer_params") instanceof ObjectNode params && params.size() > 0) {
      ObjectNode copy = params.deepCopy();
      rewriteRemoteHost(copy, pd.prefill());
      body.set("kv_transfer_params", copy);
      attrs.put("kv_transfer_params", "present");
    } else {
      attrs.put("kv_transfer_params", "absent");
      listener.connectorEvent(TYPE, EVENT_NO_PARAMS);
    }
    return decodeRequest(pd, body, attrs);
  }

  private void rewriteRemoteHost(ObjectNode params, Endpoint prefill) {
    if (rewrite == RemoteHostRewrite.NEVER) {
      return;
    }
    JsonNode host = params.get("remote_host");
    boolean replace =
        rewrite == RemoteHostRewrite.ALWAYS
            || host == null
            || host.isNull()
            || (host.isTextual() && isLoopback(host.textValue()));
    if (replace && !(host != null && prefill.host().equals(host.asText()))) {
      params.put("remote_host", prefill.host());
      listener.connectorEvent(TYPE, EVENT_HOST_REWRITTEN);
    }
  }

  private static boolean isLoopback(String host) {
    String h = host.trim().toLowerCase(Locale.ROOT);
    if (h.startsWith("[") && h.endsWith("]")) {
      h = h.substring(1, h.length() - 1);
    }
    return LOOPBACK.contains(h) || h.startsWith("127.");
  }

  /** The ServiceLoader provider of {@code nixl}. */
  public static final class Provider extends TypedConnectorProvider<Parameters> {
    /** For ServiceLoader. */
    public Provider() {
      super(
          TYPE,
          "vLLM NixlConnector: non-streamed prefill with do_remote_decode, its"
              + " kv_transfer_params forwarded to the streamed decode",
          Parameters.class,
          NixlConnector::new);
    }
  }
}
