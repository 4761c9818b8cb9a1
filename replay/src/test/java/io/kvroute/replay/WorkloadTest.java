package io.kvroute.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.replay.internal.Tokens;
import io.kvroute.replay.internal.TraceRecord;
import java.io.BufferedReader;
import java.io.StringReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Reading Mooncake traces, generating inference-perf's shared-prefix shape, deriving tokens. */
class WorkloadTest {
  static final Path SYNTHETIC =
      Path.of("src/test/resources/traces/mooncake_synthetic_trace.jsonl.gz");

  static Workload parse(String jsonl) {
    return Workload.mooncakeTrace(new BufferedReader(new StringReader(jsonl)), "t.jsonl");
  }

  @Test
  void readsTheSharedTraceCompressed() {
    Workload w = Workload.mooncakeTrace(SYNTHETIC);
    assertThat(w.size()).isEqualTo(3993);
    assertThat(w.promptTokens() / (double) w.size()).isBetween(15_325.0, 15_326.0);
    assertThat(w.outputTokens() / (double) w.size()).isBetween(149.0, 149.2);
    assertThat(w.durationMillis()).isBetween(1_000_000.0, 1_030_000.0);
    assertThat(w.first(100).size()).isEqualTo(100);
  }

  @Test
  void acceptsFieldAliasesAndSortsByArrival(@TempDir Path dir) throws Exception {
    Path f = dir.resolve("x.jsonl");
    Files.writeString(
        f,
        "{\"created_time\": 20, \"input_tokens\": 600, \"output_tokens\": 3, \"hash_ids\": [1, 2],"
            + " \"extra\": {\"a\": [1]}}\n\n"
            + "{\"timestamp\": 10.5, \"input_length\": 100, \"output_length\": 1, \"hash_ids\": [7]}\n");
    Workload w = Workload.mooncakeTrace(f);
    assertThat(w.size()).isEqualTo(2);
    List<TraceRecord> r = w.records();
    assertThat(r.get(0).arrivalMillis()).isEqualTo(10.5);
    assertThat(r.get(1).segmentIds()).containsExactly(1, 2);
    assertThat(r.get(1).segmentLengths()).containsExactly(512, 512);
  }

  @Test
  void namesTheLineAndFieldOfABadTrace() {
    assertThatThrownBy(() -> parse("{\"timestamp\": 1, \"input_length\": 5}\nnot json"))
        .isInstanceOf(TraceFormatException.class)
        .hasMessageContaining("t.jsonl:1: \"output_length\"");
    assertThatThrownBy(
            () ->
                parse(
                    "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1, \"hash_ids\":"
                        + " [1]}\n{\"timestamp\": 2, \"input_length\": 5, \"output_length\": 1,"
                        + " \"hash_ids\": \"x\"}"))
        .hasMessageContaining("t.jsonl:2: \"hash_ids\" must be an array of integers");
    assertThatThrownBy(() -> parse("[1, 2]")).hasMessageContaining("t.jsonl:1: expected a JSON");
    assertThatThrownBy(() -> parse("{\"timestamp\": 1,")).hasMessageContaining("not valid JSON");
    assertThatThrownBy(() -> parse("\n")).hasMessageContaining("no requests");
  }

  @Test
  void equalBlockIdsGiveEqualTokensAndSharedPrefixesShareTokens() {
    Workload w =
        parse(
            "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 1, \"hash_ids\": [5,"
                + " 6, 7]}\n"
                + "{\"timestamp\": 1, \"input_length\": 1300, \"output_length\": 1, \"hash_ids\":"
                + " [5, 6, 9]}\n");
    int[] a = Tokens.prompt(w.records().get(0), 0);
    int[] b = Tokens.prompt(w.records().get(1), 1);
    assertThat(a).hasSize(1100);
    assertThat(b).hasSize(1300);
    assertThat(Arrays.copyOf(a, 1024)).isEqualTo(Arrays.copyOf(b, 1024));
    assertThat(a[1024]).isNotEqualTo(b[1024]);
    assertThat(Tokens.prompt(w.records().get(0), 7)).isEqualTo(a);
    assertThat(java.util.Arrays.stream(a).allMatch(t -> t >= 0 && t < Tokens.VOCAB)).isTrue();
  }

  @Test
  void tokensBeyondTheBlocksComeFromASegmentOfTheRequest() {
    Workload w =
        parse("{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [5]}");
    int[] a = Tokens.prompt(w.records().get(0), 1);
    int[] b = Tokens.prompt(w.records().get(0), 2);
    assertThat(Arrays.copyOf(a, 512)).isEqualTo(Arrays.copyOf(b, 512));
    assertThat(Arrays.copyOfRange(a, 512, 600)).isNotEqualTo(Arrays.copyOfRange(b, 512, 600));
  }

  @Test
  void sharedPrefixFollowsInferencePerf() {
    SharedPrefix shape = new SharedPrefix(4, 3, 100, 20, 7, 10, 30);
    Workload w = Workload.sharedPrefix(shape, 1);
    List<TraceRecord> r = w.records();
    assertThat(r).hasSize(30);
    Set<Long> firstCycle = new HashSet<>();
    for (int i = 0; i < 12; i++) {
      TraceRecord x = r.get(i);
      assertThat(x.inputLength()).isEqualTo(120);
      assertThat(x.outputLength()).isEqualTo(7);
      assertThat(x.segmentLengths()).containsExactly(100, 20);
      firstCycle.add(x.segmentIds()[1]);
      // the question's group is the system prompt's
      assertThat((x.segmentIds()[1] & 0xffff) / 3).isEqualTo(x.segmentIds()[0] & 0xffff);
    }
    assertThat(firstCycle).hasSize(12); // every prompt once per cycle, then the cycle repeats
    assertThat(r.get(12).segmentIds()).isEqualTo(r.get(0).segmentIds());
    // Poisson at 10/s: 29 gaps of ~100 ms
    assertThat(w.durationMillis()).isBetween(1_000.0, 6_000.0);
    assertThat(Workload.sharedPrefix(shape, 1).records().get(5).segmentIds())
        .isEqualTo(r.get(5).segmentIds());
    assertThatThrownBy(() -> new SharedPrefix(0, 3, 100, 20, 7, 10, 30))
        .hasMessageContaining("sharedPrefix.groups must be >= 1");
    assertThat(SharedPrefix.llmdCapacityStudy(20, 100).systemPromptLength()).isEqualTo(6000);
  }

  @Test
  void sloAndStrategiesParse() {
    assertThat(Slo.parse("ttft=1.5s,tpot=40ms"))
        .isEqualTo(new Slo(java.time.Duration.ofMillis(1500), java.time.Duration.ofMillis(40)));
    assertThat(Slo.parse("tpot=100ms").ttft()).isEqualTo(java.time.Duration.ofSeconds(2));
    assertThatThrownBy(() -> Slo.parse("ttft=fast"))
        .hasMessageContaining("ttft must be a duration");
    assertThatThrownBy(() -> Slo.parse("p99=1s")).hasMessageContaining("unknown key \"p99\"");
    assertThat(Strategy.parseList("precise, round-robin"))
        .containsExactly(Strategy.PRECISE, Strategy.ROUND_ROBIN);
    assertThatThrownBy(() -> Strategy.parseList("precise,psychic"))
        .hasMessageContaining("unknown strategy \"psychic\"; known: random, round-robin");
  }

  @Test
  void readsClassPriorityTenantAndSloAnnotations() {
    Workload w =
        parse(
            "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2, \"hash_ids\": [1],"
                + " \"class\": \"chat\", \"priority\": 100, \"tenant\": \"acme\","
                + " \"slo_ttft_ms\": 500}\n"
                + "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 2, \"hash_ids\": [1]}");
    io.kvroute.replay.internal.TraceRecord.Tag t = w.records().get(0).tag();
    assertThat(t.className()).isEqualTo("chat");
    assertThat(t.priority()).isEqualTo(100);
    assertThat(t.tenant()).isEqualTo("acme");
    assertThat(t.slo()).isEqualTo(new Slo(java.time.Duration.ofMillis(500), Slo.DEFAULT.tpot()));
    assertThat(w.records().get(1).tag()).isEqualTo(io.kvroute.replay.internal.TraceRecord.Tag.NONE);
    assertThatThrownBy(
            () ->
                parse(
                    "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2,"
                        + " \"hash_ids\": [1], \"priority\": \"high\"}"))
        .isInstanceOf(TraceFormatException.class)
        .hasMessageContaining("t.jsonl:1")
        .hasMessageContaining("priority");
  }

  @Test
  void classesAreAssignedByShareTheSameForTheSameSeed() {
    Workload w = Workload.mooncakeTrace(SYNTHETIC).first(2000);
    List<RequestClass> cs =
        List.of(RequestClass.parse("a:share=3,priority=5"), RequestClass.parse("b:tenant=t2"));
    Workload x = w.withClasses(cs, 1);
    Workload y = w.withClasses(cs, 1);
    long a = x.records().stream().filter(r -> "a".equals(r.tag().className())).count();
    assertThat(a).isBetween(1400L, 1600L); // 3/4 of 2,000
    assertThat(x.records().get(7).tag()).isEqualTo(y.records().get(7).tag());
    assertThat(
            x.records().stream()
                .filter(r -> "b".equals(r.tag().className()))
                .allMatch(r -> r.tag().tenant().equals("t2") && r.tag().priority() == 0))
        .isTrue();
    assertThat(RequestClass.parse("q:ttft=1s").slo())
        .isEqualTo(new Slo(java.time.Duration.ofSeconds(1), Slo.DEFAULT.tpot()));
    assertThatThrownBy(() -> RequestClass.parse("q:speed=1")).hasMessageContaining("unknown key");
    assertThatThrownBy(() -> w.withClasses(List.of(cs.get(0), cs.get(0)), 1))
        .hasMessageContaining("twice");
  }
}
