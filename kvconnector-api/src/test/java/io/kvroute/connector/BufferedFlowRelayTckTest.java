package io.kvroute.connector;

import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;
import org.reactivestreams.tck.flow.FlowPublisherVerification;

/** {@link FlowRelay#of} (items in hand, then completion) passes the Reactive Streams TCK. */
public class BufferedFlowRelayTckTest extends FlowPublisherVerification<ByteBuffer> {

  public BufferedFlowRelayTckTest() {
    super(TckSupport.environment(), TckSupport.GC_TIMEOUT_MILLIS);
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    return FlowRelay.of(TckSupport.chunks(elements));
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFailedFlowPublisher() {
    return null; // a relay of items in hand cannot fail
  }

  @Override
  public long maxElementsFromPublisher() {
    return TckSupport.MAX_ELEMENTS;
  }
}
