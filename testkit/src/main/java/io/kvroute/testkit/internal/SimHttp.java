package io.kvroute.testkit.internal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * The simulator's HTTP plumbing on the JDK server: reading a bounded body, writing a whole
 * response, vLLM's OpenAI-style error JSON and the connection-abort signal.
 *
 * <p>Thread-safe: stateless; {@link #JSON} is a shared, thread-safe mapper.
 */
public final class SimHttp {
  /** The simulator's JSON mapper (default settings, as vLLM's responses need nothing else). */
  public static final ObjectMapper JSON = new ObjectMapper();

  /** JSON nodes for responses. */
  public static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  private static final int MAX_BODY = 64 << 20;

  private SimHttp() {}

  /**
   * Thrown from a handler to make the JDK server drop the connection without finishing the
   * response. Carries no stack trace.
   */
  public static final class AbortConnection extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** A new abort signal. */
    public AbortConnection() {
      super("simulated connection close", null, false, false);
    }
  }

  /**
   * Sends a whole response: {@code body} with {@code content-type: type}, or no body when it is
   * empty.
   *
   * @throws IOException if the client went away
   */
  public static void send(HttpExchange ex, int status, String type, byte[] body)
      throws IOException {
    ex.getResponseHeaders().set("content-type", type);
    ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
    if (body.length > 0) {
      try (OutputStream os = ex.getResponseBody()) {
        os.write(body);
      }
    }
  }

  /**
   * Sends {@code node} as {@code application/json}.
   *
   * @throws IOException if the client went away
   */
  public static void sendJson(HttpExchange ex, int status, JsonNode node) throws IOException {
    send(ex, status, "application/json", JSON.writeValueAsBytes(node));
  }

  /** vLLM's error body: {@code {"error":{"message","type","param":null,"code"}}}. */
  private static ObjectNode errorJson(int status, String type, String message) {
    ObjectNode err = NODES.objectNode();
    ObjectNode e = err.putObject("error");
    e.put("message", message);
    e.put("type", type);
    e.putNull("param");
    e.put("code", status);
    return err;
  }

  private static void sendError(HttpExchange ex, int status, String type, String message)
      throws IOException {
    sendJson(ex, status, errorJson(status, type, message));
  }

  /**
   * Sends vLLM's error JSON with the error type vLLM uses for {@code status}.
   *
   * @throws IOException if the client went away
   */
  public static void sendError(HttpExchange ex, int status, String message) throws IOException {
    sendError(ex, status, errorType(status), message);
  }

  /**
   * Sends vLLM's error of its {@code /v1/messages} endpoint: Anthropic's shape, {@code
   * {"type":"error","error":{"type":...,"message":...}}}, with the error type vLLM uses for {@code
   * status} (vLLM's {@code translate_error_response} keeps its OpenAI type names).
   *
   * @throws IOException if the client went away
   */
  public static void sendAnthropicError(HttpExchange ex, int status, String message)
      throws IOException {
    com.fasterxml.jackson.databind.node.ObjectNode root = NODES.objectNode();
    root.put("type", "error");
    root.putObject("error").put("type", errorType(status)).put("message", message);
    sendJson(ex, status, root);
  }

  /** The OpenAI error type vLLM reports for a status. */
  private static String errorType(int status) {
    switch (status) {
      case 400:
        return "BadRequestError";
      case 404:
        return "NotFoundError";
      case 429:
        return "RateLimitError";
      case 503:
        return "ServiceUnavailableError";
      default:
        return status >= 500 ? "InternalServerError" : "BadRequestError";
    }
  }

  /**
   * Reads the request body as UTF-8 text.
   *
   * @throws IOException if it cannot be read or is larger than 64 MiB
   */
  public static String readBody(HttpExchange ex) throws IOException {
    try (InputStream in = ex.getRequestBody()) {
      byte[] data = in.readNBytes(MAX_BODY + 1);
      if (data.length > MAX_BODY) {
        throw new IOException("body larger than " + MAX_BODY + " bytes");
      }
      return new String(data, StandardCharsets.UTF_8);
    }
  }

  /**
   * Answers 405 unless the request uses {@code method}.
   *
   * @return whether the request may be served
   * @throws IOException if the client went away
   */
  public static boolean requireMethod(HttpExchange ex, String method) throws IOException {
    if (!ex.getRequestMethod().equalsIgnoreCase(method)) {
      sendError(ex, 405, "MethodNotAllowed", "Method Not Allowed");
      return false;
    }
    return true;
  }
}
