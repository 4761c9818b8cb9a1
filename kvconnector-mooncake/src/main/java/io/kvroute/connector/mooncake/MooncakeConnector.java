package io.kvroute.connector.mooncake;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.config.Checks;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.http.ConcurrentHttpConnector;
import io.kvroute.connector.http.ConnectorParameters;
import io.kvroute.connector.http.HttpParameters;
import io.kvroute.connector.http.OpenAiJson;
import io.kvroute.connector.http.TypedConnectorProvider;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * The {@code mooncake} connector: upstream vLLM's {@code MooncakeConnector} (transfer-id rendezvous
 * with both legs in flight together), as vLLM's reference proxy ({@code
 * examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py}) and llm-d's {@code
 * mooncake} sidecar connector speak it (spec §2.3(a)).
 *
 * <ol>
 *   <li><b>Bootstrap.</b> {@code GET http://<prefill host>:<bootstrap port>/query} on the
 *       prefiller's Mooncake bootstrap server returns {@code {"<dp_rank>": {"engine_id": ...},
 *       ...}}. The answer is cached per prefill endpoint for {@code bootstrapCacheTtl} and dropped
 *       when a prefill leg to that endpoint fails (a restarted prefiller has a new engine id). The
 *       rank is the endpoint's {@code kvroute.io/dp-rank} label when present, else the ranks are
 *       used round robin (the reference proxy cycles over them too).
 *   <li><b>Prefill leg</b> (headers {@code X-Request-Id} and {@code X-data-parallel-rank: <rank>}):
 *       the client's body with {@code kv_transfer_params = {do_remote_decode: true,
 *       do_remote_prefill: false, transfer_id: "xfer-<uuid>"}}, {@code stream=false}, {@code
 *       max_tokens=1}, {@code max_completion_tokens=1} only when present, and without {@code
 *       stream_options}, {@code min_tokens}, {@code min_completion_tokens} (vLLM rejects {@code
 *       min_tokens > max_tokens}; the reference proxy forgets this). Its answer carries no transfer
 *       parameters and is only checked for success.
 *   <li><b>Decode leg</b>, sent <em>at the same time</em>: the client's body with {@code
 *       kv_transfer_params = {do_remote_decode: false, do_remote_prefill: true,
 *       remote_bootstrap_addr: "http://<prefill host>:<bootstrap port>", remote_engine_id: <engine
 *       id of the rank>, transfer_id: <the same id>}}.
 * </ol>
 *
 * <p>The transfer id is fresh for every call (so a retry on another pair never reuses one, and two
 * client requests with the same {@code X-Request-Id} never collide). {@link #proxy} hands out the
 * decode stream only once the prefill leg has succeeded as well: a prefill failure cancels decode
 * and fails with a {@link UpstreamException} naming {@link Leg#PREFILL} (retryable on another
 * pair); a decode failure cancels the prefill. Cancelling cancels both legs. A bootstrap failure is
 * a retryable {@code UpstreamException} on the prefill leg (the gateway answers 502 when no pair is
 * left). {@link #prepareDecode} runs the bootstrap, <em>starts</em> the prefill leg (detached: it
 * is bounded by the prefill timeout and reported to the listener, as llm-d does) and returns the
 * decode request for the gateway to send at once.
 *
 * <p>Not Kthena's {@code mooncake} (a copy of its NIXL connector, fitting vllm-ascend's Mooncake
 * connector, which returns {@code kv_transfer_params} like NIXL: use type {@code nixl} for that)
 * and not MooncakeStore: for vLLM behind a shared Mooncake <em>store</em> use {@link
 * MooncakeStoreConnector} ({@code mooncake-store}), the plain two-step flow. A bootstrap failure's
 * message says so, so that a configuration written for the store fails loudly here instead of
 * changing meaning silently.
 *
 * <p>Parameters (the {@code config:} block; {@link Parameters}):
 *
 * <ul>
 *   <li>{@code bootstrapPort} (default 8998, vLLM's {@code VLLM_MOONCAKE_BOOTSTRAP_PORT}): the
 *       prefillers' bootstrap port; an endpoint label {@code kvroute.io/mooncake-bootstrap-port}
 *       overrides it per endpoint.
 *   <li>{@code bootstrapTimeout} (default {@code 5s}): one {@code /query} call.
 *   <li>{@code bootstrapCacheTtl} (default {@code 60s}): how long a {@code /query} answer is
 *       reused.
 *   <li>{@code bootstrapCacheSize} (default 1024): the most prefill endpoints cached; the least
 *       recently used is evicted (reported as {@code connectorEvent("mooncake",
 *       "bootstrap_cache_evicted")}).
 *   <li>{@code maxPrefillResponseBytes} (default 4 MiB).
 * </ul>
 *
 * <p>Thread-safe: the bootstrap cache is a synchronized bounded map; requests share nothing else.
 * The {@code /query} call goes through the shared {@link io.kvroute.connector.HttpTransport} like
 * both legs, so a decorator on it (an allowlist, TLS, tracing) sees it too.
 */
public final class MooncakeConnector extends ConcurrentHttpConnector {

  /** The type name. */
  public static final String TYPE = "mooncake";

  /** Endpoint label pinning the prefill data-parallel rank. */
  public static final String DP_RANK_LABEL = "kvroute.io/dp-rank";

  /** Endpoint label overriding {@code bootstrapPort}. */
  public static final String BOOTSTRAP_PORT_LABEL = "kvroute.io/mooncake-bootstrap-port";

  private final int bootstrapPort;
  private final Duration bootstrapTimeout;
  private final long cacheTtlNanos;
  private final int cacheSize;
  private final Supplier<String> transferIds;
  private final Map<String, Bootstrap> cache;
  private final AtomicInteger roundRobin = new AtomicInteger();

  /**
   * The parameters of {@code mooncake}.
   *
   * @param bootstrapPort the prefillers' Mooncake bootstrap port (default 8998, vLLM's {@code
   *     VLLM_MOONCAKE_BOOTSTRAP_PORT}); the endpoint label {@value #BOOTSTRAP_PORT_LABEL} overrides
   *     it per endpoint
   * @param bootstrapTimeout one {@code /query} call (default {@code 5s}, more than 0)
   * @param bootstrapCacheTtl how long a {@code /query} answer is reused (default {@code 60s}, at
   *     least 0)
   * @param bootstrapCacheSize the most prefill endpoints whose answer is cached, least recently
   *     used evicted first (default 1024, at least 1)
   * @param maxPrefillResponseBytes as in {@link HttpParameters}
   */
  public record Parameters(
      Integer bootstrapPort,
      Duration bootstrapTimeout,
      Duration bootstrapCacheTtl,
      Integer bootstrapCacheSize,
      Integer maxPrefillResponseBytes) {
    /** Fills in the defaults and checks the values. */
    public Parameters {
      bootstrapPort = bootstrapPort == null ? 8998 : bootstrapPort;
      Checks.range("bootstrapPort", bootstrapPort, 1, 65535);
      bootstrapTimeout = bootstrapTimeout == null ? Duration.ofSeconds(5) : bootstrapTimeout;
      if (bootstrapTimeout.isZero() || bootstrapTimeout.isNegative()) {
        throw new ConfigException("bootstrapTimeout", "must be > 0, was " + bootstrapTimeout);
      }
      bootstrapCacheTtl = bootstrapCacheTtl == null ? Duration.ofSeconds(60) : bootstrapCacheTtl;
      if (bootstrapCacheTtl.isNegative()) {
        throw new ConfigException("bootstrapCacheTtl", "must be >= 0, was " + bootstrapCacheTtl);
      }
      bootstrapCacheSize = bootstrapCacheSize == null ? 1024 : bootstrapCacheSize;
      Checks.range("bootstrapCacheSize", bootstrapCacheSize, 1, Integer.MAX_VALUE);
      HttpParameters http = HttpParameters.of(maxPrefillResponseBytes);
      maxPrefillResponseBytes = http.maxPrefillResponseBytes();
    }

    /** The common HTTP parameters. */
    public HttpParameters http() {
      return HttpParameters.of(maxPrefillResponseBytes);
    }
  }

  /** A connector in {@code context}; its {@code config:} block binds to {@link Parameters}. */
  public MooncakeConnector(KVConnectorProvider.Context context) {
    this(context, ConnectorParameters.bind(context.config(), Parameters.class));
  }

  /** A connector in {@code context} with {@code parameters}. */
  public MooncakeConnector(KVConnectorProvider.Context context, Parameters parameters) {
    this(context, parameters, () -> "xfer-" + UUID.randomUUID());
  }

  MooncakeConnector(KVConnectorProvider.Context context, Supplier<String> transferIds) {
    this(context, ConnectorParameters.bind(context.config(), Parameters.class), transferIds);
  }

  private MooncakeConnector(
      KVConnectorProvider.Context context, Parameters parameters, Supplier<String> transferIds) {
    super(context, parameters.http());
    this.transferIds = transferIds;
    this.bootstrapPort = parameters.bootstrapPort();
    this.bootstrapTimeout = parameters.bootstrapTimeout();
    this.cacheTtlNanos = parameters.bootstrapCacheTtl().toNanos();
    this.cacheSize = parameters.bootstrapCacheSize();
    this.cache =
        new LinkedHashMap<>(16, 0.75f, true) {
          private static final long serialVersionUID = 1L;

          @Override
          protected boolean removeEldestEntry(Map.Entry<String, Bootstrap> eldest) {
            if (size() > cacheSize) {
              listener.connectorEvent(TYPE, "bootstrap_cache_evicted");
              return true;
            }
            return false;
          }
        };
  }

  @Override
  public String type() {
    return TYPE;
  }

  /** One prefiller's bootstrap answer: its address and the engine id of each DP rank, by rank. */
  private record Bootstrap(String address, Map<Integer, String> engineIds, long expiresNanos) {}

  private int bootstrapPort(Endpoint prefill) {
    return intLabel(prefill, BOOTSTRAP_PORT_LABEL, bootstrapPort);
  }

  private CompletableFuture<Bootstrap> bootstrap(Endpoint prefill) {
    long now = context.nanoClock().getAsLong();
    synchronized (cache) {
      Bootstrap b = cache.get(prefill.id());
      if (b != null && now - b.expiresNanos() < 0) {
        return CompletableFuture.completedFuture(b);
      }
    }
    int port;
    try {
      port = bootstrapPort(prefill);
    } catch (ConnectorException e) {
      return failed(e);
    }
    Endpoint bootstrapEndpoint =
        Endpoint.builder(prefill.id(), prefill.host(), port).role(prefill.role()).build();
    String address = bootstrapEndpoint.baseUrl();
    CompletableFuture<StreamingResponse> call =
        transport.send(
            HttpTransport.Outbound.get(bootstrapEndpoint, "/query")
                .timeout(bootstrapTimeout)
                .build());
    return cancellable(
            call,
            response -> {
              if (response.status() / 100 != 2) {
                response.cancel();
                throw bootstrapError(
                    prefill,
                    UpstreamException.Kind.STATUS,
                    response.status(),
                    address + "/query answered HTTP " + response.status(),
                    null);
              }
              return response.readAll(maxPrefillResponseBytes());
            })
        .handle(
            (bytes, t) -> {
              if (t != null) {
                Throwable c = CancellableFutures.unwrap(t);
                if (c instanceof UpstreamException u && u.leg() == Leg.PREFILL) {
                  throw u; // already a bootstrap error
                }
                boolean timeout =
                    c instanceof UpstreamException u && u.kind() == UpstreamException.Kind.TIMEOUT;
                throw bootstrapError(
                    prefill,
                    timeout ? UpstreamException.Kind.TIMEOUT : UpstreamException.Kind.IO,
                    0,
                    address + "/query " + (timeout ? "timed out" : "failed: " + c.getMessage()),
                    c);
              }
              Bootstrap b = parse(address, bytes);
              if (b == null) {
                throw bootstrapError(
                    prefill,
                    UpstreamException.Kind.PROTOCOL,
                    0,
                    address + "/query did not answer {\"<dp_rank>\": {\"engine_id\": ...}, ...}",
                    null);
              }
              synchronized (cache) {
                cache.put(prefill.id(), b);
              }
              return b;
            });
  }

  private Bootstrap parse(String address, byte[] bytes) {
    JsonNode n;
    try {
      n = OpenAiJson.readTree(bytes);
    } catch (IOException e) {
      return null;
    }
    if (n == null || !n.isObject() || n.size() == 0) {
      return null;
    }
    Map<Integer, String> ids = new TreeMap<>();
    for (Map.Entry<String, JsonNode> e : n.properties()) {
      JsonNode id = e.getValue().get("engine_id");
      if (id == null || id.isNull() || id.isContainerNode()) {
        return null;
      }
      try {
        ids.put(Integer.parseInt(e.getKey().trim()), id.asText());
      } catch (NumberFormatException ex) {
        return null;
      }
    }
    return new Bootstrap(
        address,
        java.util.Collections.unmodifiableMap(ids),
        context.nanoClock().getAsLong() + cacheTtlNanos);
  }

  private UpstreamException bootstrapError(
      Endpoint prefill, UpstreamException.Kind kind, int status, String what, Throwable cause) {
    listener.connectorEvent(TYPE, "bootstrap_failed");
    return new UpstreamException(
        Leg.PREFILL,
        prefill.id(),
        kind,
        status,
        null,
        null,
        "mooncake bootstrap query to "
            + what
            + " (type mooncake speaks vLLM's MooncakeConnector; a MooncakeStore deployment needs"
            + " type mooncake-store)",
        cause);
  }

  private int rank(Endpoint prefill, Bootstrap b) {
    String pinned = prefill.label(DP_RANK_LABEL);
    if (pinned != null) {
      try {
        int r = Integer.parseInt(pinned.trim());
        if (b.engineIds().containsKey(r)) {
          return r;
        }
      } catch (NumberFormatException e) {
        // fall through to the error below
      }
      throw UpstreamException.protocol(
          Leg.PREFILL,
          prefill.id(),
          "endpoint "
              + prefill.id()
              + " label "
              + DP_RANK_LABEL
              + "=\""
              + pinned
              + "\" names no rank its bootstrap server reports "
              + b.engineIds().keySet(),
          null);
    }
    List<Integer> ranks = new ArrayList<>(b.engineIds().keySet());
    return ranks.get(Math.floorMod(roundRobin.getAndIncrement(), ranks.size()));
  }

  @Override
  protected CompletableFuture<Attempt> attempt(PdRequest pd, ObjectNode body) {
    return cancellable(
        bootstrap(pd.prefill()), b -> CompletableFuture.completedFuture(attempt(pd, body, b)));
  }

  private Attempt attempt(PdRequest pd, ObjectNode body, Bootstrap b) {
    int rank = rank(pd.prefill(), b);
    String transferId = transferIds.get();
    ObjectNode pp = JsonNodeFactory.instance.objectNode();
    pp.put("do_remote_decode", true);
    pp.put("do_remote_prefill", false);
    pp.put("transfer_id", transferId);
    ObjectNode prefill = OpenAiJson.oneTokenPrefill(body, pp);
    Map<String, List<String>> prefillHeaders = legHeaders(pd.request());
    prefillHeaders.put("X-data-parallel-rank", List.of(Integer.toString(rank)));

    ObjectNode dp = JsonNodeFactory.instance.objectNode();
    dp.put("do_remote_decode", false);
    dp.put("do_remote_prefill", true);
    dp.put("remote_bootstrap_addr", b.address());
    dp.put("remote_engine_id", b.engineIds().get(rank));
    dp.put("transfer_id", transferId);
    body.set("kv_transfer_params", dp);
    Map<String, String> attrs = new LinkedHashMap<>();
    attrs.put("mode", "prefill_decode");
    attrs.put("transfer_id", transferId);
    attrs.put("dp_rank", Integer.toString(rank));
    Endpoint endpoint = pd.prefill();
    return new Attempt(
        prefillHeaders,
        prefill,
        decodeRequest(pd, body, attrs),
        t -> {
          if (t != null) {
            // A restarted prefiller has a new engine id: ask its bootstrap server again next time.
            synchronized (cache) {
              cache.remove(endpoint.id());
            }
          }
        });
  }

  /** Prefill endpoints whose bootstrap answer is cached; for tests and diagnostics. */
  public int cachedBootstraps() {
    synchronized (cache) {
      return cache.size();
    }
  }

  /** The ServiceLoader provider of {@code mooncake}. */
  public static final class Provider extends TypedConnectorProvider<Parameters> {
    /** For ServiceLoader. */
    public Provider() {
      super(
          TYPE,
          "vLLM MooncakeConnector: bootstrap /query, then prefill and decode together with a"
              + " shared transfer_id",
          Parameters.class,
          MooncakeConnector::new);
    }
  }
}
