package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;

/**
 * Decides per request whether to disaggregate (run a separate prefill) once the decode endpoint is
 * chosen.
 *
 * <p>Implementations must be thread-safe and non-blocking.
 */
public interface PdDecider {

  /** True to run the prefill profile for this request. */
  boolean disaggregate(SchedulingContext context, Endpoint decode);

  /** A name for metrics and debugging. */
  default String name() {
    return getClass().getSimpleName();
  }

  /**
   * llm-d's {@code prefix-based-pd-decider} without a prompt-length gate: {@code
   * prefixBased(nonCachedTokens, 0)}.
   *
   * @throws IllegalArgumentException when {@code nonCachedTokens < 0}
   */
  static PdDecider prefixBased(int nonCachedTokens) {
    return prefixBased(nonCachedTokens, 0);
  }

  /**
   * llm-d's {@code prefix-based-pd-decider}, with llm-d's semantics (its {@code
   * EndpointPickerConfig} parameters {@code nonCachedTokens} and {@code promptTokens} mean here
   * what they mean there):
   *
   * <ul>
   *   <li>{@code nonCachedTokens == 0}: never disaggregate (the decider is off; llm-d's default);
   *   <li>an unknown prompt length (no token ids, no estimate) or a prompt shorter than {@code
   *       promptTokens} (when {@code promptTokens > 0}) or than {@code nonCachedTokens}: no;
   *   <li>otherwise disaggregate iff the tokens not cached on the chosen decode endpoint number
   *       <b>at least</b> {@code nonCachedTokens}: {@code promptTokens − matchedBlocks × blockSize
   *       ≥ nonCachedTokens}, with the unweighted matched-block count (a CPU-tier hit counts in
   *       full, as in llm-d).
   * </ul>
   *
   * <p>Source: {@code llm-d/llm-d-router:pkg/epp/framework/plugins/scheduling/profilehandler/
   * disagg/prefix_based_pd_decider.go@3a08990d} (the renamed {@code llm-d-inference-scheduler}; "A
   * value of 0 disables disaggregation", {@code nonCached < threshold → no}); {@code promptTokens}
   * as in a later stored copy of the same file ("Zero disables this prompt-length gate"). Older
   * {@code llm-d-inference-scheduler} releases (e.g. {@code
   * pkg/plugins/profile/prefix_based_pd_decider.go@278a3e44}) treated 0 as "always": use {@link
   * #always()} for that.
   *
   * <p>kvroute before this version compared with {@code >} and took 0 as "whenever any token is
   * uncached"; that behaviour is {@code prefixBased(n + 1)} here (1 for the old 0).
   *
   * @throws IllegalArgumentException when a threshold is negative
   */
  static PdDecider prefixBased(int nonCachedTokens, int promptTokens) {
    if (nonCachedTokens < 0) {
      throw new IllegalArgumentException("nonCachedTokens must be >= 0, was " + nonCachedTokens);
    }
    if (promptTokens < 0) {
      throw new IllegalArgumentException("promptTokens must be >= 0, was " + promptTokens);
    }
    return new PdDecider() {
      @Override
      public boolean disaggregate(SchedulingContext context, Endpoint decode) {
        if (nonCachedTokens == 0) {
          return false; // llm-d: 0 disables the decider
        }
        int prompt = context.promptTokens();
        if (prompt <= 0 || prompt < promptTokens || prompt < nonCachedTokens) {
          return false;
        }
        PrefixCacheMatch m = context.prefixMatch(decode);
        long cached = Math.min(prompt, m.cachedTokens());
        return prompt - cached >= nonCachedTokens;
      }

      @Override
      public String name() {
        return "prefix-based-pd-decider";
      }

      @Override
      public String toString() {
        return "prefix-based-pd-decider{nonCachedTokens="
            + nonCachedTokens
            + ", promptTokens="
            + promptTokens
            + "}";
      }
    };
  }

  /** Always disaggregates (when a prefill profile exists). */
  static PdDecider always() {
    return new PdDecider() {
      @Override
      public boolean disaggregate(SchedulingContext context, Endpoint decode) {
        return true;
      }

      @Override
      public String name() {
        return "always-disagg-pd-decider";
      }
    };
  }

  /** Never disaggregates. */
  static PdDecider never() {
    return new PdDecider() {
      @Override
      public boolean disaggregate(SchedulingContext context, Endpoint decode) {
        return false;
      }

      @Override
      public String name() {
        return "never-disagg-pd-decider";
      }
    };
  }
}
