package io.kvroute.connector;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;

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
    Map<String, List<String>> h = Map.copyOf(headers);
    FlowRelay<ByteBuffer> relay =
        FlowRelay.of(
            body.length == 0
                ? List.of()
                : List.of(ByteBuffer.wrap(body.clone()).asReadOnlyBuffer()));
    return new StreamingResponse() {
      @Override
      public int status() {
        return status;
      }

      @Override
      public Map<String, List<String>> headers() {
        return h;
      }

      @Override
      public void cancel() {
        relay.cancel();
      }

      @Override
      public void subscribe(Flow.Subscriber<? super ByteBuffer> s) {
        relay.subscribe(s);
      }
    };
  }

  /**
   * A response with {@code head}'s status and headers whose body comes from {@code body} (a relay
   * of {@code head}'s body, usually: read ahead, timed, or with chunks added). Cancelling it
   * cancels both.
   */
  static StreamingResponse relayed(StreamingResponse head, FlowRelay<ByteBuffer> body) {
    java.util.Objects.requireNonNull(head, "head");
    java.util.Objects.requireNonNull(body, "body");
    return new StreamingResponse() {
      @Override
      public int status() {
        return head.status();
      }

      @Override
      public Map<String, List<String>> headers() {
        return head.headers();
      }

      @Override
      public void cancel() {
        body.cancel();
        head.cancel();
      }

      @Override
      public void subscribe(Flow.Subscriber<? super ByteBuffer> s) {
        body.subscribe(s);
      }
    };
  }
}
