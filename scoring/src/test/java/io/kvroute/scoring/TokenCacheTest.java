package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

class TokenCacheTest {

  @Test
  void countsHitsAndMissesAndEvictsTheLeastRecentlyUsedEntry() {
    TokenCache c = new TokenCache(2, 100);
    assertThat(c.get("a")).isNull();
    c.put("a", new int[] {1});
    c.put("b", new int[] {2});
    assertThat(c.get("a")).containsExactly(1); // "b" is now the least recently used
    c.put("c", new int[] {3});
    assertThat(c.get("b")).isNull();
    assertThat(c.get("c")).containsExactly(3);
    assertThat(c.size()).isEqualTo(2);
    assertThat(c.hits()).isEqualTo(2);
    assertThat(c.misses()).isEqualTo(2);
  }

  @Test
  void boundsTheTotalTokensAndNeverStoresAnOversizedArray() {
    TokenCache c = new TokenCache(10, 5);
    c.put("a", new int[3]);
    c.put("b", new int[2]);
    assertThat(c.size()).isEqualTo(2);
    c.put("c", new int[1]); // 6 tokens: "a" goes
    assertThat(c.get("a")).isNull();
    assertThat(c.size()).isEqualTo(2);
    c.put("big", new int[6]);
    assertThat(c.get("big")).isNull();
    c.put("b", new int[4]); // replacing "b" frees its 2 tokens first: 4 + 1 fit
    assertThat(c.get("b")).hasSize(4);
    assertThat(c.get("c")).hasSize(1);
  }

  @Test
  void zeroEntriesDisablesItAndNegativeBoundsAreRejected() {
    TokenCache c = new TokenCache(0, 100);
    c.put("a", new int[] {1});
    assertThat(c.get("a")).isNull();
    assertThat(c.size()).isZero();
    assertThat(c.misses()).isEqualTo(1);
    assertThatThrownBy(() -> new TokenCache(-1, 1))
        .hasMessage("cache bounds must be >= 0, were -1, 1");
    assertThatThrownBy(() -> new TokenCache(1, -1))
        .hasMessage("cache bounds must be >= 0, were 1, -1");
  }

  @Test
  void bindsItsMetersWithTheGivenNamesAndTags() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    TokenCache c = new TokenCache(4, 100);
    c.bindTo(
        reg, "kvroute.test.size", "kvroute.test.hits", "kvroute.test.misses", Tags.of("k", "v"));
    c.put("a", new int[] {1});
    c.get("a");
    c.get("b");
    c.get("c");
    assertThat(reg.get("kvroute.test.size").tag("k", "v").gauge().value()).isEqualTo(1.0);
    assertThat(reg.get("kvroute.test.hits").tag("k", "v").functionCounter().count()).isEqualTo(1.0);
    assertThat(reg.get("kvroute.test.misses").tag("k", "v").functionCounter().count())
        .isEqualTo(2.0);
  }
}
