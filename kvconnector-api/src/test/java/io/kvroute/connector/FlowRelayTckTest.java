package io.kvroute.connector;

import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;
import org.reactivestreams.tck.flow.FlowPublisherVerification;

/** {@link FlowRelay} fed by an upstream subscription passes the Reactive Streams TCK. */
public class FlowRelayTckTest extends FlowPublisherVerification<ByteBuffer> {

  public FlowRelayTckTest() {
    super(TckSupport.environment(), TckSupport.GC_TIMEOUT_MILLIS);
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    FlowRelay<ByteBuffer> relay = FlowRelay.create();
    relay.onSubscribe(new TckSupport.Generator(elements, relay));
    return relay;
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFailedFlowPublisher() {
    FlowRelay<ByteBuffer> relay = FlowRelay.create();
    relay.onError(new RuntimeException("failed on purpose"));
    return relay;
  }

  @Override
  public long maxElementsFromPublisher() {
    return TckSupport.MAX_ELEMENTS;
  }
}
