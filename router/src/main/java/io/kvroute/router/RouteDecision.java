package io.kvroute.router;

import io.kvroute.connector.Endpoint;
import io.kvroute.pd.PdOrchestrator;
import io.kvroute.router.flow.FlowController;
import io.kvroute.scoring.Decision;
import io.kvroute.scoring.LatencyPredictor;
import io.kvroute.scoring.ReuseSplit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Where one request should go, for gateways that proxy it themselves: the decode endpoint, the
 * prefill endpoint when the request is disaggregated, fallbacks in order, and the headers to set.
 *
 * <p>The router counts the request in flight from the moment it decides. Call {@link #complete}
 * exactly once when the request ends — success or failure, whichever endpoint finally served it —
 * so in-flight counts, circuit breakers, the approximate-prefix state and session tokens stay
 * right. Further calls are ignored. Thread-safe.
 */
public final class RouteDecision {

  /** How a request ended, as the gateway saw it. */
  public enum Outcome {
    /** The response was delivered. */
    SUCCESS,
    /** The endpoint failed (5xx, timeout, connection error). */
    ENDPOINT_ERROR,
    /** The client's request was rejected (4xx): says nothing about the endpoint's health. */
    CLIENT_ERROR,
    /** The client went away. */
    CANCELLED
  }

  private final KvRouter router;
  private final String model;
  private final Decision decision;
  private final long schedulingNanos;
  private final AtomicBoolean completed = new AtomicBoolean();
  private volatile Endpoint servedDecode;
  private volatile Endpoint servedPrefill;
  // the parity check's sample of this request, or null
  volatile ParityMonitor.Sample paritySample;
  private volatile FlowController.Admission admission;
  private volatile LatencyPredictor.Ticket ticket;

  RouteDecision(KvRouter router, String model, Decision decision, long schedulingNanos) {
    this.router = router;
    this.model = model;
    this.decision = decision;
    this.schedulingNanos = schedulingNanos;
    this.servedDecode = decision.primary().orElse(null);
    this.servedPrefill = decision.prefill().orElse(null);
  }

  /** The model the request names. */
  public String model() {
    return model;
  }

  /** The decode endpoint to send the request to. */
  public Endpoint decode() {
    return decision.primary().orElseThrow();
  }

  /** The prefill endpoint, when the request should be disaggregated. */
  public Optional<Endpoint> prefill() {
    return decision.prefill();
  }

  /** Decode endpoints to fall back to, in order (the primary excluded). */
  public List<Endpoint> fallbacks() {
    List<Endpoint> all = decision.endpoints();
    return all.size() <= 1 ? List.of() : List.copyOf(all.subList(1, all.size()));
  }

  /**
   * The (prefill, decode) pairs to try in order: the primary pair first, then fallbacks; prefill
   * candidates are aligned by index (Kthena's rule), the last one reused when there are fewer.
   */
  public List<PdOrchestrator.Pair> pairs() {
    List<Endpoint> decodes = decision.endpoints();
    List<Endpoint> prefills = decision.disaggregated() ? decision.prefillEndpoints() : List.of();
    List<PdOrchestrator.Pair> out = new ArrayList<>(decodes.size());
    for (int i = 0; i < decodes.size(); i++) {
      Endpoint p = prefills.isEmpty() ? null : prefills.get(Math.min(i, prefills.size() - 1));
      out.add(new PdOrchestrator.Pair(p, decodes.get(i)));
    }
    return Collections.unmodifiableList(out);
  }

  /**
   * Headers to set on the request sent to the decode endpoint ({@code x-prefiller-host-port} when
   * disaggregated, for llm-d-style decode sidecars). Delete any client-sent copies first.
   */
  public Map<String, String> requestHeaders() {
    return decision.requestHeaders();
  }

  /**
   * Headers to write on the client response: the scheduler's (e.g. a session token), plus, when the
   * router's {@code observabilityHeaders} option is on, {@code x-kvroute-decode}, {@code
   * x-kvroute-prefill}, {@code x-kvroute-cached-tokens} (the prompt tokens the decode endpoint
   * holds per the scheduler's index, counted as vLLM counts cached tokens: whole blocks before the
   * prompt's last token, see {@link ReuseSplit#reusableTokens}) and {@code
   * x-kvroute-scheduling-us}.
   */
  public Map<String, String> responseHeaders() {
    Endpoint d = servedDecode;
    Map<String, String> out = new LinkedHashMap<>();
    if (d != null) {
      out.putAll(decision.responseHeaders(d, servedPrefill));
    }
    if (router.observabilityHeaders() && d != null) {
      out.put("x-kvroute-decode", d.id());
      if (servedPrefill != null) {
        out.put("x-kvroute-prefill", servedPrefill.id());
      }
      out.put("x-kvroute-cached-tokens", Long.toString(ReuseSplit.of(decision, d).captured()));
      out.put("x-kvroute-scheduling-us", Long.toString(schedulingNanos / 1000));
    }
    return Collections.unmodifiableMap(out);
  }

  /**
   * The decode endpoint serving the request: the primary until {@link KvRouter#route} moves to a
   * fallback pair.
   */
  public Endpoint servedDecode() {
    return servedDecode;
  }

  /** The prefill endpoint serving the request, when disaggregated (see {@link #servedDecode}). */
  public Optional<Endpoint> servedPrefill() {
    return Optional.ofNullable(servedPrefill);
  }

  /**
   * Prompt tokens the index predicted the engine computing the prompt already holds: the prefill
   * endpoint's prefix-cache match when the request is disaggregated, else the decode endpoint's
   * (from {@link Decision#prefixMatch}, counted as vLLM counts cached tokens; 0 when the scheduler
   * knew nothing): {@link #reuse()}'s {@code captured}.
   */
  public long predictedCachedTokens() {
    return reuse().captured();
  }

  /**
   * The reuse split as the scheduler saw it when it decided, for the endpoint computing the prompt
   * (the serving prefill endpoint when disaggregated, else the serving decode endpoint): the
   * longest prefix any eligible endpoint held ({@code available}) and the prefix that endpoint held
   * ({@code captured}); {@code delivered} is {@link ReuseSplit#UNKNOWN} (the engine's report comes
   * with the response: {@link RouteListener.RequestListener#reuse}).
   */
  public ReuseSplit reuse() {
    Endpoint p = servedPrefill;
    Endpoint e = p != null ? p : servedDecode;
    return e == null ? ReuseSplit.ZERO : ReuseSplit.of(decision, e);
  }

  /** The scheduler's decision, with per-scorer scores for debugging. */
  public Decision scheduling() {
    return decision;
  }

  /** How long the scheduling took. */
  public Duration schedulingTime() {
    return Duration.ofNanos(schedulingNanos);
  }

  /** True when the request was served by a fallback rather than the primary: tell the router. */
  void served(Endpoint decode, Endpoint prefill) {
    this.servedDecode = Objects.requireNonNull(decode, "decode");
    this.servedPrefill = prefill;
  }

  /**
   * Reports that the request ended on the primary pair. Equivalent to {@code complete(decode(),
   * prefill().orElse(null), outcome, latency, ttft)}.
   */
  public void complete(Outcome outcome, Duration latency, Duration ttft) {
    complete(servedDecode, servedPrefill, outcome, latency, ttft);
  }

  /**
   * Reports that the request ended, served by {@code decode} (a fallback, say) and {@code prefill}
   * (nullable). Only the first call counts.
   *
   * @param ttft time to the first token the client saw, or null when unknown
   */
  public void complete(
      Endpoint decode, Endpoint prefill, Outcome outcome, Duration latency, Duration ttft) {
    Objects.requireNonNull(decode, "decode");
    Objects.requireNonNull(outcome, "outcome");
    if (completed.compareAndSet(false, true)) {
      router.completeDecision(this, decode, prefill, outcome, latency, ttft);
    }
  }

  /**
   * The orchestrator that runs this request with its model's connector ({@link KvRouter#route}).
   */
  PdOrchestrator orchestrator() {
    return router.orchestrator(model);
  }

  /**
   * Ends the router's accounting of a request {@link KvRouter#route} ran, the first time only;
   * {@code failed} when no leg delivered.
   */
  void finishRouted(long startNanos, boolean failed) {
    boolean first = completed.compareAndSet(false, true);
    router.finishRoute(startNanos, failed, first);
    if (first) {
      releaseAdmission();
    }
  }

  /** Flow control admitted the request: its admission is released when the request ends. */
  void admitted(FlowController.Admission a) {
    this.admission = a;
  }

  /** Gives the request's flow-control admission back (once). */
  void releaseAdmission() {
    FlowController.Admission a = admission;
    if (a != null) {
      a.release();
    }
  }

  /** The latency predictor's ticket of a request the gateway proxies itself. */
  void ticket(LatencyPredictor.Ticket t) {
    this.ticket = t;
  }

  /**
   * Ends the ticket of a request the gateway proxied: its first token came {@code ttft} after it
   * was sent (null: unknown, nothing is learnt).
   */
  void endTicket(Duration ttft, long nowNanos) {
    LatencyPredictor.Ticket t = ticket;
    if (t == null) {
      return;
    }
    if (ttft == null) {
      t.abandon();
      return;
    }
    t.firstTokenAfter(ttft.toNanos());
    t.finished(nowNanos, 0);
  }

  /** True once {@link #complete} was called. */
  public boolean isCompleted() {
    return completed.get();
  }

  @Override
  public String toString() {
    return "RouteDecision{decode="
        + servedDecode
        + ", prefill="
        + servedPrefill
        + ", fallbacks="
        + fallbacks().size()
        + "}";
  }
}
