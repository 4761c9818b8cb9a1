package io.kvroute.router;

import io.kvroute.connector.Endpoint;
import io.kvroute.router.flow.FlowController;
import io.kvroute.scoring.Decision;
import io.kvroute.scoring.LatencyPredictor;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * What one routed request teaches the scheduler's {@link LatencyPredictor}: a ticket per attempt
 * (its uncached prompt tokens join the computing endpoint's prefill queue), the time to first token
 * when the first event of a streamed (SSE) answer reaches the router, and the time per output token
 * when the stream ends (the answer's data events stand for its tokens: vLLM streams one per token,
 * plus its {@code [DONE]}; a stream of fewer than {@value #MIN_EVENTS} events teaches no TPOT). A
 * response that is not streamed teaches nothing but leaves the predictor's state as it found it. A
 * first token also tells flow control that prefill work finished ({@link FlowController#poll}).
 *
 * <p>Thread-safe: attempts are sequential and the stream's signals serial; the ticket is published
 * through a volatile field.
 */
final class LatencyFeed {
  static final int MIN_EVENTS = 8;
  private static final byte[] DATA = "data:".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

  private final LatencyPredictor predictor;
  private final LongSupplier clock;
  private final FlowController flow;
  private volatile LatencyPredictor.Ticket ticket;
  private boolean streaming;
  private boolean first = true;
  private long events;
  private int matched;
  private boolean lineStart = true;

  LatencyFeed(LatencyPredictor predictor, LongSupplier clock, FlowController flow) {
    this.predictor = predictor;
    this.clock = clock;
    this.flow = flow;
  }

  /** A ticket for {@code decision} sent to {@code decode} (and {@code prefill}, nullable). */
  static LatencyPredictor.Ticket ticket(
      LatencyPredictor predictor, Decision decision, Endpoint decode, Endpoint prefill, long now) {
    Endpoint compute = prefill != null ? prefill : decode;
    int prompt = Math.max(0, decision.promptTokens());
    long cached = Math.min(prompt, decision.prefixMatch(compute).cachedTokens());
    return predictor.dispatched(compute.id(), decode.id(), prompt - cached, cached, now);
  }

  /** An attempt starts on {@code decode}/{@code prefill}. */
  void started(Decision decision, Endpoint decode, Endpoint prefill) {
    ticket = ticket(predictor, decision, decode, prefill, clock.getAsLong());
  }

  /** The attempt failed before its response: forget it. */
  void failed() {
    LatencyPredictor.Ticket t = ticket;
    if (t != null) {
      t.abandon();
    }
  }

  /** The response head: only SSE answers are timed. */
  void head(Map<String, List<String>> headers) {
    for (Map.Entry<String, List<String>> h : headers.entrySet()) {
      if (h.getKey().equalsIgnoreCase("content-type")) {
        for (String v : h.getValue()) {
          streaming |= v.toLowerCase(Locale.ROOT).startsWith("text/event-stream");
        }
      }
    }
  }

  /** A chunk of the answer went by. */
  void chunk(ByteBuffer chunk) {
    if (!streaming) {
      return;
    }
    if (first) {
      first = false;
      LatencyPredictor.Ticket t = ticket;
      if (t != null) {
        t.firstToken(clock.getAsLong());
      }
      if (flow != null) {
        flow.poll();
      }
    }
    int end = chunk.limit();
    for (int i = chunk.position(); i < end; i++) {
      byte b = chunk.get(i);
      if (lineStart && matched < DATA.length && b == DATA[matched]) {
        if (++matched == DATA.length) {
          events++;
          matched = 0;
          lineStart = false;
        }
        continue;
      }
      matched = 0;
      lineStart = b == '\n';
    }
  }

  /** The answer ended ({@code failure} null) or failed. */
  void ended(Throwable failure) {
    LatencyPredictor.Ticket t = ticket;
    if (t == null) {
      return;
    }
    if (failure != null || !streaming || events < MIN_EVENTS) {
      if (streaming && failure == null) {
        t.finished(clock.getAsLong(), 0); // too short to time its tokens
      } else {
        t.abandon();
      }
      return;
    }
    t.finished(clock.getAsLong(), events - 1); // the [DONE] event is no token
  }
}
