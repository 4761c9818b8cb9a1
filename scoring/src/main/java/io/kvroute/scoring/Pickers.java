package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.ArrayList;
import java.util.List;
import java.util.random.RandomGenerator;

/**
 * The built-in {@link Picker}s. {@code maxEndpoints} is how many endpoints (primary + fallbacks)
 * the picker returns, at most the number of candidates. All are thread-safe and draw randomness
 * from {@link SchedulingContext#random()}.
 */
public final class Pickers {
  private Pickers() {}

  /** {@code max-score-picker} returning one endpoint. */
  public static Picker maxScore() {
    return maxScore("max-score-picker", 1);
  }

  /**
   * Highest total first; ties broken at random. With {@code maxEndpoints > 1} this is the top-N
   * picker: the next best are fallbacks in score order.
   *
   * @throws IllegalArgumentException when {@code maxEndpoints < 1}
   */
  public static Picker maxScore(String name, int maxEndpoints) {
    return new CountPicker(name, maxEndpoints) {
      @Override
      public List<Endpoint> pick(SchedulingContext ctx, List<Endpoint> candidates, double[] t) {
        return highest(ctx, candidates, t, maxEndpoints);
      }
    };
  }

  /**
   * The {@code maxEndpoints} candidates (at most all) with the highest {@code t}, ties at random.
   */
  private static List<Endpoint> highest(
      SchedulingContext ctx, List<Endpoint> candidates, double[] t, int maxEndpoints) {
    int n = candidates.size();
    int k = Math.min(maxEndpoints, n);
    int[] order = shuffled(n, ctx.random());
    if (k == 1) {
      int best = order[0];
      for (int i = 1; i < n; i++) {
        if (t[order[i]] > t[best]) {
          best = order[i];
        }
      }
      return List.of(candidates.get(best));
    }
    // Partial selection sort over the shuffled order: stable, so ties stay random.
    for (int s = 0; s < k; s++) {
      int bi = s;
      for (int i = s + 1; i < n; i++) {
        if (t[order[i]] > t[order[bi]]) {
          bi = i;
        }
      }
      int tmp = order[bi];
      System.arraycopy(order, s, order, s + 1, bi - s);
      order[s] = tmp;
    }
    return firstOf(candidates, order, k);
  }

  /** Top-N: {@link #maxScore(String, int)} named {@code max-score-picker}. */
  public static Picker topN(int maxEndpoints) {
    return maxScore("max-score-picker", maxEndpoints);
  }

  /** Uniformly random, ignoring scores. */
  public static Picker random(String name, int maxEndpoints) {
    return new CountPicker(name, maxEndpoints) {
      @Override
      public List<Endpoint> pick(SchedulingContext ctx, List<Endpoint> candidates, double[] t) {
        return uniform(ctx, candidates, maxEndpoints);
      }
    };
  }

  /** {@code maxEndpoints} candidates (at most all) in a uniformly random order. */
  private static List<Endpoint> uniform(
      SchedulingContext ctx, List<Endpoint> candidates, int maxEndpoints) {
    int k = Math.min(maxEndpoints, candidates.size());
    return firstOf(candidates, shuffled(candidates.size(), ctx.random()), k);
  }

  /** The candidates at the first {@code k} positions of {@code order}, as an immutable list. */
  private static List<Endpoint> firstOf(List<Endpoint> candidates, int[] order, int k) {
    List<Endpoint> out = new ArrayList<>(k);
    for (int s = 0; s < k; s++) {
      out.add(candidates.get(order[s]));
    }
    return List.copyOf(out);
  }

  /**
   * Weighted random without replacement (A-Res): key = U^(1/score), U uniform in (0, 1); a score ≤
   * 0 gives key 0; the highest keys win. When every score is ≤ 0 it is uniformly random.
   */
  public static Picker weightedRandom(String name, int maxEndpoints) {
    return new CountPicker(name, maxEndpoints) {
      @Override
      public List<Endpoint> pick(SchedulingContext ctx, List<Endpoint> candidates, double[] t) {
        int n = candidates.size();
        RandomGenerator r = ctx.random();
        double[] keys = new double[n];
        boolean any = false;
        for (int i = 0; i < n; i++) {
          if (t[i] > 0) {
            double u = r.nextDouble();
            if (u == 0) {
              u = 1e-10;
            }
            keys[i] = Math.pow(u, 1.0 / t[i]);
            any = true;
          } else {
            keys[i] = r.nextDouble() * 1e-300; // below any positive key; random among themselves
          }
        }
        if (!any) {
          return uniform(ctx, candidates, maxEndpoints);
        }
        return highest(ctx, candidates, keys, maxEndpoints);
      }
    };
  }

  /** A built-in picker returning at most {@code maxEndpoints} endpoints. */
  private abstract static class CountPicker extends NamedPlugin implements Picker {
    final int maxEndpoints;

    CountPicker(String name, int maxEndpoints) {
      super(name);
      if (maxEndpoints < 1) {
        throw new IllegalArgumentException(
            name + ".maxNumOfEndpoints must be >= 1, was " + maxEndpoints);
      }
      this.maxEndpoints = maxEndpoints;
    }
  }

  static int[] shuffled(int n, RandomGenerator r) {
    int[] a = new int[n];
    for (int i = 0; i < n; i++) {
      a[i] = i;
    }
    for (int i = n - 1; i > 0; i--) {
      int j = r.nextInt(i + 1);
      int tmp = a[i];
      a[i] = a[j];
      a[j] = tmp;
    }
    return a;
  }
}
