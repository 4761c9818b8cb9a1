package io.kvroute.scoring;

import static io.kvroute.scoring.TestSupport.ep;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.Endpoint.Role;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class SchedulerConfigLoaderTest {
  private static final String PD_YAML =
      TestSupport.PD_FILTERS_CONFIG
          + """
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
    List<Endpoint> c = TestSupport.grouped("d1@g", "d2@g", "sick@g", "p1@g");
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
        "plugins[0].parameters.threshold: must be >= 1, was 0");
    fails(
        "plugins: [{name: my-load, type: load-aware-scorer, parameters: {threshold: ten}}]",
        "plugins[0].parameters.threshold: must be an integer, was \"ten\"");
    fails(
        "plugins: [{type: load-aware-scorer, parameters: {treshold: 5}}]",
        "plugins[0].parameters.treshold: unknown key; did you mean \"threshold\"? known:"
            + " threshold");
    fails(
        "plugins: [{type: queue-scorer}, {name: x, type: load-awere-scorer}]",
        "plugins[1].type: unknown plugin \"load-awere-scorer\"; did you mean"
            + " \"load-aware-scorer\"? known: "
            + String.join(", ", SchedulerConfigLoader.create().knownTypes()));
    fails(
        "plugins: [{name: x}]",
        "plugins[0].type: is required (the plugin type, e.g. queue-scorer)");
    fails(
        "plugins: [{name: p, type: prefix-cache-scorer, parameters: {matchLengthWeight: 2}}]",
        "plugins[0].parameters.matchLengthWeight: must be in [0, 1], was 2.0");
    fails(
        "plugins: [{type: max-score-picker, parameters: {maxNumOfEndpoints: 0}}]",
        "plugins[0].parameters.maxNumOfEndpoints: must be >= 1, was 0");
    fails(
        "plugins: [{type: health-filter, parameters: {dropStaleMetrics: yes please}}]",
        "plugins[0].parameters.dropStaleMetrics: must be true or false, was \"yes please\"");
    fails(
        "plugins: [{type: disagg-profile-handler, parameters: {stageOrder: prefill-first}}]",
        "plugins[0].parameters.stageOrder: only decode-first is supported, was"
            + " \"prefill-first\"");
    fails(
        "plugins: [{type: queue-scorer}, {type: queue-scorer}]",
        "plugins[1].name: \"queue-scorer\" is already the name of plugins[0] (a name defaults to"
            + " the type; name one of them)");
    fails(
        "plugins: [{type: session-affinity-scorer, parameters: {strategy: cookie}}]",
        "plugins[0].parameters.strategy: must be encoded_endpoint_header or session_id, was"
            + " \"cookie\"");
    fails(
        "plugins: [{type: precise-prefix-cache-scorer, parameters: {speculativeTTL: soon}}]",
        "plugins[0].parameters.speculativeTTL: must be a duration such as \"30s\", \"1m30s\" or"
            + " \"250ms\", was \"soon\"");
    fails(
        "plugins: [{type: label-selector-filter, parameters: {matchExpressions: [{key: a,"
            + " operator: Near}]}}]",
        "plugins[0].parameters.matchExpressions[0].operator: must be In, NotIn, Exists or"
            + " DoesNotExist, was \"Near\"");
    fails(
        "plugins: [{type: label-selector-filter, parameters: {matchExpressions: [{key: a,"
            + " operator: In}]}}]",
        "plugins[0].parameters.matchExpressions[0].values: operator In needs values");
    fails("plugins: [{type: pd-pairing-filter}]", "plugins[0].parameters.groupKey: is required");
    fails(
        "plugins: [{type: queue-scorer, parameters: {weight: 2}}]",
        "plugins[0].parameters.weight: unknown key; this mapping takes no keys");
    fails(
        "plugins: [{type: role-filter, parameters: {role: encode}}]",
        "plugins[0].parameters.role: must be one of prefill, decode, both; was \"encode\"");
    fails(
        "plugins: [{type: disagg-profile-handler, parameters: {profiles: {encode: e}}}]",
        "plugins[0].parameters.profiles.encode: encode disaggregation (E/P/D) is not supported");
    fails(
        "plugins: [{type: queue-scorer, type: load-aware-scorer}]",
        "plugins[0].type: duplicate key (line 1)");
    fails(
        "plugins: [{type: queue-scorer, parameters: [1]}]",
        "plugins[0].parameters: must be a mapping, was a list");
  }

  @Test
  void profileErrorsNameTheProfileAndRef() {
    fails(
        "plugins: [{type: queue-scorer}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: queue-scorr}]}]",
        "schedulingProfiles[0].plugins[0].pluginRef: unknown plugin name \"queue-scorr\"; did you"
            + " mean \"queue-scorer\"? known: queue-scorer");
    fails(
        "plugins: [{type: decode-filter}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: decode-filter, weight:"
            + " 2}]}]",
        "schedulingProfiles[0].plugins[0].weight: only scorers take a weight; \"decode-filter\" is"
            + " a filter");
    fails(
        "plugins: [{type: queue-scorer}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: queue-scorer, weight:"
            + " -1}]}]",
        "schedulingProfiles[0].plugins[0].weight: must be a finite number >= 0, was -1.0");
    fails(
        "plugins: [{type: queue-scorer}, {type: max-score-picker}, {name: p2, type: random-picker}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: max-score-picker},"
            + " {pluginRef: p2}]}]",
        "schedulingProfiles[0].plugins[1].pluginRef: a profile has at most one picker;"
            + " \"max-score-picker\" is already this profile's");
    fails(
        "plugins: [{type: queue-scorer}, {type: always-disagg-pd-decider}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: always-disagg-pd-decider}]}]",
        "schedulingProfiles[0].plugins[0].pluginRef: \"always-disagg-pd-decider\" is a PD"
            + " decider, not a filter, scorer or picker, so it cannot be in a profile");
    fails(
        "plugins: [{type: queue-scorer}]\n"
            + "schedulingProfiles: [{name: a, plugins: [{pluginRef: queue-scorer}]},"
            + " {name: b, plugins: [{pluginRef: queue-scorer}]}]",
        "schedulingProfiles: has 2 profiles but no profile handler plugin (disagg-profile-handler"
            + " or single-profile-handler) says which runs");
    fails(
        "plugins: [{type: queue-scorer}]\n"
            + "schedulingProfiles: [{name: a, plugins: [{pluginRef: queue-scorer}]},"
            + " {name: a, plugins: [{pluginRef: queue-scorer}]}]",
        "schedulingProfiles[1].name: \"a\" is already the name of schedulingProfiles[0]");
    fails(
        "plugins: [{type: queue-scorer}, {type: disagg-profile-handler, parameters: {deciders:"
            + " {prefill: nope}}}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: queue-scorer}]},"
            + " {name: prefill, plugins: [{pluginRef: queue-scorer}]}]",
        "plugins[1].parameters.deciders.prefill: \"nope\" is not a PD decider plugin; known"
            + " deciders: none");
    fails(
        "plugins: [{type: queue-scorer}, {type: prefix-based-pd-decider},"
            + " {type: disagg-profile-handler, parameters: {deciders:"
            + " {prefill: prefix-based-pd-decider}}}]\n"
            + "schedulingProfiles: [{name: decode, plugins: [{pluginRef: queue-scorer}]}]",
        "plugins[2].parameters.profiles.prefill: a PD decider is set but the prefill profile"
            + " \"prefill\" does not exist; known: decode");
    fails(
        "plugins: [{type: queue-scorer}, {type: single-profile-handler, parameters: {profile:"
            + " x}}]",
        "plugins[1].parameters.profile: \"x\" is not a profile; known: default");
    fails(
        "plugins: [{type: single-profile-handler}, {name: h2, type: disagg-profile-handler}]",
        "plugins[1].type: only one profile handler is allowed; \"single-profile-handler\" is"
            + " another (plugins[0])");
    fails(
        "kind: Other\nplugins: [{type: queue-scorer}]",
        "kind: must be EndpointPickerConfig, was \"Other\"");
    fails("plugins: []", "plugins: must list at least one plugin");
    assertThatThrownBy(() -> SchedulerConfigLoader.create().load("plugins: [ {"))
        .isInstanceOf(SchedulerConfigException.class)
        .hasMessageStartingWith("plugins[0]: invalid syntax (line 1)")
        .hasMessageNotContaining("\n");
    fails(
        "bogus: 1\nplugins: [{type: queue-scorer}]",
        "bogus: unknown key; known: apiVersion, dataLayer, featureGates, flowControl, kind,"
            + " plugins, requestHandler, saturationDetector, schedulingProfiles");
    fails(
        "plugins: [{type: queue-scorer}]\nplugins: [{type: queue-scorer}]",
        "plugins: duplicate key (line 2)");
  }

  @Test
  void llmdShapesLoadAsWritten() {
    // The chart's default profile, and upstream-only sections that kvroute accepts and ignores.
    Scheduler s =
        SchedulerConfigLoader.create()
            .load(
                """
                apiVersion: inference.networking.x-k8s.io/v1alpha1
                kind: EndpointPickerConfig
                featureGates: [flowControl]
                plugins:
                - type: queue-scorer
                - type: kv-cache-utilization-scorer
                - type: prefix-cache-scorer
                  parameters: {matchLengthWeight: 0.5, prefixMatchInfoProducerName: approx}
                - type: approx-prefix-cache-producer
                  parameters: {blockSizeTokens: 32, maxPrefixTokensToMatch: 4096, autoTune: true}
                - type: no-hit-lru-scorer
                  parameters: {lruSize: 64, prefixPluginType: prefix-cache-scorer}
                - type: session-affinity-scorer
                  parameters:
                    strategy: session_id
                    sessionIdConfig: {sources: [x-conv, {type: header, name: x-conv-2}]}
                - type: label-selector-filter
                  parameters:
                    matchLabels: {tier: gold}
                    matchExpressions: [{key: zone, operator: NotIn, values: [b]}, {key: gpu, operator: Exists}]
                - type: pd-profile-handler
                  parameters: {threshold: 100, hashBlockSize: 64, primaryPort: 8000}
                schedulingProfiles:
                - name: decode
                  plugins:
                  - pluginRef: label-selector-filter
                  - pluginRef: queue-scorer
                    weight: 2
                  - pluginRef: kv-cache-utilization-scorer
                    weight: 2
                  - pluginRef: prefix-cache-scorer
                    weight: 3
                  - pluginRef: session-affinity-scorer
                  - pluginRef: no-hit-lru-scorer
                dataLayer: {injectDefaults: true, sources: [{pluginRef: metrics-data-source}]}
                flowControl: {maxRequests: 10}
                requestHandler: {parsers: [{pluginRef: openai-parser}]}
                saturationDetector: {pluginRef: utilization-detector}
                """)
            .build();
    assertThat(s.profiles()).containsOnlyKeys("decode");
    assertThat(s.profiles().get("decode").scorers())
        .extracting(w -> w.scorer().name() + "×" + w.weight())
        .containsExactly(
            "queue-scorer×2.0",
            "kv-cache-utilization-scorer×2.0",
            "prefix-cache-scorer×3.0",
            "session-affinity-scorer×1.0",
            "no-hit-lru-scorer×1.0");
    Endpoint gold = ep("g", Role.DECODE, Map.of("tier", "gold", "zone", "a", "gpu", "h100"));
    Endpoint other = ep("o", Role.DECODE, Map.of("tier", "gold", "zone", "b", "gpu", "h100"));
    Decision d =
        s.pick(SchedulingRequest.builder().model("m").candidates(List.of(gold, other)).build());
    assertThat(d.endpoints()).extracting(Endpoint::id).containsExactly("g");
  }

  @Test
  void gatewayInlineConfigurationsReportUnderTheirPath() {
    Map<String, Object> tree = new java.util.LinkedHashMap<>();
    tree.put("plugins", List.of(Map.of("type", "foo")));
    assertThatThrownBy(() -> SchedulerConfigLoader.create().load(tree, "scheduler"))
        .isInstanceOf(SchedulerConfigException.class)
        .hasMessageStartingWith("scheduler.plugins[0].type: unknown plugin \"foo\"; known: ");
  }

  @Test
  void filesNameThemselvesInErrors(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
      throws Exception {
    java.nio.file.Path f = dir.resolve("picker.yaml");
    java.nio.file.Files.writeString(f, "plugins: [{type: queue-scorer, parameters: {x: 1}}]\n");
    assertThatThrownBy(() -> SchedulerConfigLoader.create().load(f))
        .isInstanceOf(SchedulerConfigException.class)
        .hasMessage(f + ": plugins[0].parameters.x: unknown key; this mapping takes no keys");
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
