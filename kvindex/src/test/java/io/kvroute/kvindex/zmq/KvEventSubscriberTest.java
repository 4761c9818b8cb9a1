package io.kvroute.kvindex.zmq;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.EventSchema;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;

/** Real JeroMQ PUB/ROUTER publishers and the subscriber on loopback. */
class KvEventSubscriberTest {

  @RegisterExtension final SubscriberFixture fx = new SubscriberFixture();
  private final RecordingSink sink = fx.sink;
  private final RecordingListener listener = fx.listener;

  private KvEventPublisher publisher(String topic, boolean replay) {
    KvEventPublisher.Builder b = Publishers.bound().topic(topic);
    if (replay) {
      b.replayEndpoint("tcp://127.0.0.1:0");
    }
    return fx.track(b.build());
  }

  private KvEventSubscriber.Builder subscriber() {
    return fx.subscriber()
        .handshakeTimeout(Duration.ofMillis(500))
        .replayIdleTimeout(Duration.ofMillis(700));
  }

  private static final AtomicLong CLOCK = new AtomicLong(1_700_000_000_000L);

  /** A batch ts as vLLM's: wall-clock seconds, growing. */
  static double ts() {
    return CLOCK.incrementAndGet() / 1000.0;
  }

  static KvEventBatch stored(long... hashes) {
    int[] tokens = new int[16 * hashes.length];
    for (int i = 0; i < tokens.length; i++) {
      tokens[i] = i;
    }
    return KvEventBatch.of(
        ts(), List.of(KvEvent.BlockStored.of(EngineHashes.ofInts(hashes), null, tokens, 16)));
  }

  static KvEventBatch removed(long... hashes) {
    return KvEventBatch.of(ts(), List.of(KvEvent.BlockRemoved.of(EngineHashes.ofInts(hashes))));
  }

  static KvEventBatch empty() {
    return KvEventBatch.of(ts(), List.of());
  }

  /** PUB/SUB joins asynchronously: publish empty batches until the subscriber sees one. */
  private void warmUp(KvEventPublisher p, String identity) {
    Await.retrying(
        "subscriber joined " + identity,
        () -> p.publish(empty()),
        () -> listener.anyBatch(identity));
  }

  @ParameterizedTest
  @EnumSource(KvEventPublisher.ReplyFormat.class)
  void droppedBatchIsRecoveredThroughReplay(KvEventPublisher.ReplyFormat format) {
    KvEventPublisher p =
        fx.track(
            Publishers.bound()
                .replayEndpoint("tcp://127.0.0.1:0")
                .replyFormat(format)
                .topic("kv@pod-a@m")
                .build());
    KvEventSubscriber sub = fx.track(subscriber().build().start());
    sub.addPod(PodEndpoint.of("pod-a", p.endpoint()).withReplay(p.replayEndpoint())).join();
    warmUp(p, "pod-a");

    p.publish(stored(1, 2));
    long dropped = p.nextSequence();
    p.dropSequence(dropped);
    p.publish(stored(3, 0x8000_0000_0000_0001L)); // uint64 >= 2^63
    long last = p.publish(removed(1));

    Await.until("last batch applied", () -> listener.seen("pod-a", last));
    assertThat(sink.blocks("pod-a")).containsExactlyInAnyOrder(2L, 3L, 0x8000_0000_0000_0001L);
    assertThat(listener.batches).contains("pod-a:" + dropped + ":replayed");
    assertThat(listener.notes)
        .contains(
            "gap pod-a " + dropped + ".." + last,
            "replay pod-a " + dropped + ".." + last + " n=1 complete=true");
    assertThat(fx.count("kvroute.kvindex.gaps")).isEqualTo(1);
    assertThat(fx.count("kvroute.kvindex.replays", "outcome", "complete")).isEqualTo(1);
    assertThat(fx.count("kvroute.kvindex.resyncs", "reason", "gap")).isZero();
    assertThat(fx.count("kvroute.kvindex.events", "type", "BlockStored")).isEqualTo(2);
  }

  @Test
  void batchesPublishedBeforeTheSubscriberJoinedAreCaughtUpThroughReplay() {
    KvEventPublisher p = publisher("kv@pod-c@m", true);
    p.publish(stored(11, 12));
    p.publish(stored(13));
    KvEventSubscriber sub = fx.track(subscriber().build().start());
    sub.addPod(PodEndpoint.of("pod-c", p.endpoint()).withReplay(p.replayEndpoint())).join();
    warmUp(p, "pod-c");
    long last = p.publish(stored(14));
    Await.until("last batch applied", () -> listener.seen("pod-c", last));
    assertThat(sink.blocks("pod-c")).contains(11L, 12L, 13L, 14L);
    // one catch-up per handshake: a loaded machine may drop a slow handshake and reconnect, and
    // the catch-up that follows must find nothing missing (no gap, no restart, no resync)
    assertThat(fx.count("kvroute.kvindex.catchups")).isGreaterThanOrEqualTo(1);
    assertThat(fx.count("kvroute.kvindex.gaps")).isZero();
    assertThat(fx.count("kvroute.kvindex.restarts")).isZero();
    assertThat(fx.count("kvroute.kvindex.resyncs")).isZero();
  }

  /**
   * The slow-joiner case: a pod that published before the subscription reached it and then stays
   * quiet is still indexed, through the catch-up that follows the SUB's handshake.
   */
  @Test
  void aQuietPodIsCaughtUpOnConnectWithoutAnotherBatch() {
    KvEventPublisher p = publisher("kv@pod-q@m", true);
    p.publish(stored(21, 22));
    long last = p.publish(stored(23));
    KvEventSubscriber sub = fx.track(subscriber().build().start());
    sub.addPod(PodEndpoint.of("pod-q", p.endpoint()).withReplay(p.replayEndpoint())).join();
    Await.until("batches published before joining applied", () -> listener.seen("pod-q", last));
    assertThat(sink.blocks("pod-q")).containsExactlyInAnyOrder(21L, 22L, 23L);
    Await.until("catch-up counted", () -> fx.count("kvroute.kvindex.catchups") >= 1);
    // later batches follow in order, with no gap
    long next = p.publish(stored(24));
    Await.until("live batch after the catch-up", () -> listener.seen("pod-q", next));
    assertThat(fx.count("kvroute.kvindex.gaps")).isZero();
    assertThat(sink.blocks("pod-q")).contains(24L);
  }

  @Test
  void gapWithoutReplayEndpointClearsThePod() {
    KvEventPublisher p = publisher("t", false);
    KvEventSubscriber sub = fx.track(subscriber().build().start());
    sub.addPod(PodEndpoint.of("pod-a", p.endpoint())).join();
    warmUp(p, "pod-a");
    p.publish(stored(1));
    p.dropSequence(p.nextSequence());
    p.publish(stored(2));
    long last = p.publish(stored(3));
    Await.until("last batch", () -> listener.seen("pod-a", last));
    assertThat(sink.blocks("pod-a")).containsExactly(3L);
    assertThat(fx.count("kvroute.kvindex.resyncs", "reason", "gap")).isEqualTo(1);
  }

  @Test
  void decreasingSequenceIsARestartThatClearsThePod() throws Exception {
    KvEventPublisher first = Publishers.bound().topic("t").firstSequence(1_000_000).build();
    String endpoint = first.endpoint();
    KvEventSubscriber sub = fx.track(subscriber().build().start());
    sub.addPod(PodEndpoint.of("pod-a", endpoint)).join();
    try {
      warmUp(first, "pod-a");
      long s = first.publish(stored(7));
      Await.until("stored 7", () -> listener.seen("pod-a", s));
    } finally {
      first.close();
    }
    KvEventPublisher second =
        fx.track(Publishers.rebind(() -> Publishers.at(endpoint).bind(true).topic("t").build()));
    Await.until(
        "restart detected",
        () -> {
          second.publish(empty());
          return listener.notes.stream().anyMatch(n -> n.startsWith("restart pod-a"));
        });
    long s = second.publish(stored(8));
    Await.until("stored 8", () -> listener.seen("pod-a", s));
    assertThat(sink.blocks("pod-a")).containsExactly(8L);
    assertThat(fx.count("kvroute.kvindex.restarts")).isEqualTo(1);
  }

  @Test
  void malformedPayloadsAreCountedAndSkipped() {
    KvEventPublisher p = publisher("t", true);
    KvEventSubscriber sub = fx.track(subscriber().build().start());
    sub.addPod(PodEndpoint.of("pod-a", p.endpoint()).withReplay(p.replayEndpoint())).join();
    warmUp(p, "pod-a");
    p.publish(stored(1));
    p.publishPayload(new byte[] {(byte) 0xc1}); // never-used msgpack byte
    p.publishPayload(new byte[] {(byte) 0x93, (byte) 0xdd, 0x7f, (byte) 0xff, (byte) 0xff, 0});
    long last = p.publish(stored(2));
    Await.until("last batch", () -> listener.seen("pod-a", last));
    assertThat(sink.blocks("pod-a")).containsExactlyInAnyOrder(1L, 2L);
    assertThat(fx.count("kvroute.kvindex.decode.errors")).isEqualTo(2);
    assertThat(fx.count("kvroute.kvindex.dropped", "reason", "malformed")).isEqualTo(2);
    assertThat(fx.count("kvroute.kvindex.gaps")).isZero();
  }

  @Test
  void oversizedFrameIsRefusedUnreadCountedOnceAndItsGapReplayed() {
    KvEventPublisher p = publisher("t", true);
    KvEventSubscriber sub = fx.track(subscriber().maxPayloadBytes(2048).build().start());
    sub.addPod(PodEndpoint.of("pod-a", p.endpoint()).withReplay(p.replayEndpoint())).join();
    // the limit is JeroMQ's: a larger frame is refused from its size header, never allocated
    assertThat(sub.subscriberMaxMsgSizes().join()).containsExactly(2048L);
    try (ZMQ.Socket dealer = sub.newReplayDealer()) {
      assertThat(dealer.getMaxMsgSize()).isEqualTo(2048L);
    }
    warmUp(p, "pod-a");
    long first = p.publish(stored(1));
    Await.until("first batch", () -> listener.seen("pod-a", first));

    long big = p.publish(stored(new long[200])); // 200 blocks x 16 tokens: far over 2048 bytes
    // JeroMQ ends a connect-mode session for good on an oversized frame; the subscriber reopens
    // the socket. Batches published until then are lost live and come back through replay.
    List<Long> hashes = new ArrayList<>();
    long[] last = {-1};
    Await.retrying(
        "a batch after the oversized one",
        () -> {
          long h = 100 + hashes.size();
          hashes.add(h);
          last[0] = p.publish(stored(h));
        },
        () -> listener.seen("pod-a", last[0]));
    Await.until("settled", () -> sub.quiescent().join());

    assertThat(fx.count("kvroute.kvindex.dropped", "reason", "oversized")).isEqualTo(1);
    assertThat(listener.notes).contains("dropped pod-a -1 oversized");
    assertThat(listener.seen("pod-a", big)).isFalse();
    // at least one: a rare stalled handshake (timed out) reopens the socket too; the batches lost
    // meanwhile come back through the replay that follows the reconnect's handshake (or a gap's)
    assertThat(fx.count("kvroute.kvindex.socket.reopens")).isPositive();
    assertThat(fx.count("kvroute.kvindex.replays", "outcome", "incomplete")).isZero();
    assertThat(fx.count("kvroute.kvindex.resyncs", "reason", "gap")).isZero();
    Set<Long> expected = new java.util.TreeSet<>(hashes);
    expected.add(1L);
    assertThat(sink.blocks("pod-a")).isEqualTo(expected); // every other batch, none of the big one
    // and in sequence order, the oversized one skipped
    List<Long> seqs = listener.seqs("pod-a", first);
    List<Long> want = new ArrayList<>();
    for (long q = first; q <= last[0]; q++) {
      if (q != big) {
        want.add(q);
      }
    }
    assertThat(seqs).isEqualTo(want);
  }

  @Test
  void oversizedFrameInBindModeIsCountedAndThePublisherReconnects() {
    KvEventSubscriber sub =
        fx.track(subscriber().bind("tcp://127.0.0.1:0").maxPayloadBytes(2048).build().start());
    assertThat(sub.subscriberMaxMsgSizes().join()).containsExactly(2048L);
    KvEventPublisher p =
        fx.track(
            Publishers.connecting(sub.boundEndpoint().orElseThrow()).topic("kv@pod-b@m").build());
    warmUp(p, "pod-b");
    long first = p.publish(stored(1));
    Await.until("first batch", () -> listener.seen("pod-b", first));
    p.publish(stored(new long[200]));
    long[] s = {-1};
    Await.retrying(
        "a batch after the oversized one",
        () -> s[0] = p.publish(stored(2)),
        () -> listener.seen("pod-b", s[0]));
    assertThat(fx.count("kvroute.kvindex.dropped", "reason", "oversized")).isEqualTo(1);
    // the publisher is known by its address only: the frame was never read
    // (the listener hears of the drop on the socket thread, possibly after the batch that
    // followed reached the index)
    Await.until(
        "the oversized drop reported to the listener",
        () ->
            listener.notes.stream()
                .anyMatch(n -> n.matches("dropped .*127\\.0\\.0\\.1.* -1 oversized")));
    // no replay endpoint in bind mode: the gap clears the pod, then it fills again
    assertThat(fx.count("kvroute.kvindex.resyncs", "reason", "gap")).isEqualTo(1);
    assertThat(sink.blocks("pod-b")).containsExactly(2L);
  }

  @Test
  void podRemovedAtRunTimeStopsItsSubscription() {
    KvEventPublisher a = publisher("kv@a@m", false);
    KvEventPublisher b = publisher("kv@b@m", false);
    KvEventSubscriber sub = fx.track(subscriber().shards(1).build().start());
    sub.addPod(PodEndpoint.of("pod-a", a.endpoint())).join();
    sub.addPod(PodEndpoint.of("pod-b", b.endpoint())).join();
    warmUp(a, "pod-a");
    warmUp(b, "pod-b");
    long s1 = a.publish(stored(1));
    Await.until("a stored", () -> listener.seen("pod-a", s1));
    assertThat(sink.blocks("pod-a")).containsExactly(1L);

    sub.removePod("pod-a").join();
    assertThat(sub.pods()).containsExactly("pod-b");
    assertThat(sink.calls()).contains("removePod pod-a");
    assertThat(sink.pods()).doesNotContain("pod-a");

    a.publish(stored(5));
    long s2 = b.publish(stored(2));
    Await.until("b stored", () -> listener.seen("pod-b", s2));
    assertThat(sink.pods()).containsExactly("pod-b");
    assertThat(listener.batches.stream().filter(x -> x.startsWith("pod-a:")).count())
        .as("no pod-a batch after removal")
        .isEqualTo(listener.batches.indexOf("pod-a:" + s1) >= 0 ? countA(s1) : 0);
  }

  private long countA(long upTo) {
    return listener.batches.stream()
        .filter(x -> x.startsWith("pod-a:"))
        .filter(x -> Long.parseLong(x.split(":")[1]) <= upTo)
        .count();
  }

  @Test
  void bindModeTakesPodFromTopicAndRankFromBatch() {
    KvEventSubscriber sub =
        fx.track(subscriber().bind("tcp://127.0.0.1:0").topic("kv@").build().start());
    String endpoint = sub.boundEndpoint().orElseThrow();
    KvEventPublisher p = fx.track(Publishers.connecting(endpoint).topic("kv@pod-c@m").build());
    KvEventPublisher ignored = fx.track(Publishers.connecting(endpoint).topic("other").build());
    ignored.publish(stored(99));
    warmUp(p, "pod-c");
    long s = p.publish(stored(4).withDataParallelRank(1));
    long s0 = p.publish(stored(5));
    Await.until("rank 1 batch", () -> listener.seen("pod-c@dp1", s) && listener.seen("pod-c", s0));
    assertThat(sink.blocks("pod-c@dp1")).containsExactly(4L);
    assertThat(sink.blocks("pod-c")).containsExactly(5L);
    assertThat(sink.pods()).doesNotContain("other");
  }

  @Test
  void dataParallelRanksUsePortOffsetsAndRankIdentities() {
    KvEventPublisher[] ranks = bindTwoAdjacentPorts();
    KvEventSubscriber sub = fx.track(subscriber().build().start());
    sub.addPod(
            PodEndpoint.of("pod-d", ranks[0].endpoint())
                .withReplay(ranks[0].replayEndpoint())
                .withDataParallelSize(2))
        .join();
    warmUp(ranks[0], "pod-d");
    warmUp(ranks[1], "pod-d@dp1");
    long s0 = ranks[0].publish(stored(10));
    ranks[1].dropSequence(ranks[1].nextSequence());
    ranks[1].publish(stored(11));
    long s1 = ranks[1].publish(stored(12));
    Await.until("both ranks", () -> listener.seen("pod-d", s0) && listener.seen("pod-d@dp1", s1));
    assertThat(sink.blocks("pod-d")).containsExactly(10L);
    assertThat(sink.blocks("pod-d@dp1")).containsExactly(11L, 12L);
    sub.removePod("pod-d").join();
    assertThat(sink.pods()).isEmpty();
  }

  /** Binds rank 0 and rank 1 publishers (PUB and ROUTER) at base ports P and P+1, Q and Q+1. */
  private KvEventPublisher[] bindTwoAdjacentPorts() {
    for (int attempt = 0; ; attempt++) {
      int p = freePort();
      int q = freePort();
      List<KvEventPublisher> made = new ArrayList<>();
      try {
        for (int r = 0; r < 2; r++) {
          made.add(
              Publishers.at("tcp://127.0.0.1:" + p)
                  .replayEndpoint("tcp://127.0.0.1:" + q)
                  .bind(true)
                  .dataParallelRank(r)
                  .topic("kv@pod-d@m")
                  .build());
        }
        made.forEach(fx::track);
        return made.toArray(new KvEventPublisher[0]);
      } catch (ZMQException e) {
        made.forEach(KvEventPublisher::close);
        assertThat(attempt).as("free adjacent ports: " + e).isLessThan(20);
      }
    }
  }

  private static int freePort() {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  @Test
  void queueOverflowMarksThePodForResyncAndReplayRestoresIt() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch blocked = new CountDownLatch(1);
    sink.beforeStored(
        e -> {
          if (e.blockHashes().get(0) == 1L) {
            blocked.countDown();
            try {
              release.await(60, TimeUnit.SECONDS); // the test releases it
            } catch (InterruptedException ex) {
              Thread.currentThread().interrupt();
            }
          }
        });
    KvEventPublisher p = publisher("t", true);
    KvEventSubscriber sub = fx.track(subscriber().shards(1).queueCapacity(1).build().start());
    sub.addPod(PodEndpoint.of("pod-a", p.endpoint()).withReplay(p.replayEndpoint())).join();
    warmUp(p, "pod-a");
    p.publish(stored(1));
    assertThat(blocked.await(60, TimeUnit.SECONDS)).isTrue();
    for (long h = 2; h <= 6; h++) {
      p.publish(stored(h));
    }
    Await.until("overflow", () -> fx.count("kvroute.kvindex.dropped", "reason", "overflow") >= 1);
    release.countDown();
    long last = p.publish(stored(7));
    Await.until("last", () -> listener.seen("pod-a", last));
    // the last batch may itself arrive through the replay, which is counted when it ends
    Await.until(
        "replay counted", () -> fx.count("kvroute.kvindex.replays", "outcome", "complete") >= 1);
    assertThat(sink.blocks("pod-a")).containsExactly(1L, 2L, 3L, 4L, 5L, 6L, 7L);
    assertThat(fx.count("kvroute.kvindex.resyncs", "reason", "gap")).isZero();
  }

  /**
   * A replica that falls far behind on many pods at once (its only shard blocked while every pod
   * publishes, its queue and held-back buffers tiny) sheds by dropping and replaying, never by
   * clearing, and catches up with every pod once the shard is free again.
   */
  @Test
  void manyPodsOverflowingAtOnceAllCatchUpThroughReplayOnceTheLoadDrops() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    CountDownLatch blocked = new CountDownLatch(1);
    sink.beforeStored(
        e -> {
          if (e.blockHashes().get(0) == 999L) {
            blocked.countDown();
            try {
              release.await(60, TimeUnit.SECONDS); // the test releases it
            } catch (InterruptedException ex) {
              Thread.currentThread().interrupt();
            }
          }
        });
    int pods = 16;
    List<KvEventPublisher> pubs = new ArrayList<>();
    KvEventSubscriber sub =
        fx.track(
            patientSubscriber().shards(1).queueCapacity(4).replayBufferCapacity(4).build().start());
    for (int i = 0; i < pods; i++) {
      KvEventPublisher p = publisher("kv@pod-" + i + "@m", true);
      pubs.add(p);
      sub.addPod(PodEndpoint.of("pod-" + i, p.endpoint()).withReplay(p.replayEndpoint())).join();
      warmUp(p, "pod-" + i);
    }
    pubs.get(0).publish(stored(999));
    assertThat(blocked.await(60, TimeUnit.SECONDS)).isTrue();
    for (int round = 0; round < 40; round++) {
      for (int i = 0; i < pods; i++) {
        pubs.get(i).publish(stored(1000L * (i + 1) + round));
      }
    }
    Await.until("overflow", () -> fx.count("kvroute.kvindex.dropped", "reason", "overflow") >= 1);
    release.countDown();
    for (int i = 0; i < pods; i++) {
      String pod = "pod-" + i;
      KvEventPublisher p = pubs.get(i);
      long last = p.nextSequence() - 1;
      Await.until(pod + " caught up", () -> listener.seen(pod, last));
      assertThat(listener.seqs(pod, 0))
          .as(pod)
          .containsExactlyElementsOf(
              java.util.stream.LongStream.rangeClosed(0, last).boxed().toList());
    }
    assertThat(fx.count("kvroute.kvindex.resyncs", "reason", "gap")).isZero();
    assertThat(listener.notes).noneMatch(n -> n.startsWith("resync"));
    assertThat(sink.calls()).noneMatch(c -> c.startsWith("clear"));
  }

  private double gauge(String name) {
    io.micrometer.core.instrument.Gauge g = fx.registry.find(name).gauge();
    return g == null ? Double.NaN : g.value();
  }

  /** Publishes empty batches until the subscriber applies one (first contact may catch up). */
  private long warmUp(GatedReplayPod p, String identity) {
    long[] seq = {-1};
    Await.retrying(
        "subscriber joined " + identity,
        () -> seq[0] = p.publish(empty()),
        () -> listener.seen(identity, seq[0]));
    return seq[0];
  }

  private List<String> batchesFrom(String pod, long from) {
    return listener.batchesFrom(pod, from);
  }

  /** A subscriber whose replay deadlines do not pass while a test holds pod-a's replay. */
  private KvEventSubscriber.Builder patientSubscriber() {
    return subscriber()
        .replayIdleTimeout(Duration.ofSeconds(60))
        .replayTimeout(Duration.ofSeconds(120));
  }

  /**
   * Subscribes pod-a (its replay endpoint gated) and pod-b (if any, without replay); both joined.
   */
  private void addPods(KvEventSubscriber sub, GatedReplayPod a, KvEventPublisher b) {
    sub.addPod(PodEndpoint.of("pod-a", a.endpoint()).withReplay(a.replayEndpoint())).join();
    if (b != null) {
      sub.addPod(PodEndpoint.of("pod-b", b.endpoint())).join();
    }
    warmUp(a, "pod-a");
    if (b != null) {
      warmUp(b, "pod-b");
    }
  }

  /**
   * Subscribes pod-a and pod-b (if any), lets pod-a store block 1, then holds pod-a's replay of
   * block 2 ({@link #missOneAndHoldTheReplay}). Returns the missed sequence number.
   */
  private long storeOneThenHoldAReplay(
      KvEventSubscriber sub, GatedReplayPod a, KvEventPublisher b) {
    addPods(sub, a, b);
    long s1 = a.publish(stored(1));
    Await.until("pod-a stored 1", () -> listener.seen("pod-a", s1));
    return missOneAndHoldTheReplay(a);
  }

  /**
   * pod-a misses the batch of block 2 and publishes block 3's, which reveals the gap: the replay is
   * requested and held. Returns the missed sequence number (block 3's is the next).
   */
  private long missOneAndHoldTheReplay(GatedReplayPod a) {
    a.holdFrom(a.nextSequence());
    long missed = a.drop(stored(2));
    a.publish(stored(3));
    Await.until("replay requested", () -> a.held.getCount() == 0);
    return missed;
  }

  @Test
  void aSlowReplayHoldsBackOnlyItsPodWhoseLiveBatchesFollowInOrder() {
    GatedReplayPod a = fx.track(new GatedReplayPod("kv@pod-a@m"));
    KvEventPublisher b = publisher("kv@pod-b@m", false);
    KvEventSubscriber sub =
        fx.track(
            patientSubscriber()
                .shards(1) // pod-a and pod-b share the shard thread
                .build()
                .start());
    long missed = storeOneThenHoldAReplay(sub, a, b);
    long s3 = missed + 1;
    long s4 = a.publish(stored(4));
    long s5 = a.publish(stored(5));
    Await.until(
        "pod-a's live batches held back", () -> gauge("kvroute.kvindex.replay.buffered") == 3);

    long t = b.publish(stored(20));
    Await.until("pod-b applied while pod-a's replay is held", () -> listener.seen("pod-b", t));
    assertThat(a.release.getCount()).as("pod-a's replay still held").isEqualTo(1);
    assertThat(sink.blocks("pod-b")).containsExactly(20L);
    assertThat(batchesFrom("pod-a", missed)).isEmpty();

    a.release.countDown();
    Await.until("pod-a's held-back batches", () -> listener.seen("pod-a", s5));
    assertThat(batchesFrom("pod-a", missed))
        .containsExactly(
            "pod-a:" + missed + ":replayed", "pod-a:" + s3, "pod-a:" + s4, "pod-a:" + s5);
    assertThat(sink.blocks("pod-a")).containsExactly(1L, 2L, 3L, 4L, 5L);
    assertThat(listener.notes)
        .contains("replay pod-a " + missed + ".." + s3 + " n=1 complete=true");
    assertThat(fx.count("kvroute.kvindex.replays", "outcome", "complete")).isEqualTo(1);
    assertThat(gauge("kvroute.kvindex.replay.buffered")).isZero();
  }

  @Test
  void aReplayThatNeverAnswersTimesOutThenClearsAndTheHeldBackBatchesApply() {
    AtomicLong clock = new AtomicLong();
    GatedReplayPod a = fx.track(new GatedReplayPod("kv@pod-a@m"));
    KvEventPublisher b = publisher("kv@pod-b@m", false);
    KvEventSubscriber sub =
        fx.track(
            subscriber()
                .shards(1)
                .nanoClock(clock::get) // replay deadlines only pass when the test says so
                .replayIdleTimeout(Duration.ofSeconds(1))
                .replayTimeout(Duration.ofSeconds(5))
                .build()
                .start());
    long missed = storeOneThenHoldAReplay(sub, a, b); // never released
    long s3 = missed + 1;
    long s4 = a.publish(stored(4));
    Await.until(
        "pod-a's live batches held back", () -> gauge("kvroute.kvindex.replay.buffered") == 2);
    long t = b.publish(stored(20));
    Await.until("pod-b applied while pod-a's replay waits", () -> listener.seen("pod-b", t));
    assertThat(batchesFrom("pod-a", missed)).isEmpty();

    // each attempt (3) ends at its idle timeout: time passes only when the test says so
    Await.until(
        "pod-a's held-back batches",
        () -> {
          clock.addAndGet(Duration.ofSeconds(10).toNanos());
          return listener.seen("pod-a", s4);
        });
    assertThat(batchesFrom("pod-a", missed)).containsExactly("pod-a:" + s3, "pod-a:" + s4);
    assertThat(listener.notes)
        .contains("replay pod-a " + missed + ".." + s3 + " n=0 complete=false", "resync pod-a gap");
    assertThat(sink.blocks("pod-a")).containsExactly(3L, 4L); // cleared, then refilled
    assertThat(fx.count("kvroute.kvindex.replays", "outcome", "incomplete")).isEqualTo(1);
    assertThat(fx.count("kvroute.kvindex.resyncs", "reason", "gap")).isEqualTo(1);
  }

  @Test
  void liveBatchesBeyondTheReplayBufferAreDroppedAndRecoveredByAnotherReplay() {
    GatedReplayPod a = fx.track(new GatedReplayPod("kv@pod-a@m"));
    KvEventSubscriber sub = fx.track(patientSubscriber().replayBufferCapacity(2).build().start());
    long missed = storeOneThenHoldAReplay(sub, a, null);
    // The subscription's catch-up replay holds back the warm-up's empty batches too, and on a busy
    // machine the warm-up may publish more of them than the buffer of 2 holds (dropped, then
    // fetched by another replay): count from here on.
    double droppedBefore = fx.count("kvroute.kvindex.dropped", "reason", "replay_buffer");
    double replaysBefore = fx.count("kvroute.kvindex.replays", "outcome", "complete");
    long s3 = missed + 1;
    long s4 = a.publish(stored(4));
    long s5 = a.publish(stored(5));
    long s6 = a.publish(stored(6));
    Await.until(
        "two batches beyond the buffer",
        () -> fx.count("kvroute.kvindex.dropped", "reason", "replay_buffer") >= droppedBefore + 2);
    assertThat(fx.count("kvroute.kvindex.dropped", "reason", "replay_buffer") - droppedBefore)
        .as("dropped beyond the buffer; notes: %s", listener.notes)
        .isEqualTo(2);
    assertThat(gauge("kvroute.kvindex.replay.buffered")).isEqualTo(2);

    a.release.countDown();
    Await.until("second replay", () -> listener.seen("pod-a", s6));
    long s7 = a.publish(stored(7));
    Await.until("live again", () -> listener.seen("pod-a", s7));
    assertThat(batchesFrom("pod-a", missed))
        .containsExactly(
            "pod-a:" + missed + ":replayed",
            "pod-a:" + s3,
            "pod-a:" + s4,
            "pod-a:" + s5 + ":replayed",
            "pod-a:" + s6 + ":replayed",
            "pod-a:" + s7);
    assertThat(sink.blocks("pod-a")).containsExactly(1L, 2L, 3L, 4L, 5L, 6L, 7L);
    assertThat(listener.notes)
        .contains(
            "dropped pod-a " + s5 + " replay_buffer", "dropped pod-a " + s6 + " replay_buffer");
    assertThat(fx.count("kvroute.kvindex.replays", "outcome", "complete") - replaysBefore)
        .isEqualTo(2);
    assertThat(fx.count("kvroute.kvindex.resyncs", "reason", "gap")).isZero();
  }

  @Test
  void removingAPodEndsItsReplay() {
    GatedReplayPod a = fx.track(new GatedReplayPod("kv@pod-a@m"));
    KvEventSubscriber sub = fx.track(patientSubscriber().build().start());
    addPods(sub, a, null);
    missOneAndHoldTheReplay(a); // never released
    sub.removePod("pod-a").orTimeout(10, TimeUnit.SECONDS).join();
    assertThat(sink.pods()).doesNotContain("pod-a");
    assertThat(sink.calls()).last().isEqualTo("removePod pod-a");
    assertThat(gauge("kvroute.kvindex.replay.buffered")).isZero();
  }

  @Test
  void publisherFramesMatchVllm() {
    KvEventPublisher p = publisher("kv@10.0.0.7@Qwen/Qwen3-8B", false);
    KvEventSubscriber sub = fx.track(subscriber().build().start());
    sub.addPod(PodEndpoint.of("x", p.endpoint())).join();
    warmUp(p, "x");
    byte[] payload = KvEventCodec.encode(stored(1).withSchema(EventSchema.A5));
    long s = p.publishPayload(payload);
    Await.until("payload", () -> listener.seen("x", s));
    assertThat(sink.blocks("x")).isEqualTo(Set.of(1L));
  }

  @Test
  void messagesWithoutThreeFramesAreCountedAndSkipped() {
    try (ZContext ctx = new ZContext(1)) {
      ZMQ.Socket pub = ctx.createSocket(SocketType.PUB);
      pub.bind("tcp://127.0.0.1:0");
      KvEventSubscriber sub = fx.track(subscriber().build().start());
      sub.addPod(PodEndpoint.of("raw", pub.getLastEndpoint())).join();
      Await.until(
          "two-frame message counted",
          () -> {
            pub.sendMore("t".getBytes(java.nio.charset.StandardCharsets.UTF_8));
            pub.send(new byte[8]);
            return fx.count("kvroute.kvindex.dropped", "reason", "frames") >= 1;
          });
      byte[] good = KvEventCodec.encode(stored(9));
      Await.until(
          "good message applied",
          () -> {
            pub.sendMore("t".getBytes(java.nio.charset.StandardCharsets.UTF_8));
            pub.sendMore(io.kvroute.kvindex.zmq.internal.Endpoints.seqBytes(0));
            pub.send(good.clone());
            return sink.blocks("raw").contains(9L);
          });
      sub.close();
    }
  }

  @Test
  void builderValidationNamesTheField() {
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> KvEventSubscriber.builder().build())
        .hasMessageContaining("subscriber.sink");
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> KvEventSubscriber.builder().sink(sink).shards(0).build())
        .hasMessage("subscriber.shards must be >= 1, was 0");
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> Publishers.bound().bufferSteps(0).build())
        .hasMessage("publisher.bufferSteps must be >= 1, was 0");
  }
}
