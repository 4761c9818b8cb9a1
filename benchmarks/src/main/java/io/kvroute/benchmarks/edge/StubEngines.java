package io.kvroute.benchmarks.edge;

import io.kvroute.edge.EdgeServer;
import java.nio.charset.StandardCharsets;

/**
 * The static fake engines of {@code side_by_side.sh} (there: nginx {@code return 200 '...'}), on
 * kvroute's HTTP edge with one event loop named {@code alloc-stub}, so that a run can leave their
 * allocation out: a prefill engine (NIXL {@code kv_transfer_params}), a JSON decode engine and an
 * SSE decode engine (64 {@code text_completion} chunks then {@code data: [DONE]}, as one body).
 * Every engine answers {@code /tokenize} with 32 tokens and {@code /health} with 200.
 *
 * <p>Thread-safe; closed once.
 */
final class StubEngines implements AutoCloseable {
  static final String PROMPT =
      "The quick brown fox jumps over the lazy dog while the cache keeps every block of this shared"
          + " prefix warm for the next request in the same session";
  static final byte[] PREFILL_BODY =
      ascii(
          "{\"id\":\"cmpl-r\",\"object\":\"text_completion\",\"created\":1757500000,"
              + "\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"text\":\" tok0\","
              + "\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null,"
              + "\"prompt_logprobs\":null}],\"usage\":{\"prompt_tokens\":32,\"total_tokens\":33,"
              + "\"completion_tokens\":1,\"prompt_tokens_details\":null},"
              + "\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,"
              + "\"remote_block_ids\":[[1,2]],\"remote_engine_id\":\"e\",\"remote_request_id\":"
              + "\"r\",\"remote_host\":\"localhost\",\"remote_port\":5600,\"tp_size\":1}}");
  static final byte[] DECODE_BODY;
  static final byte[] SSE_BODY;
  static final byte[] TOKENIZE_BODY;

  static {
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < 16; i++) {
      text.append(" tok").append(i);
    }
    DECODE_BODY =
        ascii(
            "{\"id\":\"cmpl-r\",\"object\":\"text_completion\",\"created\":1757500000,"
                + "\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"text\":\""
                + text
                + "\",\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null,"
                + "\"prompt_logprobs\":null}],\"usage\":{\"prompt_tokens\":32,\"total_tokens\":48,"
                + "\"completion_tokens\":16,\"prompt_tokens_details\":{\"cached_tokens\":32}},"
                + "\"kv_transfer_params\":null}");
    StringBuilder sse = new StringBuilder();
    for (int i = 0; i < 64; i++) {
      sse.append(
              "data: {\"id\":\"cmpl-r\",\"object\":\"text_completion\",\"created\":1757500000,"
                  + "\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"text\":\" tok")
          .append(i)
          .append("\",\"logprobs\":null,\"finish_reason\":")
          .append(i == 63 ? "\"length\"" : "null")
          .append(",\"stop_reason\":null}]}\n\n");
    }
    SSE_BODY = ascii(sse.append("data: [DONE]\n\n").toString());
    StringBuilder tokens = new StringBuilder();
    for (int t = 1000; t < 1032; t++) {
      tokens.append(t == 1000 ? "" : ",").append(t);
    }
    TOKENIZE_BODY =
        ascii(
            "{\"count\":32,\"max_model_len\":4096,\"tokens\":["
                + tokens
                + "],\"token_strs\":null}");
  }

  private final EdgeServer prefill;
  private final EdgeServer decode;
  private final EdgeServer decodeSse;

  StubEngines() {
    prefill = engine("application/json", PREFILL_BODY);
    decode = engine("application/json", DECODE_BODY);
    decodeSse = engine("text/event-stream", SSE_BODY);
  }

  private static EdgeServer engine(String contentType, byte[] body) {
    return EdgeServer.builder()
        .listen("127.0.0.1", 0)
        .ioThreads(1)
        .threadName("alloc-stub")
        .route("*", "/tokenize", ex -> ex.respond(200, "application/json", TOKENIZE_BODY))
        .route("*", "/health", ex -> ex.respond(200, "text/plain", new byte[0]))
        .route("*", "/*", ex -> ex.respond(200, contentType, body))
        .build()
        .start();
  }

  int prefillPort() {
    return prefill.port();
  }

  /** The JSON decode engine's port, or the SSE one's. */
  int decodePort(boolean sse) {
    return sse ? decodeSse.port() : decode.port();
  }

  @Override
  public void close() {
    prefill.close();
    decode.close();
    decodeSse.close();
  }

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }
}
