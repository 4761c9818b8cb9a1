package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.List;

/**
 * Removes endpoints that must not serve a request. Filters of a {@link Profile} run in order; an
 * empty result ends the profile.
 *
 * <p>Implementations must be thread-safe: one instance serves concurrent requests. {@link #filter}
 * runs on the caller's thread and must not block. See {@link Filters} for the built-in ones.
 */
public interface Filter {

  /** The instance name, used in decisions, metrics and error messages. */
  String name();

  /**
   * The endpoints that pass, in their input order. May return the input list itself when all pass.
   */
  List<Endpoint> filter(SchedulingContext context, List<Endpoint> candidates);

  /** Called after a request was routed; stateful filters update themselves. No-op by default. */
  default void onRouted(Routed routed) {}

  /** Called when a routed request completed. No-op by default. */
  default void onComplete(Routed routed) {}
}
