package io.kvroute.connector.contract;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.http.OkHttpTransport;
import io.kvroute.connector.http.OpenAiJson;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.Flow;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.RecordedRequest;
import mockwebserver3.SocketEffect;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The contract every {@link KVConnector} passes: the connector-independent behaviour a gateway
 * relies on, checked against real HTTP servers (MockWebServer) for the prefill and decode pods.
 *
 * <p>A connector's test extends this class, names its {@link #type()}, and overrides the hooks
 * where its protocol differs (the prefill answer it needs, what its legs' bodies look like, whether
 * both legs run at once). Shipped in {@code kvconnector-http}'s test-jar:
 *
 * <pre>{@code
 * <dependency>
 *   <groupId>io.kvroute</groupId><artifactId>kvconnector-http</artifactId>
 *   <type>test-jar</type><scope>test</scope>
 * </dependency>
 * }</pre>
 */
public abstract class KVConnectorContract {

  /** The prefill pod. */
  protected MockWebServer prefillServer;

  /** The decode pod. */
  protected MockWebServer decodeServer;

  /** The transport under the connector. */
  protected OkHttpTransport transport;

  /** The scheduler given to the connector. */
  protected ScheduledExecutorService scheduler;

  /** Events the connector reported through {@link ConnectorListener#connectorEvent}. */
  protected final List<String> events = java.util.Collections.synchronizedList(new ArrayList<>());

  /** The connector type under test, e.g. {@code nixl}. */
  protected abstract String type();

  /** The configuration the connector is created with; small timeouts keep failures fast. */
  protected ConnectorConfig config() {
    return ConnectorConfig.of(type())
        .withTimeouts(
            new ConnectorConfig.Timeouts(
                Duration.ofSeconds(10),
                Duration.ofSeconds(10),
                Duration.ofSeconds(5),
                Duration.ofSeconds(5)));
  }

  /**
   * The prefill pod's successful answer for {@code api}. The default is a one-token completion
   * without transfer parameters; NIXL-like connectors return {@code kv_transfer_params}.
   */
  protected MockResponse prefillAnswer(InferenceRequest.Api api) {
    return json(
        200,
        api == InferenceRequest.Api.CHAT_COMPLETIONS
            ? "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
                + "\"message\":{\"role\":\"assistant\",\"content\":\"a\"},\"finish_reason\":\"length\"}]}"
            : "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
                + "\"text\":\"a\",\"finish_reason\":\"length\"}]}");
  }

  /**
   * True when the prefill leg completes before decode starts (NIXL, LMCache, http); false for
   * connectors that run both legs at once (SGLang, Mooncake).
   */
  protected boolean sequential() {
    return true;
  }

  /** Checks the prefill body the connector sent for {@code original}. */
  protected void checkPrefillBody(JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    assertThat(prefill.path("stream").asBoolean(true)).as("prefill stream").isFalse();
    assertThat(prefill.path("max_tokens").asInt()).as("prefill max_tokens").isEqualTo(1);
    assertThat(prefill.has("stream_options")).as("prefill stream_options").isFalse();
    assertThat(prefill.has("min_tokens")).as("prefill min_tokens").isFalse();
  }

  /** Checks the decode body the connector sent for {@code original}. */
  protected void checkDecodeBody(JsonNode decode, JsonNode original) {
    original
        .fieldNames()
        .forEachRemaining(
            f -> {
              if (!OpenAiJson.TRANSFER_FIELDS.contains(f)) {
                assertThat(decode.get(f)).as("decode field " + f).isEqualTo(original.get(f));
              }
            });
  }

  // ---- fixtures -------------------------------------------------------------------------------

  /** Starts the two pods and the transport. */
  @BeforeEach
  protected void startPods() throws IOException {
    prefillServer = new MockWebServer();
    prefillServer.start();
    decodeServer = new MockWebServer();
    decodeServer.start();
    transport = OkHttpTransport.builder().connectTimeout(Duration.ofSeconds(2)).build();
    scheduler = Executors.newSingleThreadScheduledExecutor();
  }

  /** Stops everything. */
  @AfterEach
  protected void stopPods() {
    transport.close();
    scheduler.shutdownNow();
    prefillServer.close();
    decodeServer.close();
  }

  /** A connector of {@link #type()} found through ServiceLoader. */
  protected KVConnector connector() {
    return connector(config());
  }

  /** A connector of {@link #type()} with {@code config}. */
  protected KVConnector connector(ConnectorConfig config) {
    ConnectorListener l =
        new ConnectorListener() {
          @Override
          public void connectorEvent(String connectorType, String event) {
            events.add(event);
          }
        };
    return KVConnectors.discover(getClass().getClassLoader())
        .create(
            KVConnectorProvider.Context.builder(config, transport, scheduler).listener(l).build());
  }

  /** The prefill pod as an endpoint. */
  protected Endpoint prefillEndpoint() {
    return Endpoint.builder("prefill-0", "127.0.0.1", prefillServer.getPort())
        .role(Endpoint.Role.PREFILL)
        .build();
  }

  /** The decode pod as an endpoint. */
  protected Endpoint decodeEndpoint() {
    return Endpoint.builder("decode-0", "127.0.0.1", decodeServer.getPort())
        .role(Endpoint.Role.DECODE)
        .build();
  }

  /** A JSON response. */
  protected static MockResponse json(int code, String body) {
    return new MockResponse.Builder()
        .code(code)
        .setHeader("Content-Type", "application/json")
        .body(body)
        .build();
  }

  /** An SSE response made of {@code events} (each one {@code data: ...}). */
  protected static MockResponse sse(List<String> events, int chunkBytes) {
    StringBuilder sb = new StringBuilder();
    for (String e : events) {
      sb.append("data: ").append(e).append("\n\n");
    }
    sb.append("data: [DONE]\n\n");
    return new MockResponse.Builder()
        .code(200)
        .setHeader("Content-Type", "text/event-stream")
        .chunkedBody(sb.toString(), chunkBytes)
        .build();
  }

  /** A request with headers and a request id. */
  protected static InferenceRequest request(InferenceRequest.Api api, String body) {
    return InferenceRequest.of(
        api,
        body.getBytes(StandardCharsets.UTF_8),
        Map.of("X-Request-Id", List.of("req-1"), "Authorization", List.of("Bearer t")),
        "fallback-id");
  }

  /** Reads a recorded request's body as JSON. */
  protected static JsonNode body(RecordedRequest r) throws IOException {
    return OpenAiJson.readTree(r.getBody().utf8());
  }

  /** The unwrapped cause of a failed future. */
  protected static Throwable failure(CompletableFuture<?> f) {
    try {
      f.get(30, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      return e.getCause();
    } catch (Exception e) {
      throw new AssertionError("future did not fail in time: " + e, e);
    }
    throw new AssertionError("future succeeded, failure expected");
  }

  /** Polls {@code condition} until true or 10 s pass. */
  protected static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting for: " + what);
      }
      TimeUnit.MILLISECONDS.sleep(5);
    }
  }

  private static String readAll(StreamingResponse r) throws Exception {
    return new String(r.readAll(1 << 20).get(30, TimeUnit.SECONDS), StandardCharsets.UTF_8);
  }

  // ---- the contract ---------------------------------------------------------------------------

  @Test
  void providerIsDiscoveredByServiceLoader() {
    KVConnectors all = KVConnectors.discover(getClass().getClassLoader());
    assertThat(all.types()).contains(type());
    assertThat(connector().type()).isEqualTo(type());
  }

  @Test
  void nonStreamingCompletionRunsBothLegsWithOneRequestId() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    String answer = "{\"id\":\"cmpl-2\",\"choices\":[{\"text\":\"hello world\"}]}";
    decodeServer.enqueue(json(200, answer));
    String original =
        "{\"model\":\"m\",\"prompt\":\"Hi there\",\"max_tokens\":20,\"min_tokens\":2,"
            + "\"seed\":12345678901234567890,\"temperature\":0.70}";
    StreamingResponse r =
        connector()
            .proxy(
                new PdRequest(
                    request(InferenceRequest.Api.COMPLETIONS, original),
                    prefillEndpoint(),
                    decodeEndpoint()))
            .get(30, TimeUnit.SECONDS);
    assertThat(r.status()).isEqualTo(200);
    assertThat(readAll(r)).isEqualTo(answer);

    RecordedRequest p = prefillServer.takeRequest(5, TimeUnit.SECONDS);
    RecordedRequest d = decodeServer.takeRequest(5, TimeUnit.SECONDS);
    assertThat(p).as("prefill request").isNotNull();
    assertThat(d).as("decode request").isNotNull();
    assertThat(p.getUrl().encodedPath()).isEqualTo("/v1/completions");
    assertThat(d.getUrl().encodedPath()).isEqualTo("/v1/completions");
    assertThat(p.getHeaders().get("X-Request-Id")).isEqualTo(d.getHeaders().get("X-Request-Id"));
    assertThat(d.getHeaders().get("Authorization")).isEqualTo("Bearer t");
    JsonNode orig = OpenAiJson.readTree(original);
    checkPrefillBody(body(p), orig, InferenceRequest.Api.COMPLETIONS);
    checkDecodeBody(body(d), orig);
    assertThat(d.getBody().utf8()).as("big integers survive").contains("12345678901234567890");
    // The failed leg's response is closed as the failure propagates, possibly just after it.
    await("failed response released", () -> transport.openResponses() == 0);
  }

  @Test
  void streamingChatIsRelayedChunkByChunk() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.CHAT_COMPLETIONS));
    List<String> chunks = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      chunks.add("{\"choices\":[{\"delta\":{\"content\":\"t" + i + "\"}}]}");
    }
    decodeServer.enqueue(sse(chunks, 64));
    String original =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
            + "\"stream\":true,\"stream_options\":{\"include_usage\":true},"
            + "\"max_completion_tokens\":50}";
    StreamingResponse r =
        connector()
            .proxy(
                new PdRequest(
                    request(InferenceRequest.Api.CHAT_COMPLETIONS, original),
                    prefillEndpoint(),
                    decodeEndpoint()))
            .get(30, TimeUnit.SECONDS);
    assertThat(r.contentType())
        .hasValueSatisfying(ct -> assertThat(ct).startsWith("text/event-stream"));
    String all = readAll(r);
    assertThat(all).contains("t0").contains("t49").endsWith("data: [DONE]\n\n");
    RecordedRequest p = prefillServer.takeRequest(5, TimeUnit.SECONDS);
    RecordedRequest d = decodeServer.takeRequest(5, TimeUnit.SECONDS);
    JsonNode orig = OpenAiJson.readTree(original);
    checkPrefillBody(body(p), orig, InferenceRequest.Api.CHAT_COMPLETIONS);
    checkDecodeBody(body(d), orig);
  }

  @Test
  void decodeOnlyRequestSkipsPrefill() throws Exception {
    decodeServer.enqueue(json(200, "{\"ok\":true}"));
    StreamingResponse r =
        connector()
            .proxy(
                PdRequest.decodeOnly(
                    request(InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\"}"),
                    decodeEndpoint()))
            .get(30, TimeUnit.SECONDS);
    assertThat(readAll(r)).isEqualTo("{\"ok\":true}");
    assertThat(prefillServer.getRequestCount()).isZero();
  }

  @Test
  void prefillServerErrorIsRetryableAndNamesThePrefillLeg() throws Exception {
    prefillServer.enqueue(json(503, "{\"error\":\"overloaded\"}"));
    decodeServer.enqueue(json(200, "{}"));
    Throwable t =
        failure(
            connector()
                .proxy(
                    new PdRequest(
                        request(InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\"}"),
                        prefillEndpoint(),
                        decodeEndpoint())));
    assertThat(t).isInstanceOf(UpstreamException.class);
    UpstreamException u = (UpstreamException) t;
    assertThat(u.leg()).isEqualTo(Leg.PREFILL);
    assertThat(u.upstreamStatus()).isEqualTo(503);
    assertThat(u.retryable()).isTrue();
    assertThat(u.endpointId()).isEqualTo("prefill-0");
    if (sequential()) {
      assertThat(decodeServer.getRequestCount()).isZero();
    }
  }

  @Test
  void decodeClientErrorIsReturnedNotRetried() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    decodeServer.enqueue(json(400, "{\"error\":{\"message\":\"max_tokens too large\"}}"));
    Throwable t =
        failure(
            connector()
                .proxy(
                    new PdRequest(
                        request(InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\"}"),
                        prefillEndpoint(),
                        decodeEndpoint())));
    assertThat(t).isInstanceOf(UpstreamException.class);
    UpstreamException u = (UpstreamException) t;
    assertThat(u.leg()).isEqualTo(Leg.DECODE);
    assertThat(u.httpStatus()).isEqualTo(400);
    assertThat(u.retryable()).isFalse();
    assertThat(u.upstreamBody()).hasValueSatisfying(b -> assertThat(b).contains("max_tokens"));
    // The failed leg's response is closed as the failure propagates, possibly just after it.
    await("failed response released", () -> transport.openResponses() == 0);
  }

  @Test
  void invalidJsonIsRejectedBeforeAnyUpstreamCall() {
    KVConnector c = connector();
    for (String bad :
        List.of(
            "{not json", "[1,2,3]", "\"text\"", "", "{\"a\":1} trailing", "{\"a\":1,\"a\":2}")) {
      Throwable t =
          failure(
              c.proxy(
                  new PdRequest(
                      request(InferenceRequest.Api.COMPLETIONS, bad),
                      prefillEndpoint(),
                      decodeEndpoint())));
      assertThat(t).as(bad).isInstanceOf(ConnectorException.InvalidRequestException.class);
      assertThat(((ConnectorException) t).httpStatus()).isEqualTo(400);
    }
    assertThat(prefillServer.getRequestCount()).isZero();
    assertThat(decodeServer.getRequestCount()).isZero();
  }

  @Test
  void oversizedBodyIsRejectedWith413() {
    KVConnector c = connector(config().withParams(Map.of("maxRequestBytes", 1024)));
    String big = "{\"prompt\":\"" + "x".repeat(2000) + "\"}";
    Throwable t =
        failure(
            c.proxy(
                new PdRequest(
                    request(InferenceRequest.Api.COMPLETIONS, big),
                    prefillEndpoint(),
                    decodeEndpoint())));
    assertThat(t).isInstanceOf(ConnectorException.InvalidRequestException.class);
    assertThat(((ConnectorException) t).httpStatus()).isEqualTo(413);
    assertThat(prefillServer.getRequestCount()).isZero();
  }

  @Test
  void hangingPrefillTimesOut() {
    prefillServer.enqueue(
        new MockResponse.Builder().onResponseStart(SocketEffect.Stall.INSTANCE).build());
    decodeServer.enqueue(json(200, "{}"));
    ConnectorConfig cfg =
        config()
            .withTimeouts(
                new ConnectorConfig.Timeouts(
                    Duration.ofMillis(300),
                    Duration.ofMillis(300),
                    Duration.ofSeconds(1),
                    Duration.ofSeconds(1)));
    Throwable t =
        failure(
            connector(cfg)
                .proxy(
                    new PdRequest(
                        request(InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\"}"),
                        prefillEndpoint(),
                        decodeEndpoint())));
    assertThat(t).isInstanceOf(UpstreamException.class);
    assertThat(((UpstreamException) t).kind()).isEqualTo(UpstreamException.Kind.TIMEOUT);
    assertThat(((UpstreamException) t).httpStatus()).isEqualTo(504);
  }

  @Test
  void unreachablePrefillIsAnIoError() throws IOException {
    int closedPort;
    try (ServerSocket s = new ServerSocket(0)) {
      closedPort = s.getLocalPort();
    }
    Endpoint dead =
        Endpoint.builder("dead", "127.0.0.1", closedPort).role(Endpoint.Role.PREFILL).build();
    Throwable t =
        failure(
            connector()
                .proxy(
                    new PdRequest(
                        request(InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\"}"),
                        dead,
                        decodeEndpoint())));
    assertThat(t).isInstanceOf(UpstreamException.class);
    UpstreamException u = (UpstreamException) t;
    assertThat(u.kind()).isEqualTo(UpstreamException.Kind.IO);
    assertThat(u.endpointId()).isEqualTo("dead");
    assertThat(u.retryable()).isTrue();
  }

  @Test
  void cancellingTheStreamCancelsTheDecodeCall() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    List<String> chunks = new ArrayList<>();
    for (int i = 0; i < 2000; i++) {
      chunks.add("{\"choices\":[{\"text\":\"token-" + i + "\"}]}");
    }
    decodeServer.enqueue(
        new MockResponse.Builder(sse(chunks, 128))
            .throttleBody(256, 20, TimeUnit.MILLISECONDS)
            .build());
    StreamingResponse r =
        connector()
            .proxy(
                new PdRequest(
                    request(InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\",\"stream\":true}"),
                    prefillEndpoint(),
                    decodeEndpoint()))
            .get(30, TimeUnit.SECONDS);
    CountDownLatch first = new CountDownLatch(1);
    AtomicReference<Flow.Subscription> sub = new AtomicReference<>();
    r.subscribe(
        new Flow.Subscriber<>() {
          @Override
          public void onSubscribe(Flow.Subscription s) {
            sub.set(s);
            s.request(1);
          }

          @Override
          public void onNext(ByteBuffer item) {
            first.countDown();
          }

          @Override
          public void onError(Throwable throwable) {}

          @Override
          public void onComplete() {}
        });
    assertThat(first.await(10, TimeUnit.SECONDS)).isTrue();
    sub.get().cancel();
    await("upstream stream released", () -> transport.openResponses() == 0);
  }

  @Test
  void cancellingDuringPrefillCancelsItAndSkipsDecode() throws Exception {
    prefillServer.enqueue(
        new MockResponse.Builder().onResponseStart(SocketEffect.Stall.INSTANCE).build());
    decodeServer.enqueue(json(200, "{}"));
    CompletableFuture<StreamingResponse> f =
        connector()
            .proxy(
                new PdRequest(
                    request(InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\"}"),
                    prefillEndpoint(),
                    decodeEndpoint()));
    await("prefill received", () -> prefillServer.getRequestCount() == 1);
    f.cancel(true);
    await("prefill call cancelled", () -> transport.callsAwaitingHead() == 0);
    if (sequential()) {
      assertThat(decodeServer.getRequestCount()).isZero();
    }
  }

  @Test
  void decodeClosingMidStreamReachesTheSubscriberAsAnError() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    try (ServerSocket raw = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      Thread server =
          new Thread(
              () -> {
                // One chunk of an SSE stream, then the connection drops without the last chunk.
                try (java.net.Socket s = raw.accept()) {
                  readRequest(s.getInputStream());
                  String chunk = "data: {\"choices\":[{\"text\":\"partial\"}]}\n\n";
                  String head =
                      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          + "Transfer-Encoding: chunked\r\n\r\n"
                          + Integer.toHexString(chunk.length())
                          + "\r\n"
                          + chunk
                          + "\r\n";
                  s.getOutputStream().write(head.getBytes(StandardCharsets.UTF_8));
                  s.getOutputStream().flush();
                } catch (IOException e) {
                  // the test fails on its own assertions
                }
              },
              "raw-decode");
      server.setDaemon(true);
      server.start();
      Endpoint decode =
          Endpoint.builder("decode-raw", "127.0.0.1", raw.getLocalPort())
              .role(Endpoint.Role.DECODE)
              .build();
      StreamingResponse r =
          connector()
              .proxy(
                  new PdRequest(
                      request(
                          InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\",\"stream\":true}"),
                      prefillEndpoint(),
                      decode))
              .get(30, TimeUnit.SECONDS);
      Throwable t = failure(r.readAll(1 << 20));
      assertThat(t).isInstanceOf(UpstreamException.class);
      assertThat(((UpstreamException) t).leg()).isEqualTo(Leg.DECODE);
      assertThat(((UpstreamException) t).endpointId()).isEqualTo("decode-raw");
      await("stream released", () -> transport.openResponses() == 0);
      server.join(10_000);
    }
  }

  /** Reads an HTTP/1.1 request head and its Content-Length body from {@code in}. */
  public static void readRequest(java.io.InputStream in) throws IOException {
    StringBuilder head = new StringBuilder();
    while (!head.toString().endsWith("\r\n\r\n")) {
      int c = in.read();
      if (c < 0) {
        return;
      }
      head.append((char) c);
    }
    int length = 0;
    for (String line : head.toString().split("\r\n")) {
      if (line.toLowerCase(java.util.Locale.ROOT).startsWith("content-length:")) {
        length = Integer.parseInt(line.substring(15).trim());
      }
    }
    in.readNBytes(length);
  }

  @Test
  void clientSuppliedTransferFieldsNeverReachThePods() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    decodeServer.enqueue(json(200, "{}"));
    String original =
        "{\"prompt\":\"x\",\"kv_transfer_params\":{\"remote_host\":\"evil.example\"},"
            + "\"bootstrap_host\":\"evil.example\",\"disaggregated_params\":{\"x\":1}}";
    InferenceRequest req =
        InferenceRequest.of(
            InferenceRequest.Api.COMPLETIONS,
            original.getBytes(StandardCharsets.UTF_8),
            Map.of("x-prefiller-host-port", List.of("evil.example:80")),
            "id-1");
    readAll(
        connector()
            .proxy(new PdRequest(req, prefillEndpoint(), decodeEndpoint()))
            .get(30, TimeUnit.SECONDS));
    RecordedRequest p = prefillServer.takeRequest(5, TimeUnit.SECONDS);
    RecordedRequest d = decodeServer.takeRequest(5, TimeUnit.SECONDS);
    assertThat(p.getBody().utf8()).doesNotContain("evil.example");
    assertThat(d.getBody().utf8()).doesNotContain("evil.example");
    assertThat(p.getHeaders().get("x-prefiller-host-port")).isNull();
    assertThat(d.getHeaders().get("x-prefiller-host-port")).isNull();
  }

  @Test
  void twoPhaseFormReturnsTheDecodeRequest() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    KVConnector.DecodeRequest d =
        connector()
            .prepareDecode(
                new PdRequest(
                    request(
                        InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":5}"),
                    prefillEndpoint(),
                    decodeEndpoint()))
            .get(30, TimeUnit.SECONDS);
    assertThat(d.endpoint()).isEqualTo(decodeEndpoint());
    assertThat(d.url()).isEqualTo(decodeEndpoint().baseUrl() + "/v1/completions");
    assertThat(d.headers().get("X-Request-Id")).containsExactly("req-1");
    JsonNode body = OpenAiJson.readTree(d.body());
    assertThat(body.path("max_tokens").asInt()).isEqualTo(5);
    assertThatThrownBy(() -> d.headers().put("x", List.of()))
        .isInstanceOf(UnsupportedOperationException.class);
  }
}
