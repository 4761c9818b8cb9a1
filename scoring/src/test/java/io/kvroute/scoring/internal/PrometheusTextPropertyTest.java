package io.kvroute.scoring.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.doubles;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.strings;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PrometheusTextPropertyTest {

  @Test
  void arbitraryTextNeverThrows() {
    qt().withExamples(2000)
        .forAll(strings().allPossible().ofLengthBetween(0, 200))
        .checkAssert(
            s -> {
              List<String> names = new ArrayList<>();
              int bad = PrometheusText.parse(s, n -> true, (n, l, v) -> names.add(n));
              assertThat(bad).isGreaterThanOrEqualTo(0);
              assertThat(EngineMetricsParser.parse(s))
                  .satisfiesAnyOf(m -> assertThat(m).isNull(), m -> assertThat(m).isNotNull());
            });
  }

  @Test
  void wellFormedSamplesRoundTrip() {
    qt().withExamples(500)
        .forAll(
            strings().betweenCodePoints('a', 'z').ofLengthBetween(1, 12),
            strings().allPossible().ofLengthBetween(0, 20),
            doubles().between(-1e12, 1e12),
            integers().between(0, 3))
        .checkAssert(
            (name, labelValue, value, spaces) -> {
              String escaped =
                  labelValue.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
              String pad = " ".repeat(spaces);
              String line =
                  "vllm:"
                      + name
                      + "{k=\""
                      + escaped
                      + "\","
                      + pad
                      + "z=\"1\"}"
                      + pad
                      + " "
                      + value
                      + "\n";
              List<Object[]> got = new ArrayList<>();
              int bad =
                  PrometheusText.parse(
                      line, n -> true, (n, l, v) -> got.add(new Object[] {n, l, v}));
              assertThat(bad).isZero();
              assertThat(got).hasSize(1);
              assertThat(got.get(0)[0]).isEqualTo("vllm:" + name);
              assertThat(got.get(0)[1]).isEqualTo(Map.of("k", labelValue, "z", "1"));
              assertThat(got.get(0)[2]).isEqualTo(value);
            });
  }
}
