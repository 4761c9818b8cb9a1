package io.kvroute.service.internal;

import io.kvroute.service.ServiceConfig.PodSpec;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * Per-pod activity of the configured pods: events applied, blocks stored and removed, the last
 * event's time, and rates over a short sliding window.
 *
 * <p>Bounded: only configured pods are tracked (events of other pods are ignored), and each pod
 * keeps a fixed ring of {@value #SAMPLES} one-per-tick samples. Thread-safe: counters are atomics,
 * the pod map is concurrent; {@link #sample()} is called by one scheduler thread.
 */
public final class PodTracker {
  static final int SAMPLES = 6;

  private final LongSupplier nanoClock;
  private final Clock wallClock;
  private final Map<String, Pod> pods = new ConcurrentHashMap<>();
  private final LongAdder eventsTotal = new LongAdder();
  private final AtomicLong lastEventMillis = new AtomicLong(-1);
  private volatile List<String> ids = List.of();

  /**
   * A tracker.
   *
   * @param nanoClock monotonic clock for rates and timeouts
   * @param wallClock wall clock for the reported instants
   */
  public PodTracker(LongSupplier nanoClock, Clock wallClock) {
    this.nanoClock = nanoClock;
    this.wallClock = wallClock;
  }

  /** Starts tracking a pod (keeps existing counters if it is already tracked). */
  public synchronized Pod add(PodSpec spec) {
    Pod pod =
        pods.compute(
            spec.id(),
            (id, old) -> {
              if (old == null) {
                return new Pod(spec, nanoClock.getAsLong());
              }
              old.spec = spec;
              return old;
            });
    refreshIds();
    return pod;
  }

  /** Stops tracking a pod. */
  public synchronized void remove(String podId) {
    pods.remove(podId);
    refreshIds();
  }

  private void refreshIds() {
    List<String> l = new ArrayList<>(pods.keySet());
    l.sort(null);
    ids = List.copyOf(l);
  }

  /** The tracked pod, or {@code null}. */
  public Pod get(String podId) {
    return pods.get(podId);
  }

  /** Tracked pods (a live view). */
  public Collection<Pod> all() {
    return pods.values();
  }

  /** Ids of the tracked pods, sorted (an immutable snapshot). */
  public List<String> ids() {
    return ids;
  }

  /** Records one event of {@code podId} that stored or removed {@code blocks} blocks. */
  public void onEvent(String podId, int stored, int removed) {
    Pod p = pods.get(podId);
    if (p == null) {
      return;
    }
    long now = wallClock.millis();
    p.events.increment();
    if (stored > 0) {
      p.stored.add(stored);
    }
    if (removed > 0) {
      p.removed.add(removed);
    }
    if (p.firstEventNanos == 0) {
      p.firstEventNanos = nanoClock.getAsLong() | 1;
    }
    p.lastEventMillis = now;
    eventsTotal.increment();
    lastEventMillis.accumulateAndGet(now, Math::max);
  }

  /** Events applied since start, all pods. */
  public long eventsTotal() {
    return eventsTotal.sum();
  }

  /** Wall-clock millis of the last event, or -1. */
  public long lastEventMillis() {
    return lastEventMillis.get();
  }

  /** Takes one sample per pod (call about once a second). */
  public void sample(ZmqEventFeed feed) {
    long now = nanoClock.getAsLong();
    for (Pod p : pods.values()) {
      long gaps = feed.gaps(p.spec.id());
      if (gaps > p.gapsSeen) {
        p.gapsSeen = gaps;
        p.lastGapNanos = now;
      }
      p.ring[p.next % SAMPLES] = new Sample(now, p.events.sum(), p.removed.sum());
      p.next++;
    }
  }

  /** The current monotonic time. */
  public long nanoTime() {
    return nanoClock.getAsLong();
  }

  /** One pod's counters. */
  public static final class Pod {
    volatile PodSpec spec;
    final long addedNanos;
    final LongAdder events = new LongAdder();
    final LongAdder stored = new LongAdder();
    final LongAdder removed = new LongAdder();
    volatile long firstEventNanos;
    volatile long lastEventMillis = -1;
    volatile long gapsSeen;
    volatile long lastGapNanos;
    final Sample[] ring = new Sample[SAMPLES];
    volatile int next;

    Pod(PodSpec spec, long addedNanos) {
      this.spec = spec;
      this.addedNanos = addedNanos;
    }

    /** The pod's configuration. */
    public PodSpec spec() {
      return spec;
    }

    /** Whether an event has been applied. */
    public boolean heardFrom() {
      return firstEventNanos != 0;
    }

    /** Monotonic time the pod was added. */
    public long addedNanos() {
      return addedNanos;
    }

    /** Events applied. */
    public long events() {
      return events.sum();
    }

    /** Blocks stored. */
    public long stored() {
      return stored.sum();
    }

    /** Blocks removed. */
    public long removed() {
      return removed.sum();
    }

    /** Wall-clock millis of the last event, or -1. */
    public long lastEventMillis() {
      return lastEventMillis;
    }

    /** Monotonic time of the last gap seen by {@link #sample}, or 0. */
    public long lastGapNanos() {
      return lastGapNanos;
    }

    /** Events per second since the oldest sample in the ring (0 before two samples). */
    public double eventsPerSecond(long nowNanos) {
      Sample oldest = oldest();
      if (oldest == null || nowNanos <= oldest.nanos) {
        return 0;
      }
      return (events.sum() - oldest.events) * 1e9 / (nowNanos - oldest.nanos);
    }

    /** Removed blocks per second since the oldest sample. */
    public double removalsPerSecond(long nowNanos) {
      Sample oldest = oldest();
      if (oldest == null || nowNanos <= oldest.nanos) {
        return 0;
      }
      return (removed.sum() - oldest.removed) * 1e9 / (nowNanos - oldest.nanos);
    }

    private Sample oldest() {
      int n = next;
      if (n == 0) {
        return null;
      }
      return n < SAMPLES ? ring[0] : ring[n % SAMPLES];
    }
  }

  private record Sample(long nanos, long events, long removed) {}
}
