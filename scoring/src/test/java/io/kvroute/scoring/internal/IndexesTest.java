package io.kvroute.scoring.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.junit.jupiter.api.Test;

class IndexesTest {
  private static final Map<String, Integer> IDX = Map.of("a", 0, "b", 1, "c", 2);

  private static int idx(String id) {
    return IDX.getOrDefault(id, -1);
  }

  @Test
  void approximateMatchIsConsecutiveFromBlockZero() {
    ApproximatePrefixIndex ix = new ApproximatePrefixIndex(100, 10);
    ix.add("a", new long[] {1, 2, 3, 4}, 0);
    ix.add("b", new long[] {1, 2}, 0);
    ix.add("c", new long[] {2, 3, 4}, 0); // not from block 0
    int[] out = new int[3];
    ix.match(new long[] {1, 2, 3, 4, 5}, IndexesTest::idx, out);
    assertThat(out).containsExactly(4, 2, 0);
    int[] none = new int[3];
    ix.match(new long[] {9, 1}, IndexesTest::idx, none);
    assertThat(none).containsExactly(0, 0, 0);
    assertThat(ix.size()).isEqualTo(9);
  }

  @Test
  void approximateLruEvictsOldestHashesAndEndpoints() {
    ApproximatePrefixIndex ix = new ApproximatePrefixIndex(3, 2);
    ix.add("a", new long[] {1, 2, 3, 4, 5}, 0); // keeps 3, 4, 5
    assertThat(ix.size()).isEqualTo(3);
    assertThat(ix.evictions()).isEqualTo(2);
    int[] out = new int[3];
    ix.match(new long[] {3, 4, 5}, IndexesTest::idx, out);
    assertThat(out[0]).isEqualTo(3);
    ix.add("b", new long[] {7}, 1);
    ix.add("c", new long[] {8}, 2); // endpoint table full: "a" (oldest update) goes
    assertThat(ix.endpoints()).isEqualTo(2);
    int[] after = new int[3];
    ix.match(new long[] {3}, IndexesTest::idx, after);
    assertThat(after[0]).isZero();
    ix.remove("b");
    assertThat(ix.endpoints()).isEqualTo(1);
  }

  @Test
  void speculativeEntriesExpireAndAreBounded() {
    SpeculativeIndex s = new SpeculativeIndex(100, 4);
    s.add("a", new long[] {1, 2, 3}, 0);
    assertThat(s.extend("a", new long[] {1, 2, 3, 4}, 0, 50)).isEqualTo(3);
    assertThat(s.extend("a", new long[] {1, 2, 3}, 1, 50)).isEqualTo(3);
    assertThat(s.extend("b", new long[] {1, 2, 3}, 0, 50)).isZero();
    assertThat(s.extend("a", new long[] {1, 2, 3}, 0, 100)).isZero(); // expired
    s.add("b", new long[] {5, 6, 7}, 100); // expires the old ones first
    assertThat(s.size()).isEqualTo(3);
    s.add("c", new long[] {8, 9}, 110); // 5 entries > 4: the oldest is dropped
    assertThat(s.size()).isEqualTo(4);
    assertThat(s.evictions()).isEqualTo(1);
    s.remove("c");
    assertThat(s.size()).isEqualTo(2);
  }

  @Test
  void inFlightIsBounded() {
    InFlightTracker t = new InFlightTracker(2);
    t.increment("a");
    t.increment("b");
    t.increment("c"); // full, nobody idle
    assertThat(t.get("c")).isZero();
    assertThat(t.overflows()).isEqualTo(1);
    t.decrement("a");
    t.increment("c"); // "a" is idle and is swept
    assertThat(t.get("c")).isEqualTo(1);
    assertThat(t.size()).isEqualTo(2);
    assertThat(t.total()).isEqualTo(2);
  }

  @Test
  void chainedHashesDependOnModelSaltAndPrefix() {
    int[] t = {1, 2, 3, 4, 5};
    long[] a = Hashing.chainedBlocks(t, 2, 0, "m", null);
    assertThat(a).hasSize(3); // partial last block included
    assertThat(Hashing.chainedBlocks(t, 2, 0, "m", "salt")[0]).isNotEqualTo(a[0]);
    assertThat(Hashing.chainedBlocks(t, 2, 0, "other", null)[0]).isNotEqualTo(a[0]);
    assertThat(Hashing.chainedBlocks(new int[] {1, 2, 9, 9}, 2, 0, "m", null)[0]).isEqualTo(a[0]);
    assertThat(Hashing.chainedBlocks(t, 2, 2, "m", null)).hasSize(2);
    assertThat(Hashing.estimateTokens("abcde")).containsExactly(0x64636261, 0x65);
  }
}
