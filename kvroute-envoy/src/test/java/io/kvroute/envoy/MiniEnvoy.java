package io.kvroute.envoy;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.Channel;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.envoy.EndpointPicker.BodyMode;
import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * A small Envoy for tests: it runs one HTTP request through the ext_proc filter the way Envoy does
 * in the configured body modes (messages in Envoy's order, answers checked against what each mode
 * requires), applies the header mutations, forwards the request to the picked endpoint over real
 * HTTP — or, when the picker asks for a prefill, through an llm-d-style decode sidecar made of the
 * NIXL connector — and streams the response back through the filter.
 */
final class MiniEnvoy {
  private static final Set<String> RESTRICTED =
      Set.of("content-length", "host", "connection", "expect", "upgrade", "te", "trailer");

  private final Channel channel;
  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(10))
          .build();
  private final KVConnector sidecar;

  /**
   * How Envoy is configured for one request.
   *
   * @param request the request body mode
   * @param response the response body mode
   * @param announce whether Envoy names its modes in {@code protocol_config}
   * @param requestTrailers whether the client request ends with trailers
   * @param servedIndex which of the picked endpoints Envoy ends up using (a retry)
   */
  record Mode(
      BodyMode request,
      BodyMode response,
      boolean announce,
      boolean requestTrailers,
      int servedIndex) {
    static Mode of(BodyMode both) {
      return new Mode(both, both, true, false, 0);
    }

    Mode unannounced() {
      return new Mode(request, response, false, requestTrailers, servedIndex);
    }

    Mode withTrailers() {
      return new Mode(request, response, announce, true, servedIndex);
    }

    Mode servedBy(int index) {
      return new Mode(request, response, announce, requestTrailers, index);
    }
  }

  /** What happened to one request. */
  static final class Exchange {
    ImmediateResponse immediate;
    final List<ProcessingResponse> requestAnswers = new ArrayList<>();
    final List<ProcessingResponse> responseAnswers = new ArrayList<>();
    Map<String, String> setHeaders = Map.of();
    List<String> removedHeaders = List.of();
    Map<String, String> forwardedHeaders = Map.of();
    byte[] forwardedBody;
    List<String> destinations = List.of();
    String target;
    ProcessingResponse routingAnswer;
    int status;
    String contentType;
    byte[] upstreamBody;
    byte[] clientBody;
    Map<String, String> responseHeaderMutations = Map.of();
    EnvoyReplay stream;

    String clientText() {
      return new String(clientBody, java.nio.charset.StandardCharsets.UTF_8);
    }

    /** {@code ns.key} in the dynamic metadata of the last response-side answer that has any. */
    String usageFact(String key) {
      for (int i = responseAnswers.size() - 1; i >= 0; i--) {
        ProcessingResponse r = responseAnswers.get(i);
        if (r.hasDynamicMetadata()) {
          return EnvoyReplay.dynamic(r, EndpointPicker.KVROUTE_NAMESPACE, key);
        }
      }
      return null;
    }
  }

  MiniEnvoy(Channel channel, KVConnector sidecar) {
    this.channel = channel;
    this.sidecar = sidecar;
  }

  /** Runs {@code body} to {@code path} through the filter and the picked endpoint. */
  Exchange post(String path, String body, Map<String, String> extraHeaders, Mode mode, Metadata md)
      throws Exception {
    byte[] bytes = body.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    Exchange x = new Exchange();
    EnvoyReplay s = EnvoyReplay.open(channel);
    x.stream = s;
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put(":method", "POST");
    headers.put(":path", path);
    headers.put(":authority", "gateway.example");
    headers.put(":scheme", "http");
    headers.put("content-type", "application/json");
    headers.putAll(extraHeaders);
    ProtocolConfiguration pc =
        mode.announce()
            ? EnvoyReplay.protocol(proto(mode.request()), proto(mode.response()), true)
            : null;
    s.send(EnvoyReplay.requestHeaders(headers, false, md, pc));
    if (!requestPhase(s, x, bytes, mode)) {
      return x;
    }
    applyMutations(x, headers);
    forward(x, path, mode);
    responsePhase(s, x, mode);
    s.halfClose();
    assertThat(s.awaitClosed()).as("the picker ends the stream after Envoy does").isTrue();
    return x;
  }

  /**
   * The streamed modes: the whole body (and trailers) goes out before any answer, then the picker
   * routes in its answer to the headers. False when it answered with an immediate response instead.
   */
  private static boolean sendBodyThenRoute(
      EnvoyReplay s, Exchange x, List<byte[]> chunks, Mode mode) {
    for (int i = 0; i < chunks.size(); i++) {
      boolean last = i == chunks.size() - 1;
      s.send(EnvoyReplay.requestBody(chunks.get(i), last && !mode.requestTrailers()));
    }
    if (mode.requestTrailers()) {
      s.send(EnvoyReplay.requestTrailers());
    }
    ProcessingResponse h = s.next();
    if (immediate(s, x, h)) {
      return false;
    }
    expectRouting(x, h, ResponseCase.REQUEST_HEADERS);
    return true;
  }

  /** The request phase; false when the picker answered with an immediate response. */
  private boolean requestPhase(EnvoyReplay s, Exchange x, byte[] body, Mode mode) {
    List<byte[]> chunks = split(body, 3);
    switch (mode.request()) {
      case NONE:
        {
          ProcessingResponse a = s.next();
          if (immediate(s, x, a)) {
            return false;
          }
          expectRouting(x, a, ResponseCase.REQUEST_HEADERS);
          x.forwardedBody = body;
          return true;
        }
      case BUFFERED:
      case BUFFERED_PARTIAL:
        {
          ProcessingResponse h = s.next();
          if (immediate(s, x, h)) {
            return false;
          }
          assertThat(h.getResponseCase()).isEqualTo(ResponseCase.REQUEST_HEADERS);
          assertThat(h.getRequestHeaders().getResponse().getHeaderMutation().getSetHeadersCount())
              .as("buffered: headers pass before the body is seen")
              .isZero();
          x.requestAnswers.add(h);
          s.send(EnvoyReplay.requestBody(body, !mode.requestTrailers()));
          ProcessingResponse b = s.next();
          if (immediate(s, x, b)) {
            return false;
          }
          expectRouting(x, b, ResponseCase.REQUEST_BODY);
          assertThat(b.getRequestBody().getResponse().hasBodyMutation()).isFalse();
          if (mode.requestTrailers()) {
            s.send(EnvoyReplay.requestTrailers());
            x.requestAnswers.add(s.next(ResponseCase.REQUEST_TRAILERS));
          }
          x.forwardedBody = body;
          return true;
        }
      case STREAMED:
        {
          if (!sendBodyThenRoute(s, x, chunks, mode)) {
            return false;
          }
          for (int i = 0; i < chunks.size(); i++) {
            ProcessingResponse b = s.next(ResponseCase.REQUEST_BODY);
            assertThat(b.getRequestBody().getResponse().hasBodyMutation())
                .as("streamed: chunks pass unchanged")
                .isFalse();
            x.requestAnswers.add(b);
          }
          if (mode.requestTrailers()) {
            x.requestAnswers.add(s.next(ResponseCase.REQUEST_TRAILERS));
          }
          x.forwardedBody = body;
          return true;
        }
      case FULL_DUPLEX_STREAMED:
      default:
        {
          if (!sendBodyThenRoute(s, x, chunks, mode)) {
            return false;
          }
          ByteArrayOutputStream forwarded = new ByteArrayOutputStream();
          while (true) {
            ProcessingResponse b = s.next();
            if (b.getResponseCase() == ResponseCase.REQUEST_TRAILERS) {
              assertThat(mode.requestTrailers()).isTrue();
              x.requestAnswers.add(b);
              break;
            }
            assertThat(b.getResponseCase()).isEqualTo(ResponseCase.REQUEST_BODY);
            x.requestAnswers.add(b);
            var sr = b.getRequestBody().getResponse().getBodyMutation().getStreamedResponse();
            assertThat(sr.getBody().size()).isLessThanOrEqualTo(62_000);
            forwarded.writeBytes(sr.getBody().toByteArray());
            if (sr.getEndOfStream()) {
              assertThat(mode.requestTrailers()).as("eos only without trailers").isFalse();
              break;
            }
          }
          x.forwardedBody = forwarded.toByteArray();
          return true;
        }
    }
  }

  private static boolean immediate(EnvoyReplay s, Exchange x, ProcessingResponse a) {
    if (a.getResponseCase() != ResponseCase.IMMEDIATE_RESPONSE) {
      return false;
    }
    x.immediate = a.getImmediateResponse();
    assertThat(s.awaitClosed())
        .as("the picker ends the stream after an immediate response")
        .isTrue();
    return true;
  }

  private static void expectRouting(Exchange x, ProcessingResponse a, ResponseCase kind) {
    assertThat(a.getResponseCase()).as("routing answer %s", a).isEqualTo(kind);
    CommonResponse c =
        kind == ResponseCase.REQUEST_HEADERS
            ? a.getRequestHeaders().getResponse()
            : a.getRequestBody().getResponse();
    assertThat(c.getClearRouteCache()).as("route cache cleared for the new header").isTrue();
    HeaderMutation m = c.getHeaderMutation();
    x.setHeaders = EnvoyReplay.setHeaders(m);
    x.removedHeaders = m.getRemoveHeadersList();
    String dest = x.setHeaders.get(EndpointPicker.DESTINATION_ENDPOINT_HEADER);
    assertThat(dest).as("destination header").isNotBlank();
    assertThat(EnvoyReplay.dynamic(a, "envoy.lb", EndpointPicker.DESTINATION_ENDPOINT_HEADER))
        .as("the metadata and the header name the same endpoints")
        .isEqualTo(dest);
    x.destinations = List.of(dest.split(","));
    x.routingAnswer = a;
    x.requestAnswers.add(a);
  }

  private static void applyMutations(Exchange x, Map<String, String> original) {
    Map<String, String> h = new LinkedHashMap<>(original);
    x.removedHeaders.forEach(r -> h.remove(r.toLowerCase(Locale.ROOT)));
    h.putAll(x.setHeaders);
    x.forwardedHeaders = h;
  }

  private void forward(Exchange x, String path, Mode mode) throws Exception {
    x.target = x.destinations.get(Math.min(mode.servedIndex(), x.destinations.size() - 1));
    String prefill = x.forwardedHeaders.get("x-prefiller-host-port");
    if (prefill != null && sidecar != null) {
      // The decode pod's sidecar: prefill where the header says, then decode here.
      Map<String, List<String>> h = new LinkedHashMap<>();
      x.forwardedHeaders.forEach(
          (k, v) -> {
            if (!k.startsWith(":")) {
              h.put(k, List.of(v));
            }
          });
      InferenceRequest r =
          InferenceRequest.of(
              InferenceRequest.Api.fromPath(path).orElseThrow(), x.forwardedBody, h, "sidecar-1");
      StreamingResponse resp =
          sidecar
              .proxy(
                  new KVConnector.PdRequest(
                      r,
                      Endpoint.of("http://" + prefill, Endpoint.Role.PREFILL),
                      Endpoint.of("http://" + x.target, Endpoint.Role.DECODE)))
              .get(30, TimeUnit.SECONDS);
      x.status = resp.status();
      x.contentType = resp.contentType().orElse("application/json");
      x.upstreamBody = resp.readAll(1 << 22).get(30, TimeUnit.SECONDS);
      return;
    }
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://" + x.target + path))
            .timeout(Duration.ofSeconds(30))
            .POST(HttpRequest.BodyPublishers.ofByteArray(x.forwardedBody));
    x.forwardedHeaders.forEach(
        (k, v) -> {
          if (!k.startsWith(":") && !RESTRICTED.contains(k)) {
            b.header(k, v);
          }
        });
    HttpResponse<byte[]> resp = http.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
    x.status = resp.statusCode();
    x.contentType = resp.headers().firstValue("content-type").orElse("application/json");
    x.upstreamBody = resp.body();
  }

  private static void responsePhase(EnvoyReplay s, Exchange x, Mode mode) throws Exception {
    Metadata served =
        EnvoyReplay.metadata("envoy.lb", "x-gateway-destination-endpoint-served", x.target);
    boolean empty = x.upstreamBody.length == 0;
    s.send(EnvoyReplay.responseHeaders(x.status, x.contentType, empty, served));
    ProcessingResponse h = s.next(ResponseCase.RESPONSE_HEADERS);
    x.responseAnswers.add(h);
    x.responseHeaderMutations =
        EnvoyReplay.setHeaders(h.getResponseHeaders().getResponse().getHeaderMutation());
    if (empty || mode.response() == BodyMode.NONE) {
      x.clientBody = x.upstreamBody;
      return;
    }
    switch (mode.response()) {
      case BUFFERED:
      case BUFFERED_PARTIAL:
        s.send(EnvoyReplay.responseBody(x.upstreamBody, true));
        ProcessingResponse b = s.next(ResponseCase.RESPONSE_BODY);
        assertThat(b.getResponseBody().getResponse().hasBodyMutation()).isFalse();
        x.responseAnswers.add(b);
        x.clientBody = x.upstreamBody;
        return;
      case STREAMED:
        {
          List<byte[]> chunks = split(x.upstreamBody, 5);
          for (int i = 0; i < chunks.size(); i++) {
            s.send(EnvoyReplay.responseBody(chunks.get(i), i == chunks.size() - 1));
            ProcessingResponse c = s.next(ResponseCase.RESPONSE_BODY);
            assertThat(c.getResponseBody().getResponse().hasBodyMutation()).isFalse();
            x.responseAnswers.add(c);
          }
          x.clientBody = x.upstreamBody;
          return;
        }
      default:
        {
          List<byte[]> chunks = split(x.upstreamBody, 5);
          ByteArrayOutputStream client = new ByteArrayOutputStream();
          for (int i = 0; i < chunks.size(); i++) {
            boolean last = i == chunks.size() - 1;
            s.send(EnvoyReplay.responseBody(chunks.get(i), last));
            ByteString echoed = ByteString.EMPTY;
            boolean eos = false;
            while (echoed.size() < chunks.get(i).length || (last && !eos)) {
              ProcessingResponse c = s.next(ResponseCase.RESPONSE_BODY);
              x.responseAnswers.add(c);
              var sr = c.getResponseBody().getResponse().getBodyMutation().getStreamedResponse();
              echoed = echoed.concat(sr.getBody());
              eos = sr.getEndOfStream();
            }
            assertThat(eos).as("end of stream mirrored").isEqualTo(last);
            client.writeBytes(echoed.toByteArray());
          }
          x.clientBody = client.toByteArray();
        }
    }
  }

  /** {@code b} in {@code n} uneven pieces (at least one, possibly empty). */
  static List<byte[]> split(byte[] b, int n) {
    List<byte[]> out = new ArrayList<>();
    if (b.length == 0) {
      out.add(b);
      return out;
    }
    int pos = 0;
    for (int i = 0; i < n && pos < b.length; i++) {
      int end = i == n - 1 ? b.length : Math.min(b.length, pos + Math.max(1, b.length / (n + i)));
      out.add(java.util.Arrays.copyOfRange(b, pos, end));
      pos = end;
    }
    if (pos < b.length) {
      out.add(java.util.Arrays.copyOfRange(b, pos, b.length));
    }
    return out;
  }

  static BodySendMode proto(BodyMode m) {
    return BodySendMode.valueOf(m.name());
  }
}
