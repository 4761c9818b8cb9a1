package io.kvroute.connector.http.internal;

import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;

/**
 * {@link PeekedStream#prepend}: a synthetic first chunk, then the upstream read on demand; passes
 * the Reactive Streams TCK.
 */
public class PrependedStreamTckTest extends PeekedStreamVerification {

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    if (elements == 0) {
      return PeekedStream.prepend(new byte[0], TckSupport.response(0));
    }
    return PeekedStream.prepend(new byte[] {'h'}, TckSupport.response(elements - 1));
  }
}
