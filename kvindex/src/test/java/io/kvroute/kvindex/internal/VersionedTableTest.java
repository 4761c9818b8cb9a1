package io.kvroute.kvindex.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The versioned slots lookups validate against ({@link SampledLruTable}, request-key table): under
 * random inserts, value changes and deletions (with their backward shifts) in a small, crowded
 * table, every slot whose key or value changed has a new version, every version is even between
 * writes, and the table answers like a map. A reader that read a slot and finds its version
 * unchanged afterwards therefore read what the slot still holds.
 */
class VersionedTableTest {
  private static final long EMPTY_VALUE = 0xFFFFFFFFL;

  /** A versioned table with no eviction policy of its own (the test never fills it). */
  private static final class Table extends SampledLruTable {
    Table(int maxEntries) {
      super(maxEntries, 8, EMPTY_VALUE, 42, false, true);
    }

    @Override
    int stamp(int slot) {
      return 0;
    }

    @Override
    void evicting(int slot) {}
  }

  @Test
  void everyChangedSlotHasANewVersionAndVersionsAreEvenBetweenWrites() {
    qt().withExamples(300)
        .forAll(lists().of(integers().between(0, Integer.MAX_VALUE)).ofSizeBetween(1, 200))
        .checkAssert(VersionedTableTest::run);
  }

  private static void run(List<Integer> ops) {
    Table t = new Table(40); // 52 slots, at most 40 keys: long probe runs, many shifts
    Map<Long, Long> model = new HashMap<>();
    long[] before = t.tab.clone();
    for (int op : ops) {
      long k = 1 + (op & 63); // 64 possible keys, at most 40 held
      long v = (op >>> 6) & 0xFFFFFFL;
      int slot = t.find(k);
      switch ((op >>> 30) & 1) {
        case 0 -> {
          if (slot < 0) {
            if (model.size() < 40) {
              slot = t.insert(k, v);
              assertThat(SampledLruTable.changing(t.tab[2 * slot + 1])).isTrue(); // open
              t.close(slot);
              model.put(k, v);
            }
          } else {
            t.open(slot);
            t.tab[2 * slot + 1] = v | (t.tab[2 * slot + 1] & ~SampledLruTable.BELOW_VERSION);
            t.close(slot);
            model.put(k, v);
          }
        }
        default -> {
          if (slot >= 0) {
            t.open(slot);
            t.deleteSlot(slot);
            model.remove(k);
          }
        }
      }
      check(t, before, model);
      before = t.tab.clone();
    }
  }

  private static void check(Table t, long[] before, Map<Long, Long> model) {
    long[] now = t.tab;
    for (int i = 0; i < t.cap; i++) {
      long w = now[2 * i + 1];
      assertThat(SampledLruTable.changing(w)).as("slot %d left open", i).isFalse();
      boolean keyChanged = now[2 * i] != before[2 * i];
      boolean valueChanged =
          (now[2 * i] != 0 || before[2 * i] != 0)
              && ((w ^ before[2 * i + 1]) & SampledLruTable.BELOW_VERSION) != 0;
      if (keyChanged || valueChanged) {
        assertThat(w >>> 40)
            .as(
                "slot %d changed (key %d -> %d) without a new version",
                i, before[2 * i], now[2 * i])
            .isNotEqualTo(before[2 * i + 1] >>> 40);
      }
    }
    assertThat(t.size()).isEqualTo(model.size());
    for (Map.Entry<Long, Long> e : model.entrySet()) {
      int slot = t.find(e.getKey());
      assertThat(slot).isNotNegative();
      assertThat(now[2 * slot + 1] & SampledLruTable.BELOW_VERSION).isEqualTo(e.getValue());
    }
  }
}
