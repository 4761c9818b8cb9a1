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
   * Disaggregates when the prompt tokens not already cached on the chosen decode endpoint number
   * more than {@code nonCachedTokens}: {@code promptTokens − matchedBlocks × blockSize >
   * nonCachedTokens}. kvroute's default is 10, as the llm-d seed documents ("default: 10 new
   * tokens"); upstream llm-d's {@code prefix-based-pd-decider} defaults {@code nonCachedTokens} to
   * 0, which there means "never", and compares with {@code >=}. Here 0 means "whenever any token is
   * uncached". Without token ids (and no estimate) it does not disaggregate.
   *
   * @throws IllegalArgumentException when {@code nonCachedTokens < 0}
   */
  static PdDecider prefixBased(int nonCachedTokens) {
    if (nonCachedTokens < 0) {
      throw new IllegalArgumentException("nonCachedTokens must be >= 0, was " + nonCachedTokens);
    }
    return new PdDecider() {
      @Override
      public boolean disaggregate(SchedulingContext context, Endpoint decode) {
        int prompt = context.promptTokens();
        if (prompt <= 0) {
          return false;
        }
        PrefixCacheMatch m = context.prefixMatch(decode);
        long cached = Math.min(prompt, m.cachedTokens());
        return prompt - cached > nonCachedTokens;
      }

      @Override
      public String name() {
        return "prefix-based-pd-decider";
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
