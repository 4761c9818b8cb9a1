package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.List;

/**
 * Scores every candidate in [0, 1] (higher is better). A profile's total for an endpoint is the sum
 * of each scorer's clamped score times its weight.
 *
 * <p>Implementations must be thread-safe: one instance serves concurrent requests. {@link #score}
 * runs on the caller's thread and must not block or do I/O. See {@link Scorers} for the built-in
 * ones.
 */
public interface Scorer {

  /** The instance name, used in decisions, metrics and error messages. */
  String name();

  /**
   * Writes one score per candidate into {@code out} (same index as {@code candidates}; {@code
   * out.length >= candidates.size()}). Values outside [0, 1] are clamped by the scheduler.
   */
  void score(SchedulingContext context, List<Endpoint> candidates, double[] out);

  /** Called after a request was routed; stateful scorers update themselves. No-op by default. */
  default void onRouted(Routed routed) {}

  /** Called when a routed request completed. No-op by default. */
  default void onComplete(Routed routed) {}
}
