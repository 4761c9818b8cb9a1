package io.kvroute.service.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.longs;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The fast request scanner agrees with the Jackson parse on every input it accepts, and the
 * hand-written answer writer produces the JSON Jackson reads back.
 */
class ScoreCodecTest {
  static final ObjectMapper JSON = new ObjectMapper();

  static String randomRequest(long seed) {
    SplittableRandom r = new SplittableRandom(seed);
    String ws = new String[] {"", " ", "\n  ", "\t"}[r.nextInt(4)];
    List<String> fields = new ArrayList<>();
    if (r.nextBoolean()) {
      StringBuilder t = new StringBuilder("\"token_ids\"" + ws + ":" + ws + "[");
      int n = r.nextInt(60);
      for (int i = 0; i < n; i++) {
        t.append(i == 0 ? "" : "," + ws).append(r.nextInt(0, Integer.MAX_VALUE));
      }
      fields.add(t.append(ws).append("]").toString());
    }
    if (r.nextBoolean()) {
      StringBuilder t = new StringBuilder("\"prompt_blocks\":[");
      int n = r.nextInt(20);
      for (int i = 0; i < n; i++) {
        String hex = Long.toHexString(r.nextLong());
        t.append(i == 0 ? "" : ",")
            .append('"')
            .append(r.nextBoolean() ? "0x" : "")
            .append(hex)
            .append('"');
      }
      fields.add(t.append("]").toString());
    }
    if (r.nextBoolean()) {
      fields.add("\"prompt\":\"héllo " + r.nextInt(100) + (r.nextInt(4) == 0 ? "\\n" : "") + "\"");
    }
    if (r.nextBoolean()) {
      fields.add("\"model\":\"m" + r.nextInt(3) + "\"");
    }
    if (r.nextInt(4) == 0) {
      fields.add("\"lora\":" + (r.nextBoolean() ? "null" : "\"l\""));
    }
    if (r.nextBoolean()) {
      StringBuilder t = new StringBuilder("\"candidate_pods\":[");
      int n = r.nextInt(6);
      for (int i = 0; i < n; i++) {
        t.append(i == 0 ? "" : ",").append("\"pod-").append(r.nextInt(8)).append('"');
      }
      fields.add(t.append("]").toString());
    }
    if (fields.isEmpty() || r.nextInt(8) == 0) {
      fields.add("\"token_ids\":[1,2,3]");
    }
    return "{" + ws + String.join("," + ws, fields) + ws + "}";
  }

  static String describe(ScoreCodec.Parsed p) {
    return p.prompt
        + "|"
        + (p.numTokens < 0 ? "none" : Arrays.toString(Arrays.copyOf(p.tokens, p.numTokens)))
        + "|"
        + (p.numBlocks < 0 ? "none" : Arrays.toString(Arrays.copyOf(p.blocks, p.numBlocks)))
        + "|"
        + p.model
        + "|"
        + p.lora
        + "|"
        + (p.hasCandidates ? p.candidates.toString() : "none");
  }

  static String parse(byte[] b, boolean slow) {
    ScoreCodec.Parsed p = new ScoreCodec.Parsed();
    try {
      if (slow) {
        p.reset();
        ScoreCodec.parseSlow(b, b.length, p, 100, 10, 4);
      } else {
        ScoreCodec.parse(b, b.length, p, 100, 10, 4);
      }
      return describe(p);
    } catch (ApiException e) {
      return "error " + e.status() + " " + e.field() + " " + e.getMessage();
    }
  }

  @Test
  void fastScannerAgreesWithJackson() {
    qt().withExamples(2000)
        .forAll(longs().all())
        .checkAssert(
            seed -> {
              byte[] b = randomRequest(seed).getBytes(StandardCharsets.UTF_8);
              assertThat(parse(b, false))
                  .as(new String(b, StandardCharsets.UTF_8))
                  .isEqualTo(parse(b, true));
            });
  }

  @Test
  void truncatedAndMutatedRequestsGetTheSameAnswerBothWays() {
    qt().withExamples(2000)
        .forAll(longs().all(), integers().between(0, 1000), integers().between(0, 255))
        .checkAssert(
            (seed, pos, value) -> {
              byte[] b = randomRequest(seed).getBytes(StandardCharsets.UTF_8);
              byte[] cut = Arrays.copyOf(b, Math.min(b.length, pos));
              assertThat(parse(cut, false)).isEqualTo(parse(cut, true));
              byte[] mutated = b.clone();
              mutated[pos % b.length] = (byte) (int) value;
              assertThat(parse(mutated, false)).isEqualTo(parse(mutated, true));
            });
  }

  @Test
  void limitsFallBackToPreciseErrors() {
    StringBuilder t = new StringBuilder("{\"token_ids\":[");
    for (int i = 0; i < 101; i++) {
      t.append(i == 0 ? "" : ",").append(i);
    }
    byte[] b = t.append("]}").toString().getBytes(StandardCharsets.UTF_8);
    assertThat(parse(b, false)).contains("error 400 token_ids").contains("max_tokens = 100");
  }

  @Test
  void writerOutputIsTheJsonJacksonReads() throws Exception {
    BlockIndex index = BlockIndex.inMemory(IndexConfig.builder().build());
    int[] tokens = new int[48];
    Arrays.setAll(tokens, i -> i + 1);
    index.blockStored("a\"b\\c", new long[] {1, 2, 3}, false, 0, tokens, 16, null, "GPU", 0);
    index.blockStored(
        "pöd\n", new long[] {4, 5}, false, 0, Arrays.copyOf(tokens, 32), 16, null, "CPU", 0);
    long[] keys = index.requestKeys(tokens, (String) null);
    PrefixMatch m = index.lookup(keys, List.of("a\"b\\c", "pöd\n", "none"));
    ScoreCodec.Bytes out = new ScoreCodec.Bytes();
    ScoreCodec.writeScores(out, m, keys.length, 1.0, 16);
    JsonNode n = JSON.readTree(Arrays.copyOf(out.buf, out.size));
    assertThat(n.get("recommendation").asText()).isEqualTo("a\"b\\c");
    JsonNode a = n.get("scores").get("a\"b\\c");
    assertThat(a.get("score").asDouble()).isEqualTo(100.0);
    assertThat(a.get("cache_hit_rate").asDouble()).isEqualTo(1.0);
    assertThat(a.get("blocks_by_tier").get("GPU").asInt()).isEqualTo(3);
    JsonNode p = n.get("scores").get("pöd\n");
    assertThat(p.get("score").asDouble()).isEqualTo(53.33); // 2 CPU blocks of 3, weight 0.8
    assertThat(p.get("cache_hit_rate").asDouble()).isEqualTo(0.6667);
    assertThat(p.get("blocks_present").asInt()).isEqualTo(2);
    assertThat(n.get("scores").get("none").get("blocks_by_tier").size()).isZero();
    assertThat(n.get("blocks_total").asInt()).isEqualTo(3);
  }

  @Test
  void fixedPointNumbers() {
    ScoreCodec.Bytes b = new ScoreCodec.Bytes();
    b.fixed(10_000, 2)
        .ascii(" ")
        .fixed(6667, 2)
        .ascii(" ")
        .fixed(5, 4)
        .ascii(" ")
        .fixed(0, 2)
        .ascii(" ")
        .fixed(1050, 4);
    assertThat(new String(b.buf, 0, b.size, StandardCharsets.US_ASCII))
        .isEqualTo("100.0 66.67 0.0005 0.0 0.105");
  }

  @Test
  void hexKeysRejectEngineHashes() {
    assertThatThrownBy(() -> ScoreCodec.parseHexKey("sha256:abc", "prompt_blocks[0]"))
        .isInstanceOf(ApiException.class)
        .hasMessageContaining("engine hash");
    assertThat(ScoreCodec.parseHexKey("0xffffffffffffffff", "f")).isEqualTo(-1L);
  }

  /** Arbitrary bytes: either a parsed request or a 400 naming a field; never anything else. */
  @FuzzTest(maxDuration = "20s")
  void arbitraryBodiesAreParsedOrRejectedWith400(FuzzedDataProvider data) {
    byte[] b = data.consumeRemainingAsBytes();
    String fast = parse(b, false);
    assertThat(fast).isEqualTo(parse(b, true));
    if (fast.startsWith("error")) {
      assertThat(fast).startsWith("error 400 ");
    }
  }
}
