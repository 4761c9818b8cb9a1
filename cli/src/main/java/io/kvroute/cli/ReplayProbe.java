package io.kvroute.cli;

import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.event.KvEventDecodeException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZFrame;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;
import org.zeromq.ZMsg;

/**
 * {@code kvroute doctor}'s replay check: one replay request to a vLLM ROUTER endpoint, as a DEALER
 * ({@code ["", start_seq]}), reading the answers in both of vLLM's shapes ({@code [topic, seq,
 * payload]} after vLLM PR #45177, {@code [seq, payload]} before) up to the end marker (an empty
 * last frame, or seq {@code ff×8}), decoding each payload. Not thread-safe; one call at a time.
 */
final class ReplayProbe {
  private static final int MAX_BATCHES = 100_000;

  private ReplayProbe() {}

  /**
   * What the replay endpoint did.
   *
   * @param answered whether any reply arrived
   * @param complete whether the end marker arrived
   * @param batches batches replayed
   * @param undecodable batches whose payload did not decode
   * @param problem what went wrong, or null
   */
  record Result(boolean answered, boolean complete, int batches, int undecodable, String problem) {}

  /**
   * Asks {@code endpoint} for every batch from {@code startSeq}, waiting {@code timeout} a reply.
   */
  static Result run(String endpoint, long startSeq, Duration timeout) {
    try (ZContext ctx = new ZContext()) {
      ZMQ.Socket s = ctx.createSocket(SocketType.DEALER);
      s.setLinger(0);
      s.setHandshakeIvl(1000); // a rare stalled JeroMQ handshake is retried, not waited out 30 s
      s.setReceiveTimeOut((int) Math.max(1, Math.min(Integer.MAX_VALUE, timeout.toMillis())));
      s.connect(endpoint);
      s.sendMore(new byte[0]);
      s.send(ByteBuffer.allocate(8).putLong(startSeq).array());
      int batches = 0;
      int undecodable = 0;
      boolean answered = false;
      while (batches + undecodable < MAX_BATCHES) {
        ZMsg msg = ZMsg.recvMsg(s);
        if (msg == null) {
          return new Result(
              answered,
              false,
              batches,
              undecodable,
              answered
                  ? "the replay stopped without its end marker"
                  : "no answer within " + timeout.toMillis() + " ms");
        }
        answered = true;
        List<byte[]> frames = new ArrayList<>();
        for (ZFrame f : msg) {
          frames.add(f.getData());
        }
        msg.destroy();
        if (!frames.isEmpty() && frames.get(0).length == 0) {
          frames.remove(0); // the DEALER's empty delimiter
        }
        if (frames.isEmpty()) {
          continue;
        }
        byte[] last = frames.get(frames.size() - 1);
        boolean end =
            last.length == 0 || (frames.size() >= 2 && isEnd(frames.get(frames.size() - 2)));
        if (end) {
          return new Result(true, true, batches, undecodable, null);
        }
        try {
          KvEventCodec.decode(last, 0, last.length, KvEventCodec.Dialect.VLLM);
          batches++;
        } catch (KvEventDecodeException e) {
          undecodable++;
        }
      }
      return new Result(true, false, batches, undecodable, "more than " + MAX_BATCHES + " batches");
    } catch (ZMQException | IllegalArgumentException e) {
      return new Result(false, false, 0, 0, "cannot connect: " + e.getMessage());
    }
  }

  private static boolean isEnd(byte[] seq) {
    if (seq.length != 8) {
      return false;
    }
    for (byte b : seq) {
      if (b != (byte) 0xff) {
        return false;
      }
    }
    return true;
  }
}
