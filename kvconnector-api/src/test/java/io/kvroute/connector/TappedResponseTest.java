package io.kvroute.connector;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** {@link StreamingResponse#tap}: chunks seen on the way, the end reported exactly once. */
class TappedResponseTest {
  private final List<String> events = new ArrayList<>();
  private final Upstream upstream = new Upstream();
  private final StreamingResponse tapped =
      StreamingResponse.tap(
          upstream,
          chunk -> events.add("chunk " + StandardCharsets.UTF_8.decode(chunk.duplicate())),
          end -> events.add("end " + (end == null ? "ok" : end.getClass().getSimpleName())));
  private final Recorder subscriber = new Recorder();

  @Test
  void chunksAreSeenBeforeTheSubscriberAndCompletionIsReportedOnceBeforeItsOnComplete() {
    tapped.subscribe(subscriber);
    subscriber.subscription.request(2);
    assertThat(upstream.requested).isEqualTo(2);
    upstream.subscriber.onNext(chunk("a"));
    upstream.subscriber.onNext(chunk("b"));
    upstream.subscriber.onComplete();
    tapped.cancel(); // after the end: changes nothing

    assertThat(events)
        .containsExactly(
            "chunk a", "next a", "chunk b", "next b", "end ok", "complete", "head cancelled");
    assertThat(tapped.status()).isEqualTo(203);
    assertThat(tapped.header("x-test")).contains("yes");
  }

  @Test
  void anErrorIsReportedOnceBeforeTheSubscriberSeesIt() {
    tapped.subscribe(subscriber);
    upstream.subscriber.onError(new IllegalStateException("boom"));
    subscriber.subscription.cancel();

    assertThat(events).containsExactly("end IllegalStateException", "error boom");
  }

  @Test
  void cancellingTheSubscriptionReportsACancellationOnceAndCancelsUpstream() {
    tapped.subscribe(subscriber);
    subscriber.subscription.request(1);
    upstream.subscriber.onNext(chunk("a"));
    subscriber.subscription.cancel();
    subscriber.subscription.cancel();
    upstream.subscriber.onComplete(); // too late: ignored

    assertThat(events).containsExactly("chunk a", "next a", "end CancellationException");
    assertThat(upstream.cancels.get()).isEqualTo(1);
  }

  @Test
  void aResponseCancelledBeforeItIsSubscribedIsNeverRead() {
    tapped.cancel();
    tapped.subscribe(subscriber);

    assertThat(events).containsExactly("end CancellationException", "head cancelled");
    assertThat(upstream.subscribeCount.get()).isZero();
  }

  @Test
  void anUpstreamCancelThatThrowsStillReportsTheEnd() {
    upstream.cancelThrows = true;
    tapped.subscribe(subscriber);

    subscriber.subscription.cancel(); // returns normally (rule 3.15)

    assertThat(events).containsExactly("end CancellationException");
  }

  @Test
  void aSecondSubscriberIsRefusedAndUpstreamIsSubscribedOnce() {
    tapped.subscribe(subscriber);
    Recorder second = new Recorder();
    tapped.subscribe(second);

    assertThat(second.failure).isInstanceOf(IllegalStateException.class);
    assertThat(upstream.subscribeCount.get()).isEqualTo(1);
    assertThat(events).containsExactly("error this stream accepts one subscriber");
  }

  private static ByteBuffer chunk(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }

  /** An upstream the test drives by hand. */
  private final class Upstream implements StreamingResponse {
    Flow.Subscriber<? super ByteBuffer> subscriber;
    long requested;
    boolean cancelThrows;
    final AtomicInteger cancels = new AtomicInteger();
    final AtomicInteger subscribeCount = new AtomicInteger();

    @Override
    public int status() {
      return 203;
    }

    @Override
    public Map<String, List<String>> headers() {
      return Map.of("X-Test", List.of("yes"));
    }

    @Override
    public void cancel() {
      events.add("head cancelled");
    }

    @Override
    public void subscribe(Flow.Subscriber<? super ByteBuffer> s) {
      subscribeCount.incrementAndGet();
      subscriber = s;
      s.onSubscribe(
          new Flow.Subscription() {
            @Override
            public void request(long n) {
              requested += n;
            }

            @Override
            public void cancel() {
              cancels.incrementAndGet();
              if (cancelThrows) {
                throw new IllegalStateException("Unbalanced enter/exit");
              }
            }
          });
    }
  }

  /** Records what reaches the downstream subscriber. */
  private final class Recorder implements Flow.Subscriber<ByteBuffer> {
    Flow.Subscription subscription;
    Throwable failure;

    @Override
    public void onSubscribe(Flow.Subscription s) {
      subscription = s;
    }

    @Override
    public void onNext(ByteBuffer item) {
      events.add("next " + StandardCharsets.UTF_8.decode(item.duplicate()));
    }

    @Override
    public void onError(Throwable t) {
      failure = t;
      events.add("error " + t.getMessage());
    }

    @Override
    public void onComplete() {
      events.add("complete");
    }
  }
}
