package io.kvroute.router;

import io.kvroute.kvindex.parity.ParityDiagnosis;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The KV-cache parity of one model, as {@link ParityMonitor} last judged it: whether the block
 * hashes kvroute predicted for the model's prompts were the ones its engines published.
 *
 * <p>Immutable value.
 *
 * @param model the model name
 * @param state what the monitor concluded
 * @param ratio predicted block hashes that the chosen engines published, over those predicted, in
 *     the current window of samples (NaN before the first checked sample)
 * @param samples checked samples in that window
 * @param degraded whether the model is routed with approximate scoring because parity failed
 * @param diagnosis the likely cause, when parity failed ({@code ParityCheck.diagnose} on the last
 *     sample that missed)
 * @param endpointRatios the same ratio per endpoint id (their last samples)
 * @param usageMeasured requests of the model whose engine reported {@code cached_tokens}
 * @param usageExact of those, requests where the engine reported exactly the tokens kvroute
 *     predicted it held
 */
public record ParityStatus(
    String model,
    State state,
    double ratio,
    int samples,
    boolean degraded,
    Optional<ParityDiagnosis> diagnosis,
    Map<String, Double> endpointRatios,
    long usageMeasured,
    long usageExact) {

  /** What the monitor concluded for a model. */
  public enum State {
    /** Not enough checked samples yet. */
    UNKNOWN,
    /** Parity holds: the ratio is at or above the threshold. */
    OK,
    /** Parity failed: the ratio fell below the threshold. */
    FAILED
  }

  /** Validates and copies. */
  public ParityStatus {
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(state, "state");
    Objects.requireNonNull(diagnosis, "diagnosis");
    endpointRatios = Map.copyOf(endpointRatios);
  }

  /**
   * One line for a person: {@code model m: parity 1.00 over 64 samples (ok)} or {@code model m:
   * parity 0.00 over 10 samples (FAILED: BLOCK_SIZE: ...; fix: ...; routed with approximate
   * scoring)}.
   */
  public String describe() {
    StringBuilder sb =
        new StringBuilder("model ")
            .append(model)
            .append(": parity ")
            .append(Double.isNaN(ratio) ? "n/a" : String.format(Locale.ROOT, "%.2f", ratio))
            .append(" over ")
            .append(samples)
            .append(" sample(s)");
    if (usageMeasured > 0) {
      sb.append(
          String.format(
              Locale.ROOT,
              "; cached tokens as predicted on %d of %d measured request(s)",
              usageExact,
              usageMeasured));
    }
    sb.append(" (").append(state.name().toLowerCase(Locale.ROOT));
    if (state == State.FAILED) {
      diagnosis.ifPresent(
          d ->
              sb.append(": ")
                  .append(d.cause())
                  .append(": ")
                  .append(d.message())
                  .append("; fix: ")
                  .append(d.fix()));
      sb.append(degraded ? "; routed with approximate scoring" : "; still routed precisely");
    }
    return sb.append(')').toString();
  }
}
