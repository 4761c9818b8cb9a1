package io.kvroute.kvindex.redis.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The record of the mappings this replica rewrote: a mapping counts as fresh only for the very
 * mapping (engine key, group, request key, kind) recorded, within the window after the write, and
 * never after {@link FreshMappings#clear()}; a colliding record replaces the older one, so the
 * table answers "fresh" only for what it still holds.
 */
class FreshMappingsTest {
  private static final long WINDOW = 1_000;

  @Test
  void freshOnlyForTheRecordedMappingWithinTheWindow() {
    FreshMappings f = new FreshMappings(64, WINDOW);
    long t = FreshMappings.tag(7, 0, 70, (byte) 0);
    assertThat(f.fresh(t, 100)).as("never written").isFalse();
    f.rewritten(t, 100);
    assertThat(f.fresh(t, 100 + WINDOW - 1)).isTrue();
    assertThat(f.fresh(t, 100 + WINDOW)).as("window over").isFalse();
    assertThat(f.fresh(FreshMappings.tag(7, 1, 70, (byte) 0), 200)).as("another group").isFalse();
    assertThat(f.fresh(FreshMappings.tag(7, 0, 71, (byte) 0), 200)).as("another key").isFalse();
    assertThat(f.fresh(FreshMappings.tag(7, 0, 70, (byte) 1), 200)).as("another kind").isFalse();
    f.clear();
    assertThat(f.fresh(t, 200)).as("the server may have lost it").isFalse();
  }

  @Test
  void tagsAreNeverZeroAndSeparateTheFields() {
    Set<Long> seen = new HashSet<>();
    for (long ek = 0; ek < 40; ek++) {
      for (int g = 0; g < 4; g++) {
        for (long rk = 0; rk < 4; rk++) {
          for (byte kind = 0; kind < 3; kind++) {
            long t = FreshMappings.tag(ek, g, rk, kind);
            assertThat(t).isNotZero();
            assertThat(seen.add(t)).as("tag of %d/%d/%d/%d", ek, g, rk, kind).isTrue();
          }
        }
      }
    }
  }

  @Test
  void agreesWithAModelOfTheLatestRecordPerSlot() {
    // op = (kind 0..2, mapping 0..15, time step 0..600) over a 4-slot table: mappings collide
    qt().withExamples(300)
        .forAll(lists().of(integers().between(0, 3 * 16 * 601 - 1)).ofSizeBetween(1, 80))
        .checkAssert(FreshMappingsTest::check);
  }

  private static void check(List<Integer> ops) {
    FreshMappings f = new FreshMappings(4, WINDOW);
    Map<Integer, long[]> model = new HashMap<>(); // slot -> {tag, at}
    long now = 0;
    for (int code : ops) {
      int kind = code % 3;
      int mapping = (code / 3) % 16;
      now += code / 48;
      long tag = FreshMappings.tag(mapping >> 2, mapping & 1, mapping >> 1 & 1, (byte) 0);
      int slot = (int) (tag >>> 40) & 3;
      switch (kind) {
        case 0 -> {
          f.rewritten(tag, now);
          model.put(slot, new long[] {tag, now});
        }
        case 1 -> {
          long[] m = model.get(slot);
          boolean want = m != null && m[0] == tag && now - m[1] < WINDOW;
          assertThat(f.fresh(tag, now)).isEqualTo(want);
        }
        default -> {
          if (code % 7 == 0) {
            f.clear();
            model.clear();
          }
        }
      }
    }
  }
}
