package io.kvroute.router.flow;

import io.kvroute.scoring.LatencySlo;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeSet;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongSupplier;

/**
 * Admission before scheduling: a request is admitted at once while its model's endpoints are not
 * saturated ({@link SaturationDetector}) and nothing of its band or above waits; otherwise it waits
 * in its band's bounded queue until capacity frees, its TTL passes, or a higher band's request
 * evicts it. Bands are served in strict priority; inside a band, tenants in turn (round-robin) or
 * by served tokens (virtual token counter); inside a tenant, FCFS or EDF. Design facts follow
 * llm-d's flow control ({@code gateway-api-inference-extension}, {@code pkg/epp/flowcontrol}):
 * strict priority between bands, a fairness policy between flows and an ordering policy inside a
 * flow, a saturation gate, per-band capacity, TTL expiry, and eviction of sheddable requests.
 *
 * <p>Non-blocking: a waiting request is an entry in a queue and a {@link CompletableFuture}, no
 * thread. The controller is driven by events: {@link #enqueue}, {@link Admission#release} (capacity
 * freed), and {@link #poll} — which the owner calls when its {@link Wakeup} fires (TTL expiry, and
 * a re-check every {@link FlowControlConfig#recheckInterval()} while requests wait on a saturated
 * fleet) and whenever the load it measures changed (engine metrics refreshed, a first token came
 * back). Time is the injected clock's, so the fleet simulator drives this same code in virtual
 * time. Futures are completed outside the lock, on the thread whose event admitted them, one at a
 * time (no recursion however their continuations call back).
 *
 * <p>Memory is bounded: at most {@link FlowControlConfig#maxQueued()} requests wait in all, each
 * band at most its {@code maxQueueLength}; empty tenant queues are forgotten.
 *
 * <p>Thread-safe: one lock guards the queues; it is never held while a future completes or a wakeup
 * is scheduled.
 */
public final class FlowController {
  /** Models with state of their own, at most; requests of further models are admitted at once. */
  static final int MAX_MODELS = 4096;

  /**
   * Arranges for {@link FlowController#poll()} to be called at or after a time of the controller's
   * clock. Called outside the controller's lock; may be called again with an earlier time.
   */
  @FunctionalInterface
  public interface Wakeup {
    /** Call {@link FlowController#poll()} at or after {@code nanos}. */
    void at(long nanos);
  }

  /**
   * What flow control needs to know about one request.
   *
   * @param model the model it names (its endpoints' saturation gates it)
   * @param priority its priority (higher is more important)
   * @param tenant who sent it (fairness is between tenants)
   * @param tokens its prompt tokens, or an estimate (virtual token counting)
   * @param slo its latency objective
   */
  public record FlowRequest(
      String model, int priority, String tenant, long tokens, LatencySlo slo) {
    /** Validates. */
    public FlowRequest {
      Objects.requireNonNull(model, "model");
      Objects.requireNonNull(tenant, "tenant");
      Objects.requireNonNull(slo, "slo");
      tokens = Math.max(0, tokens);
    }
  }

  private static final int QUEUED = 0;
  private static final int HELD = 1;
  private static final int ADMITTED = 2;
  private static final int ENDED = 3;

  private final FlowControlConfig config;
  private final SaturationDetector detector;
  private final LongSupplier clock;
  private final Wakeup wakeup;
  private final FlowMeters meters;
  private final Object lock = new Object();
  private final Map<String, ModelQueue> models = new HashMap<>();
  private final LinkedHashSet<ModelQueue> waiting = new LinkedHashSet<>();
  private int queued;
  private long seq;
  private long epoch;
  private boolean draining;
  private boolean pollAgain;
  private long wakeupAt = Long.MAX_VALUE;
  private long pendingWakeup = Long.MAX_VALUE;
  private final ArrayDeque<Admission> toAdmit = new ArrayDeque<>();
  private final ArrayDeque<Admission> toDrop = new ArrayDeque<>();
  private RuntimeException closed;

  private FlowController(
      FlowControlConfig config,
      SaturationDetector detector,
      LongSupplier clock,
      Wakeup wakeup,
      MeterRegistry registry) {
    this.config = Objects.requireNonNull(config, "config");
    this.detector = Objects.requireNonNull(detector, "detector");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.wakeup = Objects.requireNonNull(wakeup, "wakeup");
    this.meters = new FlowMeters(registry, config, this);
  }

  /**
   * A controller.
   *
   * @param config bands, fairness, bounds
   * @param detector the saturation of a model's endpoints
   * @param nanoClock the clock (virtual in the fleet simulator)
   * @param wakeup how {@link #poll} gets called at a later time
   * @param registry where the {@code kvroute.flow.*} meters go (null: none)
   */
  public static FlowController create(
      FlowControlConfig config,
      SaturationDetector detector,
      LongSupplier nanoClock,
      Wakeup wakeup,
      MeterRegistry registry) {
    return new FlowController(config, detector, nanoClock, wakeup, registry);
  }

  /** The configuration. */
  public FlowControlConfig config() {
    return config;
  }

  // ------------------------------------------------------------------ the public operations

  /**
   * Admits {@code request} now or queues it. The future completes with the request's {@link
   * Admission} when it is admitted (at once when the fleet has room), or fails with {@link
   * RequestDroppedException} when it is refused or dropped while waiting. Cancelling the future
   * withdraws a waiting request.
   */
  public CompletableFuture<Admission> enqueue(FlowRequest request) {
    Objects.requireNonNull(request, "request");
    CompletableFuture<Admission> f = new CompletableFuture<>();
    Admission a;
    boolean now;
    synchronized (lock) {
      if (closed != null) {
        return CompletableFuture.failedFuture(closed);
      }
      long t = clock.getAsLong();
      ModelQueue mq = modelQueue(request.model());
      a = new Admission(this, request, mq, config.bandIndex(request.priority()), seq++, t, f);
      now = mq == null || canAdmitNow(mq, a.band);
      if (now) {
        admitLocked(a, t);
      } else {
        queueLocked(a, t);
      }
    }
    if (now) {
      f.complete(a); // the fast path: nothing waits, nothing else to do
      return f;
    }
    f.whenComplete(
        (x, t) -> {
          if (t instanceof CancellationException) {
            a.cancelWaiting();
          }
        });
    finish();
    return f;
  }

  /**
   * Admits {@code request} only if it would be admitted at once ({@link #enqueue} without waiting):
   * for callers that cannot wait. Empty when it would have to wait; the refusal is counted as a
   * {@code queue-full} drop.
   */
  public Optional<Admission> tryAdmit(FlowRequest request) {
    Objects.requireNonNull(request, "request");
    synchronized (lock) {
      long now = clock.getAsLong();
      ModelQueue mq = modelQueue(request.model());
      Admission a =
          new Admission(this, request, mq, config.bandIndex(request.priority()), seq++, now, null);
      if (mq == null || canAdmitNow(mq, a.band)) {
        admitLocked(a, now);
        return Optional.of(a);
      }
      meters.dropped(a, RequestDroppedException.Reason.QUEUE_FULL);
      return Optional.empty();
    }
  }

  /**
   * Looks at the queues again: drops what expired, admits what the fleet has room for now. Call it
   * when the {@link Wakeup} fires and whenever the measured load changed (metrics refreshed, first
   * tokens came back); requests that waited for a predicted latency ({@link Admission#requeue}) are
   * reconsidered.
   */
  public void poll() {
    synchronized (lock) {
      epoch++;
      pollAgain = true;
    }
    finish();
  }

  /**
   * Stops: every waiting request fails with {@code failure}, and later ones are refused with it.
   * Admitted requests are not affected (release them as usual).
   */
  public void shutdown(RuntimeException failure) {
    Objects.requireNonNull(failure, "failure");
    List<Admission> failed = new ArrayList<>();
    synchronized (lock) {
      closed = failure;
      for (ModelQueue mq : new ArrayList<>(waiting)) {
        for (Admission a : new ArrayList<>(mq.expiries)) {
          removeLocked(a);
          a.state = ENDED;
          failed.add(a);
        }
      }
    }
    for (Admission a : failed) {
      if (a.future != null) {
        a.future.completeExceptionally(failure);
      }
    }
  }

  /** Requests waiting now, in all bands and models. */
  public int queued() {
    synchronized (lock) {
      return queued;
    }
  }

  /** Requests waiting now in band {@code band} of {@code model}. */
  public int queued(String model, String band) {
    synchronized (lock) {
      ModelQueue mq = models.get(model);
      if (mq == null) {
        return 0;
      }
      for (BandQueue b : mq.bands) {
        if (b.config.name().equals(band)) {
          return b.size();
        }
      }
      return 0;
    }
  }

  /** Requests of {@code model} admitted and not yet released. */
  public long inFlight(String model) {
    synchronized (lock) {
      ModelQueue mq = models.get(model);
      return mq == null ? 0 : mq.inFlight;
    }
  }

  /** The saturation of {@code model}'s endpoints now (see {@link SaturationDetector}). */
  public double saturation(String model) {
    synchronized (lock) {
      ModelQueue mq = models.get(model);
      return detector.saturation(model, mq == null ? 0 : mq.inFlight);
    }
  }

  // ------------------------------------------------------------------ under the lock

  private ModelQueue modelQueue(String model) {
    ModelQueue mq = models.get(model);
    if (mq == null && models.size() < MAX_MODELS) {
      mq = new ModelQueue(model, config);
      models.put(model, mq);
    }
    return mq;
  }

  /** Nothing of band {@code b} or above waits (or is held) and the fleet has room for it. */
  private boolean canAdmitNow(ModelQueue mq, int b) {
    for (int i = 0; i <= b; i++) {
      if (mq.bands[i].size() > 0) {
        return false;
      }
    }
    return detector.saturation(mq.model, mq.inFlight) < config.bands().get(b).maxSaturation();
  }

  private void admitLocked(Admission a, long now) {
    a.state = ADMITTED;
    a.admittedAt = now;
    if (a.mq != null) {
      a.mq.inFlight++;
    }
    meters.admitted(a, now - a.arrival);
  }

  private void queueLocked(Admission a, long now) {
    BandQueue bq = a.mq.bands[a.band];
    FlowControlConfig.Band band = bq.config;
    if (bq.size() >= band.maxQueueLength()) {
      // With fairness, a full band makes room by dropping the newest request of the tenant with the
      // most waiting (longest-queue drop), so one tenant's flood cannot keep the others out.
      Admission longest =
          config.fairness() == FlowControlConfig.Fairness.NONE ? null : bq.newestOfLongest(a);
      if (longest == null) {
        dropLocked(
            a, RequestDroppedException.Reason.QUEUE_FULL, "band " + band.name() + " is full");
        return;
      }
      removeLocked(longest);
      dropLocked(
          longest,
          RequestDroppedException.Reason.QUEUE_FULL,
          "band " + band.name() + " is full and its tenant has the most requests waiting in it");
    }
    if (queued >= config.maxQueued()) {
      Admission victim = victim(a.mq, a.band);
      if (victim == null) {
        dropLocked(a, RequestDroppedException.Reason.QUEUE_FULL, "the queue is full");
        return;
      }
      removeLocked(victim);
      dropLocked(
          victim,
          RequestDroppedException.Reason.SHED_LOWER_PRIORITY,
          "evicted for a request of band " + band.name());
    }
    a.state = QUEUED;
    bq.add(a);
    a.mq.expiries.add(a);
    queued++;
    waiting.add(a.mq);
    meters.queued(a, 1);
    askWakeup(a.expiresAt);
  }

  /** The newest waiting request of the lowest sheddable band below {@code band}, or null. */
  private Admission victim(ModelQueue mq, int band) {
    for (int i = mq.bands.length - 1; i > band; i--) {
      BandQueue bq = mq.bands[i];
      if (bq.config.sheddable() && !bq.all.isEmpty()) {
        return bq.all.last();
      }
    }
    return null;
  }

  /** Takes a waiting (or held) request out of every structure. */
  private void removeLocked(Admission a) {
    BandQueue bq = a.mq.bands[a.band];
    if (a.state == HELD) {
      a.mq.held.remove(a);
      bq.held--;
    } else {
      bq.remove(a);
    }
    a.mq.expiries.remove(a);
    queued--;
    meters.queued(a, -1);
    if (a.mq.waitingCount() == 0) {
      waiting.remove(a.mq);
    }
  }

  private void dropLocked(Admission a, RequestDroppedException.Reason reason, String why) {
    a.state = ENDED;
    a.dropReason = reason;
    a.dropMessage = why;
    meters.dropped(a, reason);
    toDrop.add(a);
  }

  /** Expires, releases held requests after a capacity event, admits what fits. */
  private void dispatchLocked(long now) {
    boolean more = false;
    for (ModelQueue mq : new ArrayList<>(waiting)) {
      while (!mq.expiries.isEmpty() && mq.expiries.first().expiresAt <= now) {
        Admission a = mq.expiries.first();
        removeLocked(a);
        dropLocked(
            a,
            a.expiry,
            a.expiry == RequestDroppedException.Reason.TTL_EXPIRED
                ? "waited longer than band " + mq.bands[a.band].config.name() + "'s ttl"
                : "no endpoint can meet its ttft objective any more");
      }
      if (!mq.held.isEmpty()) {
        for (java.util.Iterator<Admission> it = mq.held.iterator(); it.hasNext(); ) {
          Admission a = it.next();
          if (a.heldAtEpoch < epoch) {
            it.remove();
            BandQueue bq = mq.bands[a.band];
            bq.held--;
            a.state = QUEUED;
            bq.add(a);
          }
        }
      }
      // One admission per model and pass: its continuation routes it (and the saturation signals
      // see it) before the next one is weighed; finish() passes again at once.
      int b = mq.highestDispatchable();
      if (b >= 0) {
        if (detector.saturation(mq.model, mq.inFlight) >= config.bands().get(b).maxSaturation()) {
          askWakeup(now + config.recheckInterval().toNanos());
        } else {
          Admission a = mq.bands[b].select(config.fairness());
          removeLocked(a);
          admitLocked(a, now);
          toAdmit.add(a);
          more = true;
        }
      }
      if (!mq.held.isEmpty()) {
        askWakeup(now + config.recheckInterval().toNanos());
      }
      if (!mq.expiries.isEmpty()) {
        askWakeup(mq.expiries.first().expiresAt);
      }
    }
    if (more) {
      pollAgain = true;
    }
  }

  private void askWakeup(long at) {
    if (at < wakeupAt) {
      wakeupAt = at;
      pendingWakeup = at;
    }
  }

  // ------------------------------------------------------------------ outside the lock

  /**
   * Completes what the last operations decided, and dispatches again while events arrived: one
   * thread at a time, without recursion.
   */
  private void finish() {
    synchronized (lock) {
      if (draining) {
        return; // the thread draining completes what this call queued
      }
      draining = true;
    }
    while (true) {
      Admission admit;
      Admission drop = null;
      long wake = Long.MAX_VALUE;
      synchronized (lock) {
        if (pollAgain && toAdmit.isEmpty() && toDrop.isEmpty()) {
          pollAgain = false;
          long now = clock.getAsLong();
          if (wakeupAt <= now) {
            wakeupAt = Long.MAX_VALUE;
          }
          dispatchLocked(now);
        }
        admit = toAdmit.poll();
        if (admit == null) {
          drop = toDrop.poll();
        }
        if (admit == null && drop == null) {
          draining = false;
          wake = pendingWakeup;
          pendingWakeup = Long.MAX_VALUE;
        }
      }
      if (admit != null) {
        if (!admit.future.complete(admit)) {
          admit.release(); // cancelled while it was being admitted
        }
      } else if (drop != null) {
        if (drop.future != null) {
          drop.future.completeExceptionally(drop.dropped());
        }
      } else {
        if (wake != Long.MAX_VALUE) {
          wakeup.at(wake);
        }
        return;
      }
    }
  }

  // ------------------------------------------------------------------ the admission handle

  /**
   * One request's passage through flow control: waiting, then admitted until {@link #release}.
   * Thread-safe.
   */
  public static final class Admission {
    private final FlowController owner;
    private final FlowRequest request;
    private final ModelQueue mq;
    private final int band;
    private final long seq;
    private final long arrival;
    private CompletableFuture<Admission> future;
    private int state;
    private long admittedAt;
    private long expiresAt;
    private long orderKey;
    private long heldAtEpoch;
    private RequestDroppedException.Reason expiry;
    private RequestDroppedException.Reason dropReason;
    private String dropMessage;

    private Admission(
        FlowController owner,
        FlowRequest request,
        ModelQueue mq,
        int band,
        long seq,
        long arrival,
        CompletableFuture<Admission> future) {
      this.owner = owner;
      this.request = request;
      this.mq = mq;
      this.band = band;
      this.seq = seq;
      this.arrival = arrival;
      this.future = future;
      FlowControlConfig.Band b = owner.config.bands().get(band);
      long ttl = b.ttl().toNanos();
      this.expiresAt = arrival + ttl;
      this.expiry = RequestDroppedException.Reason.TTL_EXPIRED;
      long sloTtft = request.slo().ttftNanos();
      if (owner.config.sloAdmission() && sloTtft > 0 && sloTtft < ttl) {
        this.expiresAt = arrival + sloTtft;
        this.expiry = RequestDroppedException.Reason.SLO_UNATTAINABLE;
      }
      this.orderKey =
          b.ordering() == FlowControlConfig.Ordering.EDF
              ? arrival + (sloTtft > 0 ? sloTtft : ttl)
              : seq;
    }

    /** The request. */
    public FlowRequest request() {
      return request;
    }

    /** The name of the band it joined. */
    public String band() {
      return owner.config.bands().get(band).name();
    }

    /** When it arrived, on the controller's clock. */
    public long arrivalNanos() {
      return arrival;
    }

    /** How long it waited before its (last) admission. */
    public long waitedNanos() {
      synchronized (owner.lock) {
        return state == ADMITTED || state == ENDED ? admittedAt - arrival : -1;
      }
    }

    /**
     * The request ended (or failed after its admission): its capacity goes back and waiting
     * requests may be admitted. Idempotent.
     */
    public void release() {
      release(0);
    }

    /**
     * As {@link #release()}, charging its tenant {@code outputTokens} more served tokens (virtual
     * token counting).
     */
    public void release(long outputTokens) {
      synchronized (owner.lock) {
        if (state != ADMITTED) {
          return;
        }
        state = ENDED;
        if (mq != null) {
          mq.inFlight--;
          if (owner.config.fairness() == FlowControlConfig.Fairness.VIRTUAL_TOKEN_COUNTER) {
            mq.bands[band].charge(request.tenant(), outputTokens);
          }
        }
        owner.epoch++;
        owner.pollAgain = true;
      }
      owner.finish();
    }

    /**
     * Gives the admission back and waits again, in the same place of its queue, until the next
     * change of load (a release, a {@link #poll}): for a request that no endpoint is predicted to
     * serve within its objective yet. The returned future completes as {@link #enqueue}'s does.
     */
    public CompletableFuture<Admission> requeue() {
      CompletableFuture<Admission> f = new CompletableFuture<>();
      synchronized (owner.lock) {
        if (state != ADMITTED || mq == null) {
          throw new IllegalStateException("requeue of a request that is not admitted");
        }
        mq.inFlight--;
        future = f;
        state = HELD;
        heldAtEpoch = owner.epoch;
        mq.held.add(this);
        mq.bands[band].held++;
        mq.expiries.add(this);
        owner.queued++;
        owner.waiting.add(mq);
        owner.meters.queued(this, 1);
        owner.askWakeup(owner.clock.getAsLong() + owner.config.recheckInterval().toNanos());
        owner.askWakeup(expiresAt);
      }
      f.whenComplete(
          (x, t) -> {
            if (t instanceof CancellationException) {
              cancelWaiting();
            }
          });
      owner.finish();
      return f;
    }

    /**
     * Drops the admitted request for {@code reason} (counted like the controller's own drops) and
     * gives its capacity back; returns the exception to fail it with.
     */
    public RequestDroppedException drop(RequestDroppedException.Reason reason, String message) {
      synchronized (owner.lock) {
        if (state == ADMITTED) {
          state = ENDED;
          if (mq != null) {
            mq.inFlight--;
          }
          owner.epoch++;
          owner.pollAgain = true;
        }
        dropReason = reason;
        dropMessage = message;
        owner.meters.dropped(this, reason);
      }
      owner.finish();
      return dropped();
    }

    private void cancelWaiting() {
      synchronized (owner.lock) {
        if (state != QUEUED && state != HELD) {
          return;
        }
        owner.removeLocked(this);
        state = ENDED;
        owner.meters.cancelled(this);
      }
    }

    RequestDroppedException dropped() {
      return new RequestDroppedException(
          dropReason,
          "request dropped by flow control ("
              + dropReason.header()
              + "): "
              + dropMessage
              + " (model \""
              + request.model()
              + "\", band "
              + band()
              + ")",
          owner.config.retryAfter());
    }

    /** The band index (for meters). */
    int bandIndex() {
      return band;
    }

    @Override
    public String toString() {
      return "Admission{" + request + ", band " + band() + ", seq " + seq + "}";
    }
  }

  // ------------------------------------------------------------------ queues

  /** One model's bands. Guarded by the controller's lock. */
  private static final class ModelQueue {
    final String model;
    final BandQueue[] bands;
    final TreeSet<Admission> expiries =
        new TreeSet<>(
            Comparator.<Admission>comparingLong(a -> a.expiresAt).thenComparingLong(a -> a.seq));
    final LinkedHashSet<Admission> held = new LinkedHashSet<>();
    long inFlight;

    ModelQueue(String model, FlowControlConfig config) {
      this.model = model;
      List<FlowControlConfig.Band> cfg = config.bands();
      this.bands = new BandQueue[cfg.size()];
      for (int i = 0; i < bands.length; i++) {
        bands[i] = new BandQueue(cfg.get(i));
      }
    }

    int highestDispatchable() {
      for (int i = 0; i < bands.length; i++) {
        if (!bands[i].all.isEmpty()) {
          return i;
        }
      }
      return -1;
    }

    int waitingCount() {
      int n = 0;
      for (BandQueue b : bands) {
        n += b.size();
      }
      return n;
    }
  }

  /** One band of one model: its tenants' queues. Guarded by the controller's lock. */
  private static final class BandQueue {
    static final Comparator<Admission> ORDER =
        Comparator.<Admission>comparingLong(a -> a.orderKey).thenComparingLong(a -> a.seq);

    final FlowControlConfig.Band config;
    final TreeSet<Admission> all = new TreeSet<>(ORDER);
    final Map<String, TenantQueue> tenants = new LinkedHashMap<>();
    final ArrayDeque<TenantQueue> ring = new ArrayDeque<>();
    int held;
    double virtualTime;

    BandQueue(FlowControlConfig.Band config) {
      this.config = config;
    }

    int size() {
      return all.size() + held;
    }

    void add(Admission a) {
      all.add(a);
      TenantQueue t = tenants.get(a.request.tenant());
      if (t == null) {
        t = new TenantQueue(a.request.tenant());
        // A tenant that becomes backlogged starts from the least-served backlogged tenant's count
        // (or the band's virtual time): idling earns no credit.
        double min = virtualTime;
        boolean any = false;
        for (TenantQueue o : tenants.values()) {
          min = any ? Math.min(min, o.counter) : o.counter;
          any = true;
        }
        t.counter = Math.max(t.counter, min);
        tenants.put(t.tenant, t);
        ring.addLast(t);
      }
      t.items.add(a);
    }

    void remove(Admission a) {
      all.remove(a);
      TenantQueue t = tenants.get(a.request.tenant());
      if (t != null) {
        t.items.remove(a);
        if (t.items.isEmpty()) {
          tenants.remove(t.tenant);
          ring.remove(t);
        }
      }
    }

    /** The next request by the fairness policy (the band is not empty). */
    Admission select(FlowControlConfig.Fairness fairness) {
      switch (fairness) {
        case ROUND_ROBIN:
          {
            TenantQueue t = ring.pollFirst();
            ring.addLast(t);
            return t.items.first();
          }
        case VIRTUAL_TOKEN_COUNTER:
          {
            TenantQueue best = null;
            for (TenantQueue t : tenants.values()) {
              if (best == null
                  || t.counter < best.counter
                  || (t.counter == best.counter
                      && ORDER.compare(t.items.first(), best.items.first()) < 0)) {
                best = t;
              }
            }
            virtualTime = Math.max(virtualTime, best.counter);
            Admission a = best.items.first();
            best.counter += a.request.tokens(); // prompt tokens charged when admitted
            return a;
          }
        default:
          return all.first();
      }
    }

    /**
     * The newest waiting request of the tenant with the most requests waiting, if that tenant has
     * at least two more waiting than {@code arriving}'s tenant; else null.
     */
    Admission newestOfLongest(Admission arriving) {
      TenantQueue mine = tenants.get(arriving.request.tenant());
      int own = mine == null ? 0 : mine.items.size();
      TenantQueue longest = null;
      for (TenantQueue t : tenants.values()) {
        if (longest == null || t.items.size() > longest.items.size()) {
          longest = t;
        }
      }
      return longest != null && longest.items.size() > own + 1 ? longest.items.last() : null;
    }

    /** Charges {@code tenant} for tokens served (virtual token counter). */
    void charge(String tenant, long tokens) {
      TenantQueue t = tenants.get(tenant);
      if (t != null) {
        t.counter += tokens;
      }
    }
  }

  /** One tenant's waiting requests in one band. */
  private static final class TenantQueue {
    final String tenant;
    final TreeSet<Admission> items = new TreeSet<>(BandQueue.ORDER);
    double counter;

    TenantQueue(String tenant) {
      this.tenant = tenant;
    }
  }
}
