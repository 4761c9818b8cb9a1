package io.kvroute.kvindex.zmq;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.kvindex.vectors.GoldenVectors;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** The publisher's PUB and ROUTER frames equal vLLM's, as captured in zmq_frames_capture.json. */
class KvEventPublisherCaptureTest {

  @ParameterizedTest
  @ValueSource(ints = {0, 1})
  void liveAndReplayFramesMatchTheCapture(int run) {
    JsonNode capture = GoldenVectors.read("zmq_frames_capture.json").get("runs").get(run);
    KvEventPublisher.ReplyFormat format =
        capture.get("variant").asText().equals("legacy")
            ? KvEventPublisher.ReplyFormat.LEGACY
            : KvEventPublisher.ReplyFormat.WITH_TOPIC;
    JsonNode live = capture.get("live_sub_frames");
    String topic =
        new String(
            GoldenVectors.hex(live.get(0).get(0).asText()),
            java.nio.charset.StandardCharsets.UTF_8);
    try (ZContext ctx = new ZContext(1);
        KvEventPublisher p =
            Publishers.bound()
                .replayEndpoint("tcp://127.0.0.1:0")
                .replyFormat(format)
                .topic(topic)
                .build()) {
      ZMQ.Socket sub = ctx.createSocket(SocketType.SUB);
      sub.subscribe(new byte[0]);
      sub.setReceiveTimeOut(20);
      sub.setHandshakeIvl(500);
      sub.setReconnectIVL(10);
      sub.connect(p.endpoint());
      // PUB/SUB joins asynchronously: publish the first payload until it is seen, then the rest
      // (the capture's first message has seq 0, so start from the second for a stable compare)
      List<List<String>> received = new ArrayList<>();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      int next = 0;
      while (received.isEmpty()) {
        assertThat(System.nanoTime()).as("SUB joined").isLessThan(deadline);
        p.publishPayload(GoldenVectors.hex(live.get(0).get(2).asText()));
        next++;
        List<String> m = receive(sub);
        if (m != null) {
          received.add(m);
        }
      }
      long firstSeen = Long.parseLong(received.get(0).get(1), 16);
      for (int i = 1; i < live.size(); i++) {
        p.publishPayload(GoldenVectors.hex(live.get(i).get(2).asText()));
      }
      while (received.size() < (next - firstSeen) + live.size() - 1) {
        List<String> m = receive(sub);
        if (m != null) {
          received.add(m);
        }
        assertThat(System.nanoTime()).as("live frames").isLessThan(deadline);
      }
      List<String> last = received.get(received.size() - 1);
      JsonNode lastCaptured = live.get(live.size() - 1);
      assertThat(last.get(0)).isEqualTo(lastCaptured.get(0).asText());
      assertThat(last.get(2)).isEqualTo(lastCaptured.get(2).asText());
      assertThat(Long.parseLong(last.get(1), 16)).isEqualTo(next + live.size() - 2);

      // replay through a DEALER from the sequence of the capture's second live message
      long start = next; // our seq of live[1]
      JsonNode expected = capture.get("replay").get("DEALER").get("client_received");
      List<List<String>> replies = new ArrayList<>();
      // a fresh DEALER per attempt: JeroMQ occasionally stalls a loopback handshake
      for (int attempt = 0; replies.isEmpty(); attempt++) {
        assertThat(attempt).as("replay attempts").isLessThan(10);
        ZMQ.Socket dealer = ctx.createSocket(SocketType.DEALER);
        dealer.setReceiveTimeOut(1000);
        dealer.setHandshakeIvl(500);
        dealer.connect(p.replayEndpoint());
        dealer.sendMore(new byte[0]);
        dealer.send(seq(start));
        for (int i = 0; i < expected.size(); i++) {
          List<String> m = receive(dealer);
          if (m == null) {
            assertThat(i).as("replies stop mid-answer").isZero();
            break;
          }
          replies.add(m);
        }
        dealer.close();
      }
      for (int i = 0; i < expected.size(); i++) {
        JsonNode want = expected.get(i);
        List<String> got = replies.get(i);
        assertThat(got).as("reply %d frame count", i).hasSize(want.size());
        for (int f = 0; f < want.size(); f++) {
          String w = want.get(f).asText();
          boolean isSeq = w.length() == 16 && !w.equals("ffffffffffffffff");
          if (isSeq) {
            // sequence numbers differ by our warm-up offset
            assertThat(Long.parseLong(got.get(f), 16) - start).isEqualTo(Long.parseLong(w, 16) - 1);
          } else {
            assertThat(got.get(f)).as("reply %d frame %d", i, f).isEqualTo(w);
          }
        }
      }

      // a DEALER without the empty delimiter gets no answer (vLLM requires 3 frames)
      ZMQ.Socket bad = ctx.createSocket(SocketType.DEALER);
      bad.setReceiveTimeOut(300);
      bad.connect(p.replayEndpoint());
      bad.send(seq(0));
      assertThat(bad.recv()).isNull();
    }
  }

  private static byte[] seq(long s) {
    return io.kvroute.kvindex.zmq.internal.Endpoints.seqBytes(s);
  }

  private static List<String> receive(ZMQ.Socket s) {
    byte[] f = s.recv();
    if (f == null) {
      return null;
    }
    List<String> frames = new ArrayList<>();
    frames.add(GoldenVectors.hex(f));
    while (s.hasReceiveMore()) {
      frames.add(GoldenVectors.hex(s.recv()));
    }
    return frames;
  }
}
