package io.kvroute.kvindex.zmq;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.vectors.GoldenVectors;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Events flow from a real PUB socket through the subscriber into a real {@link BlockIndex}. */
class BlockIndexIngestionTest {

  @Test
  void vectorPayloadsAndReplayedGapsEndUpInTheIndex() {
    BlockIndex index = BlockIndex.inMemory(IndexConfig.builder().blockSize(16).build());
    RecordingListener listener = new RecordingListener();
    // vector A5_store_two_blocks: two root blocks of 16 tokens each
    byte[] payload = null;
    for (com.fasterxml.jackson.databind.JsonNode v :
        GoldenVectors.read("kv_events_msgpack.json").get("vectors")) {
      if (v.get("name").asText().equals("A5_store_two_blocks")) {
        payload = GoldenVectors.hex(v.get("payload_hex").asText());
      }
    }
    assertThat(payload).as("vector A5_store_two_blocks").isNotNull();
    KvEvent.BlockStored stored = (KvEvent.BlockStored) KvEventCodec.decode(payload).events().get(0);
    int[] tokens = stored.tokenIds();
    try (KvEventPublisher p =
            Publishers.bound()
                .replayEndpoint("tcp://127.0.0.1:0")
                .topic("kv@pod-a@Qwen/Qwen3-8B")
                .build();
        KvEventSubscriber sub =
            KvEventSubscriber.builder()
                .sink(KvEventSink.of(index))
                .listener(listener)
                .pollInterval(Duration.ofMillis(5))
                .replayIdleTimeout(Duration.ofMillis(700))
                .handshakeTimeout(Duration.ofMillis(500))
                .build()
                .start()) {
      sub.addPod(PodEndpoint.of("pod-a", p.endpoint()).withReplay(p.replayEndpoint())).join();
      Await.until(
          "subscriber joined",
          () -> {
            p.publish(KvEventBatch.of(1.0, List.of()));
            return listener.anyBatch("pod-a");
          });
      p.dropSequence(p.nextSequence());
      p.publishPayload(payload.clone()); // lost on PUB, recovered by replay
      // a child block (tokens 32..47) of the second block
      int[] child = new int[16];
      for (int i = 0; i < 16; i++) {
        child[i] = 1000 + i;
      }
      long childSeq =
          p.publish(
              KvEventBatch.of(
                  2.0,
                  List.of(
                      KvEvent.BlockStored.of(
                          EngineHashes.ofInts(42L),
                          EngineHashes.ofInts(stored.blockHashes().get(1)),
                          child,
                          16))));
      Await.until("child applied", () -> listener.seen("pod-a", childSeq));

      int[] prompt = new int[48];
      System.arraycopy(tokens, 0, prompt, 0, 32);
      System.arraycopy(child, 0, prompt, 32, 16);
      PrefixMatch m = index.lookup(index.requestKeys(prompt, (String) null), List.of("pod-a"));
      assertThat(m.matchedBlocks("pod-a")).isEqualTo(3);

      long removeSeq =
          p.publish(
              KvEventBatch.of(
                  3.0,
                  List.of(
                      KvEvent.BlockRemoved.of(EngineHashes.ofInts(stored.blockHashes().get(1))))));
      Await.until("removal applied", () -> listener.seen("pod-a", removeSeq));
      m = index.lookup(index.requestKeys(prompt, (String) null), List.of("pod-a"));
      assertThat(m.matchedBlocks("pod-a")).isEqualTo(1);

      sub.removePod("pod-a").join();
      assertThat(index.pods()).doesNotContain("pod-a");
    }
  }
}
