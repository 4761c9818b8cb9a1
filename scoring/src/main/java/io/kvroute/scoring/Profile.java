package io.kvroute.scoring;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * A named scheduling profile: filters run in order, then weighted scorers, then one picker.
 *
 * <p>Immutable and thread-safe (as long as its plugins are). Build with {@link #builder(String)}.
 */
public final class Profile {

  /** A scorer with its weight in the profile's sum. */
  public record WeightedScorer(Scorer scorer, double weight) {
    /** Validates the weight. */
    public WeightedScorer {
      Objects.requireNonNull(scorer, "scorer");
      if (!(weight >= 0) || Double.isInfinite(weight)) {
        throw new IllegalArgumentException(
            "weight of scorer \""
                + scorer.name()
                + "\" must be a finite number >= 0, was "
                + weight);
      }
    }
  }

  private final String name;
  private final List<Filter> filters;
  private final List<WeightedScorer> scorers;
  private final Picker picker;

  private Profile(Builder b) {
    this.name = b.name;
    this.filters = List.copyOf(b.filters);
    this.scorers = List.copyOf(b.scorers);
    this.picker = b.picker == null ? Pickers.maxScore() : b.picker;
  }

  /** A builder for a profile with this name. */
  public static Builder builder(String name) {
    return new Builder(name);
  }

  /** The profile name. */
  public String name() {
    return name;
  }

  /** The filters, in order. */
  public List<Filter> filters() {
    return filters;
  }

  /** The weighted scorers. */
  public List<WeightedScorer> scorers() {
    return scorers;
  }

  /** The picker ({@link Pickers#maxScore()} unless set). */
  public Picker picker() {
    return picker;
  }

  @Override
  public String toString() {
    StringBuilder sb = new StringBuilder("Profile{").append(name).append(": ");
    filters.forEach(f -> sb.append(f.name()).append(" → "));
    scorers.forEach(s -> sb.append(s.scorer().name()).append('×').append(s.weight()).append(' '));
    return sb.append("→ ").append(picker.name()).append('}').toString();
  }

  /** Builds {@link Profile}s. Not thread-safe. */
  public static final class Builder {
    private final String name;
    private final List<Filter> filters = new ArrayList<>();
    private final List<WeightedScorer> scorers = new ArrayList<>();
    private Picker picker;

    private Builder(String name) {
      this.name = name;
    }

    /** Appends a filter. */
    public Builder filter(Filter filter) {
      filters.add(Objects.requireNonNull(filter, "filter"));
      return this;
    }

    /** Adds a scorer with weight 1. */
    public Builder scorer(Scorer scorer) {
      return scorer(scorer, 1.0);
    }

    /** Adds a scorer with a weight (finite, >= 0). */
    public Builder scorer(Scorer scorer, double weight) {
      scorers.add(new WeightedScorer(scorer, weight));
      return this;
    }

    /** Sets the picker. */
    public Builder picker(Picker picker) {
      this.picker = Objects.requireNonNull(picker, "picker");
      return this;
    }

    /**
     * Builds the profile.
     *
     * @throws IllegalArgumentException when the name is blank or two plugins share a name
     */
    public Profile build() {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("profile.name must not be blank");
      }
      java.util.Set<String> names = new java.util.HashSet<>();
      for (Filter f : filters) {
        if (!names.add(f.name())) {
          throw new IllegalArgumentException(
              "profile \"" + name + "\" has two plugins named \"" + f.name() + "\"");
        }
      }
      for (WeightedScorer s : scorers) {
        if (!names.add(s.scorer().name())) {
          throw new IllegalArgumentException(
              "profile \"" + name + "\" has two plugins named \"" + s.scorer().name() + "\"");
        }
      }
      return new Profile(this);
    }
  }
}
