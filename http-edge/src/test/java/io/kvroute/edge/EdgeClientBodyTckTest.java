package io.kvroute.edge;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.FlowRelay;
import io.kvroute.connector.HttpTransport.Outbound;
import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import org.reactivestreams.tck.flow.FlowPublisherVerification;
import org.testng.annotations.AfterClass;

/**
 * The body publisher of {@link EdgeClient}'s responses passes the Reactive Streams TCK, over a real
 * connection. The upstream (an {@link EdgeServer}) answers {@code /chunks/n} with a chunked body of
 * exactly {@code n} chunks: the client's HTTP decoder yields one element per chunk however TCP
 * groups the bytes, so {@code n} chunks are exactly {@code n} elements.
 */
public class EdgeClientBodyTckTest extends FlowPublisherVerification<ByteBuffer> {
  private final EdgeServer upstream =
      EdgeServer.builder()
          .listen("127.0.0.1", 0)
          .route(
              "GET",
              "/chunks/*",
              ex -> {
                long n = Long.parseLong(ex.path().substring("/chunks/".length()));
                ex.respond(
                    Response.status(200).contentType("application/octet-stream").stream(
                            FlowRelay.of(TckSupport.chunks(n)))
                        .build());
              })
          .build()
          .start();
  private final EdgeClient client = EdgeClient.create();
  private final Endpoint endpoint =
      Endpoint.of("http://127.0.0.1:" + upstream.port(), Endpoint.Role.DECODE);

  public EdgeClientBodyTckTest() {
    super(TckSupport.environment(), TckSupport.GC_TIMEOUT_MILLIS);
  }

  @AfterClass
  public void close() {
    client.close();
    upstream.close();
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    try {
      return client
          .send(Outbound.get(endpoint, "/chunks/" + elements).streaming(true).build())
          .get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFailedFlowPublisher() {
    return null; // a failure reaches the caller as a failed future, before any publisher exists
  }

  @Override
  public long maxElementsFromPublisher() {
    return TckSupport.MAX_ELEMENTS;
  }
}
