package io.kvroute.scoring;

import java.util.List;
import java.util.function.Predicate;

/** The default scheduling profiles (see {@link Scheduler#defaultProfiles(boolean, Predicate)}). */
final class DefaultProfiles {
  /**
   * Weight of the approximate prefix scorer beside the precise one. Found with {@code kvroute
   * replay} (docs/routing-quality.md): when a prefix has been evicted everywhere, or is in flight,
   * the precise index shows no holder and the request was spread as if cold; the router's memory of
   * where it sent the prefix keeps it on the engines that hold, or will soon hold, its group. At
   * weight 1 it only breaks ties the precise score (weight 3) leaves.
   */
  static final double AFFINITY_WEIGHT = 1;

  private DefaultProfiles() {}

  static List<Profile> of(boolean precise, Predicate<String> isDown) {
    Profile.Builder decode =
        Profile.builder(Scheduler.DECODE_PROFILE)
            .filter(Filters.decode())
            .filter(Filters.health("health-filter", true, isDown))
            .filter(Filters.loraAvailability());
    prefix(decode, precise)
        .scorer(Scorers.queue(), 2)
        .scorer(Scorers.kvCacheUtilization(), 2)
        .scorer(Scorers.loadAware(), 1)
        .scorer(Scorers.activeRequests(), 1)
        .scorer(Scorers.loraAffinity(), 1)
        .scorer(Scorers.sessionAffinity(), 1)
        .scorer(Scorers.noHitLru(), 1)
        .picker(Pickers.topN(3));
    Profile.Builder prefill =
        Profile.builder(Scheduler.PREFILL_PROFILE)
            .filter(Filters.prefill())
            .filter(Filters.health("health-filter", true, isDown))
            .filter(Filters.pdPairing("pd-pairing-filter", "kvroute.io/pd-group"));
    prefix(prefill, precise)
        .scorer(Scorers.queue(), 2)
        .scorer(Scorers.kvCacheUtilization(), 2)
        .scorer(Scorers.loadAware(), 1)
        .scorer(Scorers.activeRequests(), 1)
        .picker(Pickers.topN(2));
    return List.of(decode.build(), prefill.build());
  }

  /** Precise ×3 plus approximate affinity ×1, or approximate ×3 alone. */
  private static Profile.Builder prefix(Profile.Builder p, boolean precise) {
    if (precise) {
      return p.scorer(Scorers.precisePrefixCache(), 3)
          .scorer(Scorers.approximatePrefixCache(), AFFINITY_WEIGHT);
    }
    return p.scorer(Scorers.approximatePrefixCache(), 3);
  }
}
