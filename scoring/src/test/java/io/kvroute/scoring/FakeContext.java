package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.random.RandomGenerator;

/** A hand-filled {@link SchedulingContext} for unit tests of single plugins. */
final class FakeContext implements SchedulingContext {
  SchedulingRequest request;
  final Map<String, PrefixCacheMatch> precise = new HashMap<>();
  final Map<String, PrefixCacheMatch> approximate = new HashMap<>();
  final Map<String, EndpointMetrics> metrics = new HashMap<>();
  final Map<String, Integer> inFlight = new HashMap<>();
  boolean hasPrecise;
  int promptTokens = -1;
  Endpoint peer;
  RandomGenerator random = new Random(7);
  long now = 1_000L;

  FakeContext(SchedulingRequest request) {
    this.request = request;
  }

  static FakeContext of() {
    return new FakeContext(SchedulingRequest.builder().model("m").build());
  }

  @Override
  public SchedulingRequest request() {
    return request;
  }

  @Override
  public String profileName() {
    return "test";
  }

  @Override
  public int promptTokens() {
    return promptTokens;
  }

  @Override
  public PrefixCacheMatch preciseMatch(Endpoint endpoint) {
    return precise.getOrDefault(endpoint.id(), PrefixCacheMatch.NONE);
  }

  @Override
  public boolean hasPreciseMatches() {
    return hasPrecise;
  }

  @Override
  public PrefixCacheMatch approximateMatch(Endpoint endpoint) {
    return approximate.getOrDefault(endpoint.id(), PrefixCacheMatch.NONE);
  }

  @Override
  public PrefixCacheMatch prefixMatch(Endpoint endpoint) {
    return hasPrecise ? preciseMatch(endpoint) : approximateMatch(endpoint);
  }

  @Override
  public Optional<EndpointMetrics> metrics(Endpoint endpoint) {
    return Optional.ofNullable(metrics.get(endpoint.id()));
  }

  @Override
  public int inFlight(Endpoint endpoint) {
    return inFlight.getOrDefault(endpoint.id(), 0);
  }

  @Override
  public Optional<Endpoint> peer() {
    return Optional.ofNullable(peer);
  }

  @Override
  public RandomGenerator random() {
    return random;
  }

  @Override
  public long nanoTime() {
    return now;
  }
}
