package io.kvroute.testkit.internal;

import static io.kvroute.testkit.internal.SimHttp.JSON;
import static io.kvroute.testkit.internal.SimHttp.NODES;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
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

  /** The API whose response format is written. */
  public enum Framing {
    /** {@code /v1/completions}. */
    COMPLETION,
    /** {@code /v1/chat/completions}. */
    CHAT,
    /**
     * {@code /v1/messages}: Anthropic's message object, or its SSE events ({@code message_start},
     * {@code content_block_*}, {@code message_delta} with the usage, {@code message_stop}).
     */
    MESSAGES,
    /**
     * {@code /v1/responses}: OpenAI's response object, or its SSE events ({@code response.created}
     * ... {@code response.completed} with the usage), each with a {@code sequence_number}.
     */
    RESPONSES
  }

  /**
   * What every chunk or body of the response says about itself.
   *
   * @param id the response id ({@code cmpl-...}, {@code chatcmpl-...}, {@code msg_...}, {@code
   *     resp_...})
   * @param model the model name echoed back
   * @param framing the API whose format is written
   * @param streaming whether and how to stream
   * @param created the {@code created} epoch seconds
   * @param promptTokens the prompt's length (the Messages API reports it when the stream starts)
   * @param cachedTokens the prompt's cached part
   */
  public record Head(
      String id,
      String model,
      Framing framing,
      Streaming streaming,
      long created,
      int promptTokens,
      int cachedTokens) {
    /** A head for completion or chat framing. */
    public Head(String id, String model, boolean chat, Streaming streaming, long created) {
      this(id, model, chat ? Framing.CHAT : Framing.COMPLETION, streaming, created, 0, 0);
    }

    /** True for chat-completion framing. */
    public boolean chat() {
      return framing == Framing.CHAT;
    }
  }

  private final HttpExchange ex;
  private final Head head;
  private final boolean chat;
  private final int closeAfter;
  private OutputStream out;
  private int events;
  private int sequence;
  private boolean blockOpen;

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
    if (head.framing() == Framing.MESSAGES) {
      ObjectNode e = NODES.objectNode().put("type", "message_start");
      ObjectNode m = messageObject(null);
      m.putArray("content");
      m.set("usage", messagesUsage(head.promptTokens(), 0, head.cachedTokens()));
      e.set("message", m);
      named("message_start", e);
      return;
    }
    if (head.framing() == Framing.RESPONSES) {
      ObjectNode created = responseObject("in_progress", null);
      named("response.created", responsesEvent("response.created").set("response", created));
      named(
          "response.in_progress",
          responsesEvent("response.in_progress").set("response", created.deepCopy()));
      ObjectNode added = responsesEvent("response.output_item.added").put("output_index", 0);
      added.set("item", outputMessage("in_progress", null));
      named("response.output_item.added", added);
      ObjectNode part =
          responsesEvent("response.content_part.added")
              .put("item_id", itemId())
              .put("output_index", 0)
              .put("content_index", 0);
      part.set("part", outputText(""));
      named("response.content_part.added", part);
      return;
    }
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
    if (head.framing() == Framing.MESSAGES) {
      if (!blockOpen) {
        blockOpen = true;
        ObjectNode start = NODES.objectNode().put("type", "content_block_start").put("index", 0);
        start.putObject("content_block").put("type", "text").put("text", "");
        named("content_block_start", start);
      }
      ObjectNode d = NODES.objectNode().put("type", "content_block_delta").put("index", 0);
      d.putObject("delta").put("type", "text_delta").put("text", piece);
      named("content_block_delta", d);
      return;
    }
    if (head.framing() == Framing.RESPONSES) {
      ObjectNode d =
          responsesEvent("response.output_text.delta")
              .put("item_id", itemId())
              .put("output_index", 0)
              .put("content_index", 0)
              .put("delta", piece);
      d.putArray("logprobs");
      named("response.output_text.delta", d);
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
    if (head.framing() == Framing.MESSAGES) {
      finishMessages(text, finish, usage, ktp);
      return;
    }
    if (head.framing() == Framing.RESPONSES) {
      finishResponses(text, finish, usage, ktp);
      return;
    }
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

  // ---------------------------------------------------------------- Messages

  private ObjectNode messageObject(String stopReason) {
    ObjectNode m = NODES.objectNode();
    m.put("id", head.id());
    m.put("type", "message");
    m.put("role", "assistant");
    m.put("model", head.model());
    if (stopReason == null) {
      m.putNull("stop_reason");
    } else {
      m.put("stop_reason", stopReason);
    }
    m.putNull("stop_sequence");
    return m;
  }

  /** vLLM's Anthropic usage: {@code input_tokens} without the cached part, which is its own. */
  private static ObjectNode messagesUsage(int prompt, int output, int cached) {
    ObjectNode u = NODES.objectNode();
    u.put("input_tokens", Math.max(0, prompt - cached));
    u.put("output_tokens", output);
    u.put("cache_read_input_tokens", cached);
    return u;
  }

  private static String stopReason(String finish) {
    return "length".equals(finish) ? "max_tokens" : "end_turn";
  }

  private void finishMessages(String text, String finish, ObjectNode usage, ObjectNode ktp)
      throws IOException {
    int prompt = usage.path("prompt_tokens").asInt();
    int output = usage.path("completion_tokens").asInt();
    int cached = usage.path("prompt_tokens_details").path("cached_tokens").asInt();
    if (stream()) {
      if (blockOpen) {
        named(
            "content_block_stop",
            NODES.objectNode().put("type", "content_block_stop").put("index", 0));
      }
      ObjectNode d = NODES.objectNode().put("type", "message_delta");
      d.putObject("delta").put("stop_reason", stopReason(finish)).putNull("stop_sequence");
      d.set("usage", messagesUsage(prompt, output, cached));
      named("message_delta", d);
      named("message_stop", NODES.objectNode().put("type", "message_stop"));
      return;
    }
    ObjectNode m = messageObject(stopReason(finish));
    m.putArray("content").addObject().put("type", "text").put("text", text);
    m.set("usage", messagesUsage(prompt, output, cached));
    if (ktp != null) {
      m.set("kv_transfer_params", ktp);
    }
    writeBody(JSON.writeValueAsBytes(m));
  }

  // ---------------------------------------------------------------- Responses

  private String itemId() {
    return "msg_" + head.id();
  }

  private ObjectNode responsesEvent(String type) {
    return NODES.objectNode().put("type", type).put("sequence_number", sequence++);
  }

  private ObjectNode outputText(String text) {
    ObjectNode t = NODES.objectNode().put("type", "output_text").put("text", text);
    t.putArray("annotations");
    return t;
  }

  private ObjectNode outputMessage(String status, String text) {
    ObjectNode item = NODES.objectNode();
    item.put("id", itemId());
    item.put("type", "message");
    item.put("role", "assistant");
    item.put("status", status);
    ArrayNode content = item.putArray("content");
    if (text != null) {
      content.add(outputText(text));
    }
    return item;
  }

  private ObjectNode responseObject(String status, ObjectNode usage) {
    ObjectNode r = NODES.objectNode();
    r.put("id", head.id());
    r.put("object", "response");
    r.put("created_at", head.created());
    r.put("model", head.model());
    r.put("status", status);
    r.putArray("output");
    if (usage == null) {
      r.putNull("usage");
    } else {
      r.set("usage", usage);
    }
    return r;
  }

  /** The Responses API's usage: {@code input_tokens} with its cached part in the details. */
  private static ObjectNode responsesUsage(ObjectNode usage) {
    int prompt = usage.path("prompt_tokens").asInt();
    int output = usage.path("completion_tokens").asInt();
    ObjectNode u = NODES.objectNode();
    u.put("input_tokens", prompt);
    u.putObject("input_tokens_details")
        .put("cached_tokens", usage.path("prompt_tokens_details").path("cached_tokens").asInt());
    u.put("output_tokens", output);
    u.putObject("output_tokens_details").put("reasoning_tokens", 0);
    u.put("total_tokens", prompt + output);
    return u;
  }

  private ObjectNode finalResponse(String text, String finish, ObjectNode usage, ObjectNode ktp) {
    boolean incomplete = "length".equals(finish);
    ObjectNode r = responseObject(incomplete ? "incomplete" : "completed", responsesUsage(usage));
    if (incomplete) {
      r.putObject("incomplete_details").put("reason", "max_output_tokens");
    }
    ((ArrayNode) r.get("output")).add(outputMessage("completed", text));
    if (ktp != null) {
      r.set("kv_transfer_params", ktp);
    }
    return r;
  }

  private void finishResponses(String text, String finish, ObjectNode usage, ObjectNode ktp)
      throws IOException {
    if (!stream()) {
      writeBody(JSON.writeValueAsBytes(finalResponse(text, finish, usage, ktp)));
      return;
    }
    ObjectNode done =
        responsesEvent("response.output_text.done")
            .put("item_id", itemId())
            .put("output_index", 0)
            .put("content_index", 0)
            .put("text", text);
    named("response.output_text.done", done);
    ObjectNode partDone =
        responsesEvent("response.content_part.done")
            .put("item_id", itemId())
            .put("output_index", 0)
            .put("content_index", 0);
    partDone.set("part", outputText(text));
    named("response.content_part.done", partDone);
    ObjectNode itemDone = responsesEvent("response.output_item.done").put("output_index", 0);
    itemDone.set("item", outputMessage("completed", text));
    named("response.output_item.done", itemDone);
    ObjectNode r = finalResponse(text, finish, usage, ktp);
    // vLLM ends the stream with response.completed, whatever the response's status
    named("response.completed", responsesEvent("response.completed").set("response", r));
  }

  /** One SSE event with an {@code event:} line, as Anthropic's and the Responses API's streams. */
  private void named(String name, JsonNode node) throws IOException {
    abortIfDue();
    out.write(("event: " + name + "\ndata: ").getBytes(StandardCharsets.UTF_8));
    out.write(JSON.writeValueAsBytes(node));
    out.write("\n\n".getBytes(StandardCharsets.UTF_8));
    out.flush();
    events++;
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
