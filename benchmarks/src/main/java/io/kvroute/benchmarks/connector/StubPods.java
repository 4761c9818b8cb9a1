package io.kvroute.benchmarks.connector;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Zero-latency stub model servers on loopback for the connector benchmarks (JDK {@code HttpServer},
 * with {@code sun.net.httpserver.nodelay} set so small answers are not held back by delayed ACKs).
 *
 * <ul>
 *   <li>{@code POST /v1/completions} with {@code "stream":true} in the body: {@code sseEvents} SSE
 *       events, each written and flushed on its own (one chunk per token, as vLLM sends them), then
 *       {@code data: [DONE]}.
 *   <li>Any other {@code POST}: a one-token completion; when the body asks for {@code
 *       do_remote_decode}, it carries NIXL {@code kv_transfer_params} like vLLM's prefiller.
 * </ul>
 *
 * <p>Not thread-safe to configure; serving is thread-safe.
 */
final class StubPods implements AutoCloseable {
  static final byte[] PREFILL_ANSWER =
      ("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
              + "\"text\":\"a\",\"finish_reason\":\"length\"}],\"kv_transfer_params\":"
              + "{\"do_remote_prefill\":true,\"do_remote_decode\":false,"
              + "\"remote_block_ids\":[[1,2,3,4]],\"remote_engine_id\":\"eng-1\","
              + "\"remote_request_id\":\"cmpl-r-0\",\"remote_host\":\"127.0.0.1\","
              + "\"remote_port\":5600,\"tp_size\":1}}")
          .getBytes(StandardCharsets.UTF_8);

  static final byte[] DECODE_ANSWER =
      ("{\"id\":\"cmpl-2\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
              + "\"text\":\"hello world\",\"finish_reason\":\"length\"}],"
              + "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2,\"total_tokens\":14}}")
          .getBytes(StandardCharsets.UTF_8);

  private static final byte[] EVENT =
      "data: {\"id\":\"cmpl-2\",\"choices\":[{\"index\":0,\"text\":\" tok\"}]}\n\n"
          .getBytes(StandardCharsets.UTF_8);
  private static final byte[] DONE = "data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8);

  private final HttpServer server;
  private final ExecutorService executor;
  private final int sseEvents;

  StubPods(int sseEvents) throws IOException {
    System.setProperty("sun.net.httpserver.nodelay", "true");
    this.sseEvents = sseEvents;
    this.server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
    this.executor = Executors.newFixedThreadPool(4);
    server.setExecutor(executor);
    server.createContext("/", this::handle);
    server.start();
  }

  int port() {
    return server.getAddress().getPort();
  }

  private void handle(HttpExchange ex) throws IOException {
    byte[] body;
    try (InputStream in = ex.getRequestBody()) {
      body = in.readAllBytes();
    }
    String text = new String(body, StandardCharsets.UTF_8);
    if (text.contains("\"stream\":true")) {
      ex.getResponseHeaders().set("Content-Type", "text/event-stream");
      ex.sendResponseHeaders(200, 0);
      try (OutputStream out = ex.getResponseBody()) {
        for (int i = 0; i < sseEvents; i++) {
          out.write(EVENT);
          out.flush();
        }
        out.write(DONE);
      }
      return;
    }
    byte[] answer = text.contains("\"do_remote_decode\":true") ? PREFILL_ANSWER : DECODE_ANSWER;
    ex.getResponseHeaders().set("Content-Type", "application/json");
    ex.sendResponseHeaders(200, answer.length);
    try (OutputStream out = ex.getResponseBody()) {
      out.write(answer);
    }
  }

  @Override
  public void close() {
    server.stop(0);
    executor.shutdownNow();
  }
}
