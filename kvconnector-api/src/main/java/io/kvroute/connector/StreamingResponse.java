package io.kvroute.connector;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import java.util.function.Consumer;

/**
 * An upstream response whose head (status and headers) has arrived and whose body streams through
 * {@link Flow.Publisher}.
 *
 * <p>The body publisher accepts one subscriber. Chunks arrive in order, as the upstream sent them
 * (an SSE event may span chunks), on a transport thread; the subscriber must not block it for long.
 * Cancelling the subscription, or calling {@link #cancel()}, cancels the upstream call: that is how
 * vLLM learns to abort. A response that is neither subscribed nor cancelled holds a connection
 * until its timeout, so always do one of the two.
 */
public interface StreamingResponse extends Flow.Publisher<ByteBuffer> {

  /** The HTTP status of the response. */
  int status();

  /** The response headers (case-insensitive keys). */
  Map<String, List<String>> headers();

  /** The first value of a header, case-insensitively. */
  default Optional<String> header(String name) {
    for (Map.Entry<String, List<String>> e : headers().entrySet()) {
      if (e.getKey().equalsIgnoreCase(name) && !e.getValue().isEmpty()) {
        return Optional.of(e.getValue().get(0));
      }
    }
    return Optional.empty();
  }

  /** The {@code Content-Type}, or empty. */
  default Optional<String> contentType() {
    return header("Content-Type");
  }

  /** Cancels the upstream call; idempotent. */
  void cancel();

  /**
   * For the response a connector's {@link KVConnector#proxy} returns: the usage block of its
   * prefill leg's answer, when the request was disaggregated and the connector read one; empty
   * otherwise (and for plain upstream responses). It travels up with the response so that the
   * orchestrator and the router learn what the prefill engine reported without reading its answer
   * again. Responses made by {@link #relayed} and {@link #tap} report their head's.
   */
  default java.util.Optional<EngineUsage> prefillUsage() {
    return java.util.Optional.empty();
  }

  /**
   * {@code response}, reporting {@code usage} as its {@link #prefillUsage()}: what a connector
   * returns once its prefill leg's answer was read. Everything else is {@code response}'s; {@code
   * null} usage returns {@code response} itself.
   */
  static StreamingResponse withPrefillUsage(StreamingResponse response, EngineUsage usage) {
    java.util.Objects.requireNonNull(response, "response");
    return usage == null ? response : new PrefillReported(response, usage);
  }

  /**
   * Subscribes and collects the whole body, failing with a {@link ConnectorException} if it exceeds
   * {@code maxBytes} (the call is then cancelled). Cancelling the returned future cancels the
   * upstream call too.
   */
  default CompletableFuture<byte[]> readAll(int maxBytes) {
    CompletableFuture<byte[]> result = new CompletableFuture<>();
    result.whenComplete(
        (r, t) -> {
          if (result.isCancelled()) {
            cancel();
          }
        });
    subscribe(
        new Flow.Subscriber<>() {
          private final java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
          private Flow.Subscription subscription;

          @Override
          public void onSubscribe(Flow.Subscription s) {
            subscription = s;
            s.request(Long.MAX_VALUE);
          }

          @Override
          public void onNext(ByteBuffer item) {
            if (result.isDone()) {
              return;
            }
            if (out.size() + item.remaining() > maxBytes) {
              subscription.cancel();
              result.completeExceptionally(
                  new ConnectorException(
                      "upstream response body exceeds " + maxBytes + " bytes", 502, null));
              return;
            }
            byte[] b = new byte[item.remaining()];
            item.get(b);
            out.write(b, 0, b.length);
          }

          @Override
          public void onError(Throwable t) {
            result.completeExceptionally(t);
          }

          @Override
          public void onComplete() {
            result.complete(out.toByteArray());
          }
        });
    return result;
  }

  /** A response whose whole body is already in memory (for tests and synthetic answers). */
  static StreamingResponse of(int status, Map<String, List<String>> headers, byte[] body) {
    return RelayedResponse.of(
        status,
        headers,
        FlowRelay.of(
            body.length == 0
                ? List.of()
                : List.of(ByteBuffer.wrap(body.clone()).asReadOnlyBuffer())));
  }

  /**
   * A response with {@code head}'s status and headers whose body comes from {@code body} (a relay
   * of {@code head}'s body, usually: read ahead, timed, or with chunks added). Cancelling it
   * cancels both.
   */
  static StreamingResponse relayed(StreamingResponse head, FlowRelay<ByteBuffer> body) {
    return RelayedResponse.relayed(head, body);
  }

  /**
   * {@code response} passed through unchanged, observed on the way: the pass-through wrapper every
   * decorator of a response (usage scanning, tracing, in-flight accounting) is built on, with the
   * demand and cancellation plumbing of a {@link FlowRelay}.
   *
   * <ul>
   *   <li>{@code onChunk} sees each chunk as it arrives from {@code response}, before the
   *       subscriber does, on the thread delivering it; it must not move the chunk's position.
   *   <li>{@code onEnd} runs exactly once, whatever ends the stream first: with {@code null} just
   *       before the subscriber's {@code onComplete}, with the error just before its {@code
   *       onError}, or with a {@link java.util.concurrent.CancellationException} when the
   *       subscription or the returned response is cancelled first (even when cancelling {@code
   *       response} throws).
   * </ul>
   *
   * <p>{@code response} is subscribed when the returned response is (once; a second subscriber is
   * refused), so one that is only cancelled is never read. Cancelling the returned response ends
   * the stream, then cancels {@code response}. Neither callback may throw or block for long.
   */
  static StreamingResponse tap(
      StreamingResponse response,
      Consumer<? super ByteBuffer> onChunk,
      Consumer<? super Throwable> onEnd) {
    return RelayedResponse.tap(response, onChunk, onEnd);
  }
}
