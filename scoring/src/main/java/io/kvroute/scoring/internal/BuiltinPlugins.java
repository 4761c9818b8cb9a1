package io.kvroute.scoring.internal;

import io.kvroute.config.ConfigException;
import io.kvroute.scoring.PdDecider;
import io.kvroute.scoring.Pickers;
import io.kvroute.scoring.ProfileHandler;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulerPlugin;
import io.kvroute.scoring.SchedulerPluginProvider.NoParameters;

/**
 * kvroute's pickers, PD deciders, profile handlers and the approximate prefix producer, registered
 * through {@code META-INF/services} (filters and scorers are in {@link BuiltinFilters} and {@link
 * BuiltinScorers}).
 */
public final class BuiltinPlugins {
  private BuiltinPlugins() {}

  /**
   * The pickers' parameters.
   *
   * @param maxNumOfEndpoints endpoints returned: the primary and its fallbacks (default 1)
   */
  public record Picking(Integer maxNumOfEndpoints) {
    /** Applies the default. */
    public Picking {
      maxNumOfEndpoints = maxNumOfEndpoints == null ? 1 : maxNumOfEndpoints;
    }
  }

  /** {@code max-score-picker}. */
  public static final class MaxScorePicker extends Builtin<Picking> {
    /** The provider. */
    public MaxScorePicker() {
      super(
          "max-score-picker",
          Picking.class,
          (p, c) -> SchedulerPlugin.picker(Pickers.maxScore(c.name(), p.maxNumOfEndpoints())));
    }
  }

  /** {@code random-picker}. */
  public static final class RandomPicker extends Builtin<Picking> {
    /** The provider. */
    public RandomPicker() {
      super(
          "random-picker",
          Picking.class,
          (p, c) -> SchedulerPlugin.picker(Pickers.random(c.name(), p.maxNumOfEndpoints())));
    }
  }

  /** {@code weighted-random-picker}. */
  public static final class WeightedRandomPicker extends Builtin<Picking> {
    /** The provider. */
    public WeightedRandomPicker() {
      super(
          "weighted-random-picker",
          Picking.class,
          (p, c) ->
              SchedulerPlugin.picker(Pickers.weightedRandom(c.name(), p.maxNumOfEndpoints())));
    }
  }

  /**
   * {@code prefix-based-pd-decider}, with llm-d's names, defaults and semantics (see {@link
   * PdDecider#prefixBased(int, int)}).
   *
   * @param nonCachedTokens disaggregate when at least this many prompt tokens are not cached on the
   *     decode endpoint; 0 (the default, as in llm-d) turns the decider off
   * @param promptTokens do not disaggregate prompts shorter than this (0, the default: no gate)
   */
  public record PrefixDecider(Integer nonCachedTokens, Integer promptTokens) {
    /** Applies the defaults. */
    public PrefixDecider {
      nonCachedTokens = nonCachedTokens == null ? 0 : nonCachedTokens;
      promptTokens = promptTokens == null ? 0 : promptTokens;
      if (nonCachedTokens < 0) {
        throw new ConfigException("nonCachedTokens", "must be >= 0, was " + nonCachedTokens);
      }
      if (promptTokens < 0) {
        throw new ConfigException("promptTokens", "must be >= 0, was " + promptTokens);
      }
    }
  }

  /** {@code prefix-based-pd-decider}. */
  public static final class PrefixBasedPdDecider extends Builtin<PrefixDecider> {
    /** The provider. */
    public PrefixBasedPdDecider() {
      super(
          "prefix-based-pd-decider",
          PrefixDecider.class,
          (p, c) ->
              SchedulerPlugin.pdDecider(
                  PdDecider.prefixBased(p.nonCachedTokens(), p.promptTokens())));
    }
  }

  /** {@code always-disagg-pd-decider}. */
  public static final class AlwaysDisaggPdDecider extends Builtin<NoParameters> {
    /** The provider. */
    public AlwaysDisaggPdDecider() {
      super(
          "always-disagg-pd-decider",
          NoParameters.class,
          (p, c) -> SchedulerPlugin.pdDecider(PdDecider.always()));
    }
  }

  /**
   * {@code approx-prefix-cache-producer}: the approximate index's geometry.
   *
   * @param blockSizeTokens tokens per block (default 64)
   * @param maxPrefixBlocksToMatch blocks per prompt when {@code maxPrefixTokensToMatch} is 0
   *     (default 2048)
   * @param maxPrefixTokensToMatch tokens per prompt (default 131072; 0: use the block count)
   * @param lruCapacityPerServer block hashes remembered per endpoint (default 31,250)
   * @param autoTune llm-d's, accepted and ignored
   * @param blockSize llm-d's old name, accepted and ignored
   */
  public record ApproxProducer(
      Integer blockSizeTokens,
      Integer maxPrefixBlocksToMatch,
      Integer maxPrefixTokensToMatch,
      Integer lruCapacityPerServer,
      Object autoTune,
      Object blockSize) {
    /** Validates and applies the defaults. */
    public ApproxProducer {
      blockSizeTokens = blockSizeTokens == null ? 64 : blockSizeTokens;
      if (blockSizeTokens < 1) {
        throw new ConfigException("blockSizeTokens", "must be >= 1, was " + blockSizeTokens);
      }
      maxPrefixBlocksToMatch = maxPrefixBlocksToMatch == null ? 2048 : maxPrefixBlocksToMatch;
      maxPrefixTokensToMatch = maxPrefixTokensToMatch == null ? 131_072 : maxPrefixTokensToMatch;
      lruCapacityPerServer = lruCapacityPerServer == null ? 31_250 : lruCapacityPerServer;
    }
  }

  /** {@code approx-prefix-cache-producer}. */
  public static final class ApproxPrefixCacheProducer extends Builtin<ApproxProducer> {
    /** The provider. */
    public ApproxPrefixCacheProducer() {
      super(
          "approx-prefix-cache-producer",
          ApproxProducer.class,
          (p, c) -> {
            int bs = p.blockSizeTokens();
            int blocks =
                p.maxPrefixTokensToMatch() > 0
                    ? p.maxPrefixTokensToMatch() / bs
                    : p.maxPrefixBlocksToMatch();
            int lru = p.lruCapacityPerServer();
            return SchedulerPlugin.dataProducer(b -> b.approximatePrefix(bs, blocks, lru));
          });
    }
  }

  /**
   * {@code single-profile-handler}.
   *
   * @param profile the profile that runs (default: the first)
   */
  public record Single(String profile) {}

  /** {@code single-profile-handler}: one profile, no PD. */
  public static final class SingleProfileHandler extends Builtin<Single> {
    /** The provider. */
    public SingleProfileHandler() {
      super(
          "single-profile-handler",
          Single.class,
          (p, c) ->
              SchedulerPlugin.profileHandler(
                  s -> {
                    if (p.profile() != null) {
                      s.primaryProfile(s.profile(p.profile(), "profile"));
                    }
                  }));
    }
  }

  /**
   * {@code disagg-profile-handler}.
   *
   * @param profiles the decode and prefill profiles' names
   * @param deciders the PD decider plugin that decides per request
   * @param stageOrder {@code decode-first} (the only order supported)
   * @param enabled kvroute's switch for PD (default true)
   */
  public record Disagg(Profiles profiles, Deciders deciders, String stageOrder, Boolean enabled) {
    /** Validates and applies the defaults. */
    public Disagg {
      profiles = profiles == null ? new Profiles(null, null, null) : profiles;
      deciders = deciders == null ? new Deciders(null, null) : deciders;
      stageOrder = stageOrder == null ? "decode-first" : stageOrder;
      if (!stageOrder.equals("decode-first")) {
        throw new ConfigException(
            "stageOrder", "only decode-first is supported, was \"" + stageOrder + "\"");
      }
      enabled = enabled == null || enabled;
    }
  }

  /**
   * {@code disagg-profile-handler.profiles}.
   *
   * @param decode the decode profile (default {@code decode})
   * @param prefill the prefill profile (default {@code prefill}, when it exists)
   * @param encode not supported
   */
  public record Profiles(String decode, String prefill, String encode) {
    /** Validates. */
    public Profiles {
      if (encode != null) {
        throw new ConfigException("encode", "encode disaggregation (E/P/D) is not supported");
      }
    }
  }

  /**
   * {@code disagg-profile-handler.deciders}.
   *
   * @param prefill the PD decider plugin's name
   * @param encode not supported
   */
  public record Deciders(String prefill, String encode) {
    /** Validates. */
    public Deciders {
      if (encode != null) {
        throw new ConfigException("encode", "encode disaggregation (E/P/D) is not supported");
      }
    }
  }

  /** {@code disagg-profile-handler}: decode first, then a prefill when the decider says so. */
  public static final class DisaggProfileHandler extends Builtin<Disagg> {
    /** The provider. */
    public DisaggProfileHandler() {
      super(
          "disagg-profile-handler",
          Disagg.class,
          (p, c) ->
              SchedulerPlugin.profileHandler(
                  pd(
                      p.profiles().decode(),
                      "profiles.decode",
                      p.profiles().prefill(),
                      "profiles.prefill",
                      p.deciders().prefill(),
                      "deciders.prefill",
                      null,
                      p.enabled())));
    }
  }

  /**
   * {@code pd-profile-handler}, llm-d's deprecated PD handler.
   *
   * @param decodeProfile the decode profile (default {@code decode})
   * @param prefillProfile the prefill profile (default {@code prefill}, when it exists)
   * @param deciderPluginName the PD decider plugin's name
   * @param threshold without a decider: a prefix-based decider with this many non-cached tokens
   * @param enabled kvroute's switch for PD (default true)
   * @param hashBlockSize llm-d's, accepted and ignored
   * @param primaryPort llm-d's, accepted and ignored
   */
  public record PdHandler(
      String decodeProfile,
      String prefillProfile,
      String deciderPluginName,
      Integer threshold,
      Boolean enabled,
      Object hashBlockSize,
      Object primaryPort) {
    /** Validates and applies the default. */
    public PdHandler {
      enabled = enabled == null || enabled;
      if (threshold != null && threshold < 0) {
        throw new ConfigException("threshold", "must be >= 0, was " + threshold);
      }
    }
  }

  /** {@code pd-profile-handler}. */
  public static final class PdProfileHandler extends Builtin<PdHandler> {
    /** The provider. */
    public PdProfileHandler() {
      super(
          "pd-profile-handler",
          PdHandler.class,
          (p, c) ->
              SchedulerPlugin.profileHandler(
                  pd(
                      p.decodeProfile(),
                      "decodeProfile",
                      p.prefillProfile(),
                      "prefillProfile",
                      p.deciderPluginName(),
                      "deciderPluginName",
                      p.threshold(),
                      p.enabled())));
    }
  }

  /** The PD handlers' logic: profiles checked, decider looked up, PD switched. */
  private static ProfileHandler pd(
      String decode,
      String decodeField,
      String prefill,
      String prefillField,
      String decider,
      String deciderField,
      Integer legacyThreshold,
      boolean enabled) {
    return s -> {
      s.primaryProfile(s.profile(decode == null ? Scheduler.DECODE_PROFILE : decode, decodeField));
      String pre = prefill == null ? Scheduler.PREFILL_PROFILE : prefill;
      boolean hasPrefill = s.profiles().contains(pre);
      if (prefill != null) {
        s.profile(prefill, prefillField);
      }
      if (hasPrefill) {
        s.prefillProfile(pre);
      }
      if (decider != null) {
        PdDecider d = s.decider(decider, deciderField);
        if (!hasPrefill) {
          throw s.invalid(
              prefillField,
              "a PD decider is set but the prefill profile \""
                  + pre
                  + "\" does not exist; known: "
                  + String.join(", ", s.profiles()));
        }
        s.pdDecider(d).pdEnabled(enabled);
      } else if (legacyThreshold != null) {
        // legacy llm-d pd-profile-handler: threshold 0 skipped the check (always prefill); else
        // prefill iff the uncached part >= threshold
        s.pdDecider(
                legacyThreshold == 0 ? PdDecider.always() : PdDecider.prefixBased(legacyThreshold))
            .pdEnabled(enabled && hasPrefill);
      }
    };
  }
}
