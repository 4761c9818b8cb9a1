package io.kvroute.service;

import static io.kvroute.edge.testing.Raw.closedByServer;
import static io.kvroute.edge.testing.Raw.halfClose;
import static io.kvroute.edge.testing.Raw.read;
import static io.kvroute.edge.testing.Raw.send;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.edge.testing.Raw;
import io.kvroute.service.ServiceConfig.PodSpec;
import java.io.IOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@code kvroute serve} over raw sockets, for clients that half-close (issue 34): a complete
 * request then a half-close gets its whole answer (scores are computed on a worker thread: the
 * answer may well come after the half-close), a half-close mid-body is a 400 (in serve's error
 * shape), and pipelined requests before a half-close are all answered, in order.
 */
class ServeHalfCloseTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final Raw.Sockets sockets = new Raw.Sockets();
  private KvIndexService service;

  @BeforeEach
  void start() {
    ServiceConfig config =
        ServiceConfig.builder()
            .model("test-model")
            .port(0)
            .threads(2)
            .maxBodyBytes(64 << 10)
            .readyTimeout(Duration.ofSeconds(5))
            .pod(PodSpec.of("pod-a", "tcp://127.0.0.1:1"))
            .pod(PodSpec.of("pod-b", "tcp://127.0.0.1:2"))
            .build();
    service = KvIndexService.builder(config).withoutEventFeed().start();
    int[] prompt = ServiceApiTest.tokens(48, 0);
    ServiceApiTest.store(service.index(), "pod-b", prompt, 3, "GPU");
  }

  @AfterEach
  void stop() throws IOException {
    sockets.close();
    service.close();
  }

  private Socket connect() throws IOException {
    return sockets.connect(service.baseUri().getPort());
  }

  private static String score(int salt) {
    String body =
        "{\"token_ids\":" + Arrays.toString(ServiceApiTest.tokens(48, salt)).replace(" ", "") + "}";
    return "POST /api/v1/score HTTP/1.1\r\nHost: serve\r\nContent-Type: application/json\r\n"
        + "Content-Length: "
        + body.getBytes(StandardCharsets.UTF_8).length
        + "\r\n\r\n"
        + body;
  }

  private static JsonNode json(Raw.Response r) throws IOException {
    assertThat(r.status()).as(r.body()).isEqualTo(200);
    return JSON.readTree(r.body());
  }

  @Test
  void aCompleteRequestThenAHalfCloseGetsTheWholeAnswer() throws IOException {
    Socket s = connect();
    send(s, score(0));
    halfClose(s);
    JsonNode r = json(read(s));
    assertThat(r.at("/recommendation").asText()).isEqualTo("pod-b");
    assertThat(r.at("/scores/pod-b/blocks_present").asInt()).isEqualTo(3);
    assertThat(closedByServer(s)).isTrue();
  }

  @Test
  void aHalfCloseMidBodyIs400WithAJsonError() throws IOException {
    Socket s = connect();
    String full = score(0);
    send(s, full.substring(0, full.length() - 20));
    halfClose(s);
    Raw.Response r = read(s);
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.header("Content-Type")).isEqualTo("application/json");
    // serve's own error shape (docs/serve.md), as for every other refusal of its edge
    JsonNode error = JSON.readTree(r.body());
    assertThat(error.at("/status").asInt()).isEqualTo(400);
    assertThat(error.at("/field").asText()).isEqualTo("body");
    assertThat(error.at("/error").asText()).contains("ended its input after");
    assertThat(closedByServer(s)).isTrue();
  }

  @Test
  void pipelinedRequestsThenAHalfCloseAreAllAnsweredInOrder() throws IOException {
    Socket s = connect();
    send(
        s,
        score(0)
            + "GET /api/v1/cache/state HTTP/1.1\r\nHost: serve\r\n\r\n"
            + score(7)
            + "GET /healthz HTTP/1.1\r\nHost: serve\r\n\r\n");
    halfClose(s);
    assertThat(json(read(s)).at("/recommendation").asText()).isEqualTo("pod-b");
    assertThat(json(read(s)).at("/total_pods").asInt()).isEqualTo(2);
    assertThat(json(read(s)).at("/scores/pod-b/blocks_present").asInt()).isZero();
    assertThat(read(s).status()).isEqualTo(200);
    assertThat(closedByServer(s)).isTrue();
  }
}
