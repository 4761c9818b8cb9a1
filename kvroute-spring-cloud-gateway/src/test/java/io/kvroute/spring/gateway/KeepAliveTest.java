package io.kvroute.spring.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A keep-alive connection keeps being read after the filter answers a request at once (a 405 or a
 * 413 written before the request's body is read): Reactor Netty 1.3.x stopped reading such a
 * connection when a request it had queued behind the previous one was answered synchronously
 * (reactor/reactor-netty#4361, fixed after 1.3.8), and the connection's next request waited until
 * the client gave up. The starter re-arms the read ({@code KeepAliveReadRearm}).
 */
@GatewayAppTest
class KeepAliveTest {
  static SimulatedCluster cluster;

  @LocalServerPort int port;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    cluster = SimPods.start(b -> b.decode(1), LatencyModel.ZERO);
    SimPods.mode(registry, "relay");
    SimPods.register(registry, cluster.pods(), p -> null, false);
  }

  @AfterAll
  static void stopCluster() {
    cluster.close();
  }

  private static final String GET =
      "GET /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAccept: application/json\r\n\r\n";

  @Test
  void aConnectionIsReadAfterPipelinedRequestsAnsweredAtOnce() throws Exception {
    for (int round = 0; round < 20; round++) {
      try (Socket s = new Socket()) {
        s.connect(new InetSocketAddress("127.0.0.1", port), 10_000);
        s.setSoTimeout(30_000);
        OutputStream out = s.getOutputStream();
        InputStream in = s.getInputStream();
        // two requests in one write: the second is queued behind the first (routed to a pod,
        // answered later), then answered at once when its turn comes
        out.write((post("pipelined " + round) + GET).getBytes(StandardCharsets.US_ASCII));
        out.flush();
        assertThat(status(in)).isEqualTo(200);
        assertThat(status(in)).isEqualTo(405);
        // the connection's next request is read and answered
        out.write(GET.getBytes(StandardCharsets.US_ASCII));
        out.flush();
        assertThat(status(in)).as("round %d", round).isEqualTo(405);
      }
    }
  }

  private static String post(String content) {
    byte[] body = Http.chat(SimPods.MODEL, content, false, 2).getBytes(StandardCharsets.UTF_8);
    return "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
        + "Content-Length: "
        + body.length
        + "\r\n\r\n"
        + new String(body, StandardCharsets.UTF_8);
  }

  /** Reads one response (its head, then a Content-Length or chunked body); returns its status. */
  static int status(InputStream in) throws IOException {
    String h = until(in, "\r\n\r\n");
    int length = 0;
    boolean chunked = false;
    for (String line : h.split("\r\n")) {
      String l = line.toLowerCase(Locale.ROOT);
      if (l.startsWith("content-length:")) {
        length = Integer.parseInt(l.substring(15).trim());
      } else if (l.startsWith("transfer-encoding:") && l.contains("chunked")) {
        chunked = true;
      }
    }
    if (chunked) {
      int size;
      do {
        size = Integer.parseInt(until(in, "\r\n").trim(), 16);
        in.readNBytes(size + 2); // the chunk and its CRLF (the last one: the empty trailer's)
      } while (size > 0);
    } else {
      in.readNBytes(length);
    }
    return Integer.parseInt(h.substring(9, 12));
  }

  /** The bytes up to and including {@code end}, as ASCII. */
  private static String until(InputStream in, String end) throws IOException {
    ByteArrayOutputStream seen = new ByteArrayOutputStream();
    while (!seen.toString(StandardCharsets.US_ASCII).endsWith(end)) {
      int b = in.read();
      if (b < 0) {
        throw new IOException("connection closed after " + seen.size() + " bytes: " + seen);
      }
      seen.write(b);
    }
    return seen.toString(StandardCharsets.US_ASCII);
  }
}
