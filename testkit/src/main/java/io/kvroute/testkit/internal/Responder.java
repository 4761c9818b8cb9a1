package io.kvroute.testkit.internal;

import static io.kvroute.testkit.internal.SimHttp.JSON;
import static io.kvroute.testkit.internal.SimHttp.NODES;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import io.kvroute.testkit.internal.SimHttp.AbortConnection;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * Writes one completion or chat-completion response as vLLM does: a single JSON body, or SSE events
 * ({@code data: {...}} chunks, an optional usage chunk, {@code data: [DONE]}). Can cut the
 * connection after a number of events to simulate a dropped stream.
 *
 * <p>Call {@link #begin()}, then {@link #token} once per generated piece, then {@link #finish}.
 *
 * <p>Not thread-safe: one request thread drives one instance.
 */
public final class Responder {

  /** Whether and how the response streams. */
  public enum Streaming {
    /** One JSON body. */
    NONE,
    /** SSE chunks. */
    EVENTS,
    /** SSE chunks followed by a usage chunk ({@code stream_options.include_usage}). */
    EVENTS_WITH_USAGE
  }

  /**
   * What every chunk or body of the response says about itself.
   *
   * @param id the response id ({@code cmpl-...} or {@code chatcmpl-...})
   * @param model the model name echoed back
   * @param chat chat-completion framing rather than completion framing
   * @param streaming whether and how to stream
   * @param created the {@code created} epoch seconds
   */
  public record Head(String id, String model, boolean chat, Streaming streaming, long created) {}

  private final HttpExchange ex;
  private final Head head;
  private final boolean chat;
  private final int closeAfter;
  private OutputStream out;
  private int events;

  /**
   * A writer for one response.
   *
   * @param ex the exchange to answer
   * @param head what the response says about itself
   * @param closeAfter close the connection after this many SSE events (or after the headers when
   *     not streaming); negative for never
   */
  public Responder(HttpExchange ex, Head head, int closeAfter) {
    this.ex = ex;
    this.head = head;
    this.chat = head.chat();
    this.closeAfter = closeAfter;
  }

  private boolean stream() {
    return head.streaming() != Streaming.NONE;
  }

  /**
   * Sends the headers of a streamed response and, for chat, the role chunk; nothing otherwise.
   *
   * @throws IOException if the client went away
   */
  public void begin() throws IOException {
    if (!stream()) {
      return;
    }
    ex.getResponseHeaders().set("content-type", "text/event-stream; charset=utf-8");
    ex.sendResponseHeaders(200, 0);
    out = ex.getResponseBody();
    if (chat) {
      ObjectNode c = chunkHead();
      ObjectNode choice = firstChoice(c);
      ObjectNode delta = choice.putObject("delta");
      delta.put("role", "assistant");
      delta.put("content", "");
      outcome(choice, null, false);
      event(c);
    }
  }

  private ObjectNode head(String object) {
    ObjectNode c = NODES.objectNode();
    c.put("id", head.id());
    c.put("object", object);
    c.put("created", head.created());
    c.put("model", head.model());
    return c;
  }

  private ObjectNode chunkHead() {
    return head(chat ? "chat.completion.chunk" : "text_completion");
  }

  private static ObjectNode firstChoice(ObjectNode root) {
    ObjectNode choice = root.putArray("choices").addObject();
    choice.put("index", 0);
    return choice;
  }

  /**
   * {@code logprobs}, {@code finish_reason} (null while unfinished) and maybe {@code stop_reason}.
   */
  private static void outcome(ObjectNode choice, String finish, boolean stopReason) {
    choice.putNull("logprobs");
    choice.put("finish_reason", finish);
    if (stopReason) {
      choice.putNull("stop_reason");
    }
  }

  private void abortIfDue() throws IOException {
    if (closeAfter >= 0 && events >= closeAfter) {
      out.flush();
      throw new AbortConnection();
    }
  }

  private void event(JsonNode node) throws IOException {
    abortIfDue();
    out.write("data: ".getBytes(StandardCharsets.UTF_8));
    out.write(JSON.writeValueAsBytes(node));
    out.write("\n\n".getBytes(StandardCharsets.UTF_8));
    out.flush();
    events++;
  }

  /**
   * Streams one generated piece; nothing when not streaming.
   *
   * @param piece the text of the piece
   * @param finish the finish reason if this is the last piece, else {@code null}
   * @throws IOException if the client went away
   */
  public void token(String piece, String finish) throws IOException {
    if (!stream()) {
      return;
    }
    ObjectNode c = chunkHead();
    ObjectNode choice = firstChoice(c);
    if (chat) {
      choice.putObject("delta").put("content", piece);
    } else {
      choice.put("text", piece);
    }
    // vLLM's chat chunks carry stop_reason only on the last one; completion chunks on every one
    outcome(choice, finish, !chat || finish != null);
    event(c);
  }

  /**
   * Ends the response: the usage chunk (if asked for) and {@code [DONE]} when streaming, else the
   * whole JSON body.
   *
   * @param text the whole generated text
   * @param finish the finish reason
   * @param usage the {@code usage} object
   * @param ktp the {@code kv_transfer_params} to return, or {@code null}
   * @throws IOException if the client went away
   */
  public void finish(String text, String finish, ObjectNode usage, ObjectNode ktp)
      throws IOException {
    if (stream()) {
      if (head.streaming() == Streaming.EVENTS_WITH_USAGE) {
        ObjectNode c = chunkHead();
        c.putArray("choices");
        c.set("usage", usage);
        event(c);
      }
      abortIfDue();
      out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
      out.flush();
      return;
    }
    ObjectNode root = head(chat ? "chat.completion" : "text_completion");
    ObjectNode choice = firstChoice(root);
    if (chat) {
      ObjectNode msg = choice.putObject("message");
      msg.put("role", "assistant");
      msg.put("content", text);
      msg.putNull("refusal");
      msg.putNull("annotations");
      msg.putNull("audio");
      msg.putNull("function_call");
      msg.putArray("tool_calls");
      msg.putNull("reasoning_content");
    } else {
      choice.put("text", text);
    }
    outcome(choice, finish, true);
    if (!chat) {
      choice.putNull("prompt_logprobs");
    }
    root.putNull("service_tier");
    root.putNull("system_fingerprint");
    root.set("usage", usage);
    root.putNull("prompt_logprobs");
    if (ktp == null) {
      root.putNull("kv_transfer_params");
    } else {
      root.set("kv_transfer_params", ktp);
    }
    writeBody(JSON.writeValueAsBytes(root));
  }

  private void writeBody(byte[] bytes) throws IOException {
    ex.getResponseHeaders().set("content-type", "application/json");
    ex.sendResponseHeaders(200, bytes.length);
    if (closeAfter >= 0) {
      ex.getResponseBody().write(bytes, 0, Math.min(bytes.length, 8));
      ex.getResponseBody().flush();
      throw new AbortConnection();
    }
    try (OutputStream os = ex.getResponseBody()) {
      os.write(bytes);
    }
  }
}
