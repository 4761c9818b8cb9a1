package io.kvroute.scoring;

import static io.kvroute.scoring.TestSupport.ep;
import static io.kvroute.scoring.TestSupport.eps;
import static io.kvroute.scoring.TestSupport.tokens;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.Endpoint.Role;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

class SchedulerTest {
  private final TestSupport.Clock clock = new TestSupport.Clock();

  private Scheduler.Builder base() {
    return Scheduler.builder().nanoClock(clock::get).random(new Random(11));
  }

  private static SchedulingRequest req(List<Endpoint> c, int[] tokens) {
    return SchedulingRequest.builder().model("m").tokenIds(tokens).candidates(c).build();
  }

  @Test
  void noCandidates() {
    Scheduler s = base().build();
    Decision d = s.pick(SchedulingRequest.builder().model("m").build());
    assertThat(d.result()).isEqualTo(Decision.Result.NO_CANDIDATES);
    assertThat(d.endpoints()).isEmpty();
    assertThat(d.primary()).isEmpty();
    assertThat(d.requestHeaders()).isEmpty();
    s.onRouted(d); // no-op
    s.onComplete(d);
  }

  @Test
  void allFilteredOutNamesTheFilter() {
    Scheduler s = base().build();
    List<Endpoint> prefillOnly = List.of(ep("p", Role.PREFILL, Map.of()));
    Decision d = s.pick(req(prefillOnly, null));
    assertThat(d.result()).isEqualTo(Decision.Result.ALL_FILTERED);
    assertThat(d.profiles().get("decode").emptiedBy()).contains("decode-filter");
  }

  @Test
  void unknownProfileIsADecisionNotAnException() {
    Scheduler s = base().build();
    Decision d =
        s.pick(SchedulingRequest.builder().model("m").candidates(eps("a")).profile("nope").build());
    assertThat(d.result()).isEqualTo(Decision.Result.UNKNOWN_PROFILE);
  }

  @Test
  void preciseScorerSendsRepeatsToTheHolder() {
    TestSupport.FakeLookup idx = new TestSupport.FakeLookup(16);
    int[] prompt = tokens(1024, 1);
    idx.store("c", prompt, "m", 64, 1.0);
    idx.store("b", prompt, "m", 10, 1.0);
    Scheduler s = base().prefixCacheLookup(idx).build();
    Decision d = s.pick(req(eps("a", "b", "c", "d"), prompt));
    assertThat(d.primary().get().id()).isEqualTo("c");
    assertThat(d.endpoints()).hasSize(3);
    assertThat(d.endpoints().get(1).id()).isEqualTo("b");
    Map<String, Double> cScores = d.scores().get("c");
    assertThat(cScores.get("precise-prefix-cache-scorer")).isEqualTo(1.0);
    assertThat(d.scores().get("b").get("precise-prefix-cache-scorer")).isEqualTo(10.0 / 64);
    assertThat(cScores).containsKey("total");
    assertThat(d.promptTokens()).isEqualTo(1024);
    assertThat(d.prefixMatch(ep("c"))).isEqualTo(new PrefixCacheMatch(64, 64.0, 64, 16));
    assertThat(d.prefixMatch(ep("b")).cachedTokens()).isEqualTo(160);
    assertThat(d.prefixMatch(ep("zz"))).isEqualTo(PrefixCacheMatch.NONE);
  }

  @Test
  void speculativeEntriesKeepABurstTogetherUntilTheyExpire() {
    TestSupport.FakeLookup idx = new TestSupport.FakeLookup(16);
    Scheduler s = base().prefixCacheLookup(idx).build();
    int[] prompt = tokens(512, 2);
    List<Endpoint> c = eps("a", "b", "c", "d", "e", "f");
    Decision first = s.pick(req(c, prompt));
    String chosen = first.primary().get().id();
    s.onRouted(first);
    for (int i = 0; i < 5; i++) {
      Decision d = s.pick(req(c, prompt));
      assertThat(d.primary().get().id()).isEqualTo(chosen);
      assertThat(d.scores().get(chosen).get("precise-prefix-cache-scorer")).isEqualTo(1.0);
    }
    clock.advanceMillis(2001);
    Decision later = s.pick(req(c, prompt));
    assertThat(later.scores().get(chosen).get("precise-prefix-cache-scorer")).isEqualTo(0.0);
  }

  @Test
  void approximateIndexLearnsFromRoutingDecisions() {
    Scheduler s = base().build(); // no precise index: approximate prefix
    String text = "You are a helpful assistant. ".repeat(40);
    List<Endpoint> c = eps("a", "b", "c", "d");
    SchedulingRequest r = SchedulingRequest.builder().model("m").prompt(text).candidates(c).build();
    Decision first = s.pick(r);
    s.onRouted(first);
    s.onComplete(first);
    Decision again = s.pick(r);
    assertThat(again.primary()).isEqualTo(first.primary());
    assertThat(again.scores().get(first.primary().get().id()).get("prefix-cache-scorer"))
        .isEqualTo(1.0);
    s.removeEndpoint(first.primary().get().id());
    Decision afterRemoval = s.pick(r);
    assertThat(afterRemoval.scores().get(first.primary().get().id()).get("prefix-cache-scorer"))
        .isEqualTo(0.0);
  }

  @Test
  void noHitLruSpreadsColdRequests() {
    Scheduler s = base().build();
    List<Endpoint> c = eps("a", "b", "c", "d");
    java.util.Set<String> seen = new java.util.HashSet<>();
    for (int i = 0; i < 4; i++) {
      Decision d = s.pick(req(c, tokens(300, 100 + i)));
      s.onRouted(d);
      seen.add(d.primary().get().id());
    }
    assertThat(seen).containsExactlyInAnyOrder("a", "b", "c", "d");
  }

  @Test
  void inFlightIsCountedByTheHooks() {
    Scheduler s = base().build();
    Decision d = s.pick(req(eps("a", "b"), null));
    Endpoint p = d.primary().get();
    s.onRouted(d);
    s.onRouted(d);
    assertThat(s.inFlight(p.id())).isEqualTo(2);
    Decision next = s.pick(req(eps("a", "b"), null));
    assertThat(next.scores().get(p.id()).get("active-request-scorer")).isEqualTo(0.0);
    s.onComplete(d);
    s.onComplete(d);
    s.onComplete(d); // extra: never below zero
    assertThat(s.inFlight(p.id())).isZero();
    Scheduler other = base().build();
    assertThatThrownBy(() -> other.onRouted(d)).hasMessageContaining("another Scheduler");
  }

  @Test
  void staleMetricsAreUnknownAndDroppedByHealth() {
    Scheduler s = base().build();
    s.metricsStore().update("a", EndpointMetrics.of(0, 0, 0.1));
    s.metricsStore().update("b", EndpointMetrics.of(0, 0, 0.1));
    clock.advanceMillis(2500);
    s.metricsStore().update("b", EndpointMetrics.of(3, 0, 0.5));
    Decision d = s.pick(req(eps("a", "b", "c"), null));
    assertThat(d.profiles().get("decode").candidates())
        .extracting(Endpoint::id)
        .containsExactly("b", "c"); // a is stale; c was never scraped
    assertThat(d.scores().get("c").get("load-aware-scorer")).isEqualTo(0.0); // unknown ≠ idle
    assertThat(d.scores().get("b").get("kv-cache-utilization-scorer")).isEqualTo(0.5);
  }

  @Test
  void statelessSessionTokenIsWrittenBackAndHonoured() {
    Scheduler s = base().build();
    List<Endpoint> c = eps("a", "b", "c");
    Decision d = s.pick(req(c, null));
    String token = d.responseHeaders().get("x-session-token");
    assertThat(new String(Base64.getDecoder().decode(token), StandardCharsets.UTF_8))
        .isEqualTo(d.primary().get().id());
    assertThat(d.responseHeaders(ep("b"), null))
        .containsEntry(
            "x-session-token",
            Base64.getEncoder().encodeToString("b".getBytes(StandardCharsets.UTF_8)));
    SchedulingRequest next =
        SchedulingRequest.builder()
            .model("m")
            .candidates(c)
            .header(
                "x-session-token",
                Base64.getEncoder().encodeToString("c".getBytes(StandardCharsets.UTF_8)))
            .build();
    assertThat(s.pick(next).scores().get("c").get("session-affinity-scorer")).isEqualTo(1.0);
  }

  @Test
  void pdDecisionFollowsNonCachedTokens() {
    TestSupport.FakeLookup idx = new TestSupport.FakeLookup(16);
    List<Endpoint> c =
        List.of(
            ep("d1", Role.DECODE, Map.of()),
            ep("p1", Role.PREFILL, Map.of()),
            ep("p2", Role.PREFILL, Map.of()));
    Scheduler s = base().prefixCacheLookup(idx).pdEnabled(true).build();
    // Short prompt: 9 tokens, none cached → fewer than 10 → decode only.
    Decision small = s.pick(req(c, tokens(9, 3)));
    assertThat(small.pdOutcome()).isEqualTo(Decision.PdOutcome.DECODE_ONLY);
    assertThat(small.requestHeaders()).isEmpty();
    // 10 uncached tokens → disaggregate (llm-d's >=).
    Decision big = s.pick(req(c, tokens(10, 3)));
    assertThat(big.pdOutcome()).isEqualTo(Decision.PdOutcome.PREFILL_DECODE);
    assertThat(big.primary().get().id()).isEqualTo("d1");
    assertThat(big.prefill().get().id()).startsWith("p");
    assertThat(big.requestHeaders())
        .containsEntry(Decision.PREFILLER_HEADER, big.prefill().get().hostPort());
    // Mostly cached on the decode endpoint: 1024 tokens, 63 of 64 blocks cached → 16 uncached.
    int[] prompt = tokens(1024, 4);
    idx.store("d1", prompt, "m", 64, 1.0);
    assertThat(s.pick(req(c, prompt)).pdOutcome()).isEqualTo(Decision.PdOutcome.DECODE_ONLY);
    // Per-request override.
    SchedulingRequest off =
        SchedulingRequest.builder()
            .model("m")
            .candidates(c)
            .tokenIds(tokens(500, 1))
            .disaggregation(false)
            .build();
    assertThat(s.pick(off).pdOutcome()).isEqualTo(Decision.PdOutcome.DECODE_ONLY);
    // Hooks count both legs.
    s.onRouted(big);
    assertThat(s.inFlight("d1")).isEqualTo(1);
    assertThat(s.inFlight(big.prefill().get().id())).isEqualTo(1);
  }

  @Test
  void pdOffByDefaultAndPrefillUnavailableFallsBackToDecode() {
    List<Endpoint> c = List.of(ep("d1", Role.DECODE, Map.of()));
    Decision off = base().build().pick(req(c, tokens(100, 1)));
    assertThat(off.pdOutcome()).isEqualTo(Decision.PdOutcome.NOT_CONFIGURED);
    Decision none = base().pdEnabled(true).build().pick(req(c, tokens(100, 1)));
    assertThat(none.pdOutcome()).isEqualTo(Decision.PdOutcome.PREFILL_UNAVAILABLE);
    assertThat(none.routed()).isTrue();
    assertThat(none.prefill()).isEmpty();
  }

  @Test
  void pdPairingKeepsGroups() {
    Profile decode = Profile.builder("decode").filter(Filters.decode()).build();
    Profile prefill =
        Profile.builder("prefill")
            .filter(Filters.prefill())
            .filter(Filters.pdPairing("pair", "group"))
            .build();
    Scheduler s =
        base()
            .profile(decode)
            .profile(prefill)
            .prefillProfile("prefill")
            .pdEnabled(true)
            .pdDecider(PdDecider.always())
            .build();
    List<Endpoint> c = TestSupport.grouped("d1@g1", "p1@g1", "p2@g2");
    for (int i = 0; i < 10; i++) {
      assertThat(s.pick(req(c, null)).prefill().get().id()).isEqualTo("p1");
    }
    List<Endpoint> two = TestSupport.grouped("d1@g1", "d2@g2", "p1@g1", "p2@g2");
    Decision d = s.pick(req(two, null));
    Endpoint other = two.get(d.primary().get().id().equals("d1") ? 1 : 0);
    String expected = other.id().equals("d1") ? "p1" : "p2";
    assertThat(s.prefillEndpointsFor(d, other)).extracting(Endpoint::id).containsExactly(expected);
    assertThat(s.prefillEndpointsFor(d, d.primary().get())).isEqualTo(d.prefillEndpoints());
  }

  @Test
  void pickAsyncTokenizesAndDegradesOnFailure() {
    TestSupport.FakeLookup idx = new TestSupport.FakeLookup(16);
    int[] prompt = tokens(256, 5);
    idx.store("b", prompt, "m", 16, 1.0);
    CompletableFuture<int[]> pending = new CompletableFuture<>();
    Tokenizer ok = r -> CompletableFuture.completedFuture(prompt);
    Scheduler s = base().prefixCacheLookup(idx).tokenizer(ok).build();
    SchedulingRequest r =
        SchedulingRequest.builder().model("m").prompt("hello").candidates(eps("a", "b")).build();
    Decision d = s.pickAsync(r).join();
    assertThat(d.primary().get().id()).isEqualTo("b");
    assertThat(d.tokenizationFailed()).isFalse();

    Scheduler failing =
        base()
            .prefixCacheLookup(idx)
            .tokenizer(x -> CompletableFuture.failedFuture(new IllegalStateException("down")))
            .build();
    Decision f = failing.pickAsync(r).join();
    assertThat(f.routed()).isTrue();
    assertThat(f.tokenizationFailed()).isTrue();

    Scheduler slow =
        base()
            .prefixCacheLookup(idx)
            .tokenizer(x -> pending)
            .tokenizeTimeout(Duration.ofMillis(20))
            .build();
    Decision t = slow.pickAsync(r).join();
    assertThat(t.tokenizationFailed()).isTrue();
    assertThat(pending).isNotDone(); // the tokenizer's own future is not cancelled by us
  }

  @Test
  void metricsAreRecorded() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    Scheduler s = base().meterRegistry(reg).build();
    s.pick(req(eps("a", "b"), null));
    s.pick(SchedulingRequest.builder().model("m").build());
    assertThat(reg.get("kvroute.scheduler.decisions").tag("result", "routed").counter().count())
        .isEqualTo(1);
    assertThat(
            reg.get("kvroute.scheduler.decisions").tag("result", "no_candidates").counter().count())
        .isEqualTo(1);
    assertThat(reg.get("kvroute.scheduler.duration").tag("result", "routed").timer().count())
        .isEqualTo(1);
    assertThat(queueScorerTimings(reg)).isEqualTo(1);
    assertThat(reg.get("kvroute.scheduler.inflight.endpoints").gauge().value()).isZero();
    assertThat(reg.get("kvroute.scheduler.approx.prefix.entries").gauge()).isNotNull();
  }

  @Test
  void pluginTimingsAreSampled() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    Scheduler s = base().meterRegistry(reg).build();
    int cycles = 3 * Scheduler.PLUGIN_TIMING_SAMPLE + 1;
    for (int i = 0; i < cycles; i++) {
      s.pick(req(eps("a", "b"), null));
    }
    assertThat(reg.get("kvroute.scheduler.duration").tag("result", "routed").timer().count())
        .isEqualTo(cycles);
    assertThat(queueScorerTimings(reg)).isEqualTo(4);
  }

  /** How many times the decode profile's queue scorer was timed. */
  private static long queueScorerTimings(SimpleMeterRegistry reg) {
    return reg.get("kvroute.scheduler.plugin.duration")
        .tag("plugin", "queue-scorer")
        .tag("profile", "decode")
        .timer()
        .count();
  }

  @Test
  void builderValidation() {
    assertThatThrownBy(() -> Scheduler.builder().approximatePrefix(0, 1, 1).build())
        .hasMessage("approximatePrefix.blockSizeTokens must be >= 1, was 0");
    assertThatThrownBy(() -> Scheduler.builder().tokenizeTimeout(Duration.ZERO).build())
        .hasMessage("tokenizeTimeout must be > 0, was PT0S");
    Profile p = Profile.builder("x").build();
    assertThatThrownBy(() -> Scheduler.builder().profile(p).prefillProfile("y").build())
        .hasMessage("prefillProfile \"y\" is not a profile; known: [x]");
    assertThatThrownBy(() -> Scheduler.builder().profile(p).profile(p).build())
        .hasMessage("scheduler has two profiles named \"x\"");
    assertThatThrownBy(
            () -> SchedulingRequest.builder().candidates(eps("a", "a")).model("m").build())
        .hasMessage("request.candidates has the endpoint id \"a\" twice");
    assertThatThrownBy(() -> SchedulingRequest.builder().build())
        .hasMessage("request.model must be set");
    assertThat(Set.of(Scheduler.defaultProfiles(true).get(0).name())).containsExactly("decode");
  }

  /**
   * The default precise profile breaks a tie of the precise index with the router's memory of where
   * it sent the prompt (kvroute replay found the tie-break worth it: docs/routing-quality.md): both
   * endpoints hold the shared half of the prompt, the one that last served the whole prompt wins,
   * whatever the random tie-break.
   */
  @Test
  void defaultPreciseProfileBreaksIndexTiesWithWhereThePromptWent() {
    TestSupport.FakeLookup index = new TestSupport.FakeLookup(16);
    int[] prompt = tokens(128, 5);
    List<Endpoint> two = eps("a", "b");
    index.store("a", prompt, "m", 4, 1.0);
    index.store("b", prompt, "m", 4, 1.0);
    for (int seed = 0; seed < 20; seed++) {
      Scheduler s =
          Scheduler.builder()
              .prefixCacheLookup(index)
              .speculative(Duration.ZERO, 1)
              .random(new java.util.SplittableRandom(seed))
              .build();
      SchedulingRequest r =
          SchedulingRequest.builder().model("m").tokenIds(prompt).candidates(two).build();
      Decision first = s.pick(r);
      s.onRouted(first, two.get(1), null);
      s.onComplete(first, two.get(1), null);
      assertThat(s.pick(r).primary()).as("seed %d", seed).contains(two.get(1));
    }
  }
}
