package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.Optional;
import java.util.random.RandomGenerator;

/**
 * What a {@link SchedulingContext} of this package is given rather than computes: the request, the
 * first stage's endpoint in a second PD stage, the random source and the clock; and the rule that
 * the best prefix match is the precise one when there is one.
 */
abstract class ContextBase implements SchedulingContext {
  SchedulingRequest request;
  Endpoint peer;
  RandomGenerator random;
  long now;

  ContextBase(SchedulingRequest request, RandomGenerator random, long now) {
    this.request = request;
    this.random = random;
    this.now = now;
  }

  @Override
  public final SchedulingRequest request() {
    return request;
  }

  @Override
  public final PrefixCacheMatch prefixMatch(Endpoint endpoint) {
    return hasPreciseMatches() ? preciseMatch(endpoint) : approximateMatch(endpoint);
  }

  @Override
  public final Optional<Endpoint> peer() {
    return Optional.ofNullable(peer);
  }

  @Override
  public final RandomGenerator random() {
    return random;
  }

  @Override
  public final long nanoTime() {
    return now;
  }
}
