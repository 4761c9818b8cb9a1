package io.kvroute.kvindex.hash;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import io.kvroute.kvindex.hash.internal.TokenHash;
import io.kvroute.kvindex.hash.internal.Xxh64;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class RequestKeyHasherTest {

  @Test
  void xxh64KnownValues() {
    assertThat(Xxh64.hash(new byte[0], 0, 0)).isEqualTo(0xEF46DB3751D8E999L);
    byte[] abc = "abc".getBytes(StandardCharsets.US_ASCII);
    assertThat(Xxh64.hash(abc, 3, 0)).isEqualTo(0x44BC2CF5AD770999L);
  }

  @Test
  void tokenDigestSeparatesContentOrderAndLength() {
    qt().withExamples(300)
        .forAll(lists().of(integers().between(0, 200_000)).ofSizeBetween(1, 80), integers().all())
        .checkAssert(
            (toks, r) -> {
              int[] t = toks.stream().mapToInt(Integer::intValue).toArray();
              long h = TokenHash.tokens(t, 0, t.length);
              int[] changed = t.clone();
              int at = Math.floorMod(r, t.length);
              changed[at] ^= 1 + (r >>> 16 & 0xFF);
              assertThat(TokenHash.tokens(changed, 0, t.length)).isNotEqualTo(h);
              int[] longer = Arrays.copyOf(t, t.length + 1);
              assertThat(TokenHash.tokens(longer, 0, longer.length)).isNotEqualTo(h);
              if (t.length >= 48) {
                int[] swapped = t.clone();
                System.arraycopy(t, 44, swapped, 0, 4);
                System.arraycopy(t, 0, swapped, 44, 4);
                if (!Arrays.equals(swapped, t)) {
                  assertThat(TokenHash.tokens(swapped, 0, t.length)).isNotEqualTo(h);
                }
              }
            });
  }

  @Test
  void noCollisionsAmongRandomBlocksAndKeysAreStable() {
    java.util.SplittableRandom rnd = new java.util.SplittableRandom(1);
    java.util.Set<Long> seen = new java.util.HashSet<>();
    for (int i = 0; i < 50_000; i++) {
      int[] t = new int[16];
      for (int j = 0; j < 16; j++) {
        t[j] = rnd.nextInt(1000);
      }
      assertThat(seen.add(TokenHash.tokens(t, 0, 16))).isTrue();
    }
    // pinned: request keys are shared by index replicas, so they must not change silently
    RequestKeyHasher h = RequestKeyHasher.create(4, "", "m");
    assertThat(Long.toHexString(h.requestKeys(new int[] {1, 2, 3, 4}, (String) null)[0]))
        .isEqualTo(PINNED);
  }

  private static final String PINNED = "61324be0167410ec";

  @Test
  void keysArePrefixConsistentAndOnlyFullBlocks() {
    RequestKeyHasher h = RequestKeyHasher.create(16, "", "m");
    qt().withExamples(200)
        .forAll(lists().of(integers().between(0, 200_000)).ofSizeBetween(0, 200))
        .checkAssert(
            toks -> {
              int[] t = toks.stream().mapToInt(Integer::intValue).toArray();
              long[] all = h.requestKeys(t, (String) null);
              assertThat(all).hasSize(t.length / 16);
              int cut = t.length / 2;
              long[] part = h.requestKeys(Arrays.copyOf(t, cut), (String) null);
              assertThat(part).containsExactly(Arrays.copyOf(all, part.length));
              long[] buf = new long[all.length + 3];
              assertThat(h.requestKeys(t, t.length, null, buf)).isEqualTo(all.length);
              assertThat(Arrays.copyOf(buf, all.length)).containsExactly(all);
              assertThat(all).doesNotContain(0L);
            });
  }

  @Test
  void loraAndModelNamesSeparateChains() {
    RequestKeyHasher h = RequestKeyHasher.create(4, "s", "base");
    int[] t = {1, 2, 3, 4, 5, 6, 7, 8};
    assertThat(h.requestKeys(t, "base")).containsExactly(h.requestKeys(t, (String) null));
    assertThat(h.requestKeys(t, "lora-a")[0]).isNotEqualTo(h.requestKeys(t, (String) null)[0]);
    assertThat(h.requestKeys(t, BlockExtraKeys.lora("lora-a")))
        .containsExactly(h.requestKeys(t, "lora-a"));
    assertThat(RequestKeyHasher.create(4, "other", "base").requestKeys(t, (String) null)[0])
        .isNotEqualTo(h.requestKeys(t, (String) null)[0]);
  }

  @Test
  void extraKeysChangeOnlyAffectedBlocks() {
    RequestKeyHasher h = RequestKeyHasher.create(4, "", "m");
    int[] t = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    long[] plain = h.requestKeys(t, (String) null);
    long[] salted = h.requestKeys(t, BlockExtraKeys.builder().cacheSalt("s").build());
    assertThat(salted[0]).isNotEqualTo(plain[0]);
    assertThat(salted[2]).isNotEqualTo(plain[2]); // the chain carries the difference
    long[] mm = h.requestKeys(t, BlockExtraKeys.builder().multiModal("img", 8, 2).build());
    assertThat(mm[0]).isEqualTo(plain[0]);
    assertThat(mm[1]).isEqualTo(plain[1]);
    assertThat(mm[2]).isNotEqualTo(plain[2]);
    assertThat(RequestKeyHasher.extraKeysHash(null)).isZero();
    assertThat(RequestKeyHasher.extraKeysHash(List.of("a")))
        .isNotEqualTo(RequestKeyHasher.extraKeysHash(List.of("b")));
  }

  @Test
  void rejectsBadBlockSize() {
    assertThatThrownBy(() -> RequestKeyHasher.create(0, "", "m"))
        .hasMessageContaining("blockSize must be > 0, was 0");
  }
}
