package io.kvroute.connector.nixl;

import io.kvroute.config.Checks;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.connector.Leg;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.http.AbstractHttpConnector;
import io.kvroute.connector.http.ConnectorParameters;
import io.kvroute.connector.http.HttpParameters;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The {@code fallback} connector: a chain of connectors tried in order for a prefill endpoint, in
 * the spirit of vLLM's {@code MultiConnector}, typically {@code chain: [nixl, http]}: speak NIXL to
 * prefillers that run vLLM's {@code NixlConnector}, and the plain two-step protocol to those that
 * do not.
 *
 * <p><b>"Does not speak it"</b>, precisely. A chain member is skipped for a prefill endpoint when,
 * on that endpoint,
 *
 * <ol>
 *   <li>the member's prefill leg was answered with HTTP 400 or 422 whose body mentions {@code
 *       kv_transfer_params} (a server that validates fields strictly and does not know the field):
 *       the <em>same request</em> is then retried at once with the next member on the same pair; or
 *   <li>the member's prefill answered 2xx with {@code finish_reason "length"} (the one-token cap
 *       was hit, so a NIXL prefiller would have kept the KV and returned parameters) but
 *       <em>without</em> {@code kv_transfer_params} (decode attributes {@code
 *       kv_transfer_params=absent} and {@code prefill_finish_reason=length}, as {@link
 *       NixlConnector} reports them). The request goes on to decode without parameters, exactly as
 *       the next member would have sent it (the prefill already ran, so a shared store such as
 *       LMCache holds its KV), and later requests to that prefill endpoint use the next member
 *       directly.
 * </ol>
 *
 * A prefill that ends with EOS or a stop string ({@code finish_reason "stop"}) without parameters
 * is normal NIXL behaviour and marks nothing. A marked (endpoint, member) pair is remembered for
 * {@code fallbackTtl}, then the member is tried again (pods restart with new configurations). Each
 * fallback is reported as {@code connectorEvent("fallback", "fallback")}; evictions from the full
 * memory as {@code "fallback_memory_evicted"}. The last member is never skipped. Decode-only
 * requests go to the first member. Every {@link KVConnector.DecodeRequest} carries the attribute
 * {@code connector=<member type>}.
 *
 * <p>Parameters (the {@code config:} block; {@link Parameters}):
 *
 * <ul>
 *   <li>{@code chain} (default {@code [nixl, http]}): the member types in order, as a list. At
 *       least one; {@code fallback} itself and the concurrent types {@code mooncake} and {@code
 *       sglang} are not allowed (a member's decode leg is sent by this connector after the member's
 *       prefill finished). Members are found with {@link KVConnectors#discover} on this class's
 *       class loader and created with the same context; each receives the other keys of this block
 *       that it declares (one that declares none receives them all), and a key no member takes is
 *       refused.
 *   <li>{@code fallbackTtl} (default {@code 5m}): how long a prefill endpoint stays marked as not
 *       speaking a member's protocol.
 *   <li>{@code fallbackMemorySize} (default 4096): the most (endpoint, member) marks kept; the
 *       least recently used is evicted beyond that.
 *   <li>{@code maxPrefillResponseBytes}: as for every HTTP connector.
 * </ul>
 *
 * <p>Thread-safe: the marks live in a synchronized bounded map.
 */
public final class FallbackConnector extends AbstractHttpConnector {

  /** The type name. */
  public static final String TYPE = "fallback";

  /** The event reported when a member is skipped or marked for a prefill endpoint. */
  public static final String EVENT_FALLBACK = "fallback";

  private static final Set<String> NOT_CHAINABLE = Set.of(TYPE, "mooncake", "sglang");

  private final List<KVConnector> members;
  private final long ttlNanos;
  private final int memorySize;
  private final Map<String, Long> marks;

  /**
   * The parameters of {@code fallback} itself. The {@code config:} block may hold the chain
   * members' parameters too: each member gets the keys it declares (a member that declares none
   * gets every key that is not {@code fallback}'s own), and a key no member and not {@code
   * fallback} takes is refused.
   *
   * @param chain the member types in order (default {@code [nixl, http]}); at least one, never
   *     {@code fallback}, {@code mooncake} or {@code sglang}
   * @param fallbackTtl how long a prefill endpoint stays marked as not speaking a member's protocol
   *     (default {@code 5m}, at least 0)
   * @param fallbackMemorySize the most (endpoint, member) marks kept, least recently used evicted
   *     first (default 4096, at least 1)
   * @param maxPrefillResponseBytes as in {@link HttpParameters}; also passed to the members
   */
  public record Parameters(
      List<String> chain,
      Duration fallbackTtl,
      Integer fallbackMemorySize,
      Integer maxPrefillResponseBytes) {
    /** Fills in the defaults and checks the values. */
    public Parameters {
      chain = chainOf(chain);
      fallbackTtl = fallbackTtl == null ? Duration.ofMinutes(5) : fallbackTtl;
      if (fallbackTtl.isNegative()) {
        throw new ConfigException("fallbackTtl", "must be >= 0, was " + fallbackTtl);
      }
      fallbackMemorySize = fallbackMemorySize == null ? 4096 : fallbackMemorySize;
      Checks.range("fallbackMemorySize", fallbackMemorySize, 1, Integer.MAX_VALUE);
      HttpParameters http = HttpParameters.of(maxPrefillResponseBytes);
      maxPrefillResponseBytes = http.maxPrefillResponseBytes();
    }

    /** The common HTTP parameters. */
    public HttpParameters http() {
      return HttpParameters.of(maxPrefillResponseBytes);
    }
  }

  /** Keys only {@code fallback} takes; the members never see them. */
  private static final Set<String> OWN_ONLY = Set.of("chain", "fallbackTtl", "fallbackMemorySize");

  /** A chain built from {@code context.config().params()}, members found by ServiceLoader. */
  public FallbackConnector(KVConnectorProvider.Context context) {
    this(context, KVConnectors.discover(FallbackConnector.class.getClassLoader()));
  }

  /** A chain whose members come from {@code registry}. */
  public FallbackConnector(KVConnectorProvider.Context context, KVConnectors registry) {
    this(context, registry, Split.of(context.config(), registry));
  }

  private FallbackConnector(
      KVConnectorProvider.Context context, KVConnectors registry, Split split) {
    super(context, split.own().http());
    this.ttlNanos = split.own().fallbackTtl().toNanos();
    this.memorySize = split.own().fallbackMemorySize();
    List<KVConnector> built = new ArrayList<>();
    for (int i = 0; i < split.own().chain().size(); i++) {
      String type = split.own().chain().get(i);
      built.add(
          registry.create(
              KVConnectorProvider.Context.builder(
                      context.config().withType(type).withParams(split.members().get(i)),
                      context.transport(),
                      context.scheduler())
                  .listener(context.listener())
                  .nanoClock(context.nanoClock())
                  .build()));
    }
    this.members = List.copyOf(built);
    this.marks =
        new LinkedHashMap<>(16, 0.75f, true) {
          private static final long serialVersionUID = 1L;

          @Override
          protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
            if (size() > memorySize) {
              listener.connectorEvent(TYPE, "fallback_memory_evicted");
              return true;
            }
            return false;
          }
        };
  }

  /**
   * The {@code config:} block split into {@code fallback}'s own parameters and each member's.
   *
   * @param own the bound parameters of {@code fallback}
   * @param members each chain member's parameters, in chain order
   */
  private record Split(Parameters own, List<Map<String, Object>> members) {
    static Split of(ConnectorConfig config, KVConnectors registry) {
      Map<String, Object> params = config.params();
      Set<String> ownKeys = ConnectorParameters.names(Parameters.class);
      Map<String, Object> ownParams = new LinkedHashMap<>();
      params.forEach(
          (k, v) -> {
            if (ownKeys.contains(k)) {
              ownParams.put(k, v);
            }
          });
      Parameters own = ConnectorParameters.bind(config.withParams(ownParams), Parameters.class);
      List<KVConnectorProvider> providers = new ArrayList<>();
      List<Set<String>> accepted = new ArrayList<>();
      Set<String> known = new java.util.TreeSet<>(ownKeys);
      for (String type : own.chain()) {
        KVConnectorProvider p;
        try {
          p = registry.provider(type);
        } catch (ConnectorException.UnknownConnectorException e) {
          throw new ConnectorConfigException(
              ConnectorParameters.PATH + ".chain",
              ConfigException.unknown("", "connector type", type, registry.types()).problem());
        }
        providers.add(p);
        Set<String> keys = p.parameters().map(ConnectorParameters::names).orElse(null);
        accepted.add(keys);
        if (keys != null) {
          known.addAll(keys);
        }
      }
      List<Map<String, Object>> members = new ArrayList<>();
      for (int i = 0; i < providers.size(); i++) {
        members.add(new LinkedHashMap<>());
      }
      for (Map.Entry<String, Object> e : params.entrySet()) {
        String key = e.getKey();
        boolean taken = ownKeys.contains(key);
        if (!OWN_ONLY.contains(key)) {
          for (int i = 0; i < providers.size(); i++) {
            Set<String> keys = accepted.get(i);
            if (keys == null || keys.contains(key)) {
              members.get(i).put(key, e.getValue());
              taken = true;
            }
          }
        }
        if (!taken) {
          throw ConnectorParameters.unknown(TYPE, key, known);
        }
      }
      for (int i = 0; i < providers.size(); i++) {
        providers
            .get(i)
            .checkParameters(config.withType(own.chain().get(i)).withParams(members.get(i)));
      }
      return new Split(own, members);
    }
  }

  private static List<String> chainOf(List<String> value) {
    if (value == null) {
      return List.of(NixlConnector.TYPE, "http");
    }
    List<String> out = new ArrayList<>();
    for (String t : value) {
      String type = t == null ? "" : t.trim().toLowerCase(Locale.ROOT);
      if (type.isEmpty()) {
        continue;
      }
      if (NOT_CHAINABLE.contains(type)) {
        throw new ConfigException(
            "chain",
            "must not contain \""
                + type
                + "\" (fallback chains hold sequential connectors such as nixl, lmcache, http)");
      }
      out.add(type);
    }
    if (out.isEmpty()) {
      throw new ConfigException(
          "chain", "must name at least one connector type, e.g. [nixl, http]; was " + value);
    }
    return List.copyOf(out);
  }

  @Override
  public String type() {
    return TYPE;
  }

  /** The member connectors' types, in chain order. */
  public List<String> chainTypes() {
    List<String> t = new ArrayList<>();
    for (KVConnector m : members) {
      t.add(m.type());
    }
    return t;
  }

  @Override
  public CompletableFuture<DecodeRequest> prepareDecode(PdRequest pd) {
    CompletableFuture<DecodeRequest> result = new CompletableFuture<>();
    AtomicReference<CompletableFuture<DecodeRequest>> current = new AtomicReference<>();
    result.whenComplete(
        (r, t) -> {
          CompletableFuture<DecodeRequest> c = current.get();
          if (result.isCancelled() && c != null) {
            c.cancel(true);
          }
        });
    attempt(pd, firstUsable(pd, 0), result, current);
    return result;
  }

  private int firstUsable(PdRequest pd, int from) {
    if (!pd.disaggregated()) {
      return from;
    }
    for (int i = from; i < members.size() - 1; i++) {
      if (!isMarked(pd.prefill().id(), i)) {
        return i;
      }
    }
    return members.size() - 1;
  }

  private void attempt(
      PdRequest pd,
      int index,
      CompletableFuture<DecodeRequest> result,
      AtomicReference<CompletableFuture<DecodeRequest>> current) {
    KVConnector member = members.get(index);
    CompletableFuture<DecodeRequest> f;
    try {
      f = member.prepareDecode(pd);
    } catch (RuntimeException e) {
      result.completeExceptionally(e);
      return;
    }
    current.set(f);
    if (result.isCancelled()) {
      f.cancel(true);
      return;
    }
    f.whenComplete(
        (d, t) -> {
          if (t != null) {
            Throwable cause = CancellableFutures.unwrap(t);
            if (pd.disaggregated()
                && index < members.size() - 1
                && doesNotSpeak(cause)
                && !result.isDone()) {
              mark(pd.prefill().id(), index);
              attempt(pd, firstUsable(pd, index + 1), result, current);
            } else {
              result.completeExceptionally(cause);
            }
            return;
          }
          if (pd.disaggregated()
              && index < members.size() - 1
              && "absent".equals(d.attributes().get("kv_transfer_params"))
              && "length".equals(d.attributes().get("prefill_finish_reason"))) {
            mark(pd.prefill().id(), index);
          }
          Map<String, String> attrs = new LinkedHashMap<>(d.attributes());
          attrs.put("connector", member.type());
          result.complete(d.toBuilder().attributes(attrs).build());
        });
  }

  /** A prefill answered 400/422 naming {@code kv_transfer_params}: the field is not understood. */
  static boolean doesNotSpeak(Throwable t) {
    return t instanceof UpstreamException u
        && u.leg() == Leg.PREFILL
        && u.kind() == UpstreamException.Kind.STATUS
        && (u.upstreamStatus() == 400 || u.upstreamStatus() == 422)
        && u.upstreamBody().map(b -> b.contains("kv_transfer_params")).orElse(false);
  }

  private boolean isMarked(String endpointId, int member) {
    String key = key(endpointId, member);
    synchronized (marks) {
      Long until = marks.get(key);
      if (until == null) {
        return false;
      }
      if (context.nanoClock().getAsLong() - until >= 0) {
        marks.remove(key);
        return false;
      }
      return true;
    }
  }

  private void mark(String endpointId, int member) {
    synchronized (marks) {
      marks.put(key(endpointId, member), context.nanoClock().getAsLong() + ttlNanos);
    }
    listener.connectorEvent(TYPE, EVENT_FALLBACK);
  }

  private String key(String endpointId, int member) {
    return members.get(member).type() + "@" + endpointId;
  }

  /** The (endpoint, member) marks currently remembered; for tests and diagnostics. */
  public int rememberedFallbacks() {
    synchronized (marks) {
      return marks.size();
    }
  }

  @Override
  public void close() {
    for (KVConnector m : members) {
      try {
        m.close();
      } catch (RuntimeException e) {
        // closing the others matters more
      }
    }
  }

  /** The ServiceLoader provider of {@code fallback}. */
  public static final class Provider implements KVConnectorProvider {
    /** For ServiceLoader. */
    public Provider() {}

    @Override
    public String type() {
      return TYPE;
    }

    @Override
    public String description() {
      return "a chain such as [nixl, http]: the next member for prefill endpoints that do not"
          + " speak the previous one";
    }

    /** {@link Parameters}; the chain members' parameters are accepted too. */
    @Override
    public Optional<Class<? extends Record>> parameters() {
      return Optional.of(Parameters.class);
    }

    /** Checks {@code fallback}'s own parameters, then each member's with the keys it takes. */
    @Override
    public void checkParameters(ConnectorConfig config) {
      Split.of(config, KVConnectors.discover(FallbackConnector.class.getClassLoader()));
    }

    @Override
    public KVConnector create(Context context) {
      return new FallbackConnector(context);
    }
  }
}
