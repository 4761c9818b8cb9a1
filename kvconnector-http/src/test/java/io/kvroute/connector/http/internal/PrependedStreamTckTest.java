package io.kvroute.connector.http.internal;

import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;
import org.reactivestreams.tck.flow.FlowPublisherVerification;

/**
 * {@link PeekedStream#prepend}: a synthetic first chunk, then the upstream read on demand; passes
 * the Reactive Streams TCK.
 */
public class PrependedStreamTckTest extends FlowPublisherVerification<ByteBuffer> {

  public PrependedStreamTckTest() {
    super(TckSupport.environment());
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    if (elements == 0) {
      return PeekedStream.prepend(new byte[0], TckSupport.response(0));
    }
    return PeekedStream.prepend(new byte[] {'h'}, TckSupport.response(elements - 1));
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
