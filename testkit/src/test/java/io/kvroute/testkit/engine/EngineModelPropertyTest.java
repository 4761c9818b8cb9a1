package io.kvroute.testkit.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.longs;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The engine model under random workloads, budgets and cache sizes (preemptions included): every
 * accepted request finishes with exactly its output tokens, time only moves forward, no block is
 * leaked, and the per-step event batches, through the codec, describe exactly what the pool holds.
 */
class EngineModelPropertyTest {

  @Test
  void everyRequestFinishesAndTheEventsMatchThePool() {
    qt().withExamples(60)
        .forAll(
            longs().all(),
            integers().between(8, 120),
            integers().between(16, 600),
            integers().between(1, 12))
        .checkAssert(EngineModelPropertyTest::run);
  }

  private static void run(long seed, int kvBlocks, int budget, int maxSeqs) {
    SplittableRandom rnd = new SplittableRandom(seed);
    Map<Long, Integer> fromEvents = new HashMap<>();
    EngineModelTest.Log log = new EngineModelTest.Log();
    Map<Long, Integer> outputs = new HashMap<>();
    EngineModel e =
        EngineModel.builder(EngineModelTest.profile(kvBlocks, budget, maxSeqs))
            .listener(log)
            .eventSink(
                events -> {
                  byte[] wire = KvEventCodec.encode(KvEventBatch.of(0, events));
                  for (KvEvent ev : KvEventCodec.decode(wire).events()) {
                    io.kvroute.testkit.internal.BlockPoolPropertyTest.apply(fromEvents, ev);
                  }
                })
            .build();
    long t = 0;
    int n = 5 + rnd.nextInt(25);
    for (int i = 0; i < n; i++) {
      int[] prompt = EngineModelTest.tokens(1 + rnd.nextInt(200), rnd.nextInt(3));
      int out = 1 + rnd.nextInt(40);
      outputs.put((long) i, out);
      e.submit(EngineModelTest.req(i, prompt, out), t);
      int steps = rnd.nextInt(4);
      for (int s = 0; s < steps; s++) {
        long end = e.startStep(t);
        if (end < 0) {
          break;
        }
        assertThat(end).isGreaterThan(t);
        e.finishStep(end);
        t = end;
        e.pool().checkInvariants();
        assertThat(fromEvents).isEqualTo(e.pool().cachedBlockCounts());
      }
    }
    EngineModelTest.drain(e, t);
    e.pool().checkInvariants();
    assertThat(e.pool().totalReferences()).isZero();
    assertThat(fromEvents).isEqualTo(e.pool().cachedBlockCounts());
    EngineModel.Stats s = e.stats();
    assertThat(s.finished() + s.rejected()).isEqualTo(n);
    assertThat(log.done.size()).isEqualTo((int) s.finished());
    long expectedOut = 0;
    for (long id : log.done.keySet()) {
      expectedOut += outputs.get(id);
      assertThat(log.first.get(id)).isLessThanOrEqualTo(log.done.get(id));
      assertThat(log.scheduled.get(id)).isLessThan(log.first.get(id));
    }
    assertThat(s.outputTokens()).isEqualTo(expectedOut);
  }
}
