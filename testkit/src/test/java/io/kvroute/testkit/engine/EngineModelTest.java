package io.kvroute.testkit.engine;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The engine model's scheduling, timing and events, with a cost model simple enough to add up. */
class EngineModelTest {
  /** 1 ms per step plus 1 µs per batched token; no attention or KV-read terms. */
  static final CostModel SIMPLE =
      CostModel.builder().overheadNanos(1_000_000).perTokenNanos(1_000).build();

  static EngineProfile profile(int kvBlocks, int budget, int maxSeqs) {
    return EngineProfile.builder("test")
        .costModel(SIMPLE)
        .kvBlocks(kvBlocks)
        .maxNumBatchedTokens(budget)
        .maxNumSeqs(maxSeqs)
        .build();
  }

  /** Records what the listener hears. */
  static final class Log implements EngineListener {
    final Map<Long, Long> scheduled = new HashMap<>();
    final Map<Long, Integer> cached = new HashMap<>();
    final Map<Long, Long> first = new HashMap<>();
    final Map<Long, Long> done = new HashMap<>();
    final List<String> rejected = new ArrayList<>();

    @Override
    public void onScheduled(EngineRequest r, long nanos, int cachedTokens) {
      scheduled.put(r.id(), nanos);
      cached.put(r.id(), cachedTokens);
    }

    @Override
    public void onFirstToken(EngineRequest r, long nanos) {
      first.put(r.id(), nanos);
    }

    @Override
    public void onFinished(EngineRequest r, long nanos) {
      done.put(r.id(), nanos);
    }

    @Override
    public void onRejected(EngineRequest r, long nanos, String reason) {
      rejected.add(reason);
    }
  }

  /** Runs steps back to back from {@code t} until nothing can run; returns the time it stops. */
  static long drain(EngineModel e, long t) {
    for (long end; (end = e.startStep(t)) >= 0; t = end) {
      e.finishStep(end);
    }
    return t;
  }

  static int[] tokens(int n, int seed) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = seed * 100_000 + i;
    }
    return t;
  }

  static EngineRequest req(long id, int[] prompt, int out) {
    return EngineRequest.builder(id, prompt, out).build();
  }

  @Test
  void loneRequestPrefillsInOneStepThenDecodesOneTokenPerStep() {
    Log log = new Log();
    EngineModel e = EngineModel.builder(profile(1000, 8192, 16)).listener(log).build();
    e.submit(req(1, tokens(1000, 1), 5), 0);
    long end = drain(e, 0);
    // prefill: 1 ms + 1000 µs; each of the 4 later tokens: 1 ms + 1 µs
    assertThat(log.first.get(1L)).isEqualTo(2_000_000);
    assertThat(log.done.get(1L)).isEqualTo(2_000_000 + 4 * 1_001_000);
    assertThat(end).isEqualTo(log.done.get(1L));
    EngineModel.Stats s = e.stats();
    assertThat(s.steps()).isEqualTo(5);
    assertThat(s.outputTokens()).isEqualTo(5);
    assertThat(s.busyNanos()).isEqualTo(end);
    assertThat(e.kvCacheUsage()).isZero();
  }

  @Test
  void longPromptsArePrefilledInChunksOfTheTokenBudget() {
    Log log = new Log();
    EngineModel e = EngineModel.builder(profile(4000, 2048, 16)).listener(log).build();
    e.submit(req(1, tokens(5000, 1), 1), 0);
    drain(e, 0);
    // 2048 + 2048 + 904 tokens: three steps, the first token at the end of the third
    assertThat(log.first.get(1L)).isEqualTo(3 * 1_000_000L + 5000 * 1_000L);
    assertThat(e.stats().steps()).isEqualTo(3);
  }

  @Test
  void continuousBatchingSharesStepsAndTheBudget() {
    Log log = new Log();
    EngineModel e = EngineModel.builder(profile(4000, 8192, 16)).listener(log).build();
    e.submit(req(1, tokens(100, 1), 3), 0);
    e.submit(req(2, tokens(200, 2), 3), 0);
    drain(e, 0);
    // both prefilled in one step of 300 tokens, then two decode steps of 2 tokens
    assertThat(log.first.get(1L)).isEqualTo(log.first.get(2L)).isEqualTo(1_300_000);
    assertThat(log.done.get(1L)).isEqualTo(1_300_000 + 2 * 1_002_000);
    assertThat(e.stats().steps()).isEqualTo(3);
  }

  @Test
  void maxNumSeqsBoundsTheRunningBatch() {
    Log log = new Log();
    EngineModel e = EngineModel.builder(profile(4000, 8192, 2)).listener(log).build();
    for (int i = 0; i < 3; i++) {
      e.submit(req(i, tokens(64, i + 1), 2), 0);
    }
    long t = e.startStep(0);
    assertThat(e.runningRequests()).isEqualTo(2);
    assertThat(e.waitingRequests()).isEqualTo(1);
    e.finishStep(t);
    drain(e, t);
    assertThat(log.scheduled.get(2L)).isGreaterThan(log.scheduled.get(0L));
    assertThat(log.done).hasSize(3);
  }

  @Test
  void aRepeatedPromptHitsThePrefixCacheOfFullBlocks() {
    Log log = new Log();
    EngineModel e = EngineModel.builder(profile(1000, 8192, 16)).listener(log).build();
    int[] prompt = tokens(1000, 7);
    e.submit(req(1, prompt, 2), 0);
    long t = drain(e, 0);
    e.submit(req(2, prompt, 2), t);
    drain(e, t);
    // 62 full blocks of 16 (992 tokens) are reused; 999 is the cap, 992 the full blocks
    assertThat(log.cached.get(1L)).isZero();
    assertThat(log.cached.get(2L)).isEqualTo(992);
    assertThat(log.first.get(2L) - t).isEqualTo(1_000_000 + 8 * 1_000L);
    assertThat(e.stats().cachedTokens()).isEqualTo(992);
  }

  @Test
  void kvEventsThroughTheCodecTellAnIndexWhatTheEngineHolds() {
    BlockIndex index = BlockIndex.inMemory(IndexConfig.builder().blockSize(16).build());
    List<byte[]> payloads = new ArrayList<>();
    EngineModel e =
        EngineModel.builder(profile(200, 8192, 16))
            .name("pod-a")
            .eventSink(events -> payloads.add(KvEventCodec.encode(KvEventBatch.of(0, events))))
            .build();
    int[] prompt = tokens(320, 3);
    e.submit(req(1, prompt, 1), 0);
    drain(e, 0);
    assertThat(payloads).hasSize(1); // one batch for the step that scheduled the prompt
    payloads.forEach(p -> index.accept("pod-a", KvEventCodec.decode(p)));
    PrefixMatch m = index.lookup(index.requestKeys(prompt, (String) null), List.of("pod-a"));
    assertThat(m.matchedBlocks(0)).isEqualTo(20);
    // the engine's own view agrees
    List<io.kvroute.kvindex.hash.BlockHash> hashes = e.hasher().hashBlocks(prompt);
    assertThat(e.cachedPrefixTokens(hashes, prompt.length)).isEqualTo(19 * 16);
  }

  @Test
  void aFullCachePreemptsTheNewestRequestWhichResumesLater() {
    Log log = new Log();
    // 12 blocks of 16: two requests of 64 prompt tokens growing by 64 tokens each cannot coexist
    EngineModel e = EngineModel.builder(profile(12, 8192, 16)).listener(log).build();
    e.submit(req(1, tokens(64, 1), 100), 0);
    e.submit(req(2, tokens(64, 2), 100), 0);
    drain(e, 0);
    assertThat(e.stats().preemptions()).isPositive();
    assertThat(log.done).containsKeys(1L, 2L);
    assertThat(log.done.get(1L)).isLessThan(log.done.get(2L));
    assertThat(e.kvCacheUsage()).isZero();
    assertThat(e.pool().totalReferences()).isZero();
    e.pool().checkInvariants();
  }

  @Test
  void requestsThatCanNeverRunAreRejected() {
    Log log = new Log();
    EngineModel e = EngineModel.builder(profile(10, 8192, 16)).listener(log).build();
    e.submit(req(1, tokens(200, 1), 1), 0);
    EngineModel big =
        EngineModel.builder(
                EngineProfile.builder("small").costModel(SIMPLE).maxModelLen(100).build())
            .listener(log)
            .build();
    big.submit(req(2, tokens(90, 1), 20), 0);
    assertThat(log.rejected)
        .hasSize(2)
        .anyMatch(r -> r.contains("KV blocks"))
        .anyMatch(r -> r.contains("max_model_len 100"));
    assertThat(e.startStep(0)).isEqualTo(-1);
  }

  @Test
  void aDecodeLegWaitsForItsKvThenComputesOnlyTheLastToken() {
    Log log = new Log();
    List<KvEvent> events = new ArrayList<>();
    EngineModel e =
        EngineModel.builder(profile(1000, 8192, 16))
            .listener(log)
            .eventSink(events::addAll)
            .build();
    int[] prompt = tokens(500, 4);
    e.submit(EngineRequest.builder(1, prompt, 3).remoteKvReadyAt(5_000_000).build(), 0);
    assertThat(e.startStep(0)).isEqualTo(-1); // blocks allocated, KV still in flight
    assertThat(log.cached.get(1L)).isEqualTo(499);
    assertThat(e.startStep(4_999_999)).isEqualTo(-1);
    long end = e.startStep(5_000_000);
    assertThat(end).isEqualTo(5_000_000 + 1_001_000); // one token computed
    e.finishStep(end);
    assertThat(log.first.get(1L)).isEqualTo(end);
    drain(e, end);
    assertThat(log.done).containsKey(1L);
    // the received blocks were cached (and published) when the transfer completed
    assertThat(events)
        .anyMatch(ev -> ev instanceof KvEvent.BlockStored s && s.blockHashes().size() == 31);
    assertThat(e.stats().computedPrefillTokens()).isEqualTo(1);
  }

  @Test
  void aHeldPrefillLegKeepsItsBlocksUntilReleased() {
    EngineModel e = EngineModel.builder(profile(100, 8192, 16)).build();
    EngineRequest r = EngineRequest.builder(1, tokens(160, 5), 1).holdKv(true).build();
    e.submit(r, 0);
    drain(e, 0);
    assertThat(e.kvCacheUsage()).isEqualTo(10 / 100.0);
    e.release(r);
    assertThat(e.kvCacheUsage()).isZero();
  }

  @Test
  void sameInputsGiveTheSameTimeline() {
    assertThat(timeline(42)).isEqualTo(timeline(42)).isNotEqualTo(timeline(43));
  }

  private static List<Long> timeline(long seed) {
    Log log = new Log();
    EngineModel e = EngineModel.builder(profile(300, 512, 8)).listener(log).build();
    SplittableRandom rnd = new SplittableRandom(seed);
    long t = 0;
    for (int i = 0; i < 40; i++) {
      e.submit(req(i, tokens(16 + rnd.nextInt(400), rnd.nextInt(4)), 1 + rnd.nextInt(30)), t);
      long end = e.startStep(t);
      if (end >= 0) {
        e.finishStep(end);
        t = end;
      }
    }
    drain(e, t);
    List<Long> out = new ArrayList<>();
    for (long i = 0; i < 40; i++) {
      out.add(log.first.get(i));
      out.add(log.done.get(i));
    }
    return out;
  }
}
