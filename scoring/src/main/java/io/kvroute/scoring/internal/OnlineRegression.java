package io.kvroute.scoring.internal;

/**
 * A linear model learned online by weighted least squares with exponential forgetting and a small
 * ridge: after each sample {@code (x, y)} the coefficients solve {@code (Σ γ^age w xxᵀ + λI) c = Σ
 * γ^age w x y}, with sample weight {@code w = 1 / max(y, floor)²} so that the fit minimises
 * <em>relative</em> error (a 100 ms miss on a 200 ms target counts as much as a 2 s miss on a 4 s
 * one). {@code γ = 1 − 1/window} forgets old samples, so the model follows a fleet whose behaviour
 * drifts. The system is {@code k × k} (a handful of features): solving it by Cholesky after each
 * sample costs a few hundred floating-point operations.
 *
 * <p>Thread-safe: updates are synchronized; {@link #predict} reads the last coefficients without a
 * lock.
 */
public final class OnlineRegression {
  private final int k;
  private final double decay;
  private final double ridge;
  private final double floor;
  private final double[] a;
  private final double[] b;
  // the factor and the forward solution of solve(), reused (solve runs under the lock)
  private final double[] l;
  private final double[] z;
  private long samples;
  private volatile double[] coefficients;

  /**
   * A model of {@code features} inputs.
   *
   * @param features inputs per sample, the intercept's constant 1 included
   * @param window samples after which an old sample's weight has decayed by 1/e
   * @param ridge the ridge added to the diagonal
   * @param floor the smallest target used in a sample's weight {@code 1/y²}
   */
  public OnlineRegression(int features, int window, double ridge, double floor) {
    if (features < 1 || window < 1 || !(ridge > 0) || !(floor > 0)) {
      throw new IllegalArgumentException(
          "regression needs features >= 1, window >= 1, ridge > 0 and floor > 0");
    }
    this.k = features;
    this.decay = 1.0 - 1.0 / window;
    this.ridge = ridge;
    this.floor = floor;
    this.a = new double[k * k];
    this.b = new double[k];
    this.l = new double[k * k];
    this.z = new double[k];
  }

  /** Learns from one sample: inputs {@code x} (length {@code features}) and target {@code y}. */
  public synchronized void add(double[] x, double y) {
    if (!Double.isFinite(y) || y < 0) {
      return;
    }
    double w = 1.0 / Math.pow(Math.max(y, floor), 2);
    for (int i = 0; i < k * k; i++) {
      a[i] *= decay;
    }
    for (int i = 0; i < k; i++) {
      b[i] = b[i] * decay + w * x[i] * y;
      double wx = w * x[i];
      for (int j = 0; j <= i; j++) {
        a[i * k + j] += wx * x[j];
      }
    }
    samples++;
    double[] c = solve();
    if (c != null) {
      coefficients = c;
    }
  }

  /** The prediction for inputs {@code x}; NaN before the first sample. */
  public double predict(double[] x) {
    double[] c = coefficients;
    if (c == null) {
      return Double.NaN;
    }
    double y = 0;
    for (int i = 0; i < k; i++) {
      y += c[i] * x[i];
    }
    return y;
  }

  /** Samples learnt so far. */
  public synchronized long samples() {
    return samples;
  }

  /** The coefficients now (a copy), or an empty array before the first sample. */
  public double[] coefficients() {
    double[] c = coefficients;
    return c == null ? new double[0] : c.clone();
  }

  /**
   * Cholesky of the lower triangle plus the ridge; null when not positive definite. The result is a
   * new array (it is published to {@link #predict}, which reads it without the lock).
   */
  private double[] solve() {
    for (int i = 0; i < k; i++) {
      for (int j = 0; j <= i; j++) {
        double s = a[i * k + j] + (i == j ? ridge : 0);
        for (int p = 0; p < j; p++) {
          s -= l[i * k + p] * l[j * k + p];
        }
        if (i == j) {
          if (!(s > 0)) {
            return null;
          }
          l[i * k + i] = Math.sqrt(s);
        } else {
          l[i * k + j] = s / l[j * k + j];
        }
      }
    }
    for (int i = 0; i < k; i++) {
      double s = b[i];
      for (int p = 0; p < i; p++) {
        s -= l[i * k + p] * z[p];
      }
      z[i] = s / l[i * k + i];
    }
    double[] c = new double[k];
    for (int i = k - 1; i >= 0; i--) {
      double s = z[i];
      for (int p = i + 1; p < k; p++) {
        s -= l[p * k + i] * c[p];
      }
      c[i] = s / l[i * k + i];
    }
    return c;
  }
}
