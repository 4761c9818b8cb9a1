package io.kvroute.scoring;

import java.util.List;
import java.util.function.Predicate;

/** The default scheduling profiles (see {@link Scheduler#defaultProfiles(boolean, Predicate)}). */
final class DefaultProfiles {
  private DefaultProfiles() {}

  static List<Profile> of(boolean precise, Predicate<String> isDown) {
    Profile decode =
        Profile.builder(Scheduler.DECODE_PROFILE)
            .filter(Filters.decode())
            .filter(Filters.health("health-filter", true, isDown))
            .filter(Filters.loraAvailability())
            .scorer(precise ? Scorers.precisePrefixCache() : Scorers.approximatePrefixCache(), 3)
            .scorer(Scorers.queue(), 2)
            .scorer(Scorers.kvCacheUtilization(), 2)
            .scorer(Scorers.loadAware(), 1)
            .scorer(Scorers.activeRequests(), 1)
            .scorer(Scorers.loraAffinity(), 1)
            .scorer(Scorers.sessionAffinity(), 1)
            .scorer(Scorers.noHitLru(), 1)
            .picker(Pickers.topN(3))
            .build();
    Profile prefill =
        Profile.builder(Scheduler.PREFILL_PROFILE)
            .filter(Filters.prefill())
            .filter(Filters.health("health-filter", true, isDown))
            .filter(Filters.pdPairing("pd-pairing-filter", "kvroute.io/pd-group"))
            .scorer(precise ? Scorers.precisePrefixCache() : Scorers.approximatePrefixCache(), 3)
            .scorer(Scorers.queue(), 2)
            .scorer(Scorers.kvCacheUtilization(), 2)
            .scorer(Scorers.loadAware(), 1)
            .scorer(Scorers.activeRequests(), 1)
            .picker(Pickers.topN(2))
            .build();
    return List.of(decode, prefill);
  }
}
