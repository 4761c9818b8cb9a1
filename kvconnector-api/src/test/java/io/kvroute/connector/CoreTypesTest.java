package io.kvroute.connector;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class CoreTypesTest {

  @Test
  void endpointFromUrl() {
    Endpoint e = Endpoint.of("http://10.0.0.7:8000", Endpoint.Role.DECODE);
    assertThat(e.id()).isEqualTo("10.0.0.7:8000");
    assertThat(e.baseUrl()).isEqualTo("http://10.0.0.7:8000");
    Endpoint v6 = Endpoint.of("http://[::1]:9000/", Endpoint.Role.BOTH);
    assertThat(v6.host()).isEqualTo("::1");
    assertThat(v6.hostPort()).isEqualTo("[::1]:9000");
    assertThat(Endpoint.of("localhost:8100", Endpoint.Role.PREFILL).baseUrl())
        .isEqualTo("http://localhost:8100");
    assertThat(Endpoint.of("https://pod", Endpoint.Role.BOTH).port()).isEqualTo(443);
  }

  @Test
  void endpointRejectsNonsense() {
    assertThatThrownBy(() -> Endpoint.of("http://host:8000/v1", Endpoint.Role.DECODE))
        .hasMessageContaining("must not have a path");
    assertThatThrownBy(() -> Endpoint.of("ftp://host:21", Endpoint.Role.DECODE))
        .hasMessageContaining("scheme must be http or https");
    assertThatThrownBy(() -> Endpoint.builder("a", "h", 0).role(Endpoint.Role.DECODE).build())
        .hasMessageContaining("port must be in 1..65535");
    assertThatThrownBy(() -> Endpoint.Role.parse("middle"))
        .hasMessageContaining("prefill, decode, both");
  }

  @Test
  void rolesKnowWhatTheyRun() {
    assertThat(Endpoint.Role.PREFILL.canDecode()).isFalse();
    assertThat(Endpoint.Role.BOTH.canDecode()).isTrue();
    assertThat(Endpoint.Role.parse("Decode")).isEqualTo(Endpoint.Role.DECODE);
  }

  @Test
  void requestIdComesFromTheHeaderOnlyWhenSafe() {
    byte[] body = "{}".getBytes(StandardCharsets.UTF_8);
    InferenceRequest ok =
        InferenceRequest.of(
            InferenceRequest.Api.COMPLETIONS, body, Map.of("x-request-id", List.of("abc-1")), "fb");
    assertThat(ok.requestId()).isEqualTo("abc-1");
    InferenceRequest hostile =
        InferenceRequest.of(
            InferenceRequest.Api.COMPLETIONS,
            body,
            Map.of("X-Request-Id", List.of("a\r\nX-Evil: 1")),
            "fb");
    assertThat(hostile.requestId()).isEqualTo("fb");
    assertThat(hostile.header("X-REQUEST-ID")).contains("a\r\nX-Evil: 1");
  }

  @Test
  void requestIsImmutable() {
    byte[] body = "{\"a\":1}".getBytes(StandardCharsets.UTF_8);
    InferenceRequest r =
        InferenceRequest.of(InferenceRequest.Api.CHAT_COMPLETIONS, body, null, "id");
    body[0] = 'x';
    assertThat(r.bodyAsString()).isEqualTo("{\"a\":1}");
    r.body()[0] = 'y';
    assertThat(r.bodyAsString()).isEqualTo("{\"a\":1}");
    assertThat(r.toString()).doesNotContain("\"a\"");
  }

  @Test
  void legsShareImmutableBodiesAndCopyEverythingElse() {
    byte[] client = "{\"prompt\":\"p\"}".getBytes(StandardCharsets.UTF_8);
    InferenceRequest r =
        InferenceRequest.of(
            InferenceRequest.Api.COMPLETIONS,
            client,
            Map.of("Content-Type", List.of("application/json")),
            "id-1");
    Endpoint d = Endpoint.of("http://10.0.0.2:8000", Endpoint.Role.DECODE);

    // the client's body as it came: the request's path, the same bytes
    KVConnector.DecodeRequest decode =
        KVConnector.DecodeRequest.builder(d, r)
            .headers(Map.of("X-Request-Id", List.of("id-1"), "x-a", List.of("1")))
            .build();
    assertThat(decode.path()).isEqualTo("/v1/completions");
    assertThat(decode.body()).isEqualTo(client).isNotSameAs(decode.body());
    assertThat(decode.bodyLength()).isEqualTo(client.length);
    assertThat(decode.headers()).containsKey("x-request-id").containsKey("X-A");

    // the outbound leg of the decode request: its endpoint, path, body and headers
    HttpTransport.Outbound out = decode.toOutbound().leg(Leg.DECODE).streaming(true).build();
    assertThat(out.method()).isEqualTo(HttpTransport.Method.POST);
    assertThat(out.url()).isEqualTo("http://10.0.0.2:8000/v1/completions");
    assertThat(out.body()).isEqualTo(client);
    assertThat(out.headers()).isEqualTo(decode.headers()).containsKey("X-REQUEST-ID");
    assertThat(out.leg()).isEqualTo(Leg.DECODE);
    assertThat(out.streaming()).isTrue();

    // the body as a read-only view, a fresh one per call
    java.nio.ByteBuffer view = out.bodyBuffer();
    assertThat(view.isReadOnly()).isTrue();
    byte[] read = new byte[view.remaining()];
    view.get(read);
    assertThat(read).isEqualTo(client);
    assertThat(out.bodyBuffer().position()).isZero();
    assertThat(HttpTransport.Outbound.get(d, "/health").build().bodyBuffer().remaining()).isZero();

    // a buffer's remaining bytes are copied, its position unmoved
    java.nio.ByteBuffer scratch = java.nio.ByteBuffer.wrap("xx{\"a\":1}".getBytes());
    scratch.position(2);
    HttpTransport.Outbound fromBuffer =
        HttpTransport.Outbound.post(d, "/v1/completions", scratch).build();
    KVConnector.DecodeRequest decodeFromBuffer =
        KVConnector.DecodeRequest.builder(d, "/v1/completions", scratch).build();
    assertThat(scratch.position()).isEqualTo(2);
    scratch.put(2, (byte) 'z');
    assertThat(new String(fromBuffer.body(), StandardCharsets.UTF_8)).isEqualTo("{\"a\":1}");
    assertThat(new String(decodeFromBuffer.body(), StandardCharsets.UTF_8)).isEqualTo("{\"a\":1}");

    // byte arrays given to builders are still copied
    byte[] mine = "{\"b\":2}".getBytes(StandardCharsets.UTF_8);
    HttpTransport.Outbound copied = HttpTransport.Outbound.post(d, "/x", mine).build();
    KVConnector.DecodeRequest copiedDecode =
        KVConnector.DecodeRequest.builder(d, "/x", mine).build();
    mine[0] = 'x';
    assertThat(copied.body()[0]).isEqualTo((byte) '{');
    assertThat(copiedDecode.body()[0]).isEqualTo((byte) '{');
  }

  @Test
  void apiFromPath() {
    assertThat(InferenceRequest.Api.fromPath("/v1/chat/completions/"))
        .contains(InferenceRequest.Api.CHAT_COMPLETIONS);
    assertThat(InferenceRequest.Api.fromPath("/v1/completions?x=1"))
        .contains(InferenceRequest.Api.COMPLETIONS);
    assertThat(InferenceRequest.Api.fromPath("/v1/embeddings")).isEmpty();
  }

  @Test
  void upstreamExceptionClassification() {
    UpstreamException e400 = status(400);
    assertThat(e400.retryable()).isFalse();
    assertThat(e400.httpStatus()).isEqualTo(400);
    assertThat(e400.endpointFault()).isFalse();
    UpstreamException e429 = status(429);
    assertThat(e429.retryable()).isTrue();
    assertThat(e429.endpointFault()).isFalse();
    UpstreamException e503 = status(503);
    assertThat(e503.retryable()).isTrue();
    assertThat(e503.httpStatus()).isEqualTo(503);
    assertThat(status(500).httpStatus()).isEqualTo(502);
    assertThat(ConnectorListener.outcome(e503)).isEqualTo("status_5xx");
    assertThat(ConnectorListener.outcome(null)).isEqualTo("ok");
  }

  private static UpstreamException status(int s) {
    return new UpstreamException(
        Leg.DECODE, "d", UpstreamException.Kind.STATUS, s, Duration.ofSeconds(1), null, "x", null);
  }

  @Test
  void bufferedStreamingResponseDeliversOnce() throws Exception {
    StreamingResponse r =
        StreamingResponse.of(
            200,
            Map.of("Content-Type", List.of("application/json")),
            "{}".getBytes(StandardCharsets.UTF_8));
    assertThat(r.contentType()).contains("application/json");
    assertThat(new String(r.readAll(10).get(), StandardCharsets.UTF_8)).isEqualTo("{}");
    assertThat(r.readAll(10)).isCompletedExceptionally();
    StreamingResponse big = StreamingResponse.of(200, Map.of(), new byte[100]);
    assertThat(big.readAll(10)).isCompletedExceptionally();
  }
}
