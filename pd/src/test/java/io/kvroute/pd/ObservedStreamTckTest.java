package io.kvroute.pd;

import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import org.reactivestreams.tck.flow.FlowPublisherVerification;

/**
 * The decode stream {@link PdOrchestrator#execute} returns (first chunk read ahead, the rest
 * relayed and timed) passes the Reactive Streams TCK.
 */
public class ObservedStreamTckTest extends FlowPublisherVerification<ByteBuffer> {

  public ObservedStreamTckTest() {
    super(TckSupport.environment(), TckSupport.GC_TIMEOUT_MILLIS);
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    try {
      return ObservedStream.prefetch(
              TckSupport.response(elements),
              "http",
              "d1",
              ConnectorListener.NONE,
              System::nanoTime,
              System.nanoTime(),
              failure -> {})
          .get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFailedFlowPublisher() {
    return null; // a stream that fails before its first byte is retried, never handed out
  }

  @Override
  public long maxElementsFromPublisher() {
    return TckSupport.MAX_ELEMENTS;
  }
}
