package io.kvroute.router.flow;

import io.kvroute.connector.Endpoint;
import io.kvroute.scoring.Decision;
import io.kvroute.scoring.LatencyPredictor;
import io.kvroute.scoring.LatencySlo;
import io.kvroute.scoring.ProfileResult;
import java.util.List;
import java.util.Objects;

/**
 * Flow control's latency rule, applied to a scheduled request before it is sent: whether the
 * endpoint the scheduler chose is predicted ({@link LatencyPredictor}) to meet the request's
 * objective in the time it has left. When it is not, the request waits for the load to change
 * ({@link Verdict#WAIT}), unless no candidate could meet it even idle in the time left ({@link
 * Verdict#UNATTAINABLE}: refused as {@code slo-unattainable}). A request without a TTFT objective,
 * or a predictor that has not learnt enough yet, always passes.
 *
 * <p>Stateless and thread-safe.
 */
public final class SloGate {
  private SloGate() {}

  /** What to do with a scheduled request. */
  public enum Verdict {
    /** Send it. */
    SEND,
    /** Hold it until the load changes, then schedule it again. */
    WAIT,
    /** Refuse it: no endpoint can meet its objective any more. */
    UNATTAINABLE
  }

  /**
   * The verdict on {@code decision} (routed) for a request that has waited {@code waitedNanos}
   * since it arrived.
   */
  public static Verdict check(
      Decision decision, LatencyPredictor predictor, LatencySlo slo, long waitedNanos) {
    Objects.requireNonNull(decision, "decision");
    Objects.requireNonNull(predictor, "predictor");
    Objects.requireNonNull(slo, "slo");
    long ttftBound = slo.ttftNanos();
    if (ttftBound == 0 || !decision.routed()) {
      return Verdict.SEND;
    }
    long left = ttftBound - waitedNanos;
    Endpoint chosen = decision.prefill().orElse(decision.primary().orElseThrow());
    int prompt = Math.max(0, decision.promptTokens());
    long cached = Math.min(prompt, decision.prefixMatch(chosen).cachedTokens());
    LatencyPredictor.Prediction p = predictor.predict(chosen.id(), prompt - cached, cached);
    if (!p.knowsTtft()) {
      return Verdict.SEND;
    }
    if (left > 0 && p.ttftNanos() <= left) {
      return Verdict.SEND;
    }
    // Could any candidate meet it idle, in the time left?
    List<Endpoint> candidates = List.of(chosen);
    for (ProfileResult r : decision.profiles().values()) {
      if (r.endpoints().contains(chosen)) {
        candidates = r.candidates();
        break;
      }
    }
    long best = Long.MAX_VALUE;
    for (Endpoint e : candidates) {
      long c = Math.min(prompt, decision.prefixMatch(e).cachedTokens());
      LatencyPredictor.Prediction idle = predictor.predictIdle(e.id(), prompt - c, c);
      if (idle.knowsTtft()) {
        best = Math.min(best, idle.ttftNanos());
      }
    }
    return best <= left ? Verdict.WAIT : Verdict.UNATTAINABLE;
  }
}
