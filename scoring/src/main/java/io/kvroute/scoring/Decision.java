package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The scheduler's answer for one request: the decode (or aggregated) endpoints in order, the
 * optional prefill endpoint, the per-profile scores, and the headers to set.
 *
 * <p>Immutable and thread-safe. Pass it back to {@link Scheduler#onRouted} when the request is sent
 * and to {@link Scheduler#onComplete} when it ends, so that in-flight counts, the approximate
 * prefix index, speculative entries and sessions stay right.
 */
public final class Decision {

  /** Header naming the prefill endpoint for a decode-side sidecar or connector (llm-d). */
  public static final String PREFILLER_HEADER = "x-prefiller-host-port";

  /** Why a decision has, or lacks, endpoints. */
  public enum Result {
    /** At least one endpoint was picked. */
    ROUTED,
    /** The request listed no candidate endpoints. */
    NO_CANDIDATES,
    /** The filters left no endpoint (see {@link ProfileResult#emptiedBy()}). */
    ALL_FILTERED,
    /** The request named a profile the scheduler does not have. */
    UNKNOWN_PROFILE
  }

  /** What the PD stage did. */
  public enum PdOutcome {
    /** No prefill profile is configured, or PD is switched off. */
    NOT_CONFIGURED,
    /** The decider (or the request) chose decode only. */
    DECODE_ONLY,
    /** A prefill endpoint was chosen: prefill there, then decode on the primary. */
    PREFILL_DECODE,
    /** PD was wanted but the prefill profile found no endpoint; decode only. */
    PREFILL_UNAVAILABLE
  }

  private final Result result;
  private final SchedulingRequest request;
  private final Map<String, ProfileResult> profiles;
  private final String primaryProfile;
  private final String prefillProfile;
  private final PdOutcome pd;
  private final boolean tokenizationFailed;
  private final int promptTokens;
  final CycleContext context;
  private final Scheduler scheduler;

  Decision(
      Scheduler scheduler,
      Result result,
      SchedulingRequest request,
      Map<String, ProfileResult> profiles,
      String primaryProfile,
      String prefillProfile,
      PdOutcome pd,
      boolean tokenizationFailed,
      int promptTokens,
      CycleContext context) {
    this.scheduler = scheduler;
    this.result = result;
    this.request = request;
    this.profiles = Collections.unmodifiableMap(profiles);
    this.primaryProfile = primaryProfile;
    this.prefillProfile = prefillProfile;
    this.pd = pd;
    this.tokenizationFailed = tokenizationFailed;
    this.promptTokens = promptTokens;
    this.context = context;
  }

  Scheduler scheduler() {
    return scheduler;
  }

  /** Why the decision has (or lacks) endpoints. */
  public Result result() {
    return result;
  }

  /** True when {@link #result()} is {@link Result#ROUTED}. */
  public boolean routed() {
    return result == Result.ROUTED;
  }

  /** The request this decision is for. */
  public SchedulingRequest request() {
    return request;
  }

  /**
   * The decode (or aggregated) endpoints: primary first, then fallbacks in order. Empty unless
   * {@link #routed()}.
   */
  public List<Endpoint> endpoints() {
    ProfileResult p = profiles.get(primaryProfile);
    return p == null ? List.of() : p.endpoints();
  }

  /** The primary endpoint, when routed. */
  public Optional<Endpoint> primary() {
    List<Endpoint> e = endpoints();
    return e.isEmpty() ? Optional.empty() : Optional.of(e.get(0));
  }

  /** The prefill endpoint when the request is disaggregated. */
  public Optional<Endpoint> prefill() {
    List<Endpoint> e = prefillEndpoints();
    return e.isEmpty() ? Optional.empty() : Optional.of(e.get(0));
  }

  /** The prefill endpoints in order (primary first) when disaggregated; else empty. */
  public List<Endpoint> prefillEndpoints() {
    if (pd != PdOutcome.PREFILL_DECODE) {
      return List.of();
    }
    ProfileResult p = profiles.get(prefillProfile);
    return p == null ? List.of() : p.endpoints();
  }

  /** True when a prefill endpoint was chosen. */
  public boolean disaggregated() {
    return pd == PdOutcome.PREFILL_DECODE;
  }

  /** What the PD stage did. */
  public PdOutcome pdOutcome() {
    return pd;
  }

  /** The results of every profile that ran, by profile name, in the order they ran. */
  public Map<String, ProfileResult> profiles() {
    return profiles;
  }

  /** The name of the primary (decode) profile. */
  public String primaryProfile() {
    return primaryProfile;
  }

  /**
   * Per endpoint id, the primary profile's scores (see {@link ProfileResult#scores()}); empty when
   * nothing was scored.
   */
  public Map<String, Map<String, Double>> scores() {
    ProfileResult p = profiles.get(primaryProfile);
    return p == null ? Map.of() : p.scores();
  }

  /**
   * How much of this request's prompt {@code endpoint} holds: from the precise index (plus
   * speculative entries) when the request had token ids and an index is configured, else from the
   * approximate index, as seen when the decision was made. {@link PrefixCacheMatch#NONE} for an
   * endpoint that was not a candidate of a routed decision.
   */
  public PrefixCacheMatch prefixMatch(Endpoint endpoint) {
    Objects.requireNonNull(endpoint, "endpoint");
    if (context == null || !request.candidates().contains(endpoint)) {
      return PrefixCacheMatch.NONE;
    }
    synchronized (context) {
      return context.prefixMatch(endpoint);
    }
  }

  /** True when the remote tokenizer failed and the request was scheduled without token ids. */
  public boolean tokenizationFailed() {
    return tokenizationFailed;
  }

  /** Prompt tokens the decision was based on, or -1 when unknown. */
  public int promptTokens() {
    return promptTokens;
  }

  /**
   * Headers to set on the request sent to the primary endpoint: {@code x-prefiller-host-port} when
   * disaggregated. A gateway must delete any client-sent copy of these headers first.
   */
  public Map<String, String> requestHeaders() {
    Optional<Endpoint> p = prefill();
    return p.isPresent() ? Map.of(PREFILLER_HEADER, p.get().hostPort()) : Map.of();
  }

  /**
   * Headers to write on the response to the client when the request was served by the primary (and
   * the prefill) endpoint — for example the stateless session token.
   */
  public Map<String, String> responseHeaders() {
    return primary().map(e -> responseHeaders(e, prefill().orElse(null))).orElse(Map.of());
  }

  /**
   * Headers to write on the response when the request was finally served by {@code decode} (a
   * fallback, say) and {@code prefill} (nullable).
   */
  public Map<String, String> responseHeaders(Endpoint decode, Endpoint prefill) {
    Map<String, String> out = new LinkedHashMap<>();
    scheduler.collectResponseHeaders(this, decode, prefill, out);
    return Collections.unmodifiableMap(out);
  }

  String prefillProfileName() {
    return prefillProfile;
  }

  @Override
  public String toString() {
    return "Decision{"
        + result
        + ", endpoints="
        + endpoints().stream().map(Endpoint::id).toList()
        + (disaggregated() ? ", prefill=" + prefill().get().id() : "")
        + ", pd="
        + pd
        + "}";
  }
}
