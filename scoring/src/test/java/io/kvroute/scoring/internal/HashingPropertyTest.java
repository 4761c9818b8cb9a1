package io.kvroute.scoring.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.quicktheories.core.Gen;

/**
 * The approximate tokens and their block hashes, computed without the UTF-8 byte array or the token
 * array, are exactly what the array-based definitions give, on text of any characters: ASCII,
 * Latin-1, the rest of the BMP, surrogate pairs, and unpaired surrogates (which {@code
 * String.getBytes(UTF_8)} encodes as {@code ?}).
 */
class HashingPropertyTest {

  /** Characters from every UTF-8 length class, surrogates (paired or not) included. */
  private static Gen<String> text() {
    Gen<Integer> ch =
        integers()
            .between(0, 5)
            .flatMap(
                kind ->
                    switch (kind) {
                      case 0 -> integers().between(0, 0x7f);
                      case 1 -> integers().between(0x80, 0x7ff);
                      case 2 -> integers().between(0x800, 0xd7ff);
                      case 3 -> integers().between(0xd800, 0xdbff); // high surrogate
                      case 4 -> integers().between(0xdc00, 0xdfff); // low surrogate
                      default -> integers().between(0xe000, 0xffff);
                    });
    return lists()
        .of(ch)
        .ofSizeBetween(0, 300)
        .map(
            cs -> {
              StringBuilder sb = new StringBuilder(cs.size());
              cs.forEach(c -> sb.append((char) c.intValue()));
              return sb.toString();
            });
  }

  /** The definition: the UTF-8 bytes packed four to a token, little-endian, zero-padded. */
  private static int[] byBytes(String text) {
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    int[] t = new int[(b.length + 3) / 4];
    for (int i = 0; i < b.length; i++) {
      t[i >> 2] |= (b[i] & 0xff) << ((i & 3) * 8);
    }
    return t;
  }

  @Test
  void estimatedTokensAreThoseOfTheUtf8Bytes() {
    qt().withExamples(3000)
        .forAll(text())
        .checkAssert(
            s -> {
              assertThat(Hashing.estimateTokens(s)).containsExactly(byBytes(s));
              assertThat(Hashing.estimatedTokenCount(s)).isEqualTo(byBytes(s).length);
            });
  }

  @Test
  void textBlocksAreTheBlocksOfTheEstimatedTokens() {
    qt().withExamples(3000)
        .forAll(text(), integers().between(1, 20), integers().between(0, 8))
        .checkAssert(
            (s, blockSize, maxBlocks) ->
                assertThat(Hashing.chainedBlocksOfText(s, blockSize, maxBlocks, "m", "salt"))
                    .containsExactly(
                        Hashing.chainedBlocks(byBytes(s), blockSize, maxBlocks, "m", "salt")));
  }

  @Test
  void edgeCases() {
    for (String s :
        List.of("", "a", "abcd", "abcde", "\ud83d\ude00", "\ud83d", "\ude00x", "x\ud83d")) {
      assertThat(Hashing.estimateTokens(s)).containsExactly(byBytes(s));
      assertThat(Hashing.chainedBlocksOfText(s, 1, 0, "m", null))
          .containsExactly(Hashing.chainedBlocks(byBytes(s), 1, 0, "m", null));
    }
  }
}
