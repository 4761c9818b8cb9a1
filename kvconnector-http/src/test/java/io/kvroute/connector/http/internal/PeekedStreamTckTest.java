package io.kvroute.connector.http.internal;

import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;

/**
 * {@link PeekedStream#peek}: the first chunk decides, the rest is relayed; passes the Reactive
 * Streams TCK.
 */
public class PeekedStreamTckTest extends PeekedStreamVerification {

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    try {
      return PeekedStream.peek(TckSupport.response(elements), bytes -> true, 1 << 20)
          .get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }
}
