package io.kvroute.kvindex.hash.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class TokenHashTest {

  @Test
  void unrolledSixteenTokenDigestEqualsTheLoop() {
    SplittableRandom r = new SplittableRandom(3);
    for (int round = 0; round < 1000; round++) {
      int[] t = new int[40];
      for (int i = 0; i < t.length; i++) {
        t[i] = round % 3 == 0 ? r.nextInt() : r.nextInt(200_000);
      }
      int from = r.nextInt(24);
      assertThat(TokenHash.tokens(t, from, from + 16))
          .isEqualTo(TokenHash.generic(t, from, from + 16));
    }
  }
}
