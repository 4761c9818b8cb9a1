package io.kvroute.scoring;

import java.util.Objects;
import java.util.Optional;

/**
 * What every built-in filter, scorer and picker starts from: its instance name, checked once here.
 * Not API: the built-ins are created through {@link Filters}, {@link Scorers} and {@link Pickers}.
 */
abstract class NamedPlugin {
  private final String name;

  /**
   * A plugin named {@code name}.
   *
   * @throws IllegalArgumentException when {@code name} is null or blank
   */
  NamedPlugin(String name) {
    this.name = checkName(name);
  }

  /** The instance name, used in decisions, metrics and error messages. */
  public final String name() {
    return name;
  }

  static String checkName(String name) {
    if (name == null || name.isBlank()) {
      throw new IllegalArgumentException("plugin name must not be blank");
    }
    return name;
  }

  /** A built-in {@link Scorer}. */
  abstract static class NamedScorer extends NamedPlugin implements Scorer {
    NamedScorer(String name) {
      super(name);
    }
  }

  /** A built-in {@link Filter}. */
  abstract static class NamedFilter extends NamedPlugin implements Filter {
    NamedFilter(String name) {
      super(name);
    }
  }

  /**
   * A session-affinity plugin (the filter's hard pin or the scorer's preference): reads the
   * request's session endpoint and, after routing, records where the session went.
   */
  abstract static class SessionPlugin extends NamedPlugin {
    final SessionAffinity affinity;

    SessionPlugin(String name, SessionAffinity affinity) {
      super(name);
      this.affinity = Objects.requireNonNull(affinity, "affinity");
    }

    /** The id of the endpoint the request's session is on, if any. */
    final Optional<String> pinned(SchedulingContext ctx) {
      return affinity.endpointId(ctx.request(), ctx.nanoTime());
    }

    /** Records the routed request's session on its endpoint. */
    public final void onRouted(Routed routed) {
      affinity.record(routed.request(), routed.endpoint(), routed.nanoTime());
    }
  }
}
