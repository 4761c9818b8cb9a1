package io.kvroute.kvindex.zmq;

import static io.kvroute.kvindex.zmq.KvEventSubscriberTest.stored;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.zmq.internal.Endpoints;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The three bugs of issue 13, each over real JeroMQ sockets: the last batch lost after the connect
 * catch-up; a duplicate sequence number wiping the pod; a restarted publisher first seen at a
 * higher sequence number treated as a gap.
 */
class KvEventSubscriberRegressionTest {

  @RegisterExtension final SubscriberFixture fx = new SubscriberFixture();
  private final RecordingSink sink = fx.sink;
  private final RecordingListener listener = fx.listener;

  private KvEventSubscriber subscriber() {
    return fx.track(
        fx.subscriber()
            .handshakeTimeout(Duration.ofSeconds(2))
            .replayIdleTimeout(Duration.ofSeconds(30))
            .build()
            .start());
  }

  private KvEventPublisher publisher(String endpoint, String replay) {
    return fx.track(
        Publishers.rebind(
            () ->
                KvEventPublisher.builder()
                    .handshakeTimeout(Duration.ofSeconds(2))
                    .endpoint(endpoint)
                    .replayEndpoint(replay)
                    .bind(true)
                    .topic("kv@pod@m")
                    .build()));
  }

  private List<Long> seqs(String pod) {
    return listener.seqs(pod, 0);
  }

  /**
   * Bug 1: six batches published right after the subscriber connects (the slow joiner the catch-up
   * exists for), then nothing: all six are applied, in order, once. Repeated, because which batches
   * arrive live and which through the catch-up depends on timing.
   */
  @RepeatedTest(10)
  void sixBatchesRightAfterConnectAreAllAppliedThoughThePublisherThenStaysQuiet() {
    KvEventPublisher p = publisher("tcp://127.0.0.1:0", "tcp://127.0.0.1:0");
    KvEventSubscriber sub = subscriber();
    sub.addPod(PodEndpoint.of("pod", p.endpoint()).withReplay(p.replayEndpoint())).join();
    for (long h = 1; h <= 6; h++) {
      p.publish(stored(h));
    }
    Await.until("all six applied", () -> seqs("pod").size() >= 6 && sub.quiescent().join());
    assertThat(seqs("pod")).containsExactly(0L, 1L, 2L, 3L, 4L, 5L);
    assertThat(sink.blocks("pod")).containsExactly(1L, 2L, 3L, 4L, 5L, 6L);
    assertThat(fx.count("kvroute.kvindex.resyncs", "reason", "gap")).isZero();
    assertThat(fx.count("kvroute.kvindex.restarts")).isZero();
    assertThat(sink.calls()).doesNotContain("cleared pod");
  }

  /**
   * Bug 2: the same sequence number twice (a duplicate frame, as replay and live overlap) used to
   * be taken for a restart and clear the pod. Raw PUB socket: seq 0, 1, 1, 2.
   */
  @Test
  void aDuplicateSequenceNumberIsDroppedNotARestart() {
    try (ZContext ctx = new ZContext(1)) {
      ZMQ.Socket pub = ctx.createSocket(SocketType.PUB);
      pub.setLinger(0);
      pub.bind("tcp://127.0.0.1:0");
      KvEventSubscriber sub = subscriber();
      sub.addPod(PodEndpoint.of("pod", pub.getLastEndpoint())).join();
      byte[] topic = "kv@pod@m".getBytes(StandardCharsets.UTF_8);
      // PUB/SUB joins asynchronously: send seq 0 until it is applied
      byte[] first = KvEventCodec.encode(stored(10));
      Await.retrying(
          "joined",
          () -> {
            pub.sendMore(topic.clone());
            pub.sendMore(Endpoints.seqBytes(0));
            pub.send(first.clone());
          },
          () -> listener.seen("pod", 0));
      byte[] one = KvEventCodec.encode(stored(11));
      byte[] two = KvEventCodec.encode(stored(12));
      for (byte[][] frame :
          new byte[][][] {
            {Endpoints.seqBytes(1), one}, {Endpoints.seqBytes(1), one}, {Endpoints.seqBytes(2), two}
          }) {
        pub.sendMore(topic.clone());
        pub.sendMore(frame[0].clone());
        pub.send(frame[1].clone());
      }
      Await.until("seq 2 applied", () -> listener.seen("pod", 2));
      Await.until("the duplicates counted", () -> fx.count("kvroute.kvindex.duplicates") >= 1);
      assertThat(sink.blocks("pod")).containsExactly(10L, 11L, 12L);
      assertThat(fx.count("kvroute.kvindex.restarts")).isZero();
      assertThat(sink.calls()).doesNotContain("cleared pod");
      assertThat(seqs("pod")).containsExactly(0L, 1L, 2L);
      sub.close();
    }
  }

  /**
   * Bug 3: a restarted publisher whose first batches went out before the SUB reconnected is first
   * seen at a higher sequence number. It used to be taken for a gap and replayed as if it were the
   * same publisher, so the old blocks kept scoring. Now the replay from the last applied batch
   * proves the new epoch: the pod is cleared once and the new epoch fetched from 0.
   */
  @Test
  void aRestartedPublisherFirstSeenAtAHigherSequenceIsDetectedAndClearedOnce() {
    KvEventPublisher first = publisher("tcp://127.0.0.1:0", "tcp://127.0.0.1:0");
    String endpoint = first.endpoint();
    String replay = first.replayEndpoint();
    KvEventSubscriber sub = subscriber();
    sub.addPod(PodEndpoint.of("pod", endpoint).withReplay(replay)).join();
    for (long h = 1; h <= 3; h++) {
      first.publish(stored(h)); // epoch 0: seq 0..2
    }
    Await.until("epoch 0 applied", () -> seqs("pod").size() == 3);
    first.close();

    KvEventPublisher second = publisher(endpoint, replay);
    for (long h = 101; h <= 105; h++) {
      second.dropSequence(second.nextSequence()); // seq 0..4: out before the SUB is back
      second.publish(stored(h));
    }
    long last = second.publish(stored(106)); // seq 5, live
    Await.until(
        "epoch 1 applied", () -> sink.blocks("pod").contains(106L) && sub.quiescent().join());
    assertThat(sink.blocks("pod")).containsExactly(101L, 102L, 103L, 104L, 105L, 106L);
    assertThat(fx.count("kvroute.kvindex.restarts")).isEqualTo(1);
    assertThat(sink.calls().stream().filter(c -> c.equals("cleared pod")).count()).isEqualTo(1);
    assertThat(listener.seen("pod", last)).isTrue();
    assertThat(fx.count("kvroute.kvindex.resyncs", "reason", "gap")).isZero();
  }
}
