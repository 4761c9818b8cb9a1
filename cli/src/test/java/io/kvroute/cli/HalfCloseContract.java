package io.kvroute.cli;

import static io.kvroute.edge.testing.Raw.await;
import static io.kvroute.edge.testing.Raw.closedByServer;
import static io.kvroute.edge.testing.Raw.halfClose;
import static io.kvroute.edge.testing.Raw.read;
import static io.kvroute.edge.testing.Raw.reset;
import static io.kvroute.edge.testing.Raw.send;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.edge.testing.Raw;
import java.io.IOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import mockwebserver3.Dispatcher;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.RecordedRequest;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 34 against a command on the edge ({@code kvroute proxy}, {@code kvroute gateway}), over raw
 * sockets in front of MockWebServer engines: a client that half-closes after its request gets the
 * whole answer, one that half-closes mid-body gets a 400, pipelined requests before a half-close
 * are all answered in order, and a client that resets is cancelled at once, half-closed or not. A
 * subclass starts the command in front of {@link #prefill} and {@link #decode}.
 */
abstract class HalfCloseContract {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** Events in a stream answered "slowly": far longer than any test waits. */
  static final int ENDLESS = 100_000;

  final MockWebServer prefill = new MockWebServer();
  final MockWebServer decode = new MockWebServer();
  final Raw.Sockets sockets = new Raw.Sockets();

  /** Starts the engines; a subclass starts its command in front of them. */
  HalfCloseContract() {
    prefill.setDispatcher(engine(true));
    decode.setDispatcher(engine(false));
  }

  /** The command's port. */
  abstract int port();

  /** Requests the command is serving now. */
  abstract int inFlight();

  @AfterEach
  void closeEngines() throws IOException {
    sockets.close();
    prefill.close();
    decode.close();
  }

  /**
   * An engine answering by path: {@code /tokenize} (three tokens), a prefill leg ({@code {}}), a
   * decode leg echoing its prompt: a JSON completion, or an SSE stream of {@code n} events (the
   * prompt's "events" field, default 20; {@link #ENDLESS} throttled to last minutes) and {@code
   * [DONE]}.
   */
  private static Dispatcher engine(boolean isPrefill) {
    return new Dispatcher() {
      @Override
      public MockResponse dispatch(RecordedRequest request) {
        if (request.getUrl().encodedPath().equals("/tokenize")) {
          return new MockResponse.Builder()
              .code(200)
              .body("{\"count\":3,\"max_model_len\":4096,\"tokens\":[1,2,3]}")
              .build();
        }
        if (isPrefill) {
          return new MockResponse.Builder().code(200).body("{}").build();
        }
        JsonNode body;
        try {
          body = JSON.readTree(request.getBody().utf8());
        } catch (IOException e) {
          return new MockResponse.Builder().code(400).body("{}").build();
        }
        String prompt = body.path("prompt").asText();
        if (!body.path("stream").asBoolean()) {
          return new MockResponse.Builder()
              .code(200)
              .setHeader("Content-Type", "application/json")
              .body("{\"choices\":[{\"text\":\"" + prompt + "\"}]}")
              .build();
        }
        int events = prompt.equals("endless") ? ENDLESS : 20;
        MockResponse.Builder b =
            new MockResponse.Builder()
                .code(200)
                .setHeader("Content-Type", "text/event-stream")
                .chunkedBody(sse(prompt, events), 256);
        if (events == ENDLESS) {
          b.throttleBody(256, 50, TimeUnit.MILLISECONDS);
        }
        return b.build();
      }
    };
  }

  static String sse(String prompt, int events) {
    StringBuilder sse = new StringBuilder();
    for (int i = 0; i < events; i++) {
      sse.append("data: {\"choices\":[{\"text\":\"")
          .append(prompt)
          .append(' ')
          .append(i)
          .append("\"}]}\n\n");
    }
    return sse.append("data: [DONE]\n\n").toString();
  }

  static String completion(String prompt, boolean stream) {
    String body =
        "{\"model\":\"m\",\"prompt\":\""
            + prompt
            + "\",\"max_tokens\":4"
            + (stream ? ",\"stream\":true" : "")
            + "}";
    return "POST /v1/completions HTTP/1.1\r\nHost: kvroute\r\nContent-Type: application/json\r\n"
        + "Content-Length: "
        + body.getBytes(StandardCharsets.UTF_8).length
        + "\r\n\r\n"
        + body;
  }

  Socket connect() throws IOException {
    return sockets.connect(port());
  }

  @Test
  void aCompleteRequestThenAHalfCloseGetsTheWholeAnswer() throws Exception {
    Socket s = connect();
    send(s, completion("hello", false));
    halfClose(s);
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.body()).isEqualTo("{\"choices\":[{\"text\":\"hello\"}]}");
    assertThat(closedByServer(s)).isTrue();
  }

  @Test
  void aStreamedAnswerReachesAHalfClosedClientInFull() throws Exception {
    Socket s = connect();
    send(s, completion("streamed", true));
    halfClose(s);
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.body()).isEqualTo(sse("streamed", 20));
    assertThat(closedByServer(s)).isTrue();
    await("the request is finished", () -> inFlight() == 0);
  }

  @Test
  void aHalfCloseMidBodyIs400WithAJsonError() throws Exception {
    Socket s = connect();
    String full = completion("cut", false);
    send(s, full.substring(0, full.length() - 10));
    halfClose(s);
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.header("Content-Type")).isEqualTo("application/json");
    assertThat(r.body())
        .contains("\"type\":\"invalid_request_error\"")
        .contains("\"param\":\"body\"");
    assertThat(closedByServer(s)).isTrue();
    assertThat(decode.getRequestCount()).isZero();
  }

  @Test
  void pipelinedRequestsThenAHalfCloseAreAllAnsweredInOrder() throws Exception {
    Socket s = connect();
    send(
        s,
        completion("one", false)
            + completion("two", true)
            + completion("three", false)
            + completion("four", false));
    halfClose(s);
    assertThat(read(s).body()).isEqualTo("{\"choices\":[{\"text\":\"one\"}]}");
    assertThat(read(s).body()).isEqualTo(sse("two", 20));
    assertThat(read(s).body()).isEqualTo("{\"choices\":[{\"text\":\"three\"}]}");
    Raw.Response last = read(s);
    assertThat(last.body()).isEqualTo("{\"choices\":[{\"text\":\"four\"}]}");
    assertThat(closedByServer(s)).isTrue();
  }

  @Test
  void aResetCancelsTheRequestAtOnceHalfClosedOrNot() throws Exception {
    // a client that resets while its answer streams (the case ProxyCommandTest keeps for the
    // decode leg)
    Socket plain = connect();
    send(plain, completion("endless", true));
    assertThat(Raw.readLine(plain.getInputStream())).startsWith("HTTP/1.1 200");
    reset(plain);
    await("the reset client's request is cancelled", () -> inFlight() == 0);

    // a client that half-closed and then resets, while its answer would stream for minutes
    Socket halfClosed = connect();
    send(halfClosed, completion("endless", true));
    halfClose(halfClosed);
    assertThat(Raw.readLine(halfClosed.getInputStream())).startsWith("HTTP/1.1 200");
    assertThat(inFlight()).isEqualTo(1);
    reset(halfClosed);
    await("the half-closed client's request is cancelled once it resets", () -> inFlight() == 0);
  }
}
