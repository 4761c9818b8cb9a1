package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Random;

/** A hand-filled {@link SchedulingContext} for unit tests of single plugins. */
final class FakeContext extends ContextBase {
  final Map<String, PrefixCacheMatch> precise = new HashMap<>();
  final Map<String, PrefixCacheMatch> approximate = new HashMap<>();
  final Map<String, EndpointMetrics> metrics = new HashMap<>();
  final Map<String, Integer> inFlight = new HashMap<>();
  boolean hasPrecise;
  int promptTokens = -1;

  FakeContext(SchedulingRequest request) {
    super(request, new Random(7), 1_000L);
  }

  static FakeContext of() {
    return new FakeContext(SchedulingRequest.builder().model("m").build());
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
  public Optional<EndpointMetrics> metrics(Endpoint endpoint) {
    return Optional.ofNullable(metrics.get(endpoint.id()));
  }

  @Override
  public int inFlight(Endpoint endpoint) {
    return inFlight.getOrDefault(endpoint.id(), 0);
  }
}
