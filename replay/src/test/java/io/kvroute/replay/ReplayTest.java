package io.kvroute.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.router.flow.FlowControlConfig;
import io.kvroute.testkit.engine.EngineProfile;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Replays of a slice of the shared Mooncake trace through every strategy: the figures are
 * consistent, cache-aware routing finds the reuse blind routing misses, the JSON has exactly the
 * documented shape, and the same inputs and seed give the same report.
 */
class ReplayTest {
  static final ObjectMapper JSON = new ObjectMapper();
  static Workload slice;
  static ReplayReport all;

  @BeforeAll
  static void replayEveryStrategy() {
    slice = Workload.mooncakeTrace(WorkloadTest.SYNTHETIC).first(300);
    all = Replay.builder(slice).pods(4).speed(1).build().run(ReplayListener.NONE);
  }

  @Test
  void everyStrategyRoutesEveryRequest() {
    assertThat(all.pods()).isEqualTo(4);
    assertThat(all.requests()).isEqualTo(300);
    assertThat(all.strategies())
        .extracting(StrategyResult::name)
        .containsExactly("random", "round-robin", "least-load", "approximate", "precise", "oracle");
    for (StrategyResult s : all.strategies()) {
      assertThat(s.requests() + s.rejected()).as(s.name()).isEqualTo(300);
      assertThat(s.hitRatio()).as(s.name()).isBetween(0.0, 1.0);
      assertThat(s.reuse().captured()).as(s.name()).isLessThanOrEqualTo(s.reuse().available());
      assertThat(s.reuse().delivered())
          .as(s.name())
          .isEqualTo(Math.round(s.hitRatio() * s.promptTokens()));
      assertThat(s.ttftMs().p50()).isLessThanOrEqualTo(s.ttftMs().p90());
      assertThat(s.ttftMs().p90()).isLessThanOrEqualTo(s.ttftMs().p99());
      assertThat(s.imbalance()).isGreaterThanOrEqualTo(1.0);
      assertThat(s.sloAttainment()).isBetween(0.0, 1.0);
      assertThat(s.ttftCdfMs()).hasSize(201);
      assertThat(s.hitRatioOverTime()).hasSize(60);
    }
  }

  @Test
  void cacheAwareRoutingCapturesTheReuseBlindRoutingMisses() {
    StrategyResult rr = all.strategy("round-robin").orElseThrow();
    StrategyResult precise = all.strategy("precise").orElseThrow();
    StrategyResult oracle = all.strategy("oracle").orElseThrow();
    // blind routing leaves most of the available reuse behind; precise routing captures it
    assertThat(rr.reuse().captured()).isLessThan(rr.reuse().available() / 2);
    assertThat(precise.reuse().captured()).isGreaterThan(precise.reuse().available() * 8 / 10);
    assertThat(precise.hitRatio()).isGreaterThan(2 * rr.hitRatio());
    assertThat(precise.hitRatio()).isGreaterThan(0.8 * oracle.hitRatio());
  }

  @Test
  void jsonHasExactlyTheDocumentedShape() throws Exception {
    JsonNode root = JSON.readTree(all.toJson());
    assertThat(names(root)).containsExactly("pods", "requests", "wallSeconds", "strategies");
    assertThat(root.get("pods").asInt()).isEqualTo(4);
    JsonNode s = root.get("strategies").get(4);
    assertThat(names(s))
        .containsExactly(
            "name",
            "requests",
            "hitRatio",
            "ttftMs",
            "tpotMs",
            "goodputRps",
            "sloAttainment",
            "imbalance",
            "reuse",
            "dropped",
            "ttftPredictionError",
            "fairness",
            "classes");
    assertThat(names(s.get("ttftMs"))).containsExactly("p50", "p90", "p99");
    assertThat(names(s.get("tpotMs"))).containsExactly("p50", "p90");
    assertThat(names(s.get("reuse"))).containsExactly("available", "captured", "delivered");
    assertThat(s.get("name").asText()).isEqualTo("precise");
    assertThat(s.get("reuse").get("delivered").isIntegralNumber()).isTrue();
  }

  @Test
  void sameInputsAndSeedGiveTheSameReport() throws Exception {
    Workload w = slice.first(100);
    List<Strategy> s = List.of(Strategy.RANDOM, Strategy.APPROXIMATE, Strategy.PRECISE);
    String a = withoutWallTime(Replay.builder(w).pods(3).strategies(s).seed(7).build());
    String b = withoutWallTime(Replay.builder(w).pods(3).strategies(s).seed(7).build());
    String c = withoutWallTime(Replay.builder(w).pods(3).strategies(s).seed(8).build());
    assertThat(a).isEqualTo(b).isNotEqualTo(c);
  }

  private static String withoutWallTime(Replay r) throws Exception {
    ObjectNode root = (ObjectNode) JSON.readTree(r.run(ReplayListener.NONE).toJson());
    root.remove("wallSeconds");
    return root.toString();
  }

  @Test
  void prefillDecodeDisaggregationRoutesBothLegs() {
    ReplayReport r =
        Replay.builder(slice.first(80))
            .prefillDecode(2, 2)
            .strategies(List.of(Strategy.ROUND_ROBIN, Strategy.PRECISE))
            .build()
            .run(ReplayListener.NONE);
    assertThat(r.pods()).isEqualTo(4);
    for (StrategyResult s : r.strategies()) {
      assertThat(s.requests() + s.rejected()).isEqualTo(80);
      assertThat(s.ttftMs().p50()).isPositive();
    }
    assertThat(r.strategy("precise").orElseThrow().hitRatio())
        .isGreaterThan(r.strategy("round-robin").orElseThrow().hitRatio());
  }

  @Test
  void progressIsReportedPerStrategy() {
    List<String> seen = new ArrayList<>();
    Replay.builder(slice.first(30))
        .pods(2)
        .strategies(List.of(Strategy.LEAST_LOAD))
        .profile(EngineProfile.LLAMA_8B_FP8_H200)
        .build()
        .run(
            new ReplayListener() {
              @Override
              public void onStrategyStart(Strategy strategy, int requests) {
                seen.add("start " + strategy.cliName() + " " + requests);
              }

              @Override
              public void onProgress(Strategy strategy, int done, int total) {
                seen.add(done + "/" + total);
              }

              @Override
              public void onStrategyEnd(StrategyResult result) {
                seen.add("end " + result.name());
              }
            });
    assertThat(seen).startsWith("start least-load 30").endsWith("30/30", "end least-load");
  }

  @Test
  void theTableAndPageCarryEveryStrategy() {
    String table = all.toTable();
    String html = all.toHtml();
    for (StrategyResult s : all.strategies()) {
      assertThat(table).containsPattern("(?m)^" + s.name() + " +" + s.requests() + " ");
      assertThat(html).contains("data-strategy=\"" + s.name() + "\"");
    }
    assertThat(table).contains("lost:routing");
    assertThat(html).contains("id=\"ttft-cdf\"").contains("id=\"hit-ratio\"");
  }

  @Test
  void optionsAreValidated() {
    assertThatThrownBy(() -> Replay.builder(slice).pods(0).build())
        .hasMessageContaining("pods must be >= 1");
    assertThatThrownBy(() -> Replay.builder(slice).prefillDecode(1, 0).build())
        .hasMessageContaining("prefill and decode must both be >= 1");
    assertThatThrownBy(() -> Replay.builder(slice).speed(0).build())
        .hasMessageContaining("speed must be > 0");
  }

  @Test
  void flowControlAtThreeTimesTheLoadKeepsGoodputWhereWithoutItCollapses() throws Exception {
    // 1,200 short requests at 400 req/s on 2 engines: far beyond what they serve
    Workload w = Workload.sharedPrefix(new SharedPrefix(20, 5, 500, 100, 50, 400, 1200), 1);
    Replay.Builder b = Replay.builder(w).pods(2).strategies(List.of(Strategy.PRECISE));
    StrategyResult off = b.build().run(ReplayListener.NONE).strategies().get(0);
    StrategyResult on =
        b.flowControl(
                FlowControlConfig.builder()
                    .saturation(new FlowControlConfig.Saturation(5, 0.8, 64, 0))
                    .build())
            .build()
            .run(ReplayListener.NONE)
            .strategies()
            .get(0);
    assertThat(off.dropped()).isEmpty();
    assertThat(off.requests() + off.rejected()).isEqualTo(1200);
    assertThat(on.droppedTotal()).isPositive();
    assertThat(on.requests() + on.droppedTotal() + on.rejected()).isEqualTo(1200);
    assertThat(on.goodputRps()).isGreaterThan(1.5 * off.goodputRps());
    assertThat(on.tpotMs().p90()).isLessThan(off.tpotMs().p90());
    JsonNode json =
        JSON.readTree(b.build().run(ReplayListener.NONE).toJson()).get("strategies").get(0);
    assertThat(json.get("dropped").size()).isPositive();
    assertThat(json.get("ttftPredictionError").isNumber()).isTrue();
  }

  @Test
  void classesAreReportedEachWithItsFiguresAndTenantsShareFairlyUnderFlowControl()
      throws Exception {
    // two tenants offering 10:1, both backlogged: equal-sized requests far beyond 2 engines
    Workload w =
        Workload.sharedPrefix(new SharedPrefix(20, 5, 500, 100, 50, 1000, 1500), 1)
            .withClasses(
                List.of(
                    RequestClass.parse("big:share=10,tenant=a"),
                    RequestClass.parse("small:share=1,tenant=b,ttft=5s")),
                1);
    Replay.Builder b = Replay.builder(w).pods(2).strategies(List.of(Strategy.PRECISE));
    StrategyResult off = b.build().run(ReplayListener.NONE).strategies().get(0);
    ReplayReport onReport =
        b.flowControl(
                FlowControlConfig.builder()
                    .bands(
                        List.of(
                            new FlowControlConfig.Band(
                                "standard",
                                0,
                                1000,
                                Duration.ofSeconds(30),
                                FlowControlConfig.Ordering.FCFS,
                                1.0,
                                false)))
                    .saturation(new FlowControlConfig.Saturation(5, 0.8, 64, 0))
                    .sloAdmission(false)
                    .build())
            .build()
            .run(ReplayListener.NONE);
    StrategyResult on = onReport.strategies().get(0);
    assertThat(off.classes())
        .extracting(StrategyResult.ClassResult::name)
        .containsExactly("big", "small");
    StrategyResult.ClassResult big = off.klass("big").orElseThrow();
    StrategyResult.ClassResult small = off.klass("small").orElseThrow();
    assertThat(big.offered() + small.offered()).isEqualTo(1500);
    assertThat(big.offered()).isGreaterThan(5 * small.offered());
    assertThat(off.fairness()).isLessThan(0.8);
    assertThat(on.fairness()).isGreaterThan(0.9);
    JsonNode classes = JSON.readTree(onReport.toJson()).get("strategies").get(0).get("classes");
    assertThat(classes.size()).isEqualTo(2);
    assertThat(names(classes.get(0)))
        .containsExactly(
            "name",
            "offered",
            "requests",
            "dropped",
            "ttftMs",
            "goodputRps",
            "sloAttainment",
            "outputTokensPerSecond");
    assertThat(onReport.toTable()).contains("per class").contains("small");
  }

  @Test
  void aHighPriorityClassIsServedFirstWhileALowOneFloods() {
    Workload w =
        Workload.sharedPrefix(new SharedPrefix(20, 5, 500, 100, 50, 400, 1200), 1)
            .withClasses(
                List.of(
                    RequestClass.parse("high:share=1,priority=100"),
                    RequestClass.parse("low:share=9,priority=-100")),
                3);
    Replay.Builder b =
        Replay.builder(w)
            .pods(2)
            .strategies(List.of(Strategy.PRECISE))
            .flowControl(
                FlowControlConfig.builder()
                    .bands(
                        List.of(
                            FlowControlConfig.Band.of("critical", 100),
                            new FlowControlConfig.Band(
                                "sheddable",
                                -100,
                                1000,
                                Duration.ofSeconds(2),
                                FlowControlConfig.Ordering.FCFS,
                                0.7,
                                true)))
                    .saturation(new FlowControlConfig.Saturation(5, 0.8, 64, 0))
                    .build());
    StrategyResult on = b.build().run(ReplayListener.NONE).strategies().get(0);
    StrategyResult.ClassResult high = on.klass("high").orElseThrow();
    StrategyResult.ClassResult low = on.klass("low").orElseThrow();
    // the flood is held and shed; the high class goes first and is not dropped
    assertThat(high.sloAttainment()).isGreaterThan(low.sloAttainment());
    assertThat(low.dropped()).isNotEmpty();
    int highDropped = high.dropped().values().stream().mapToInt(Integer::intValue).sum();
    assertThat(highDropped).isLessThan(high.offered() / 20);
  }

  private static List<String> names(JsonNode n) {
    List<String> out = new ArrayList<>();
    for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
      out.add(it.next());
    }
    return out;
  }
}
