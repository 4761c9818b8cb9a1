package io.kvroute.scoring;

import static io.kvroute.scoring.TestSupport.ep;
import static io.kvroute.scoring.TestSupport.eps;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.Endpoint.Role;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class FiltersTest {

  private static List<String> ids(List<Endpoint> e) {
    return e.stream().map(Endpoint::id).toList();
  }

  @Test
  void roleFiltersUseTheLabelThenEndpointRole() {
    List<Endpoint> c =
        List.of(
            ep("p", Role.BOTH, Map.of("llm-d.ai/role", "prefill")),
            ep("d", Role.BOTH, Map.of("llm-d.ai/role", "decode")),
            ep("pd", Role.DECODE, Map.of("llm-d.ai/role", "prefill-decode")),
            ep("enc", Role.BOTH, Map.of("llm-d.ai/role", "encode")),
            ep("noLabelDecode", Role.DECODE, Map.of()),
            ep("noLabelPrefill", Role.PREFILL, Map.of()),
            ep("noLabelBoth", Role.BOTH, Map.of()));
    FakeContext ctx = FakeContext.of();
    assertThat(ids(Filters.decode().filter(ctx, c)))
        .containsExactly("d", "pd", "noLabelDecode", "noLabelBoth");
    assertThat(ids(Filters.prefill().filter(ctx, c)))
        .containsExactly("p", "pd", "noLabelPrefill", "noLabelBoth");
    assertThat(ids(Filters.role("r", Role.BOTH, null).filter(ctx, c)))
        .containsExactly("pd", "noLabelBoth");
    Filter custom = Filters.role("r", Role.DECODE, "my/role");
    assertThat(ids(custom.filter(ctx, List.of(ep("x", Role.PREFILL, Map.of("my/role", "decode"))))))
        .containsExactly("x");
  }

  @Test
  void allPassReturnsTheSameListAndNoCandidatesStayEmpty() {
    List<Endpoint> c = eps("a", "b");
    assertThat(Filters.decode().filter(FakeContext.of(), c)).isSameAs(c);
    assertThat(Filters.decode().filter(FakeContext.of(), List.of())).isEmpty();
  }

  @Test
  void labelSelectorAndsLabelsAndExpressions() {
    List<Endpoint> c =
        List.of(
            ep("a", Role.BOTH, Map.of("zone", "z1", "gpu", "h100")),
            ep("b", Role.BOTH, Map.of("zone", "z2", "gpu", "h100")),
            ep("c", Role.BOTH, Map.of("zone", "z1")),
            ep("d", Role.BOTH, Map.of("zone", "z1", "gpu", "a100", "canary", "true")));
    Filter f =
        Filters.labelSelector(
            "sel",
            Map.of("zone", "z1"),
            List.of(
                new Filters.LabelRequirement("gpu", Filters.Operator.IN, Set.of("h100", "a100")),
                new Filters.LabelRequirement("canary", Filters.Operator.DOES_NOT_EXIST, null)));
    assertThat(ids(f.filter(FakeContext.of(), c))).containsExactly("a");
    Filter notIn =
        Filters.labelSelector(
            "sel",
            Map.of(),
            List.of(new Filters.LabelRequirement("gpu", Filters.Operator.NOT_IN, Set.of("h100"))));
    assertThat(ids(notIn.filter(FakeContext.of(), c))).containsExactly("c", "d");
    Filter exists =
        Filters.labelSelector(
            "sel",
            null,
            List.of(new Filters.LabelRequirement("canary", Filters.Operator.EXISTS, Set.of())));
    assertThat(ids(exists.filter(FakeContext.of(), c))).containsExactly("d");
    assertThatThrownBy(() -> new Filters.LabelRequirement("gpu", Filters.Operator.IN, Set.of()))
        .hasMessage("matchExpressions[gpu]: operator IN needs values");
  }

  @Test
  void pdPairingKeepsThePeersGroup() {
    Filter f = Filters.pdPairing("pair", "group");
    List<Endpoint> c =
        List.of(
            ep("p1", Role.PREFILL, Map.of("group", "g1")),
            ep("p2", Role.PREFILL, Map.of("group", "g2")),
            ep("p3", Role.PREFILL, Map.of()));
    FakeContext ctx = FakeContext.of();
    assertThat(f.filter(ctx, c)).isSameAs(c); // no peer: first stage
    ctx.peer = ep("d", Role.DECODE, Map.of("group", "g2"));
    assertThat(ids(f.filter(ctx, c))).containsExactly("p2");
    ctx.peer = ep("d", Role.DECODE, Map.of("group", "g9"));
    assertThat(f.filter(ctx, c)).isEmpty();
    ctx.peer = ep("d", Role.DECODE, Map.of());
    assertThat(f.filter(ctx, c)).isSameAs(c);
    assertThatThrownBy(() -> Filters.pdPairing("pair", " "))
        .hasMessage("pair.groupKey must not be blank");
  }

  @Test
  void healthDropsEjectedEndpoints() {
    Set<String> ejected = new java.util.HashSet<>(Set.of("b"));
    Filter f = Filters.health(ejected);
    assertThat(ids(f.filter(FakeContext.of(), eps("a", "b", "c")))).containsExactly("a", "c");
    ejected.clear(); // live view
    assertThat(ids(f.filter(FakeContext.of(), eps("a", "b", "c")))).containsExactly("a", "b", "c");
    assertThat(Filters.health(Set.of("a")).filter(FakeContext.of(), eps("a"))).isEmpty();
  }

  @Test
  void sessionFilterPinsHardButNeverEmpties() {
    SessionAffinity sa = SessionAffinity.encodedEndpointHeader("x-session-token");
    Filter f = Filters.sessionAffinity("pin", sa);
    String tok = Base64.getEncoder().encodeToString("b".getBytes(StandardCharsets.UTF_8));
    FakeContext ctx =
        new FakeContext(
            SchedulingRequest.builder().model("m").header("x-session-token", tok).build());
    assertThat(ids(f.filter(ctx, eps("a", "b", "c")))).containsExactly("b");
    assertThat(ids(f.filter(ctx, eps("a", "c")))).containsExactly("a", "c");
    assertThat(ids(f.filter(FakeContext.of(), eps("a", "c")))).containsExactly("a", "c");
  }

  @Test
  void loraAvailabilityUsesLabelsAndMetrics() {
    SchedulingRequest r = SchedulingRequest.builder().model("m").lora("ad").build();
    FakeContext ctx = new FakeContext(r);
    List<Endpoint> c =
        List.of(
            ep("label", Role.BOTH, Map.of(Filters.LORA_LABEL, "x, ad")),
            ep("metrics", Role.BOTH, Map.of()),
            ep("none", Role.BOTH, Map.of()));
    ctx.metrics.put("metrics", EndpointMetrics.of(0, 0, 0).withLoras(Set.of(), Set.of("ad"), 4));
    assertThat(ids(Filters.loraAvailability().filter(ctx, c))).containsExactly("label", "metrics");
    List<Endpoint> nobody = List.of(ep("none", Role.BOTH, Map.of()));
    assertThat(Filters.loraAvailability().filter(ctx, nobody)).isSameAs(nobody); // fail open
    assertThat(Filters.loraAvailability("l", null, false).filter(ctx, nobody)).isEmpty();
    assertThat(Filters.loraAvailability().filter(FakeContext.of(), c)).isSameAs(c); // no LoRA
  }
}
