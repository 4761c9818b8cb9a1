package io.kvroute.pd;

import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.LongSupplier;

/**
 * Bounds retries to a fraction of traffic, so that a sick fleet is not hit by a retry storm (the
 * Finagle/Envoy "retry budget"). Over a sliding window of ten one-second buckets, retries are
 * allowed while {@code retries < minRetriesPerSecond * 10 + ratio * requests}.
 *
 * <p>Thread-safe and lock-free; approximate under contention (a few extra retries may pass), which
 * is the right trade for a hot path.
 */
public final class RetryBudget {
  private static final int BUCKETS = 10;
  private static final long BUCKET_NANOS = 1_000_000_000L;

  private final double ratio;
  private final int minRetriesPerSecond;
  private final LongSupplier nanoClock;
  // Per bucket: [epoch, requests, retries] packed in three arrays of the same index.
  private final AtomicLongArray epochs = new AtomicLongArray(BUCKETS);
  private final AtomicLongArray requests = new AtomicLongArray(BUCKETS);
  private final AtomicLongArray retries = new AtomicLongArray(BUCKETS);

  private RetryBudget(double ratio, int minRetriesPerSecond, LongSupplier nanoClock) {
    if (!(ratio >= 0 && ratio <= 1)) {
      throw new IllegalArgumentException("retryBudget.ratio must be in [0, 1], was " + ratio);
    }
    if (minRetriesPerSecond < 0) {
      throw new IllegalArgumentException(
          "retryBudget.minRetriesPerSecond must be >= 0, was " + minRetriesPerSecond);
    }
    this.ratio = ratio;
    this.minRetriesPerSecond = minRetriesPerSecond;
    this.nanoClock = nanoClock;
    for (int i = 0; i < BUCKETS; i++) {
      epochs.set(i, Long.MIN_VALUE);
    }
  }

  /**
   * A budget allowing {@code ratio} retries per request plus {@code minRetriesPerSecond}.
   *
   * @throws IllegalArgumentException if ratio is outside [0, 1] or the minimum is negative
   */
  public static RetryBudget of(double ratio, int minRetriesPerSecond, LongSupplier nanoClock) {
    return new RetryBudget(ratio, minRetriesPerSecond, nanoClock);
  }

  /** The default: 20% of requests plus 10 retries per second. */
  public static RetryBudget defaults(LongSupplier nanoClock) {
    return of(0.2, 10, nanoClock);
  }

  /** A budget that never refuses a retry. */
  public static RetryBudget unlimited() {
    return new RetryBudget(1, Integer.MAX_VALUE / (BUCKETS * 2), () -> 0L);
  }

  private int bucket() {
    long epoch = Math.floorDiv(nanoClock.getAsLong(), BUCKET_NANOS);
    int i = (int) Math.floorMod(epoch, (long) BUCKETS);
    long seen = epochs.get(i);
    if (seen != epoch && epochs.compareAndSet(i, seen, epoch)) {
      requests.set(i, 0);
      retries.set(i, 0);
    }
    return i;
  }

  /** Records one request (first attempts only). */
  public void recordRequest() {
    requests.incrementAndGet(bucket());
  }

  /** Takes one retry from the budget; false when the budget is spent. */
  public boolean tryAcquireRetry() {
    int current = bucket();
    long epoch = epochs.get(current);
    long req = 0;
    long ret = 0;
    for (int i = 0; i < BUCKETS; i++) {
      long e = epochs.get(i);
      if (e != Long.MIN_VALUE && epoch - e < BUCKETS) {
        req += requests.get(i);
        ret += retries.get(i);
      }
    }
    double allowed = (double) minRetriesPerSecond * BUCKETS + ratio * req;
    if (ret + 1 > allowed) {
      return false;
    }
    retries.incrementAndGet(current);
    return true;
  }
}
