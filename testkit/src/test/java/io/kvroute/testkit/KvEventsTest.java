package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.kvindex.event.EventSchema;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** KV events on real JeroMQ sockets: stores, evictions, clears, replay and event faults. */
class KvEventsTest {

  private static List<Long> stored(KvEventBatch b) {
    List<Long> out = new ArrayList<>();
    for (KvEvent e : b.events()) {
      if (e instanceof KvEvent.BlockStored s && "GPU".equals(s.medium())) {
        for (long h : s.blockHashes().values()) {
          out.add(h);
        }
      }
    }
    return out;
  }

  @Test
  void topicSeqAndEvictionOrderFollowTheBlockPool() {
    try (VllmSimulator sim = TestSupport.sim().gpuBlocks(4).blockSize(16).build().start();
        TestSupport.Sub sub = new TestSupport.Sub(sim)) {
      assertThat(sim.topic()).isEqualTo("kv@" + sim.hostPort() + "@sim-model");
      // 32 prompt tokens + 1 output: 3 blocks, 2 full prompt blocks stored
      TestSupport.post(
          sim, "/v1/completions", TestSupport.completion(TestSupport.tokens(32, 1), 1));
      TestSupport.Msg m1 = sub.expect();
      assertThat(m1.topic()).isEqualTo(sim.topic());
      KvEventBatch b1 = m1.batch();
      assertThat(b1.schema()).isIn(EventSchema.M0, EventSchema.M1, EventSchema.M2);
      KvEvent.BlockStored s1 = (KvEvent.BlockStored) b1.events().get(0);
      assertThat(s1.blockHashes().size()).isEqualTo(2);
      assertThat(s1.tokenIds()).hasSize(32);
      assertThat(s1.parentBlockHash()).isNull();
      assertThat(s1.medium()).isEqualTo("GPU");
      // a different prompt needs 3 of 4 blocks: the LRU free cached blocks are evicted first
      TestSupport.post(
          sim, "/v1/completions", TestSupport.completion(TestSupport.tokens(32, 2), 1));
      KvEventBatch evict = sub.expect().batch();
      assertThat(sub.expect().seq()).isEqualTo(m1.seq() + 2);
      assertThat(evict.events()).allMatch(e -> e instanceof KvEvent.BlockRemoved);
      long removed = ((KvEvent.BlockRemoved) evict.events().get(0)).blockHashes().get(0);
      assertThat(s1.blockHashes().values()).contains(removed);
      assertThat(sim.cachedBlockHashes()).doesNotContain(removed);
      // AllBlocksCleared on reset
      sim.faults().clearAllBlocks();
      assertThat(sub.expect().batch().events()).containsExactly(KvEvent.AllBlocksCleared.INSTANCE);
      assertThat(sim.cachedBlockHashes()).isEmpty();
    }
  }

  @Test
  void replayReturnsBufferedBatchesToADealer() {
    try (VllmSimulator sim = TestSupport.sim().build().start();
        TestSupport.Sub sub = new TestSupport.Sub(sim);
        ZContext ctx = new ZContext(1)) {
      TestSupport.post(
          sim, "/v1/completions", TestSupport.completion(TestSupport.tokens(40, 3), 1));
      TestSupport.Msg live = sub.expect();
      List<List<byte[]>> reply = replay(ctx, sim.replayEndpoint(), live.seq());
      List<byte[]> frames = reply.get(0);
      // [empty, topic, seq, payload]
      assertThat(frames).hasSize(4);
      assertThat(new String(frames.get(1), ZMQ.CHARSET)).isEqualTo(sim.topic());
      assertThat(frames.get(2)).isEqualTo(seqBytes(live.seq()));
      assertThat(frames.get(3)).isEqualTo(live.payload());
      List<byte[]> end = reply.get(reply.size() - 1);
      assertThat(end.get(end.size() - 1)).isEmpty();
      assertThat(end.get(end.size() - 2)).isEqualTo(seqBytes(-1));
    }
  }

  @Test
  void droppedBatchLeavesAGapThatReplayFills() {
    try (VllmSimulator sim = TestSupport.sim().build().start();
        TestSupport.Sub sub = new TestSupport.Sub(sim);
        ZContext ctx = new ZContext(1)) {
      sim.faults().dropEventBatches(1);
      TestSupport.post(
          sim, "/v1/completions", TestSupport.completion(TestSupport.tokens(32, 4), 1));
      TestSupport.post(
          sim, "/v1/completions", TestSupport.completion(TestSupport.tokens(32, 5), 1));
      TestSupport.Msg after = sub.expect();
      KvEventBatch afterBatch = after.batch();
      assertThat(stored(afterBatch)).hasSize(2);
      List<byte[]> missing = replay(ctx, sim.replayEndpoint(), after.seq() - 1).get(0);
      assertThat(missing.get(2)).isEqualTo(seqBytes(after.seq() - 1));
      assertThat(stored(KvEventCodec.decode(missing.get(3)))).hasSize(2);
    }
  }

  @Test
  void corruptBatchIsUndecodableAndPublisherRestartResetsSequence() {
    try (VllmSimulator sim = TestSupport.sim().build().start();
        TestSupport.Sub sub = new TestSupport.Sub(sim)) {
      sim.faults().corruptEventBatches(1);
      TestSupport.post(
          sim, "/v1/completions", TestSupport.completion(TestSupport.tokens(32, 6), 1));
      TestSupport.Msg bad = sub.expect();
      assertThat(bad.seq()).isPositive();
      assertThatThrownBy(bad::batch).isInstanceOf(RuntimeException.class);

      sim.faults().restartPublisher();
      // the SUB reconnects by itself; the first batch after the restart has seq 0
      TestSupport.Msg first = null;
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (first == null && System.nanoTime() < deadline) {
        sim.resetPrefixCache();
        first = sub.next(100);
      }
      assertThat(first).isNotNull();
      assertThat(first.batch().events()).containsExactly(KvEvent.AllBlocksCleared.INSTANCE);
      // the new publisher's buffer starts at sequence 0
      try (ZContext ctx = new ZContext(1)) {
        assertThat(replay(ctx, sim.replayEndpoint(), 0).get(0).get(2)).isEqualTo(seqBytes(0));
      }
    }
  }

  @Test
  void arraySchemaFamilyAndCpuOffloadEvents() {
    try (VllmSimulator sim =
            TestSupport.sim().eventSchema(EventSchema.A2).cpuBlocks(2).build().start();
        TestSupport.Sub sub = new TestSupport.Sub(sim)) {
      TestSupport.post(
          sim, "/v1/completions", TestSupport.completion(TestSupport.tokens(48, 7), 1));
      KvEventBatch b = sub.expect().batch();
      assertThat(b.schema()).isEqualTo(EventSchema.A2);
      KvEvent.BlockStored gpu = (KvEvent.BlockStored) b.events().get(0);
      assertThat(gpu.medium()).isEqualTo("GPU");
      assertThat(gpu.blockHashes().size()).isEqualTo(3);
      // CPU tier holds 2: one CPU eviction among the first three offloads, then a CPU store
      assertThat(b.events())
          .anySatisfy(
              e -> {
                assertThat(e).isInstanceOf(KvEvent.BlockStored.class);
                assertThat(((KvEvent.BlockStored) e).medium()).isEqualTo("CPU");
              });
      assertThat(b.events())
          .anySatisfy(
              e -> {
                assertThat(e).isInstanceOf(KvEvent.BlockRemoved.class);
                assertThat(((KvEvent.BlockRemoved) e).medium()).isEqualTo("CPU");
              });
    }
  }

  private static byte[] seqBytes(long seq) {
    byte[] b = new byte[8];
    for (int i = 0; i < 8; i++) {
      b[i] = (byte) (seq >>> (56 - 8 * i));
    }
    return b;
  }

  /**
   * One replay request from a DEALER, returning every reply message up to and including the end
   * marker. A fresh JeroMQ connection to a just-bound socket occasionally stays silent, so the
   * request is retried on a new DEALER after a second without an answer (as llm-d's consumer
   * retries after its idle timeout).
   */
  private static List<List<byte[]>> replay(ZContext ctx, String endpoint, long start) {
    for (int attempt = 0; attempt < 10; attempt++) {
      ZMQ.Socket dealer = ctx.createSocket(SocketType.DEALER);
      try {
        dealer.setLinger(0);
        dealer.setHandshakeIvl(1000);
        dealer.setReceiveTimeOut(1000);
        dealer.connect(endpoint);
        dealer.sendMore(new byte[0]);
        dealer.send(seqBytes(start));
        List<List<byte[]>> out = new ArrayList<>();
        while (true) {
          byte[] f = dealer.recv();
          if (f == null) {
            break;
          }
          List<byte[]> msg = new ArrayList<>();
          msg.add(f);
          while (dealer.hasReceiveMore()) {
            msg.add(dealer.recv());
          }
          out.add(msg);
          if (msg.get(msg.size() - 1).length == 0) {
            return out;
          }
        }
      } finally {
        dealer.close();
      }
    }
    throw new AssertionError("no replay answer after 10 attempts");
  }
}
