package io.kvroute.envoy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.google.protobuf.ByteString;
import com.google.protobuf.ListValue;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.Channel;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One ext_proc stream as Envoy drives it: messages written from the ext_proc proto docs, answers
 * collected in order. Waits use generous deadlines, never fixed sleeps.
 */
final class EnvoyReplay {
  static final long WAIT_SECONDS = 30;

  private final LinkedBlockingQueue<ProcessingResponse> answers = new LinkedBlockingQueue<>();
  private final CountDownLatch closed = new CountDownLatch(1);
  private volatile Throwable error;
  private volatile ClientCallStreamObserver<ProcessingRequest> requests;

  private EnvoyReplay() {}

  /** Opens a stream on {@code channel}. */
  static EnvoyReplay open(Channel channel) {
    EnvoyReplay r = new EnvoyReplay();
    ExternalProcessorGrpc.newStub(channel)
        .process(
            new ClientResponseObserver<ProcessingRequest, ProcessingResponse>() {
              @Override
              public void beforeStart(ClientCallStreamObserver<ProcessingRequest> s) {
                r.requests = s;
              }

              @Override
              public void onNext(ProcessingResponse value) {
                r.answers.add(value);
              }

              @Override
              public void onError(Throwable t) {
                r.error = t;
                r.closed.countDown();
              }

              @Override
              public void onCompleted() {
                r.closed.countDown();
              }
            });
    return r;
  }

  EnvoyReplay send(ProcessingRequest m) {
    requests.onNext(m);
    return this;
  }

  /** The next answer, waiting up to {@link #WAIT_SECONDS}. */
  ProcessingResponse next() {
    try {
      ProcessingResponse r = answers.poll(WAIT_SECONDS, TimeUnit.SECONDS);
      if (r == null) {
        fail("no ext_proc answer within " + WAIT_SECONDS + " s (error: " + error + ")");
      }
      return r;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  /** The next answer, asserting its kind. */
  ProcessingResponse next(ProcessingResponse.ResponseCase kind) {
    ProcessingResponse r = next();
    assertThat(r.getResponseCase()).as("answer kind of %s", r).isEqualTo(kind);
    return r;
  }

  /** Answers received and not yet taken. */
  int pending() {
    return answers.size();
  }

  /** Envoy half-closes its side (the HTTP stream ended). */
  void halfClose() {
    requests.onCompleted();
  }

  /** Envoy resets the stream (client gone). */
  void cancel() {
    requests.cancel("client reset", null);
  }

  /** Waits until the server ends the stream; true when it did in time. */
  boolean awaitClosed() {
    try {
      return closed.await(WAIT_SECONDS, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  Throwable error() {
    return error;
  }

  // ---------------------------------------------------------------- messages Envoy sends

  static HeaderMap headerMap(Map<String, String> headers) {
    HeaderMap.Builder b = HeaderMap.newBuilder();
    headers.forEach(
        (k, v) ->
            b.addHeaders(
                HeaderValue.newBuilder()
                    .setKey(k.toLowerCase(Locale.ROOT))
                    .setRawValue(ByteString.copyFromUtf8(v))));
    return b.build();
  }

  static ProcessingRequest requestHeaders(
      Map<String, String> headers,
      boolean endOfStream,
      Metadata metadata,
      ProtocolConfiguration pc) {
    ProcessingRequest.Builder b =
        ProcessingRequest.newBuilder()
            .setRequestHeaders(
                HttpHeaders.newBuilder()
                    .setHeaders(headerMap(headers))
                    .setEndOfStream(endOfStream));
    if (metadata != null) {
      b.setMetadataContext(metadata);
    }
    if (pc != null) {
      b.setProtocolConfig(pc);
    }
    return b.build();
  }

  static ProcessingRequest requestBody(byte[] chunk, boolean endOfStream) {
    return ProcessingRequest.newBuilder()
        .setRequestBody(
            HttpBody.newBuilder().setBody(ByteString.copyFrom(chunk)).setEndOfStream(endOfStream))
        .build();
  }

  static ProcessingRequest requestTrailers() {
    return ProcessingRequest.newBuilder()
        .setRequestTrailers(
            HttpTrailers.newBuilder().setTrailers(headerMap(Map.of("x-trailer", "t"))))
        .build();
  }

  static ProcessingRequest responseHeaders(
      int status, String contentType, boolean endOfStream, Metadata metadata) {
    Map<String, String> h = new LinkedHashMap<>();
    h.put(":status", Integer.toString(status));
    if (contentType != null) {
      h.put("content-type", contentType);
    }
    ProcessingRequest.Builder b =
        ProcessingRequest.newBuilder()
            .setResponseHeaders(
                HttpHeaders.newBuilder().setHeaders(headerMap(h)).setEndOfStream(endOfStream));
    if (metadata != null) {
      b.setMetadataContext(metadata);
    }
    return b.build();
  }

  static ProcessingRequest responseBody(byte[] chunk, boolean endOfStream) {
    return ProcessingRequest.newBuilder()
        .setResponseBody(
            HttpBody.newBuilder().setBody(ByteString.copyFrom(chunk)).setEndOfStream(endOfStream))
        .build();
  }

  static ProcessingRequest responseTrailers() {
    return ProcessingRequest.newBuilder()
        .setResponseTrailers(
            HttpTrailers.newBuilder().setTrailers(headerMap(Map.of("grpc-status", "0"))))
        .build();
  }

  static ProtocolConfiguration protocol(
      ProcessingMode.BodySendMode request,
      ProcessingMode.BodySendMode response,
      boolean withoutWaiting) {
    return ProtocolConfiguration.newBuilder()
        .setRequestBodyMode(request)
        .setResponseBodyMode(response)
        .setSendBodyWithoutWaitingForHeaderResponse(withoutWaiting)
        .build();
  }

  /** Filter metadata {@code ns.key = value} (a string). */
  static Metadata metadata(String ns, String key, String value) {
    return Metadata.newBuilder()
        .putFilterMetadata(
            ns,
            Struct.newBuilder()
                .putFields(key, Value.newBuilder().setStringValue(value).build())
                .build())
        .build();
  }

  /** Filter metadata {@code ns.key = [values]} (a list of strings). */
  static Metadata metadataList(String ns, String key, List<String> values) {
    ListValue.Builder l = ListValue.newBuilder();
    values.forEach(v -> l.addValues(Value.newBuilder().setStringValue(v)));
    return Metadata.newBuilder()
        .putFilterMetadata(
            ns,
            Struct.newBuilder().putFields(key, Value.newBuilder().setListValue(l).build()).build())
        .build();
  }

  // ---------------------------------------------------------------- reading answers

  /** The headers a mutation sets, lower-case names; asserts each one overwrites. */
  static Map<String, String> setHeaders(HeaderMutation m) {
    Map<String, String> out = new LinkedHashMap<>();
    for (HeaderValueOption o : m.getSetHeadersList()) {
      assertThat(o.getAppendAction())
          .as("header %s replaces client copies", o.getHeader().getKey())
          .isEqualTo(HeaderValueOption.HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD);
      out.put(
          o.getHeader().getKey().toLowerCase(Locale.ROOT),
          o.getHeader().getRawValue().toString(StandardCharsets.UTF_8));
    }
    return out;
  }

  /** {@code ns.key} in an answer's dynamic metadata, as a string (numbers without fraction). */
  static String dynamic(ProcessingResponse r, String ns, String key) {
    Value v = r.getDynamicMetadata().getFieldsMap().get(ns);
    if (v == null || !v.hasStructValue()) {
      return null;
    }
    Value f = v.getStructValue().getFieldsMap().get(key);
    if (f == null) {
      return null;
    }
    if (f.hasNumberValue()) {
      return Long.toString((long) f.getNumberValue());
    }
    if (f.hasBoolValue()) {
      return Boolean.toString(f.getBoolValue());
    }
    return f.getStringValue();
  }
}
