package io.kvroute.scoring;

import static io.kvroute.scoring.TestSupport.ep;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.Endpoint.Role;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class SchedulerConfigLoaderTest {
  private static final String PD_YAML =
      """
      apiVersion: llm-d.ai/v1alpha1
      kind: EndpointPickerConfig
      plugins:
      - type: decode-filter
      - type: prefill-filter
      - name: pair
        type: pd-pairing-filter
        parameters: {groupKey: group}
      - type: health-filter
      - name: prefix
        type: precise-prefix-cache-scorer
        parameters: {matchLengthWeight: 0.2, speculativeTTL: 500ms, kvEventsConfig: {topicFilter: "kv@"}}
      - type: load-aware-scorer
        parameters: {threshold: 20}
      - type: queue-scorer
      - type: session-affinity-scorer
        parameters:
          strategy: session_id
          sessionIdConfig: {sources: [{type: header, name: x-conv}]}
          evictionTtlSeconds: 60
      - type: max-score-picker
        parameters: {maxNumOfEndpoints: 2}
      - type: prefix-based-pd-decider
        parameters: {nonCachedTokens: 32}
      - type: disagg-profile-handler
        parameters:
          profiles: {decode: decode, prefill: prefill}
          deciders: {prefill: prefix-based-pd-decider}
      schedulingProfiles:
      - name: decode
        plugins:
        - pluginRef: decode-filter
        - pluginRef: health-filter
        - pluginRef: prefix
          weight: 3
        - pluginRef: load-aware-scorer
        - pluginRef: session-affinity-scorer
        - pluginRef: max-score-picker
      - name: prefill
        plugins:
        - pluginRef: prefill-filter
        - pluginRef: pair
        - pluginRef: queue-scorer
          weight: 2
      """;

  @Test
  void loadsAPdConfiguration() {
    Scheduler s =
        SchedulerConfigLoader.create(id -> id.equals("sick"))
            .load(PD_YAML)
            .random(new Random(1))
            .prefixCacheLookup(new TestSupport.FakeLookup(16))
            .build();
    assertThat(s.profiles()).containsOnlyKeys("decode", "prefill");
    Profile decode = s.profiles().get("decode");
    assertThat(decode.scorers())
        .extracting(w -> w.scorer().name() + "×" + w.weight())
        .containsExactly("prefix×3.0", "load-aware-scorer×1.0", "session-affinity-scorer×1.0");
    assertThat(s.profiles().get("prefill").picker().name()).isEqualTo("max-score-picker");
    List<Endpoint> c =
        List.of(
            ep("d1", Role.DECODE, Map.of("group", "g")),
            ep("d2", Role.DECODE, Map.of("group", "g")),
            ep("sick", Role.DECODE, Map.of("group", "g")),
            ep("p1", Role.PREFILL, Map.of("group", "g")));
    Decision small =
        s.pick(SchedulingRequest.builder().model("m").candidates(c).tokenIds(new int[31]).build());
    assertThat(small.pdOutcome()).isEqualTo(Decision.PdOutcome.DECODE_ONLY); // llm-d: 31 < 32
    Decision big =
        s.pick(SchedulingRequest.builder().model("m").candidates(c).tokenIds(new int[32]).build());
    assertThat(big.pdOutcome()).isEqualTo(Decision.PdOutcome.PREFILL_DECODE);
    assertThat(big.endpoints()).extracting(Endpoint::id).hasSize(2).doesNotContain("sick");
    assertThat(big.prefill().get().id()).isEqualTo("p1");
  }

  @Test
  void jsonWithoutProfilesGetsADefaultProfileAndPicker() {
    String json =
        "{\"plugins\":[{\"type\":\"queue-scorer\"},{\"type\":\"kv-cache-utilization-scorer\"},"
            + "{\"type\":\"approx-prefix-cache-producer\",\"parameters\":{\"blockSizeTokens\":32}}]}";
    Scheduler s = SchedulerConfigLoader.create().load(json).build();
    assertThat(s.profiles()).containsOnlyKeys("default");
    assertThat(s.profiles().get("default").picker().name()).isEqualTo("max-score-picker");
    assertThat(s.pick(SchedulingRequest.builder().model("m").candidate(ep("a")).build()).routed())
        .isTrue();
  }

  private static void fails(String yaml, String message) {
    assertThatThrownBy(() -> SchedulerConfigLoader.create().load(yaml))
        .isInstanceOf(SchedulerConfigException.class)
        .hasMessage(message);
  }

  @Test
  void errorsNameThePluginAndField() {
    fails(
        "plugins: [{name: my-load, type: load-aware-scorer, parameters: {threshold: 0}}]",
        "plugin \"my-load\" (load-aware-scorer): parameters.threshold must be >= 1, was 0");
    fails(
        "plugins: [{name: my-load, type: load-aware-scorer, parameters: {threshold: ten}}]",
        "plugin \"my-load\" (load-aware-scorer): parameters.threshold must be an integer, was \"ten\"");
    fails(
        "plugins: [{type: load-aware-scorer, parameters: {treshold: 5}}]",
        "plugin \"load-aware-scorer\" (load-aware-scorer): unknown parameter"
            + " \"parameters.treshold\"; known: [threshold]");
    fails(
        "plugins: [{name: x, type: load-awere-scorer}]",
        "plugin \"x\": unknown type \"load-awere-scorer\"; known: "
            + SchedulerConfigLoader.knownTypes());
    fails("plugins: [{name: x}]", "plugins[0]: type is required");
    fails(
        "plugins: [{name: p, type: prefix-cache-scorer, parameters: {matchLengthWeight: 2}}]",
        "plugin \"p\" (prefix-cache-scorer): parameters.matchLengthWeight must be in [0, 1], was"
            + " 2.0");
    fails(
        "plugins: [{type: max-score-picker, parameters: {maxNumOfEndpoints: 0}}]",
        "plugin \"max-score-picker\" (max-score-picker): parameters.maxNumOfEndpoints must be >= 1,"
            + " was 0");
    fails(
        "plugins: [{type: health-filter, parameters: {dropStaleMetrics: yes please}}]",
        "plugin \"health-filter\" (health-filter): parameters.dropStaleMetrics must be true or"
            + " false, was \"yes please\"");
    fails(
        "plugins: [{type: disagg-profile-handler, parameters: {stageOrder: prefill-first}}]",
        "plugin \"disagg-profile-handler\" (disagg-profile-handler): parameters.stageOrder only"
            + " decode-first is supported, was \"prefill-first\"");
    fails(
        "plugins: [{type: queue-scorer}, {type: queue-scorer}]",
        "plugins[1]: two plugins are named \"queue-scorer\"");
    fails(
        "plugins: [{type: session-affinity-scorer, parameters: {strategy: cookie}}]",
        "plugin \"session-affinity-scorer\" (session-affinity-scorer): parameters.strategy must be"
            + " encoded_endpoint_header or session_id, was \"cookie\"");
    fails(
        "plugins: [{type: precise-prefix-cache-scorer, parameters: {speculativeTTL: soon}}]",
        "plugin \"precise-prefix-cache-scorer\" (precise-prefix-cache-scorer):"
            + " parameters.speculativeTTL must be a duration such as 2s or 500ms, was \"soon\"");
    fails(
        "plugins: [{type: label-selector-filter, parameters: {matchExpressions: [{key: a,"
            + " operator: Near}]}}]",
        "plugin \"label-selector-filter\" (label-selector-filter): parameters.matchExpressions[0]"
            + ".operator must be In, NotIn, Exists or DoesNotExist, was \"Near\"");
    fails(
        "plugins: [{type: pd-pairing-filter}]",
        "plugin \"pd-pairing-filter\" (pd-pairing-filter): parameters.groupKey is required");
  }

  @Test
  void profileErrorsNameTheProfileAndRef() {
    fails(
        "plugins: [{type: queue-scorer}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: nope}]}]",
        "schedulingProfiles[0] (\"decode\").plugins[0]: pluginRef \"nope\" is not a plugin;"
            + " known: [queue-scorer]");
    fails(
        "plugins: [{type: decode-filter}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: decode-filter, weight:"
            + " 2}]}]",
        "schedulingProfiles[0] (\"decode\").plugins[0] (\"decode-filter\"): weight is only allowed"
            + " on scorers");
    fails(
        "plugins: [{type: queue-scorer}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: queue-scorer, weight:"
            + " -1}]}]",
        "schedulingProfiles[0] (\"decode\").plugins[0] (\"queue-scorer\"): weight must be a finite"
            + " number >= 0, was -1.0");
    fails(
        "plugins: [{type: queue-scorer}]\n"
            + "schedulingProfiles: [{name: a, plugins: [{pluginRef: queue-scorer}]},"
            + " {name: b, plugins: [{pluginRef: queue-scorer}]}]",
        "schedulingProfiles has 2 profiles but no profile handler plugin (disagg-profile-handler"
            + " or single-profile-handler) says which runs");
    fails(
        "plugins: [{type: queue-scorer}, {type: disagg-profile-handler, parameters: {deciders:"
            + " {prefill: nope}}}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: queue-scorer}]},"
            + " {name: prefill, plugins: [{pluginRef: queue-scorer}]}]",
        "plugin \"disagg-profile-handler\" (disagg-profile-handler): deciders.prefill \"nope\" is"
            + " not a PD decider plugin; known deciders: []");
    fails(
        "kind: Other\nplugins: [{type: queue-scorer}]",
        "kind must be EndpointPickerConfig, was \"Other\"");
    fails("plugins: []", "plugins must be a non-empty list");
    fails("plugins: [ {", SchedulerConfigLoaderTest.parseMessage("plugins: [ {"));
    fails(
        "bogus: 1\nplugins: [{type: queue-scorer}]",
        "unknown top-level field \"bogus\"; known: "
            + new java.util.TreeSet<>(
                Set.of(
                    "apiVersion",
                    "kind",
                    "featureGates",
                    "plugins",
                    "schedulingProfiles",
                    "dataLayer",
                    "flowControl",
                    "requestHandler",
                    "saturationDetector")));
  }

  private static String parseMessage(String yaml) {
    try {
      SchedulerConfigLoader.create().load(yaml);
      return "no error";
    } catch (SchedulerConfigException e) {
      assertThat(e.getMessage()).startsWith("configuration is not valid YAML/JSON: ");
      return e.getMessage();
    }
  }

  @Test
  void pdCanBeSwitchedOff() {
    String yaml =
        PD_YAML.replace(
            "deciders: {prefill: prefix-based-pd-decider}",
            "deciders: {prefill: prefix-based-pd-decider}\n    enabled: false");
    Scheduler s = SchedulerConfigLoader.create().load(yaml).build();
    List<Endpoint> c = List.of(ep("d1", Role.DECODE, Map.of()), ep("p1", Role.PREFILL, Map.of()));
    Decision d =
        s.pick(SchedulingRequest.builder().model("m").candidates(c).tokenIds(new int[500]).build());
    assertThat(d.pdOutcome()).isEqualTo(Decision.PdOutcome.NOT_CONFIGURED);
  }
}
