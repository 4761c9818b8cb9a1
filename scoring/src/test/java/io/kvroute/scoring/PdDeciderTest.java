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

/**
 * llm-d's {@code prefix-based-pd-decider} semantics (llm-d-router {@code
 * prefix_based_pd_decider.go}): 0 means never, the uncached part is compared with {@code >=}, and
 * {@code promptTokens} gates on the prompt length.
 */
class PdDeciderTest {
  private final Endpoint decode = ep("d1", Role.DECODE, Map.of());

  private boolean decide(PdDecider d, int prompt, int matchedBlocks) {
    FakeContext c = FakeContext.of();
    c.promptTokens = prompt;
    c.approximate.put("d1", new PrefixCacheMatch(matchedBlocks, matchedBlocks, 8, 16));
    return d.disaggregate(c, decode);
  }

  @Test
  void zeroMeansNever() {
    PdDecider d = PdDecider.prefixBased(0);
    assertThat(decide(d, 10_000, 0)).isFalse();
    assertThat(decide(d, 1, 0)).isFalse();
  }

  @Test
  void uncachedTokensAtTheThresholdDisaggregate() {
    PdDecider d = PdDecider.prefixBased(32);
    assertThat(decide(d, 32, 0)).as("32 uncached >= 32").isTrue();
    assertThat(decide(d, 31, 0)).as("31 uncached < 32").isFalse();
    assertThat(decide(d, 48, 1)).as("48 - 16 cached = 32").isTrue();
    assertThat(decide(d, 47, 1)).as("47 - 16 cached = 31").isFalse();
    assertThat(decide(d, 64, 4)).as("all cached").isFalse();
    assertThat(decide(d, -1, 0)).as("prompt length unknown").isFalse();
    assertThat(decide(PdDecider.prefixBased(1), 17, 1)).as("one uncached token").isTrue();
    assertThat(decide(PdDecider.prefixBased(1), 16, 1)).isFalse();
  }

  @Test
  void promptTokensGatesShortPrompts() {
    PdDecider d = PdDecider.prefixBased(16, 100);
    assertThat(decide(d, 99, 0)).isFalse();
    assertThat(decide(d, 100, 0)).isTrue();
    assertThat(decide(d, 100, 6)).as("100 - 96 = 4 uncached").isFalse();
    assertThatThrownBy(() -> PdDecider.prefixBased(-1))
        .hasMessage("nonCachedTokens must be >= 0, was -1");
    assertThatThrownBy(() -> PdDecider.prefixBased(1, -1))
        .hasMessage("promptTokens must be >= 0, was -1");
  }

  private static final String CONFIG =
      TestSupport.PD_FILTERS_CONFIG
          + """
      - type: prefix-based-pd-decider
        %s
      - type: disagg-profile-handler
        parameters:
          deciders: {prefill: prefix-based-pd-decider}
      schedulingProfiles:
      - name: decode
        plugins: [{pluginRef: decode-filter}]
      - name: prefill
        plugins: [{pluginRef: prefill-filter}]
      """;

  private static Decision.PdOutcome outcome(String parameters, int promptTokens) {
    Scheduler s =
        SchedulerConfigLoader.create()
            .load(String.format(CONFIG, parameters))
            .random(new Random(1))
            .build();
    List<Endpoint> c = List.of(ep("d1", Role.DECODE, Map.of()), ep("p1", Role.PREFILL, Map.of()));
    return s.pick(
            SchedulingRequest.builder()
                .model("m")
                .candidates(c)
                .tokenIds(new int[promptTokens])
                .build())
        .pdOutcome();
  }

  /** An llm-d EndpointPickerConfig means in kvroute what it means in llm-d. */
  @Test
  void llmdConfigKeepsItsMeaning() {
    assertThat(outcome("", 5_000))
        .as("nonCachedTokens defaults to 0: off")
        .isEqualTo(Decision.PdOutcome.DECODE_ONLY);
    assertThat(outcome("parameters: {nonCachedTokens: 0}", 5_000))
        .isEqualTo(Decision.PdOutcome.DECODE_ONLY);
    assertThat(outcome("parameters: {nonCachedTokens: 16}", 16))
        .isEqualTo(Decision.PdOutcome.PREFILL_DECODE);
    assertThat(outcome("parameters: {nonCachedTokens: 16}", 15))
        .isEqualTo(Decision.PdOutcome.DECODE_ONLY);
    assertThat(outcome("parameters: {nonCachedTokens: 16, promptTokens: 64}", 63))
        .isEqualTo(Decision.PdOutcome.DECODE_ONLY);
    assertThat(outcome("parameters: {nonCachedTokens: 16, promptTokens: 64}", 64))
        .isEqualTo(Decision.PdOutcome.PREFILL_DECODE);
  }
}
