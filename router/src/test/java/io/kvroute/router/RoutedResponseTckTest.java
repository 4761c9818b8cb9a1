package io.kvroute.router;

import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;
import org.reactivestreams.tck.flow.FlowPublisherVerification;

/** The stream {@link KvRouter#route} returns passes the Reactive Streams TCK. */
public class RoutedResponseTckTest extends FlowPublisherVerification<ByteBuffer> {

  public RoutedResponseTckTest() {
    super(TckSupport.environment(), TckSupport.GC_TIMEOUT_MILLIS);
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    return new RoutedResponse(TckSupport.response(elements), null, (t, u) -> {});
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFailedFlowPublisher() {
    return new RoutedResponse(
        TckSupport.failing(new RuntimeException("failed on purpose")), null, (t, u) -> {});
  }

  @Override
  public long maxElementsFromPublisher() {
    return TckSupport.MAX_ELEMENTS;
  }
}
