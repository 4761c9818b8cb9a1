package io.kvroute.connector;

import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.Flow;
import org.reactivestreams.tck.flow.FlowPublisherVerification;

/** {@link StreamingResponse#of} (a body in memory: zero or one chunk) passes the TCK. */
public class StreamingResponseOfTckTest extends FlowPublisherVerification<ByteBuffer> {

  public StreamingResponseOfTckTest() {
    super(TckSupport.environment(), TckSupport.GC_TIMEOUT_MILLIS);
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    return StreamingResponse.of(200, Map.of(), new byte[(int) elements * 7]);
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFailedFlowPublisher() {
    return null; // a body in memory cannot fail
  }

  @Override
  public long maxElementsFromPublisher() {
    return 1;
  }
}
