package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.Map;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs the {@link Scheduler}'s plugin hooks after a decision: {@code onRouted}/{@code onComplete}
 * of every filter and scorer of the profiles that chose an endpoint, and the response headers of
 * session plugins. A failing hook is logged and skipped; the others still run.
 */
final class PluginHooks {
  private static final Logger log = LoggerFactory.getLogger(Scheduler.class);

  private PluginHooks() {}

  /** {@code onRouted} ({@code routed} true) or {@code onComplete} of every plugin. */
  static void lifecycle(
      Decision d,
      Function<String, Profile> profiles,
      Endpoint decode,
      Endpoint prefill,
      long now,
      boolean routed) {
    for (ProfileResult pr : d.profiles().values()) {
      Profile p = profiles.apply(pr.name());
      Endpoint target = target(d, pr, decode, prefill);
      if (p == null || pr.endpoints().isEmpty() || target == null) {
        continue;
      }
      Routed r = new Routed(d.request(), pr.name(), target, pr.cold(), now);
      for (Filter f : p.filters()) {
        try {
          if (routed) {
            f.onRouted(r);
          } else {
            f.onComplete(r);
          }
        } catch (RuntimeException e) {
          log.warn("plugin {} failed in a lifecycle hook", f.name(), e);
        }
      }
      for (Profile.WeightedScorer w : p.scorers()) {
        Scorer s = w.scorer();
        try {
          if (routed) {
            s.onRouted(r);
          } else {
            s.onComplete(r);
          }
        } catch (RuntimeException e) {
          log.warn("plugin {} failed in a lifecycle hook", s.name(), e);
        }
      }
    }
  }

  /** The response headers the session plugins want for the endpoints that served. */
  static void responseHeaders(
      Decision d,
      Function<String, Profile> profiles,
      Endpoint decode,
      Endpoint prefill,
      Map<String, String> out) {
    for (ProfileResult pr : d.profiles().values()) {
      Profile p = profiles.apply(pr.name());
      Endpoint target = target(d, pr, decode, prefill);
      if (p == null || target == null) {
        continue;
      }
      for (Filter f : p.filters()) {
        if (f instanceof Filters.SessionFilter sf) {
          sf.affinity.responseHeaders(target, out);
        }
      }
      for (Profile.WeightedScorer w : p.scorers()) {
        if (w.scorer() instanceof Scorers.SessionScorer ss) {
          ss.affinity.responseHeaders(target, out);
        }
      }
    }
  }

  private static Endpoint target(Decision d, ProfileResult pr, Endpoint decode, Endpoint prefill) {
    return pr.name().equals(d.prefillProfileName()) ? prefill : decode;
  }
}
