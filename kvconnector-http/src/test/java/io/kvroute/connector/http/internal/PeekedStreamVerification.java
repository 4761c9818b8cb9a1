package io.kvroute.connector.http.internal;

import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;
import org.reactivestreams.tck.flow.FlowPublisherVerification;

/**
 * The Reactive Streams TCK for a {@link PeekedStream} publisher: the shared environment, element
 * bound and failed publisher (an upstream failing at once behind an empty first chunk); a subclass
 * makes the publisher under test.
 */
public abstract class PeekedStreamVerification extends FlowPublisherVerification<ByteBuffer> {

  protected PeekedStreamVerification() {
    super(TckSupport.environment(), TckSupport.GC_TIMEOUT_MILLIS);
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFailedFlowPublisher() {
    return PeekedStream.prepend(new byte[0], TckSupport.failing(new RuntimeException("failed")));
  }

  @Override
  public long maxElementsFromPublisher() {
    return TckSupport.MAX_ELEMENTS;
  }
}
