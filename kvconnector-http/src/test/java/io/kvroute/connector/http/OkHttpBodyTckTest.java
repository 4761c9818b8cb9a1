package io.kvroute.connector.http;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.tck.TckSupport;
import java.nio.ByteBuffer;
import java.util.concurrent.Flow;
import okhttp3.Call;
import okhttp3.OkHttpClient;
import okhttp3.Protocol;
import okhttp3.Request;
import okhttp3.Response;
import okhttp3.ResponseBody;
import okio.Buffer;
import okio.Okio;
import okio.Source;
import okio.Timeout;
import org.reactivestreams.tck.flow.FlowPublisherVerification;
import org.testng.annotations.AfterClass;

/**
 * The body publisher of {@link OkHttpTransport}'s responses passes the Reactive Streams TCK. The
 * body comes from a source that yields one 8-byte chunk per read, so that {@code n} chunks are
 * exactly {@code n} elements (over a socket the chunking would depend on timing).
 */
public class OkHttpBodyTckTest extends FlowPublisherVerification<ByteBuffer> {
  private final OkHttpTransport transport = OkHttpTransport.builder().chunkSize(64).build();
  private final OkHttpClient client = new OkHttpClient();
  private final Endpoint endpoint = Endpoint.of("http://127.0.0.1:9", Endpoint.Role.DECODE);

  public OkHttpBodyTckTest() {
    super(TckSupport.environment(), TckSupport.GC_TIMEOUT_MILLIS);
  }

  @AfterClass
  public void close() {
    transport.close();
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFlowPublisher(long elements) {
    Request request = new Request.Builder().url(endpoint.baseUrl() + "/v1/completions").build();
    Call call = client.newCall(request);
    Response response =
        new Response.Builder()
            .request(request)
            .protocol(Protocol.HTTP_1_1)
            .code(200)
            .message("OK")
            .body(ResponseBody.Companion.create(Okio.buffer(new Chunks(elements)), null, -1))
            .build();
    HttpTransport.Outbound out =
        HttpTransport.Outbound.post(endpoint, "/v1/completions", new byte[0])
            .streaming(true)
            .build();
    return transport.new OkHttpStreamingResponse(out, call, response);
  }

  @Override
  public Flow.Publisher<ByteBuffer> createFailedFlowPublisher() {
    return null; // the body is read only once the subscriber asks for it
  }

  @Override
  public long maxElementsFromPublisher() {
    return TckSupport.MAX_ELEMENTS;
  }

  /** An okio source of {@code n} chunks of 8 bytes, one per read. */
  private static final class Chunks implements Source {
    private long left;

    Chunks(long n) {
      this.left = n;
    }

    @Override
    public long read(Buffer sink, long byteCount) {
      if (left == 0) {
        return -1;
      }
      left--;
      sink.writeUtf8("chunk-" + (left % 10) + ";");
      return 8;
    }

    @Override
    public Timeout timeout() {
      return Timeout.NONE;
    }

    @Override
    public void close() {}
  }
}
