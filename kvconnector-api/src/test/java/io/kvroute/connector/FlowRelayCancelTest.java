package io.kvroute.connector;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.CancellationException;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** Cancelling a relay whose upstream misbehaves still ends the stream once. */
class FlowRelayCancelTest {

  @Test
  void anUpstreamCancelThatThrowsStillReportsTheEnd() {
    AtomicReference<Throwable> end = new AtomicReference<>();
    FlowRelay<String> relay = FlowRelay.create(end::set);
    relay.onSubscribe(
        new Flow.Subscription() {
          @Override
          public void request(long n) {}

          @Override
          public void cancel() {
            throw new IllegalStateException("Unbalanced enter/exit");
          }
        });

    relay.cancel(); // returns normally (rule 3.15)

    assertThat(relay.isCancelled()).isTrue();
    assertThat(end.get()).isInstanceOf(CancellationException.class);
  }
}
