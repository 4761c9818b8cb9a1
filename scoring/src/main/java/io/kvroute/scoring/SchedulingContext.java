package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.Optional;
import java.util.random.RandomGenerator;

/**
 * The read-only view of one scheduling cycle that {@link Filter}s, {@link Scorer}s, {@link Picker}s
 * and {@link PdDecider}s see: the request, its tokens, the prefix-cache matches, engine metrics and
 * router-tracked load.
 *
 * <p>A context belongs to one call of {@link Scheduler#pick} and is used by the thread running that
 * call only; it must not be retained after the plugin returns. Values are computed lazily and
 * memoised, so asking twice is cheap.
 */
public interface SchedulingContext {

  /** The request being scheduled. */
  SchedulingRequest request();

  /** The name of the profile being run. */
  String profileName();

  /** The number of prompt tokens, or -1 when the request has no token ids. */
  int promptTokens();

  /**
   * The match from the precise (KV-event fed) index, plus speculative entries, for an endpoint.
   * {@link PrefixCacheMatch#NONE} when there is no index or the request has no token ids.
   */
  PrefixCacheMatch preciseMatch(Endpoint endpoint);

  /**
   * True when precise matches are available for this request: an index, token ids, and {@link
   * SchedulingRequest#preciseScoring()}.
   */
  boolean hasPreciseMatches();

  /** The match from the router's own approximate index of its past decisions. */
  PrefixCacheMatch approximateMatch(Endpoint endpoint);

  /**
   * The best available match: precise when {@link #hasPreciseMatches()}, else approximate. This is
   * what the no-hit scorer and the PD decider read.
   */
  PrefixCacheMatch prefixMatch(Endpoint endpoint);

  /** Fresh engine metrics for an endpoint; empty when unknown or stale. */
  Optional<EndpointMetrics> metrics(Endpoint endpoint);

  /**
   * Requests the router has sent to the endpoint that have not completed: with a fleet ({@link
   * Scheduler.Builder#fleet}), every replica's, as of this cycle's fleet view.
   */
  int inFlight(Endpoint endpoint);

  /**
   * In a second PD stage, the endpoint chosen by the first stage (the decode endpoint when the
   * prefill profile runs); empty otherwise.
   */
  Optional<Endpoint> peer();

  /** The injected random source (use it for every random choice, so tests are repeatable). */
  RandomGenerator random();

  /** The injected clock, in nanoseconds. */
  long nanoTime();
}
