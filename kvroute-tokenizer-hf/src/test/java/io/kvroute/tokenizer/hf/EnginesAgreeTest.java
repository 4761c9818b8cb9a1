package io.kvroute.tokenizer.hf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;

import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.quicktheories.core.Gen;
import org.quicktheories.generators.SourceDSL;

/**
 * The Java byte-level BPE and the native Hugging Face library give the same ids for arbitrary text
 * (random mixtures of ASCII, whitespace runs, scripts, combining marks, emoji, digits, punctuation
 * and special-token strings), with and without special tokens.
 */
class EnginesAgreeTest {
  private static final List<String> PIECES =
      List.of(
          "a",
          "the",
          " The",
          "CAPS",
          "don't",
          "'S",
          "'ll",
          "x1",
          "123456",
          "3.14",
          " ",
          "  ",
          "\t",
          "\n",
          "\r\n",
          "\n\n\n",
          "   \n ",
          "\u00a0",
          "\u3000",
          "\u2028",
          "é",
          "e\u0301",
          "ﬁ",
          "Ω",
          "ß",
          "İ",
          "ſ",
          "日本語",
          "中文",
          "한국어",
          "Привет",
          "مرحبا",
          "हिन्दी",
          "🙂",
          "👩‍👩‍👧",
          "🇫🇷",
          "\u200d",
          "\u0000",
          "\u001f",
          "\u007f",
          "<",
          ">",
          "<|",
          "|>",
          "<|im_start|>",
          "<|im_end|>",
          "<think>",
          "</think>",
          "<|begin_of_text|>",
          "<|eot_id|>",
          "<|reserved_special_token_7|>",
          "{",
          "}",
          "()",
          "->",
          "::",
          "#",
          "$",
          "%",
          "&&",
          "...",
          "—",
          "“",
          "”",
          "'",
          "\"",
          "`",
          "\\",
          "/",
          "_",
          "-",
          "+",
          "=",
          "@",
          "₀",
          "²",
          "½",
          "٣",
          "Ⅻ",
          "\ud835\udc00",
          "ǅ",
          "𝔘");

  private static HfTokenizer[] qwen;
  private static HfTokenizer[] llama;

  @BeforeAll
  static void load() {
    qwen = pair("qwen3");
    llama = pair("llama3-bos");
  }

  private static HfTokenizer[] pair(String name) {
    return new HfTokenizer[] {
      ReferenceTokenizers.builder(name).engine(HfTokenizer.Engine.JAVA).cache(0, 0).build(),
      ReferenceTokenizers.builder(name).engine(HfTokenizer.Engine.NATIVE).cache(0, 0).build()
    };
  }

  @AfterAll
  static void close() {
    for (HfTokenizer t : List.of(qwen[0], qwen[1], llama[0], llama[1])) {
      t.close();
    }
  }

  private static Gen<String> texts() {
    Gen<String> piece = SourceDSL.integers().between(0, PIECES.size() - 1).map(PIECES::get);
    Gen<String> codePoint =
        SourceDSL.integers()
            .between(0x20, 0x2FFFF)
            .map(
                c ->
                    Character.isDefined(c) && (c < 0xD800 || c > 0xDFFF)
                        ? new String(Character.toChars(c))
                        : String.valueOf((char) ('a' + c % 26)));
    Gen<String> either =
        SourceDSL.integers().between(0, 3).flatMap(k -> k == 0 ? codePoint : piece);
    return SourceDSL.lists().of(either).ofSizeBetween(0, 40).map(l -> String.join("", l));
  }

  @Test
  void qwen3EnginesAgree() {
    assertEnginesAgree(qwen);
  }

  @Test
  void llama3EnginesAgree() {
    assertEnginesAgree(llama);
  }

  private static void assertEnginesAgree(HfTokenizer[] engines) {
    qt().withExamples(1500)
        .forAll(texts(), SourceDSL.booleans().all())
        .checkAssert(
            (text, special) ->
                assertThat(engines[0].encode(text, special))
                    .as("%s", text)
                    .containsExactly(engines[1].encode(text, special)));
  }

  @Test
  void theGenericRegexPathAgreesWithTheHandWrittenSplit() throws Exception {
    com.fasterxml.jackson.databind.JsonNode json =
        new com.fasterxml.jackson.databind.ObjectMapper()
            .readTree(ReferenceTokenizers.modelDir("llama3").resolve("tokenizer.json").toFile());
    var regex = io.kvroute.tokenizer.hf.internal.ByteLevelBpe.of(json, false).orElseThrow();
    var fast = io.kvroute.tokenizer.hf.internal.ByteLevelBpe.of(json, true).orElseThrow();
    qt().withExamples(1000)
        .forAll(texts())
        .checkAssert(
            text ->
                assertThat(regex.encode(text, false))
                    .as("%s", text)
                    .containsExactly(fast.encode(text, false))
                    .containsExactly(llama[1].encode(text, false)));
  }

  @Test
  void longRunsAgree() {
    for (String unit : List.of("a", " ", "\n", "ab", "🙂", "1", "=", "é")) {
      String text = unit.repeat(3000);
      assertThat(qwen[0].encode(text, true)).containsExactly(qwen[1].encode(text, true));
      assertThat(llama[0].encode(text, true)).containsExactly(llama[1].encode(text, true));
    }
  }

  @Test
  void decodeRoundTrips() {
    String text = "Grüße 🙂 <|im_start|>user\nhi<|im_end|>";
    assertThat(qwen[0].decode(qwen[0].encode(text, false), false)).isEqualTo(text);
    assertThat(qwen[0].decode(qwen[0].encode(text, false), true)).isEqualTo("Grüße 🙂 user\nhi");
    assertThat(qwen[0].engine()).isEqualTo("java");
    assertThat(qwen[1].engine()).isEqualTo("native");
  }
}
