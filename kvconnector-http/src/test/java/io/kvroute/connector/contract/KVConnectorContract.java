package io.kvroute.connector.contract;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.EngineUsage;
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
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.Flow;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import mockwebserver3.Dispatcher;
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
 * where its protocol differs (the prefill answer it needs, the transfer fields its legs carry, what
 * else its legs' bodies hold, whether both legs run at once). Shipped in {@code kvconnector-http}'s
 * test-jar, with its fixtures ({@link #json}, {@link #failure}, {@link #await}, {@link
 * DroppingPod}) for other tests over real pods:
 *
 * <pre>{@code
 * <dependency>
 *   <groupId>io.kvroute</groupId><artifactId>kvconnector-http</artifactId>
 *   <type>test-jar</type><scope>test</scope>
 * </dependency>
 * }</pre>
 */
public abstract class KVConnectorContract {

  /** The smallest valid completion body. */
  protected static final String PROMPT_X = "{\"prompt\":\"x\"}";

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

  /** The usage block of {@link #prefillAnswer}: 7 prompt tokens, 3 of them cached. */
  protected static final String USAGE =
      "\"usage\":{\"prompt_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":3}}";

  /**
   * The prefill pod's successful answer for {@code api}: a one-token completion with a usage block
   * ({@link #USAGE}), without transfer parameters.
   */
  protected MockResponse prefillAnswer(InferenceRequest.Api api) {
    return json(
        200,
        api == InferenceRequest.Api.CHAT_COMPLETIONS
            ? "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
                + "\"message\":{\"role\":\"assistant\",\"content\":\"a\"},\"finish_reason\":\"length\"}],"
                + USAGE
                + "}"
            : "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
                + "\"text\":\"a\",\"finish_reason\":\"length\"}],"
                + USAGE
                + "}");
  }

  /**
   * True when the prefill leg completes before decode starts (NIXL, LMCache, http); false for
   * connectors that run both legs at once (SGLang, Mooncake).
   */
  protected boolean sequential() {
    return true;
  }

  /**
   * True when the connector serves a request without a prefill endpoint by sending it to decode
   * alone (every connector but those whose engines cannot run without a prefill, such as {@code
   * p2pnccl}); false: such a request fails with {@code NoAvailableEndpointException} and nothing is
   * sent.
   */
  protected boolean servesDecodeOnly() {
    return true;
  }

  /**
   * Checks the {@code X-Request-Id} both legs carried for a request whose own id is {@code
   * requestId}: that id itself by default; connectors that address the transfer through the id
   * ({@code p2pnccl}) check their own form.
   */
  protected void checkRequestId(String sent, String requestId) {
    assertThat(sent).as("X-Request-Id").isEqualTo(requestId);
  }

  /**
   * Which of {@link OpenAiJson#TRANSFER_FIELDS} the connector puts on both legs' bodies (none by
   * default); the contract checks that exactly these are there.
   */
  protected Set<String> transferFields() {
    return Set.of();
  }

  /**
   * Checks what else the connector's prefill body for {@code original} must hold, after the
   * contract's own checks passed (none by default).
   */
  protected void checkConnectorPrefill(
      JsonNode prefill, JsonNode original, InferenceRequest.Api api) {}

  /**
   * Checks what else the connector's decode body for {@code original} must hold, after the
   * contract's own checks passed (none by default).
   */
  protected void checkConnectorDecode(JsonNode decode, JsonNode original) {}

  /** Checks the prefill body the connector sent for {@code original}. */
  private void checkPrefillBody(JsonNode prefill, JsonNode original, InferenceRequest.Api api) {
    assertThat(prefill.path("stream").asBoolean(true)).as("prefill stream").isFalse();
    assertThat(prefill.path("max_tokens").asInt()).as("prefill max_tokens").isEqualTo(1);
    assertThat(prefill.has("stream_options")).as("prefill stream_options").isFalse();
    assertThat(prefill.has("min_tokens")).as("prefill min_tokens").isFalse();
    assertThat(prefill.has("min_completion_tokens")).as("prefill min_completion_tokens").isFalse();
    if (original.has("max_completion_tokens")) {
      assertThat(prefill.path("max_completion_tokens").asInt())
          .as("prefill max_completion_tokens")
          .isEqualTo(1);
    }
    checkTransferFields("prefill", prefill);
    checkConnectorPrefill(prefill, original, api);
  }

  /** Checks the decode body the connector sent for {@code original}. */
  private void checkDecodeBody(JsonNode decode, JsonNode original) {
    original
        .fieldNames()
        .forEachRemaining(
            f -> {
              if (!OpenAiJson.TRANSFER_FIELDS.contains(f)) {
                assertThat(decode.get(f)).as("decode field " + f).isEqualTo(original.get(f));
              }
            });
    checkTransferFields("decode", decode);
    checkConnectorDecode(decode, original);
  }

  private void checkTransferFields(String leg, JsonNode body) {
    for (String f : OpenAiJson.TRANSFER_FIELDS) {
      assertThat(body.has(f)).as(leg + " " + f).isEqualTo(transferFields().contains(f));
    }
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

  /** {@link #request} for {@code api} and {@code body}, to the prefill pod and the decode pod. */
  protected PdRequest pd(InferenceRequest.Api api, String body) {
    return new PdRequest(request(api, body), prefillEndpoint(), decodeEndpoint());
  }

  /** {@link #pd(InferenceRequest.Api, String)} for a completion. */
  protected PdRequest pd(String completionBody) {
    return pd(InferenceRequest.Api.COMPLETIONS, completionBody);
  }

  /** {@code pd} proxied by {@code c}: the response, once its head is in. */
  protected static StreamingResponse proxied(KVConnector c, PdRequest pd) throws Exception {
    return c.proxy(pd).get(30, TimeUnit.SECONDS);
  }

  /** {@code pd} proxied by {@code c}, which must fail: the unwrapped cause. */
  protected static Throwable proxyFailure(KVConnector c, PdRequest pd) {
    return failure(c.proxy(pd));
  }

  /** The two-phase form: the decode request {@code c} prepares for {@code pd}. */
  protected static KVConnector.DecodeRequest prepared(KVConnector c, PdRequest pd)
      throws Exception {
    return c.prepareDecode(pd).get(30, TimeUnit.SECONDS);
  }

  /**
   * Proxies {@code pd} through {@code c} with the prefill pod giving {@link #prefillAnswer} and the
   * decode pod an empty object, reads the answer whole, and returns what the pods received.
   */
  protected Legs exchange(KVConnector c, PdRequest pd) throws Exception {
    prefillServer.enqueue(prefillAnswer(pd.request().api()));
    decodeServer.enqueue(json(200, "{}"));
    text(proxied(c, pd));
    return takeLegs();
  }

  /** The requests the two pods received next, prefill first; both must have come. */
  protected Legs takeLegs() throws InterruptedException {
    RecordedRequest p = prefillServer.takeRequest(5, TimeUnit.SECONDS);
    RecordedRequest d = decodeServer.takeRequest(5, TimeUnit.SECONDS);
    assertThat(p).as("prefill request").isNotNull();
    assertThat(d).as("decode request").isNotNull();
    return new Legs(p, d);
  }

  /** What the prefill pod and the decode pod received for one request. */
  protected record Legs(RecordedRequest prefill, RecordedRequest decode) {
    /** The prefill body as sent. */
    public String prefillBody() {
      return prefill.getBody().utf8();
    }

    /** The decode body as sent. */
    public String decodeBody() {
      return decode.getBody().utf8();
    }

    /** Header {@code name} as each leg carried it, prefill first (null where absent). */
    public List<String> header(String name) {
      return Arrays.asList(prefill.getHeaders().get(name), decode.getHeaders().get(name));
    }
  }

  /** A JSON response. */
  public static MockResponse json(int code, String body) {
    return new MockResponse.Builder()
        .code(code)
        .setHeader("Content-Type", "application/json")
        .body(body)
        .build();
  }

  /** A response that never starts: the pod holds the request. */
  public static MockResponse stalled() {
    return new MockResponse.Builder().onResponseStart(SocketEffect.Stall.INSTANCE).build();
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

  /**
   * A chat body: model {@code m}, one user message {@code hi}, then {@code fields} (a JSON object's
   * members, may be empty).
   */
  protected static String chatBody(String fields) {
    return "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
        + (fields.isEmpty() ? "" : "," + fields)
        + "}";
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
  public static Throwable failure(CompletableFuture<?> f) {
    try {
      f.get(30, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      return e.getCause();
    } catch (Exception e) {
      throw new AssertionError("future did not fail in time: " + e, e);
    }
    throw new AssertionError("future succeeded, failure expected");
  }

  /** {@code t}, which must be an {@link UpstreamException}. */
  protected static UpstreamException upstream(Throwable t) {
    assertThat(t).isInstanceOf(UpstreamException.class);
    return (UpstreamException) t;
  }

  /** Polls {@code condition} until true or 10 s pass. */
  public static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting for: " + what);
      }
      TimeUnit.MILLISECONDS.sleep(5);
    }
  }

  /** A response's whole body as text. */
  protected static String text(StreamingResponse r) throws Exception {
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
    StreamingResponse r = proxied(connector(), pd(original));
    assertThat(r.status()).isEqualTo(200);
    assertThat(text(r)).isEqualTo(answer);

    Legs legs = takeLegs();
    assertThat(legs.prefill().getUrl().encodedPath()).isEqualTo("/v1/completions");
    assertThat(legs.decode().getUrl().encodedPath()).isEqualTo("/v1/completions");
    List<String> ids = legs.header("X-Request-Id");
    assertThat(ids.get(0)).isEqualTo(ids.get(1));
    checkRequestId(ids.get(0), "req-1");
    assertThat(legs.decode().getHeaders().get("Authorization")).isEqualTo("Bearer t");
    JsonNode orig = OpenAiJson.readTree(original);
    checkPrefillBody(body(legs.prefill()), orig, InferenceRequest.Api.COMPLETIONS);
    checkDecodeBody(body(legs.decode()), orig);
    assertThat(legs.decodeBody()).as("big integers survive").contains("12345678901234567890");
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
        chatBody(
            "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_completion_tokens\":50");
    StreamingResponse r = proxied(connector(), pd(InferenceRequest.Api.CHAT_COMPLETIONS, original));
    assertThat(r.contentType())
        .hasValueSatisfying(ct -> assertThat(ct).startsWith("text/event-stream"));
    String all = text(r);
    assertThat(all).contains("t0").contains("t49").endsWith("data: [DONE]\n\n");
    Legs legs = takeLegs();
    JsonNode orig = OpenAiJson.readTree(original);
    checkPrefillBody(body(legs.prefill()), orig, InferenceRequest.Api.CHAT_COMPLETIONS);
    checkDecodeBody(body(legs.decode()), orig);
  }

  @Test
  void decodeOnlyRequestSkipsPrefill() throws Exception {
    decodeServer.enqueue(json(200, "{\"ok\":true}"));
    PdRequest decodeOnly =
        PdRequest.decodeOnly(request(InferenceRequest.Api.COMPLETIONS, PROMPT_X), decodeEndpoint());
    if (!servesDecodeOnly()) {
      assertThat(proxyFailure(connector(), decodeOnly))
          .isInstanceOf(ConnectorException.NoAvailableEndpointException.class);
      assertThat(decodeServer.getRequestCount()).isZero();
      assertThat(prefillServer.getRequestCount()).isZero();
      return;
    }
    StreamingResponse r = proxied(connector(), decodeOnly);
    assertThat(text(r)).isEqualTo("{\"ok\":true}");
    assertThat(prefillServer.getRequestCount()).isZero();
  }

  @Test
  void prefillServerErrorIsRetryableAndNamesThePrefillLeg() throws Exception {
    prefillServer.enqueue(json(503, "{\"error\":\"overloaded\"}"));
    decodeServer.enqueue(json(200, "{}"));
    UpstreamException u = upstream(proxyFailure(connector(), pd(PROMPT_X)));
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
    UpstreamException u = upstream(proxyFailure(connector(), pd(PROMPT_X)));
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
      Throwable t = proxyFailure(c, pd(bad));
      assertThat(t).as(bad).isInstanceOf(ConnectorException.InvalidRequestException.class);
      assertThat(((ConnectorException) t).httpStatus()).isEqualTo(400);
    }
    assertThat(prefillServer.getRequestCount()).isZero();
    assertThat(decodeServer.getRequestCount()).isZero();
  }

  @Test
  void everyAttemptOfARequestReadsItsOneParse() throws Exception {
    KVConnector c = connector();
    PdRequest first = pd(PROMPT_X);
    PdRequest retry =
        new PdRequest(
            first.request().withRequestId(first.request().requestId() + "-r2"),
            first.prefill(),
            first.decode());
    long before = OpenAiJson.clientBodiesParsed();
    exchange(c, first);
    exchange(c, retry);
    assertThat(OpenAiJson.clientBodiesParsed() - before).as("client bodies parsed").isEqualTo(1);
  }

  @Test
  void thePrefillAnswersUsageComesUpWithTheResponse() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    decodeServer.enqueue(json(200, "{}"));
    StreamingResponse r = proxied(connector(), pd(PROMPT_X));
    text(r);
    assertThat(r.prefillUsage()).contains(new EngineUsage(7, 3));
  }

  /**
   * A misspelt parameter does not start a connector that ignores it: the connector declares its
   * parameters, and an unknown key is refused with the closest known one, by {@link
   * KVConnectorProvider#checkParameters} as by {@link KVConnectorProvider#create}.
   */
  @Test
  void anUnknownParameterIsRefusedWithTheClosestKnownOne() {
    ConnectorConfig misspelt = config().withParams(Map.of("maxPrefillResponseByte", 1024));
    assertThatThrownBy(() -> connector(misspelt))
        .isInstanceOf(io.kvroute.connector.ConnectorConfigException.class)
        .hasMessageStartingWith("kvConnector.config.maxPrefillResponseByte: ")
        .hasMessageContaining("did you mean \"maxPrefillResponseBytes\"");
    KVConnectorProvider provider =
        KVConnectors.discover(getClass().getClassLoader()).provider(type());
    assertThatThrownBy(() -> provider.checkParameters(misspelt))
        .isInstanceOf(io.kvroute.connector.ConnectorConfigException.class)
        .hasMessageContaining("did you mean \"maxPrefillResponseBytes\"");
    assertThat(provider.parameters()).as("declared parameters").isPresent();
    provider.checkParameters(config());
  }

  @Test
  void hangingPrefillTimesOut() {
    prefillServer.enqueue(stalled());
    decodeServer.enqueue(json(200, "{}"));
    ConnectorConfig cfg =
        config()
            .withTimeouts(
                new ConnectorConfig.Timeouts(
                    Duration.ofMillis(300),
                    Duration.ofMillis(300),
                    Duration.ofSeconds(1),
                    Duration.ofSeconds(1)));
    UpstreamException u = upstream(proxyFailure(connector(cfg), pd(PROMPT_X)));
    assertThat(u.kind()).isEqualTo(UpstreamException.Kind.TIMEOUT);
    assertThat(u.httpStatus()).isEqualTo(504);
  }

  @Test
  void unreachablePrefillIsAnIoError() throws IOException {
    int closedPort;
    try (ServerSocket s = new ServerSocket(0)) {
      closedPort = s.getLocalPort();
    }
    Endpoint dead =
        Endpoint.builder("dead", "127.0.0.1", closedPort).role(Endpoint.Role.PREFILL).build();
    UpstreamException u =
        upstream(
            proxyFailure(
                connector(),
                new PdRequest(
                    request(InferenceRequest.Api.COMPLETIONS, PROMPT_X), dead, decodeEndpoint())));
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
    StreamingResponse r = proxied(connector(), pd("{\"prompt\":\"x\",\"stream\":true}"));
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
    prefillServer.enqueue(stalled());
    decodeServer.enqueue(json(200, "{}"));
    CompletableFuture<StreamingResponse> f = connector().proxy(pd(PROMPT_X));
    await("prefill received", () -> prefillServer.getRequestCount() == 1);
    f.cancel(true);
    await("prefill call cancelled", () -> transport.callsAwaitingHead() == 0);
    if (sequential()) {
      assertThat(decodeServer.getRequestCount()).isZero();
    }
  }

  /**
   * {@link #sequential()} tells the truth: a sequential connector sends decode only once the
   * prefill answer is in; the others have both legs in flight at once (the prefill pod answers only
   * after decode has arrived, so a connector that waited for it would fail here).
   */
  @Test
  void legsOverlapExactlyWhenNotSequential() throws Exception {
    CountDownLatch decodeArrived = new CountDownLatch(1);
    AtomicBoolean prefillAnswered = new AtomicBoolean();
    AtomicBoolean decodeCameAfterPrefill = new AtomicBoolean();
    decodeServer.setDispatcher(
        new Dispatcher() {
          @Override
          public MockResponse dispatch(RecordedRequest r) {
            decodeCameAfterPrefill.set(prefillAnswered.get());
            decodeArrived.countDown();
            return json(200, "{\"ok\":true}");
          }
        });
    prefillServer.setDispatcher(
        new Dispatcher() {
          @Override
          public MockResponse dispatch(RecordedRequest r) throws InterruptedException {
            if (!sequential() && !decodeArrived.await(10, TimeUnit.SECONDS)) {
              return json(500, "{\"error\":\"decode never came\"}");
            }
            prefillAnswered.set(true);
            return prefillAnswer(InferenceRequest.Api.COMPLETIONS);
          }
        });
    assertThat(text(proxied(connector(), pd(PROMPT_X)))).contains("ok");
    assertThat(decodeCameAfterPrefill.get())
        .as("decode sent after the prefill answer")
        .isEqualTo(sequential());
  }

  @Test
  void decodeClosingMidStreamReachesTheSubscriberAsAnError() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    // One chunk of an SSE stream, then the connection drops without the last chunk.
    try (DroppingPod raw = new DroppingPod("data: {\"choices\":[{\"text\":\"partial\"}]}\n\n")) {
      StreamingResponse r =
          proxied(
              connector(),
              new PdRequest(
                  request(InferenceRequest.Api.COMPLETIONS, "{\"prompt\":\"x\",\"stream\":true}"),
                  prefillEndpoint(),
                  raw.endpoint("decode-raw", Endpoint.Role.DECODE)));
      UpstreamException u = upstream(failure(r.readAll(1 << 20)));
      assertThat(u.leg()).isEqualTo(Leg.DECODE);
      assertThat(u.endpointId()).isEqualTo("decode-raw");
      await("stream released", () -> transport.openResponses() == 0);
    }
  }

  @Test
  void clientSuppliedTransferFieldsNeverReachThePods() throws Exception {
    String original =
        "{\"prompt\":\"x\",\"kv_transfer_params\":{\"remote_host\":\"evil.example\"},"
            + "\"bootstrap_host\":\"evil.example\",\"disaggregated_params\":{\"x\":1}}";
    InferenceRequest req =
        InferenceRequest.of(
            InferenceRequest.Api.COMPLETIONS,
            original.getBytes(StandardCharsets.UTF_8),
            Map.of("x-prefiller-host-port", List.of("evil.example:80")),
            "id-1");
    Legs legs = exchange(connector(), new PdRequest(req, prefillEndpoint(), decodeEndpoint()));
    assertThat(legs.prefillBody()).doesNotContain("evil.example");
    assertThat(legs.decodeBody()).doesNotContain("evil.example");
    assertThat(legs.header("x-prefiller-host-port")).containsOnlyNulls();
  }

  @Test
  void twoPhaseFormReturnsTheDecodeRequest() throws Exception {
    prefillServer.enqueue(prefillAnswer(InferenceRequest.Api.COMPLETIONS));
    KVConnector.DecodeRequest d = prepared(connector(), pd("{\"prompt\":\"x\",\"max_tokens\":5}"));
    assertThat(d.endpoint()).isEqualTo(decodeEndpoint());
    assertThat(d.url()).isEqualTo(decodeEndpoint().baseUrl() + "/v1/completions");
    assertThat(d.headers().get("X-Request-Id")).hasSize(1);
    checkRequestId(d.headers().get("X-Request-Id").get(0), "req-1");
    JsonNode body = OpenAiJson.readTree(d.body());
    assertThat(body.path("max_tokens").asInt()).isEqualTo(5);
    assertThatThrownBy(() -> d.headers().put("x", List.of()))
        .isInstanceOf(UnsupportedOperationException.class);
  }
}
