package io.kvroute.kvindex.zmq;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.zmq.internal.ReplayClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * What broke the subscriber against vLLM's own {@code ZmqEventPublisher} ({@code
 * vllm/distributed/kv_events.py}: vllm-project/vllm 0181ea31 "map" and b4e69e0a "array",
 * local-inference-lab/vllm b6b82137 "latest"), each reproduced on real JeroMQ sockets on loopback.
 *
 * <p><b>Stalled handshakes.</b> In all three revisions {@code _socket_setup} binds a libzmq PUB and
 * a ROUTER; libzmq's {@code stream_engine} sends the first 10 bytes of its ZMTP greeting when it
 * accepts a connection and waits for the peer's. JeroMQ 0.6.0 sometimes never answers on a
 * connect-side connection whose TCP connect completed asynchronously ({@code Poller.run}'s
 * re-registration pass meets {@code TcpConnecter.connectEvent}'s cancelled handle and the new
 * {@code StreamEngine}'s handle together and registers neither), and then nothing happens until the
 * handshake timeout. Against vLLM (its replay ROUTER answers from {@code _service_replay}, one
 * request per turn of {@code _publisher_thread}) this cost a replay attempt per stall (2 s) and
 * after three of them the pod was resynchronised — "seq 1 of the new epoch lost and the pod
 * cleared" — or a new epoch's SUB connection missed every batch until the publisher was gone. The
 * double here ({@link StallingProxy}) holds connections exactly as vLLM's side saw them; the
 * subscriber must drop such a connection long before the handshake timeout (both timeouts are 60 s
 * here: without the fix nothing below completes in time).
 */
class KvEventSubscriberVllmTest {
  private static final Duration SOON = Duration.ofSeconds(20);

  @RegisterExtension final SubscriberFixture fx = new SubscriberFixture();

  private KvEventSubscriber.Builder patientSubscriber(StallingProxy proxy) {
    return fx.subscriber()
        .handshakeTimeout(Duration.ofSeconds(60))
        .replayIdleTimeout(Duration.ofSeconds(60))
        // the double's held connections, and JeroMQ's own stalls (loopback meets them too)
        .stallCheck(ch -> proxy.isHeld(ch) || ReplayClient.stalled(ch));
  }

  /**
   * The replay ROUTER's connection stalls (twice in a row): the catch-up on connect and a later gap
   * replay still complete, nothing is resynchronised, no attempt is counted as failed. The reply
   * shapes are the revisions': {@code LEGACY} ([seq, payload], end [END, ""]) for 0181ea31 and
   * b4e69e0a, {@code WITH_TOPIC} ([topic, seq, payload], end ["", END, ""]) for b6b82137.
   */
  @ParameterizedTest
  @EnumSource(KvEventPublisher.ReplyFormat.class)
  void aStalledReplayConnectionIsReplacedAndTheReplayCompletes(KvEventPublisher.ReplyFormat format)
      throws Exception {
    KvEventPublisher p =
        fx.track(
            Publishers.bound()
                .replayEndpoint("tcp://127.0.0.1:0")
                .replyFormat(format)
                .topic("kv@pod-v@m")
                .build());
    long first = p.publish(KvEventSubscriberTest.stored(1));
    p.publish(KvEventSubscriberTest.stored(2));
    StallingProxy replay = fx.track(new StallingProxy(p.replayEndpoint(), 2));
    KvEventSubscriber sub = fx.track(patientSubscriber(replay).build().start());
    sub.addPod(PodEndpoint.of("pod-v", p.endpoint()).withReplay(replay.endpoint())).join();

    // the catch-up on the first handshake goes through two stalled connections, then a good one
    Await.until("catch-up", SOON, () -> fx.listener.seen("pod-v", first + 1));
    Await.retrying(
        "live batches",
        () -> p.publish(KvEventSubscriberTest.empty()),
        () -> fx.listener.anyBatch("pod-v"));
    long dropped = p.nextSequence();
    p.dropSequence(dropped);
    p.publish(KvEventSubscriberTest.stored(3));
    long last = p.publish(KvEventSubscriberTest.stored(4));
    Await.until("gap replayed", SOON, () -> fx.listener.seen("pod-v", last));

    assertThat(replay.accepted()).isGreaterThanOrEqualTo(3);
    assertThat(fx.count("kvroute.kvindex.handshake.stalls", "socket", "replay"))
        .isGreaterThanOrEqualTo(2);
    assertThat(fx.listener.seqs("pod-v", 0))
        .containsExactlyElementsOf(LongStream.rangeClosed(0, last).boxed().toList());
    assertThat(fx.listener.batches).contains("pod-v:" + dropped + ":replayed");
    assertThat(fx.sink.blocks("pod-v")).containsExactlyInAnyOrder(1L, 2L, 3L, 4L);
    assertThat(fx.listener.notes).noneMatch(n -> n.startsWith("resync"));
    assertThat(fx.registry.find("kvroute.kvindex.replay.attempts.failed").counters()).isEmpty();
  }

  /**
   * The SUB connection stalls (a subscription made before vLLM published, as with a freshly
   * restarted publisher): the socket is reopened, and what was published meanwhile comes from the
   * catch-up replay, in order, with nothing resynchronised.
   */
  @Test
  void aStalledSubConnectionIsReopenedAndNothingIsLost() throws Exception {
    KvEventPublisher p =
        fx.track(
            Publishers.bound()
                .replayEndpoint("tcp://127.0.0.1:0")
                .replyFormat(KvEventPublisher.ReplyFormat.LEGACY)
                .topic("kv@pod-s@m")
                .build());
    StallingProxy pub = fx.track(new StallingProxy(p.endpoint(), 1));
    KvEventSubscriber sub = fx.track(patientSubscriber(pub).build().start());
    sub.addPod(PodEndpoint.of("pod-s", pub.endpoint()).withReplay(p.replayEndpoint())).join();
    List<Long> published = new ArrayList<>();
    for (int i = 1; i <= 3; i++) {
      published.add(p.publish(KvEventSubscriberTest.stored(i)));
    }
    Await.until("the stall is seen", SOON, () -> pub.accepted() >= 2);
    Await.retrying(
        "a live batch after the reopen",
        () -> published.add(p.publish(KvEventSubscriberTest.empty())),
        () -> fx.listener.anyBatch("pod-s"));
    long last = published.get(published.size() - 1);
    Await.until("all applied", SOON, () -> fx.listener.seen("pod-s", last));

    assertThat(fx.count("kvroute.kvindex.handshake.stalls", "socket", "sub"))
        .isGreaterThanOrEqualTo(1);
    assertThat(fx.listener.seqs("pod-s", 0))
        .containsExactlyElementsOf(LongStream.rangeClosed(0, last).boxed().toList());
    assertThat(fx.sink.blocks("pod-s")).containsExactlyInAnyOrder(1L, 2L, 3L);
    assertThat(fx.listener.notes).noneMatch(n -> n.startsWith("resync"));
  }

  /**
   * A burst far over the I/O thread's per-socket read budget, then silence: the socket stays on the
   * ready list until it is empty (JeroMQ signals its descriptor only when a pipe read empty gets a
   * message, so nothing else would wake the loop for the rest).
   */
  @Test
  void aBurstOverTheReadBudgetIsReadToTheEndWithoutFurtherTraffic() {
    KvEventPublisher p =
        fx.track(
            Publishers.bound().replayEndpoint("tcp://127.0.0.1:0").topic("kv@pod-b@m").build());
    KvEventSubscriber sub =
        fx.track(fx.subscriber().handshakeTimeout(Duration.ofSeconds(5)).build().start());
    sub.addPod(PodEndpoint.of("pod-b", p.endpoint()).withReplay(p.replayEndpoint())).join();
    Await.retrying(
        "joined",
        () -> p.publish(KvEventSubscriberTest.empty()),
        () -> fx.listener.anyBatch("pod-b"));
    KvEventBatch b = KvEventSubscriberTest.empty();
    long last = -1;
    for (int i = 0; i < 5 * 256; i++) {
      last = p.publish(b);
    }
    long end = last;
    Await.until("the whole burst", () -> fx.listener.seen("pod-b", end));
    assertThat(fx.listener.seqs("pod-b", 0))
        .containsExactlyElementsOf(LongStream.rangeClosed(0, last).boxed().toList());
  }
}
