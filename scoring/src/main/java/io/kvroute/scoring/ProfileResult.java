package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The outcome of running one {@link Profile}: the endpoints that passed the filters, the picked
 * endpoints in order, and every scorer's score for debugging.
 *
 * <p>Immutable and thread-safe. The score maps are built on first access (the hot path does not pay
 * for them).
 */
public final class ProfileResult {
  private final String name;
  private final List<Endpoint> candidates;
  private final List<Endpoint> picked;
  private final String[] scorerNames;
  private final double[] weights;
  private final double[][] scores;
  private final double[] totals;
  private final String emptiedBy;
  private final boolean cold;
  private volatile Map<String, Map<String, Double>> scoreMap;

  ProfileResult(
      String name,
      List<Endpoint> candidates,
      List<Endpoint> picked,
      String[] scorerNames,
      double[] weights,
      double[][] scores,
      double[] totals,
      String emptiedBy,
      boolean cold) {
    this.name = name;
    this.candidates = candidates;
    this.picked = picked;
    this.scorerNames = scorerNames;
    this.weights = weights;
    this.scores = scores;
    this.totals = totals;
    this.emptiedBy = emptiedBy;
    this.cold = cold;
  }

  static ProfileResult emptied(String name, String filter) {
    return new ProfileResult(
        name,
        List.of(),
        List.of(),
        new String[0],
        new double[0],
        new double[0][],
        new double[0],
        filter,
        false);
  }

  /** The profile name. */
  public String name() {
    return name;
  }

  /** The endpoints that passed every filter. */
  public List<Endpoint> candidates() {
    return candidates;
  }

  /** The picked endpoints: primary first, then fallbacks. Empty when the filters left none. */
  public List<Endpoint> endpoints() {
    return picked;
  }

  /** The filter that left no endpoint, when {@link #endpoints()} is empty. */
  public Optional<String> emptiedBy() {
    return Optional.ofNullable(emptiedBy);
  }

  /** True when no candidate had any prefix-cache match (a "cold" request). */
  public boolean cold() {
    return cold;
  }

  /**
   * Per endpoint id, each scorer's clamped score in [0, 1] (before weighting), in scorer order,
   * plus {@code "total"}: the weighted sum.
   */
  public Map<String, Map<String, Double>> scores() {
    Map<String, Map<String, Double>> m = scoreMap;
    if (m == null) {
      m = new LinkedHashMap<>();
      for (int c = 0; c < candidates.size(); c++) {
        Map<String, Double> per = new LinkedHashMap<>();
        for (int s = 0; s < scorerNames.length; s++) {
          per.put(scorerNames[s], scores[s][c]);
        }
        per.put("total", totals[c]);
        m.put(candidates.get(c).id(), Collections.unmodifiableMap(per));
      }
      m = Collections.unmodifiableMap(m);
      scoreMap = m;
    }
    return m;
  }

  /** The weight of each scorer, by name. */
  public Map<String, Double> weights() {
    Map<String, Double> w = new LinkedHashMap<>();
    for (int s = 0; s < scorerNames.length; s++) {
      w.put(scorerNames[s], weights[s]);
    }
    return Collections.unmodifiableMap(w);
  }

  /** The weighted total of an endpoint, if it was scored. */
  public Optional<Double> total(Endpoint endpoint) {
    int i = candidates.indexOf(endpoint);
    return i < 0 ? Optional.empty() : Optional.of(totals[i]);
  }

  @Override
  public String toString() {
    return "ProfileResult{"
        + name
        + ", picked="
        + picked.stream().map(Endpoint::id).toList()
        + (emptiedBy != null ? ", emptiedBy=" + emptiedBy : "")
        + "}";
  }
}
