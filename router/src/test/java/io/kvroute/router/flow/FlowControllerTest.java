package io.kvroute.router.flow;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.router.flow.FlowControlConfig.Band;
import io.kvroute.router.flow.FlowControlConfig.Fairness;
import io.kvroute.router.flow.FlowControlConfig.Ordering;
import io.kvroute.router.flow.FlowController.Admission;
import io.kvroute.router.flow.FlowController.FlowRequest;
import io.kvroute.scoring.LatencySlo;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * {@link FlowController} on a manual clock, with a saturation that is the in-flight count over a
 * capacity the test sets: admission, bands, fairness, ordering, bounds, TTL, eviction, the latency
 * hold, cancellation, shutdown, meters, and many threads at once.
 */
class FlowControllerTest {
  private final AtomicLong clock = new AtomicLong(1_000_000_000L);
  private final AtomicInteger capacity = new AtomicInteger(1);
  private final List<Long> wakeups = new ArrayList<>();
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

  private FlowController controller(FlowControlConfig config) {
    return FlowController.create(
        config,
        (model, inFlight) -> capacity.get() == 0 ? 1 : inFlight / (double) capacity.get(),
        clock::get,
        wakeups::add,
        registry);
  }

  private static FlowRequest req(int priority, String tenant) {
    return req(priority, tenant, 100);
  }

  private static FlowRequest req(int priority, String tenant, long tokens) {
    return new FlowRequest("m", priority, tenant, tokens, LatencySlo.NONE);
  }

  private static RequestDroppedException.Reason reasonOf(CompletableFuture<Admission> f) {
    assertThat(f).isCompletedExceptionally();
    try {
      f.join();
    } catch (CompletionException e) {
      return ((RequestDroppedException) e.getCause()).reason();
    }
    throw new AssertionError("not dropped");
  }

  @Test
  void admitsAtOnceWhileTheFleetHasRoomAndQueuesBeyond() {
    FlowController c = controller(FlowControlConfig.builder().build());
    CompletableFuture<Admission> a = c.enqueue(req(0, "t"));
    assertThat(a).isCompleted();
    assertThat(c.inFlight("m")).isEqualTo(1);
    CompletableFuture<Admission> b = c.enqueue(req(0, "t"));
    assertThat(b).isNotDone();
    assertThat(c.queued()).isEqualTo(1);
    a.join().release();
    assertThat(b).isCompleted();
    assertThat(c.queued()).isZero();
    assertThat(c.inFlight("m")).isEqualTo(1);
    assertThat(registry.get("kvroute.flow.admitted").tag("band", "standard").counter().count())
        .isEqualTo(2);
    assertThat(registry.get("kvroute.flow.wait").tag("tenant", "t").timer().count()).isEqualTo(2);
  }

  @Test
  void higherBandsGoFirstAndNegativePrioritiesAreSheddable() {
    FlowControlConfig config = FlowControlConfig.builder().build();
    assertThat(config.bands().get(config.bandIndex(-1)).name()).isEqualTo("sheddable");
    assertThat(config.bands().get(config.bandIndex(5)).name()).isEqualTo("standard");
    assertThat(config.bands().get(config.bandIndex(1000)).name()).isEqualTo("critical");
    FlowController c = controller(config);
    Admission first = c.enqueue(req(0, "t")).join();
    CompletableFuture<Admission> low = c.enqueue(req(-5, "t"));
    CompletableFuture<Admission> mid = c.enqueue(req(0, "t"));
    CompletableFuture<Admission> high = c.enqueue(req(100, "t"));
    first.release();
    assertThat(high).isCompleted();
    assertThat(mid).isNotDone();
    high.join().release();
    assertThat(mid).isCompleted();
    assertThat(low).isNotDone();
    mid.join().release();
    assertThat(low).isCompleted();
    assertThat(low.join().band()).isEqualTo("sheddable");
  }

  @Test
  void aFullBandRefusesWithQueueFull() {
    FlowController c =
        controller(
            FlowControlConfig.builder()
                .bands(
                    List.of(
                        new Band("only", 0, 2, Duration.ofSeconds(30), Ordering.FCFS, 1.0, false)))
                .build());
    c.enqueue(req(0, "t")).join();
    c.enqueue(req(0, "t"));
    c.enqueue(req(0, "t"));
    CompletableFuture<Admission> third = c.enqueue(req(0, "t"));
    assertThat(reasonOf(third)).isEqualTo(RequestDroppedException.Reason.QUEUE_FULL);
    assertThat(third.handle((x, t) -> t.getMessage()).join())
        .contains("queue-full")
        .contains("band only is full");
    assertThat(
            registry
                .get("kvroute.flow.dropped")
                .tag("reason", "queue-full")
                .tag("band", "only")
                .counter()
                .count())
        .isEqualTo(1);
  }

  @Test
  void aFullBandDropsTheNewestRequestOfTheTenantWithTheMostWaiting() {
    FlowController c =
        controller(
            FlowControlConfig.builder()
                .bands(
                    List.of(
                        new Band("only", 0, 3, Duration.ofSeconds(30), Ordering.FCFS, 1.0, false)))
                .build());
    c.enqueue(req(0, "flood")).join(); // admitted: the fleet is full after it
    CompletableFuture<Admission> f1 = c.enqueue(req(0, "flood"));
    CompletableFuture<Admission> f2 = c.enqueue(req(0, "flood"));
    CompletableFuture<Admission> f3 = c.enqueue(req(0, "flood"));
    // the band is full of the flood's requests; another of the flood's is refused ...
    assertThat(reasonOf(c.enqueue(req(0, "flood"))))
        .isEqualTo(RequestDroppedException.Reason.QUEUE_FULL);
    // ... but the quiet tenant's gets in, in place of the flood's newest
    CompletableFuture<Admission> quiet = c.enqueue(req(0, "quiet"));
    assertThat(quiet).isNotDone();
    assertThat(reasonOf(f3)).isEqualTo(RequestDroppedException.Reason.QUEUE_FULL);
    assertThat(f3.handle((x, t) -> t.getMessage()).join()).contains("most requests waiting");
    assertThat(f1).isNotDone();
    assertThat(f2).isNotDone();
    assertThat(c.queued()).isEqualTo(3);
  }

  @Test
  void aRequestThatWaitsPastItsBandsTtlIsDropped() {
    FlowController c =
        controller(
            FlowControlConfig.builder()
                .bands(
                    List.of(
                        new Band("b", 0, 10, Duration.ofMillis(500), Ordering.FCFS, 1.0, false)))
                .build());
    c.enqueue(req(0, "t")).join();
    CompletableFuture<Admission> waiting = c.enqueue(req(0, "t"));
    assertThat(wakeups).contains(clock.get() + 500_000_000L);
    clock.addAndGet(499_000_000L);
    c.poll();
    assertThat(waiting).isNotDone();
    clock.addAndGet(1_000_000L);
    c.poll();
    assertThat(reasonOf(waiting)).isEqualTo(RequestDroppedException.Reason.TTL_EXPIRED);
    assertThat(c.queued()).isZero();
  }

  @Test
  void aRequestWhoseTtftObjectivePassesWhileWaitingIsSloUnattainable() {
    FlowController c = controller(FlowControlConfig.builder().build());
    c.enqueue(req(0, "t")).join();
    CompletableFuture<Admission> waiting =
        c.enqueue(new FlowRequest("m", 0, "t", 10, LatencySlo.of(Duration.ofMillis(200), null)));
    clock.addAndGet(200_000_000L);
    c.poll();
    assertThat(reasonOf(waiting)).isEqualTo(RequestDroppedException.Reason.SLO_UNATTAINABLE);
  }

  @Test
  void aFullQueueEvictsTheNewestSheddableRequestForAHigherBand() {
    FlowController c = controller(FlowControlConfig.builder().maxQueued(2).build());
    c.enqueue(req(0, "t")).join();
    CompletableFuture<Admission> old = c.enqueue(req(-1, "t"));
    CompletableFuture<Admission> newest = c.enqueue(req(-1, "t"));
    CompletableFuture<Admission> important = c.enqueue(req(0, "t"));
    assertThat(reasonOf(newest)).isEqualTo(RequestDroppedException.Reason.SHED_LOWER_PRIORITY);
    assertThat(old).isNotDone();
    assertThat(important).isNotDone();
    assertThat(c.queued()).isEqualTo(2);
    // a request of the lowest band cannot evict anything: refused
    assertThat(reasonOf(c.enqueue(req(-1, "t"))))
        .isEqualTo(RequestDroppedException.Reason.QUEUE_FULL);
  }

  @Test
  void requestsOfBandsThatAreNotSheddableAreNeverEvicted() {
    FlowController c =
        controller(
            FlowControlConfig.builder()
                .maxQueued(1)
                .bands(List.of(Band.of("high", 10), Band.of("low", 0)))
                .build());
    c.enqueue(req(0, "t")).join();
    CompletableFuture<Admission> low = c.enqueue(req(0, "t"));
    assertThat(reasonOf(c.enqueue(req(10, "t"))))
        .isEqualTo(RequestDroppedException.Reason.QUEUE_FULL);
    assertThat(low).isNotDone();
  }

  /**
   * Releases {@code running}, then each admission as it comes (capacity 1: one at a time); returns
   * the tenants in the order they were admitted.
   */
  private static List<String> serve(Admission running, List<CompletableFuture<Admission>> all) {
    List<String> order = new ArrayList<>();
    java.util.Set<Admission> released =
        java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    running.release();
    while (order.size() < all.size()) {
      Admission next = null;
      for (CompletableFuture<Admission> f : all) {
        if (f.isDone() && !released.contains(f.join())) {
          next = f.join();
          break;
        }
      }
      assertThat(next).as("an admission after %s", order).isNotNull();
      order.add(next.request().tenant());
      released.add(next);
      next.release();
    }
    return order;
  }

  @Test
  void roundRobinServesBackloggedTenantsInTurn() {
    FlowController c = controller(FlowControlConfig.builder().build());
    Admission running = c.enqueue(req(0, "x")).join();
    List<CompletableFuture<Admission>> all = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      all.add(c.enqueue(req(0, "a")));
    }
    all.add(c.enqueue(req(0, "b")));
    all.add(c.enqueue(req(0, "b")));
    assertThat(serve(running, all)).containsExactly("a", "b", "a", "b", "a", "a", "a", "a");
  }

  @Test
  void theVirtualTokenCounterServesTheTenantServedTheFewestTokens() {
    FlowController c =
        controller(FlowControlConfig.builder().fairness(Fairness.VIRTUAL_TOKEN_COUNTER).build());
    Admission running = c.enqueue(req(0, "x")).join();
    List<CompletableFuture<Admission>> all = new ArrayList<>();
    // a's requests are ten times b's: b gets ten requests for each of a's
    for (int i = 0; i < 3; i++) {
      all.add(c.enqueue(req(0, "a", 1000)));
    }
    for (int i = 0; i < 12; i++) {
      all.add(c.enqueue(req(0, "b", 100)));
    }
    // a first (older at equal counts), then b ten times, then a again
    assertThat(serve(running, all).subList(0, 12))
        .containsExactly("a", "b", "b", "b", "b", "b", "b", "b", "b", "b", "b", "a");
  }

  @Test
  void fairnessNoneServesTheBandInArrivalOrder() {
    FlowController c = controller(FlowControlConfig.builder().fairness(Fairness.NONE).build());
    Admission running = c.enqueue(req(0, "x")).join();
    List<CompletableFuture<Admission>> all = new ArrayList<>();
    all.add(c.enqueue(req(0, "a")));
    all.add(c.enqueue(req(0, "a")));
    all.add(c.enqueue(req(0, "b")));
    assertThat(serve(running, all)).containsExactly("a", "a", "b");
  }

  @Test
  void edfServesTheEarliestDeadlineFirst() {
    FlowController c =
        controller(
            FlowControlConfig.builder()
                .sloAdmission(false)
                .bands(
                    List.of(new Band("b", 0, 10, Duration.ofSeconds(30), Ordering.EDF, 1, false)))
                .build());
    Admission running = c.enqueue(req(0, "t")).join();
    CompletableFuture<Admission> lax =
        c.enqueue(new FlowRequest("m", 0, "t", 1, LatencySlo.of(Duration.ofSeconds(10), null)));
    CompletableFuture<Admission> none = c.enqueue(req(0, "t"));
    CompletableFuture<Admission> tight =
        c.enqueue(new FlowRequest("m", 0, "t", 1, LatencySlo.of(Duration.ofSeconds(1), null)));
    running.release();
    assertThat(tight).isCompleted();
    assertThat(lax).isNotDone();
    tight.join().release();
    assertThat(lax).isCompleted();
    lax.join().release();
    assertThat(none).isCompleted(); // its deadline is its band's TTL, 30 s
  }

  @Test
  void aBandWithALowerSaturationLimitKeepsHeadroomForTheBandsAbove() {
    capacity.set(10);
    FlowController c =
        controller(
            FlowControlConfig.builder()
                .bands(
                    List.of(
                        Band.of("high", 10),
                        new Band("low", 0, 100, Duration.ofSeconds(30), Ordering.FCFS, 0.5, true)))
                .build());
    for (int i = 0; i < 5; i++) {
      assertThat(c.enqueue(req(0, "t"))).isCompleted();
    }
    assertThat(c.enqueue(req(0, "t"))).isNotDone();
    assertThat(c.enqueue(req(10, "t"))).isCompleted();
    assertThat(c.saturation("m")).isEqualTo(0.6);
  }

  @Test
  void aCancelledWaitingRequestLeavesTheQueue() {
    FlowController c = controller(FlowControlConfig.builder().build());
    Admission running = c.enqueue(req(0, "t")).join();
    CompletableFuture<Admission> gone = c.enqueue(req(0, "t"));
    CompletableFuture<Admission> next = c.enqueue(req(0, "t"));
    gone.cancel(true);
    assertThat(c.queued()).isEqualTo(1);
    running.release();
    assertThat(next).isCompleted();
    assertThat(registry.get("kvroute.flow.cancelled").counter().count()).isEqualTo(1);
  }

  @Test
  void aRequeuedRequestWaitsForTheNextChangeOfLoadInItsPlace() {
    capacity.set(2);
    FlowController c = controller(FlowControlConfig.builder().build());
    Admission held = c.enqueue(req(0, "t")).join();
    Admission other = c.enqueue(req(0, "t")).join();
    CompletableFuture<Admission> again = held.requeue();
    assertThat(again).isNotDone();
    assertThat(c.queued()).isEqualTo(1);
    // a newcomer waits behind the held request
    CompletableFuture<Admission> newcomer = c.enqueue(req(0, "t"));
    assertThat(newcomer).isNotDone();
    assertThat(wakeups).isNotEmpty();
    c.poll();
    assertThat(again).isCompleted();
    assertThat(newcomer).isNotDone();
    other.release();
    assertThat(newcomer).isCompleted();
  }

  @Test
  void aDropOfAnAdmittedRequestGivesItsCapacityBack() {
    FlowController c = controller(FlowControlConfig.builder().build());
    Admission a = c.enqueue(req(0, "t")).join();
    CompletableFuture<Admission> next = c.enqueue(req(0, "t"));
    RequestDroppedException e = a.drop(RequestDroppedException.Reason.SLO_UNATTAINABLE, "late");
    assertThat(e.reason()).isEqualTo(RequestDroppedException.Reason.SLO_UNATTAINABLE);
    assertThat(e.httpStatus()).isEqualTo(429);
    assertThat(e.retryAfter()).contains(Duration.ofSeconds(1));
    assertThat(e.getStackTrace()).isEmpty();
    assertThat(next).isCompleted();
  }

  @Test
  void tryAdmitAdmitsOnlyWhatWouldNotWait() {
    FlowController c = controller(FlowControlConfig.builder().build());
    assertThat(c.tryAdmit(req(0, "t"))).isPresent();
    assertThat(c.tryAdmit(req(0, "t"))).isEmpty();
    assertThat(c.queued()).isZero();
  }

  @Test
  void shutdownFailsWaitingRequestsAndRefusesNewOnes() {
    FlowController c = controller(FlowControlConfig.builder().build());
    c.enqueue(req(0, "t")).join();
    CompletableFuture<Admission> waiting = c.enqueue(req(0, "t"));
    IllegalStateException closed = new IllegalStateException("closed");
    c.shutdown(closed);
    assertThatThrownBy(waiting::join).hasCause(closed);
    assertThatThrownBy(() -> c.enqueue(req(0, "t")).join()).hasCause(closed);
    assertThat(c.queued()).isZero();
  }

  @Test
  void theQueueNeverHoldsMoreThanItsBound() {
    FlowController c = controller(FlowControlConfig.builder().maxQueued(50).build());
    c.enqueue(req(0, "t")).join();
    int dropped = 0;
    for (int i = 0; i < 500; i++) {
      CompletableFuture<Admission> f = c.enqueue(req(i % 3 == 0 ? -1 : 0, "t" + (i % 7)));
      if (f.isCompletedExceptionally()) {
        dropped++;
      }
      assertThat(c.queued()).isLessThanOrEqualTo(50);
    }
    assertThat(c.queued()).isEqualTo(50);
    assertThat(dropped).isGreaterThanOrEqualTo(450 - 50);
  }

  @Test
  void configErrorsNameTheField() {
    assertThatThrownBy(() -> FlowControlConfig.builder().bands(List.of()).build())
        .hasMessageContaining("flowControl.bands");
    assertThatThrownBy(
            () ->
                FlowControlConfig.builder()
                    .bands(List.of(Band.of("a", 1), Band.of("a", 2)))
                    .build())
        .hasMessageContaining("two bands named a");
    assertThatThrownBy(() -> new Band("x", 0, 1, Duration.ZERO, Ordering.FCFS, 1, false))
        .hasMessageContaining("band x: ttl must be > 0");
  }

  @Test
  void manyThreadsEnqueueingAndReleasingLoseNoRequest() throws Exception {
    capacity.set(4);
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try {
      FlowController[] self = new FlowController[1];
      FlowController c =
          FlowController.create(
              FlowControlConfig.builder()
                  .bands(
                      List.of(
                          new Band(
                              "high", 10, 5000, Duration.ofMinutes(5), Ordering.FCFS, 1, false),
                          new Band("low", 0, 5000, Duration.ofMinutes(5), Ordering.FCFS, 1, true)))
                  .build(),
              (model, inFlight) -> inFlight / 4.0,
              System::nanoTime,
              at ->
                  timer.schedule(
                      () -> self[0].poll(),
                      Math.max(0, at - System.nanoTime()),
                      TimeUnit.NANOSECONDS),
              null);
      self[0] = c;
      int n = 2000;
      CountDownLatch done = new CountDownLatch(n);
      ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
      AtomicInteger concurrent = new AtomicInteger();
      AtomicInteger maxConcurrent = new AtomicInteger();
      for (int i = 0; i < n; i++) {
        int k = i;
        pool.execute(
            () ->
                c.enqueue(req(k % 5 == 0 ? 100 : 0, "t" + (k % 3)))
                    .whenComplete(
                        (a, t) -> {
                          if (t != null) {
                            errors.add(t);
                            done.countDown();
                            return;
                          }
                          int now = concurrent.incrementAndGet();
                          maxConcurrent.accumulateAndGet(now, Math::max);
                          pool.execute(
                              () -> {
                                concurrent.decrementAndGet();
                                a.release();
                                done.countDown();
                              });
                        }));
      }
      assertThat(done.await(60, TimeUnit.SECONDS)).as("every request ended").isTrue();
      assertThat(errors).isEmpty();
      assertThat(maxConcurrent.get()).isLessThanOrEqualTo(4);
      assertThat(c.queued()).isZero();
      assertThat(c.inFlight("m")).isZero();
    } finally {
      pool.shutdownNow();
      timer.shutdownNow();
    }
  }
}
