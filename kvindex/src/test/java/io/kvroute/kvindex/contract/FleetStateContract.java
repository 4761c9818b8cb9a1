package io.kvroute.kvindex.contract;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.kvindex.fleet.FleetView;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The behaviour every {@link FleetState} implementation must have, as tests an implementation's
 * test class extends (kvindex's test-jar): a replica's own counts are exact at once, other
 * replicas' become visible, counts never go negative and leave with their replica, speculative
 * entries match prefixes by the checkpoint rule (exact with stride 1, to the stride's start when a
 * prompt diverges inside a stride, exact for a prompt that contains the earlier one), expire with
 * their TTL, and the local view shows one's own state only; the routing memory likewise, kept apart
 * from the speculative entries, with its own TTL; cold routing ordered fleet-wide.
 *
 * <p>An implementation supplies {@link #join(FleetConfig)}: a replica of this test's fleet (every
 * call of one test joins the same fleet; the config's fleet name is unique per test). Replicas are
 * closed after each test. Propagation between replicas may be asynchronous: the tests wait for it
 * (bounded), never for a replica's own state.
 */
public abstract class FleetStateContract {
  private static final AtomicInteger FLEETS = new AtomicInteger();
  private final List<FleetState> joined = new ArrayList<>();
  private final String fleet =
      "contract-" + ProcessHandle.current().pid() + "-" + FLEETS.incrementAndGet();

  /** A replica of the fleet named in {@code config}. */
  protected abstract FleetState join(FleetConfig config);

  /** A replica of this test's fleet, the builder completed by {@code tweak}. */
  protected final FleetState replica(
      String id, java.util.function.UnaryOperator<FleetConfig.Builder> tweak) {
    FleetState f = join(tweak.apply(FleetConfig.builder().fleet(fleet).replicaId(id)).build());
    joined.add(f);
    return f;
  }

  /**
   * A replica of this test's fleet with stride 1 and a speculative TTL of a minute (the tests read
   * entries well within it, however loaded the machine).
   */
  protected final FleetState replica(String id) {
    return replica(id, b -> b.speculativeStride(1).speculativeTtl(Duration.ofMinutes(1)));
  }

  @AfterEach
  void closeReplicas() {
    for (FleetState f : joined) {
      f.close();
    }
    joined.clear();
  }

  /** Distinct chained-looking keys: {@code seed}-derived. */
  public static long[] keys(int seed, int n) {
    long[] k = new long[n];
    long h = 0x9E3779B97F4A7C15L * (seed + 1);
    for (int i = 0; i < n; i++) {
      h = (h ^ (i + 1)) * 0xff51afd7ed558ccdL;
      h ^= h >>> 29;
      k[i] = h;
    }
    return k;
  }

  /** {@code base}'s first {@code shared} keys, then different ones, {@code n} in all. */
  public static long[] diverging(long[] base, int shared, int n, int seed) {
    long[] other = keys(seed + 1000, n);
    System.arraycopy(base, 0, other, 0, Math.min(shared, n));
    return other;
  }

  /** Waits (60 s at most) for a condition that depends on propagation between replicas. */
  protected static void await(String what, BooleanSupplier condition) {
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after 60 s waiting for " + what);
      }
      try {
        Thread.sleep(10); // polling interval while waiting for a condition, not synchronisation
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }

  /** Waits until {@code view} gives {@code expected} (compared as strings for readable errors). */
  protected static void awaitView(String what, Supplier<FleetView> view, String expected) {
    String[] last = {null};
    try {
      await(
          what + ": " + expected,
          () -> {
            last[0] = describe(view.get());
            return last[0].equals(expected);
          });
    } catch (AssertionError e) {
      throw new AssertionError(e.getMessage() + " (last: " + last[0] + ")", e);
    }
  }

  /** "e1=2/30/5 e2=0/0/0": requests / tokens / speculative blocks per endpoint. */
  protected static String describe(FleetView v) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < v.size(); i++) {
      if (i > 0) {
        sb.append(' ');
      }
      sb.append(v.endpointId(i))
          .append('=')
          .append(v.inFlightRequests(i))
          .append('/')
          .append(v.inFlightTokens(i))
          .append('/')
          .append(v.speculativeBlocks(i));
    }
    return sb.toString();
  }

  private static final List<String> EPS = List.of("e1", "e2", "e3");
  private static final long[] NONE = new long[0];

  @Test
  void ownCountsAreExactAtOnce() {
    FleetState a = replica("a");
    a.requestStarted("e1", 100);
    a.requestStarted("e1", 20);
    a.requestStarted("e2", 7);
    FleetView v = a.view(EPS, NONE, 0);
    assertThat(describe(v)).isEqualTo("e1=2/120/0 e2=1/7/0 e3=0/0/0");
    assertThat(describe(a.localView(EPS, NONE, 0))).isEqualTo("e1=2/120/0 e2=1/7/0 e3=0/0/0");
    a.requestFinished("e1", 100);
    assertThat(describe(a.view(EPS, NONE, 0))).isEqualTo("e1=1/20/0 e2=1/7/0 e3=0/0/0");
  }

  @Test
  void otherReplicasCountsBecomeVisibleToEveryReplica() {
    FleetState a = replica("a");
    FleetState b = replica("b");
    a.requestStarted("e1", 100);
    a.requestStarted("e1", 100);
    b.requestStarted("e1", 50);
    b.requestStarted("e3", 1);
    awaitView("a to see b", () -> a.view(EPS, NONE, 0), "e1=3/250/0 e2=0/0/0 e3=1/1/0");
    awaitView("b to see a", () -> b.view(EPS, NONE, 0), "e1=3/250/0 e2=0/0/0 e3=1/1/0");
    assertThat(a.view(EPS, NONE, 0).source()).isEqualTo(FleetView.Source.FLEET);
    // the local view: one's own only
    FleetView local = a.localView(EPS, NONE, 0);
    assertThat(local.source()).isEqualTo(FleetView.Source.LOCAL);
    assertThat(describe(local)).isEqualTo("e1=2/200/0 e2=0/0/0 e3=0/0/0");
  }

  @Test
  void finishedRequestsLeaveAndCountsNeverGoNegative() {
    FleetState a = replica("a");
    FleetState b = replica("b");
    a.requestStarted("e1", 10);
    a.requestFinished("e1", 10);
    a.requestFinished("e1", 10); // one too many
    a.requestFinished("e2", 10); // never started
    b.requestStarted("e1", 5);
    awaitView("b's request only", () -> a.view(EPS, NONE, 0), "e1=1/5/0 e2=0/0/0 e3=0/0/0");
    b.requestFinished("e1", 5);
    awaitView("nothing in flight", () -> a.view(EPS, NONE, 0), "e1=0/0/0 e2=0/0/0 e3=0/0/0");
    awaitView("nothing in flight", () -> b.view(EPS, NONE, 0), "e1=0/0/0 e2=0/0/0 e3=0/0/0");
  }

  @Test
  void aClosedReplicasCountsLeaveTheFleet() {
    FleetState a = replica("a");
    FleetState b = replica("b");
    a.requestStarted("e2", 30);
    a.requestStarted("e2", 30);
    awaitView("b to see a", () -> b.view(EPS, NONE, 0), "e1=0/0/0 e2=2/60/0 e3=0/0/0");
    a.close();
    awaitView("a's counts to leave", () -> b.view(EPS, NONE, 0), "e1=0/0/0 e2=0/0/0 e3=0/0/0");
  }

  @Test
  void speculativeEntriesAreSeenByEveryReplicaExactlyWithStrideOne() {
    FleetState a = replica("a");
    FleetState b = replica("b");
    long[] k = keys(1, 12);
    a.speculate("e2", k, 8);
    // a's own entries at once
    assertThat(describe(a.view(EPS, k, 12))).isEqualTo("e1=0/0/0 e2=0/0/8 e3=0/0/0");
    awaitView("b to see a's entries", () -> b.view(EPS, k, 12), "e1=0/0/0 e2=0/0/8 e3=0/0/0");
    long[] d = diverging(k, 5, 12, 1);
    assertThat(describe(b.view(EPS, d, 12))).isEqualTo("e1=0/0/0 e2=0/0/5 e3=0/0/0");
    assertThat(describe(b.view(EPS, keys(2, 12), 12))).isEqualTo("e1=0/0/0 e2=0/0/0 e3=0/0/0");
    assertThat(describe(b.view(EPS, k, 0))).isEqualTo("e1=0/0/0 e2=0/0/0 e3=0/0/0");
    // b's local view does not hold a's entries
    assertThat(describe(b.localView(EPS, k, 12))).isEqualTo("e1=0/0/0 e2=0/0/0 e3=0/0/0");
  }

  @Test
  void aStrideMatchesContainedPromptsExactlyAndDivergingOnesToTheStridesStart() {
    FleetState a = replica("a", x -> x.speculativeStride(4).speculativeTtl(Duration.ofMinutes(1)));
    FleetState b = replica("b", x -> x.speculativeStride(4).speculativeTtl(Duration.ofMinutes(1)));
    long[] k = keys(3, 16);
    a.speculate("e1", k, 10); // checkpoints 0, 4, 8; tails 3, 7, 9
    // the next turn of the conversation contains the whole earlier prompt: exact
    awaitView("b to see a's entries", () -> b.view(EPS, k, 16), "e1=0/0/10 e2=0/0/0 e3=0/0/0");
    // the same prompt: exact
    assertThat(describe(b.view(EPS, k, 10))).isEqualTo("e1=0/0/10 e2=0/0/0 e3=0/0/0");
    // diverging inside the second stride (6 shared): matched to its start (5)
    assertThat(describe(b.view(EPS, diverging(k, 6, 16, 3), 16)))
        .isEqualTo("e1=0/0/5 e2=0/0/0 e3=0/0/0");
    // diverging at a stride's end (8 shared): exact, the tail of the stride matched
    assertThat(describe(b.view(EPS, diverging(k, 8, 16, 3), 16)))
        .isEqualTo("e1=0/0/8 e2=0/0/0 e3=0/0/0");
    // a shorter prompt inside the first stride (3 keys): checkpoint 0 only
    assertThat(describe(b.view(EPS, k, 3))).isEqualTo("e1=0/0/1 e2=0/0/0 e3=0/0/0");
    // two requests to two endpoints
    a.speculate("e3", k, 16);
    awaitView("b to see the second", () -> b.view(EPS, k, 16), "e1=0/0/10 e2=0/0/0 e3=0/0/16");
  }

  @Test
  void speculativeEntriesExpireWithTheirTtl() {
    FleetState a = replica("a", x -> x.speculativeStride(1).speculativeTtl(Duration.ofMillis(300)));
    FleetState b = replica("b", x -> x.speculativeStride(1).speculativeTtl(Duration.ofMillis(300)));
    long[] k = keys(4, 6);
    a.speculate("e1", k, 6);
    a.flush(Duration.ofSeconds(30));
    // seen at most until the TTL ran out, then gone for every replica
    await("a's entries to expire", () -> b.view(EPS, k, 6).speculativeBlocks(0) == 0);
    await("a's entries to expire for a", () -> a.view(EPS, k, 6).speculativeBlocks(0) == 0);
  }

  @Test
  void removingAnEndpointForgetsOnesOwnCountsAndEntries() {
    FleetState a = replica("a");
    FleetState b = replica("b");
    long[] k = keys(5, 4);
    a.requestStarted("e1", 3);
    a.speculate("e1", k, 4);
    awaitView("b to see a", () -> b.view(EPS, k, 4), "e1=1/3/4 e2=0/0/0 e3=0/0/0");
    a.removeEndpoint("e1");
    assertThat(describe(a.localView(EPS, k, 4))).isEqualTo("e1=0/0/0 e2=0/0/0 e3=0/0/0");
    await("a's count to leave", () -> b.view(EPS, k, 4).inFlightRequests(0) == 0);
  }

  @Test
  void anEndpointListedTwiceGetsTheSameAnswer() {
    FleetState a = replica("a");
    long[] k = keys(6, 4);
    a.requestStarted("e1", 3);
    a.speculate("e1", k, 4);
    assertThat(describe(a.view(List.of("e1", "e2", "e1"), k, 4)))
        .isEqualTo("e1=1/3/4 e2=0/0/0 e1=1/3/4");
    assertThat(a.view(List.of(), k, 4).size()).isZero();
  }

  /** "e1=5 e2=0": remembered blocks per endpoint. */
  protected static String remembered(FleetView v) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < v.size(); i++) {
      sb.append(i == 0 ? "" : " ")
          .append(v.endpointId(i))
          .append('=')
          .append(v.rememberedBlocks(i));
    }
    return sb.toString();
  }

  /** The endpoints with a cold order, oldest first: "e1<e3<e2". */
  protected static String coldOrder(FleetView v) {
    List<Integer> idx = new ArrayList<>();
    for (int i = 0; i < v.size(); i++) {
      if (v.lastColdRouted(i) != 0) {
        idx.add(i);
      }
    }
    idx.sort((x, y) -> Long.compare(v.lastColdRouted(x), v.lastColdRouted(y)));
    StringBuilder sb = new StringBuilder();
    for (int i : idx) {
      sb.append(sb.length() == 0 ? "" : "<").append(v.endpointId(i));
    }
    return sb.toString();
  }

  private static void awaitString(String what, Supplier<String> actual, String expected) {
    String[] last = {null};
    try {
      await(
          what + ": " + expected,
          () -> {
            last[0] = actual.get();
            return last[0].equals(expected);
          });
    } catch (AssertionError e) {
      throw new AssertionError(e.getMessage() + " (last: " + last[0] + ")", e);
    }
  }

  @Test
  void theRoutingMemoryIsSeenByEveryReplicaApartFromSpeculativeEntries() {
    FleetState a = replica("a");
    FleetState b = replica("b");
    long[] h = keys(11, 12);
    a.remember("e2", h, 8);
    // a's own memory at once
    assertThat(remembered(a.view(EPS, NONE, 0, h, 12))).isEqualTo("e1=0 e2=8 e3=0");
    awaitString(
        "b to see a's memory", () -> remembered(b.view(EPS, NONE, 0, h, 12)), "e1=0 e2=8 e3=0");
    // matched by the checkpoint rule: a prompt diverging after 5 hashes
    assertThat(remembered(b.view(EPS, NONE, 0, diverging(h, 5, 12, 11), 12)))
        .isEqualTo("e1=0 e2=5 e3=0");
    // not a speculative entry: the same keys as request keys find nothing
    assertThat(describe(b.view(EPS, h, 12))).isEqualTo("e1=0/0/0 e2=0/0/0 e3=0/0/0");
    // nor is a speculative entry memory
    a.speculate("e3", h, 12);
    awaitView("b to see a's entry", () -> b.view(EPS, h, 12), "e1=0/0/0 e2=0/0/0 e3=0/0/12");
    assertThat(remembered(b.view(EPS, h, 12, h, 12))).isEqualTo("e1=0 e2=8 e3=0");
    // the 3-argument view matches no memory; b's local view holds none of a's
    assertThat(b.view(EPS, h, 12).rememberedBlocks(1)).isZero();
    assertThat(remembered(b.localView(EPS, NONE, 0, h, 12))).isEqualTo("e1=0 e2=0 e3=0");
    b.remember("e1", h, 3);
    assertThat(remembered(b.localView(EPS, NONE, 0, h, 12))).isEqualTo("e1=3 e2=0 e3=0");
  }

  @Test
  void theRoutingMemoryExpiresWithItsTtlAndAZeroTtlSharesNone() {
    FleetState a =
        replica(
            "a",
            x ->
                x.speculativeStride(1)
                    .speculativeTtl(Duration.ofMinutes(1))
                    .memoryTtl(Duration.ofMillis(300)));
    FleetState b = replica("b");
    FleetState none = replica("none", x -> x.speculativeStride(1).memoryTtl(Duration.ZERO));
    long[] h = keys(12, 6);
    a.remember("e1", h, 6);
    none.remember("e2", h, 6);
    assertThat(remembered(none.view(EPS, NONE, 0, h, 6)).contains("e2=0")).isTrue();
    a.flush(Duration.ofSeconds(30));
    none.flush(Duration.ofSeconds(30));
    await("a's memory to expire", () -> b.view(EPS, NONE, 0, h, 6).rememberedBlocks(0) == 0);
    await("a's memory to expire for a", () -> a.view(EPS, NONE, 0, h, 6).rememberedBlocks(0) == 0);
    assertThat(b.view(EPS, NONE, 0, h, 6).rememberedBlocks(1)).isZero();
  }

  @Test
  void coldRoutingIsOrderedFleetWideAndForgottenWithTheEndpoint() {
    FleetState a = replica("a");
    FleetState b = replica("b");
    assertThat(coldOrder(a.view(EPS, NONE, 0))).isEmpty();
    a.coldRouted("e1");
    assertThat(coldOrder(a.view(EPS, NONE, 0))).isEqualTo("e1"); // one's own at once
    awaitString("b to see a's", () -> coldOrder(b.view(EPS, NONE, 0)), "e1");
    b.coldRouted("e3");
    assertThat(coldOrder(b.view(EPS, NONE, 0))).isEqualTo("e1<e3");
    awaitString("a to see b's", () -> coldOrder(a.view(EPS, NONE, 0)), "e1<e3");
    a.coldRouted("e2");
    assertThat(coldOrder(a.view(EPS, NONE, 0))).isEqualTo("e1<e3<e2");
    awaitString("b to see all", () -> coldOrder(b.view(EPS, NONE, 0)), "e1<e3<e2");
    a.coldRouted("e1"); // e1 again: now the latest
    awaitString("b to see e1 last", () -> coldOrder(b.view(EPS, NONE, 0)), "e3<e2<e1");
    // the local view: one's own only
    assertThat(coldOrder(b.localView(EPS, NONE, 0))).isEqualTo("e3");
    a.removeEndpoint("e2");
    awaitString("e2 to be forgotten", () -> coldOrder(b.view(EPS, NONE, 0)), "e3<e1");
  }
}
