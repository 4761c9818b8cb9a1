package io.kvroute.connector;

import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;
import org.reactivestreams.tck.flow.FlowPublisherVerification;

/** {@link StreamingResponse#tap} (a response observed on its way through) passes the TCK. */
public class TappedResponseTckTest extends FlowPublisherVerification<ByteBuffer> {

  public TappedResponseTckTest() {
    super(TckSupport.environment(), TckSupport.GC_TIMEOUT_MILLIS);
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    return StreamingResponse.tap(TckSupport.response(elements), chunk -> {}, end -> {});
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFailedFlowPublisher() {
    return StreamingResponse.tap(
        TckSupport.failing(new RuntimeException("failed on purpose")), chunk -> {}, end -> {});
  }

  @Override
  public long maxElementsFromPublisher() {
    return TckSupport.MAX_ELEMENTS;
  }
}
