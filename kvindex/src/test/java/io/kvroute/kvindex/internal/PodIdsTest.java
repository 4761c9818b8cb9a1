package io.kvroute.kvindex.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PodIdsTest {
  @Test
  void agreesWithHashMapUnderPutsAndRemoves() {
    qt().withExamples(200)
        .forAll(lists().of(integers().between(0, 400)).ofSizeBetween(0, 300))
        .checkAssert(
            ops -> {
              PodIds ids = new PodIds();
              Map<String, Integer> ref = new HashMap<>();
              int next = 0;
              for (int op : ops) {
                String pod = "pod-" + (op % 100);
                if (op >= 300) {
                  ids.remove(pod);
                  ref.remove(pod);
                } else if (!ref.containsKey(pod)) {
                  ids.put(pod, next);
                  ref.put(pod, next++);
                }
              }
              assertThat(ids.size()).isEqualTo(ref.size());
              for (int p = 0; p < 100; p++) {
                String pod = new String("pod-" + p); // not the same instance
                assertThat(ids.get(pod)).isEqualTo(ref.getOrDefault(pod, -1));
              }
              assertThat(ids.keys()).containsExactlyInAnyOrderElementsOf(ref.keySet());
            });
  }
}
