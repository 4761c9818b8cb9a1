package io.kvroute.router;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.ConnectorException.InvalidRequestException;
import io.kvroute.connector.http.OpenAiJson;
import io.kvroute.scoring.SchedulingRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;

/**
 * Anthropic Messages and OpenAI Responses bodies in the forms the tokenizers take: the chat vLLM
 * converts them to before it applies the chat template (kvroute's mirror of that conversion), a
 * render copy for vLLM's own render endpoint of the API, and a text view for the approximate index.
 *
 * <p>The mirror follows vLLM's code (2026-11): for Messages {@code
 * vllm/entrypoints/anthropic/serving.py} ({@code to_chat_completion_request}) and {@code
 * inline_system.py}; for Responses {@code vllm/entrypoints/openai/responses/utils.py} ({@code
 * construct_input_messages}) and {@code ResponsesRequest.build_chat_params}. Where vLLM's result
 * depends on a probe of the engine's renderer or on Python's {@code str()} of a list, the request
 * has no chat form here ({@link Converted#chatInputs()} null): only vLLM's render endpoint
 * tokenizes it exactly, and without one the request is routed without precise prefix scores. Inline
 * system messages after the conversation's start are kept as system turns (vLLM's {@code preserve},
 * which its {@code auto} mode picks for templates that mark system turns) when the request has a
 * system prompt; otherwise they are folded into the neighbouring user turns, as vLLM does in both
 * modes.
 *
 * <p>Stateless and thread-safe.
 */
final class ApiBodies {
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  /** Claude Code's per-request attribution block, which vLLM drops from system prompts. */
  private static final String BILLING_HEADER = "x-anthropic-billing-header";

  /** Fields that never change a Messages request's prompt: left out of the render copy. */
  private static final List<String> MESSAGES_NOT_PROMPT =
      List.of(
          "stream",
          "temperature",
          "top_p",
          "top_k",
          "stop_sequences",
          "metadata",
          "service_tier",
          "cache_salt",
          "vllm_xargs",
          "ec_transfer_params");

  /** Fields that never change a Responses request's prompt: left out of the render copy. */
  private static final List<String> RESPONSES_NOT_PROMPT =
      List.of(
          "stream",
          "stream_options",
          "max_output_tokens",
          "max_tool_calls",
          "temperature",
          "top_p",
          "top_k",
          "top_logprobs",
          "logit_bias",
          "metadata",
          "service_tier",
          "store",
          "background",
          "user",
          "safety_identifier",
          "prompt_cache_key",
          "include",
          "text",
          "seed",
          "stop",
          "repetition_penalty",
          "ignore_eos",
          "request_id",
          "priority",
          "cache_salt",
          "vllm_xargs",
          "ec_transfer_params",
          "skip_special_tokens",
          "include_stop_str_in_output",
          "enable_response_messages");

  private ApiBodies() {}

  /**
   * One request in the tokenizers' forms.
   *
   * @param chatInputs the chat vLLM renders ({@code messages}, {@code tools}, template options), or
   *     null when kvroute cannot mirror it
   * @param renderJson the body for vLLM's render endpoint of the API, or null when it cannot render
   *     the request (a stateful Responses request)
   * @param textView the conversation as role/text pairs, for the approximate index
   * @param stateful a Responses request that continues a stored response or conversation: its
   *     prompt is the engine's stored state, and only the engine that stored it can serve it
   */
  record Converted(
      ObjectNode chatInputs,
      String renderJson,
      List<SchedulingRequest.ChatMessage> textView,
      boolean stateful) {}

  /** vLLM cannot be mirrored for this request: its chat form depends on what kvroute cannot see. */
  private static final class Unmirrorable extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Unmirrorable(String why) {
      super(why, null, false, false);
    }
  }

  // ------------------------------------------------------------------ Messages

  /** The content-block types vLLM's Messages protocol accepts ({@code AnthropicContentBlock}). */
  private static final List<String> BLOCK_TYPES =
      List.of(
          "text",
          "image",
          "tool_use",
          "tool_result",
          "tool_reference",
          "thinking",
          "redacted_thinking");

  /**
   * A {@code /v1/messages} body. It is checked as vLLM's protocol checks it (a request vLLM would
   * refuse with 400 is refused here, before any engine is picked): {@code max_tokens} a positive
   * integer; {@code messages} a non-empty array of objects whose {@code role} is {@code user},
   * {@code assistant} or {@code system} (Claude Code's {@code ctx} and {@code msg} read as {@code
   * user}, as vLLM reads them) and whose {@code content} is a string or an array of content blocks
   * of a known type; {@code system} a string or content blocks; {@code tools} an array of objects
   * with a string {@code name} and an object {@code input_schema}.
   *
   * @throws InvalidRequestException naming the field that is missing or malformed
   */
  static Converted messages(ObjectNode body) {
    JsonNode maxTokens = body.get("max_tokens");
    if (maxTokens == null || !maxTokens.isIntegralNumber() || maxTokens.asLong() <= 0) {
      throw new InvalidRequestException(
          "request body field \"max_tokens\" must be a positive integer");
    }
    JsonNode messages = body.get("messages");
    if (messages == null || !messages.isArray() || messages.isEmpty()) {
      throw new InvalidRequestException(
          "request body field \"messages\" must be a non-empty array");
    }
    ArrayNode normalized = null;
    for (int i = 0; i < messages.size(); i++) {
      JsonNode m = messages.get(i);
      String where = "messages[" + i + "]";
      if (!m.isObject() || !m.path("role").isTextual()) {
        throw new InvalidRequestException(
            "request body field \"" + where + "\" must be an object with a string role");
      }
      String role = m.get("role").asText();
      if (role.equals("ctx") || role.equals("msg")) {
        normalized = normalized != null ? normalized : ((ArrayNode) messages).deepCopy();
        ((ObjectNode) normalized.get(i)).put("role", "user");
      } else if (!role.equals("user") && !role.equals("assistant") && !role.equals("system")) {
        throw new InvalidRequestException(
            "request body field \""
                + where
                + ".role\" must be \"user\", \"assistant\" or \"system\", was \""
                + role
                + "\"");
      }
      JsonNode c = m.get("content");
      if (c == null || !(c.isTextual() || c.isArray())) {
        throw new InvalidRequestException(
            "request body field \""
                + where
                + ".content\" must be a string or an array of content blocks");
      }
      if (c.isArray() && c.isEmpty()) {
        throw new InvalidRequestException("message content must not be empty");
      }
      checkBlocks(c, where + ".content");
    }
    JsonNode system = body.get("system");
    if (system != null && !system.isNull()) {
      if (!(system.isTextual() || system.isArray())) {
        throw new InvalidRequestException(
            "request body field \"system\" must be a string or an array of content blocks");
      }
      checkBlocks(system, "system");
    }
    checkTools(body.get("tools"));
    if (normalized != null) {
      body = body.deepCopy();
      body.set("messages", normalized);
      messages = normalized;
    }
    ObjectNode chat;
    try {
      chat = messagesToChat(body, (ArrayNode) messages);
    } catch (Unmirrorable e) {
      chat = null;
    }
    ObjectNode render = body.deepCopy();
    OpenAiJson.stripTransferFields(render);
    render.remove(MESSAGES_NOT_PROMPT);
    render.put("max_tokens", 1); // required by the API; a one-token budget always fits
    List<SchedulingRequest.ChatMessage> view =
        chat != null ? textView(chat.get("messages")) : rawTextView(body, messages);
    return new Converted(chat, render.toString(), view, false);
  }

  /** Each item of a content-block array is an object of a type vLLM accepts. */
  private static void checkBlocks(JsonNode blocks, String where) {
    if (!blocks.isArray()) {
      return;
    }
    for (int j = 0; j < blocks.size(); j++) {
      JsonNode b = blocks.get(j);
      String at = where + "[" + j + "]";
      if (!b.isObject() || !b.path("type").isTextual()) {
        throw new InvalidRequestException(
            "request body field \"" + at + "\" must be a content block with a string type");
      }
      String type = b.get("type").asText();
      if (!BLOCK_TYPES.contains(type)) {
        throw new InvalidRequestException(
            "request body field \""
                + at
                + ".type\" is \""
                + type
                + "\", not a content-block type the engine accepts (one of "
                + String.join(", ", BLOCK_TYPES)
                + ")");
      }
      JsonNode text = b.get("text");
      if (text != null && !text.isNull() && !text.isTextual()) {
        throw new InvalidRequestException(
            "request body field \"" + at + ".text\" must be a string");
      }
    }
  }

  private static void checkTools(JsonNode tools) {
    if (tools == null || tools.isNull()) {
      return;
    }
    if (!tools.isArray()) {
      throw new InvalidRequestException("request body field \"tools\" must be an array");
    }
    for (int i = 0; i < tools.size(); i++) {
      JsonNode t = tools.get(i);
      if (!t.isObject() || !t.path("name").isTextual() || !t.path("input_schema").isObject()) {
        throw new InvalidRequestException(
            "request body field \"tools["
                + i
                + "]\" must be an object with a string name and an object input_schema");
      }
    }
  }

  private static ObjectNode messagesToChat(ObjectNode body, ArrayNode messages) {
    JsonNode thinking = body.get("thinking");
    if (thinking != null && "disabled".equals(thinking.path("type").asText())) {
      // vLLM maps it to the reasoning effort its renderer probe picks ("none" or "low")
      throw new Unmirrorable("thinking.type=disabled");
    }
    String systemPrompt = systemPromptText(body.get("system"));
    List<ObjectNode> msgs = new ArrayList<>();
    for (JsonNode m : messages) {
      msgs.add((ObjectNode) m);
    }
    String leading = "";
    boolean anySystem = msgs.stream().anyMatch(m -> isSystem(m));
    if (anySystem) {
      int n = 0;
      List<String> lead = new ArrayList<>();
      while (n < msgs.size() && isSystem(msgs.get(n))) {
        lead.add(systemText(msgs.get(n)));
        n++;
      }
      leading = join(lead);
      List<ObjectNode> rest = moveOutOfToolRuns(msgs.subList(n, msgs.size()));
      msgs = systemPrompt.isEmpty() && leading.isEmpty() ? fold(rest) : rest;
    }
    ArrayNode out = NODES.arrayNode();
    String system = join(List.of(systemPrompt, leading));
    if (!system.isEmpty()) {
      out.addObject().put("role", "system").put("content", system);
    }
    for (ObjectNode m : msgs) {
      convertMessage(m, out);
    }
    ObjectNode chat = NODES.objectNode();
    chat.set("messages", out);
    JsonNode tools = body.get("tools");
    if (tools != null && tools.isArray()) {
      ArrayNode t = chat.putArray("tools");
      for (JsonNode tool : tools) {
        ObjectNode fn = t.addObject().put("type", "function").putObject("function");
        fn.set("name", tool.get("name"));
        fn.set("description", tool.get("description"));
        fn.set("parameters", tool.get("input_schema"));
      }
    }
    ObjectNode kwargs = NODES.objectNode();
    JsonNode ctk = body.get("chat_template_kwargs");
    if (ctk != null && ctk.isObject()) {
      kwargs.setAll((ObjectNode) ctk);
    }
    JsonNode effort = body.path("output_config").get("effort");
    if (effort != null && !effort.isNull()) {
      kwargs.set("reasoning_effort", effort);
    }
    if (!kwargs.isEmpty()) {
      chat.set("chat_template_kwargs", kwargs);
    }
    return chat;
  }

  private static boolean isSystem(JsonNode m) {
    return "system".equals(m.path("role").asText());
  }

  /** The top-level {@code system}: a string, or its text blocks joined without a separator. */
  private static String systemPromptText(JsonNode system) {
    if (system == null || system.isNull()) {
      return "";
    }
    if (system.isTextual()) {
      return system.asText();
    }
    if (system.isArray()) {
      return blocksText(system);
    }
    throw new Unmirrorable("system is neither a string nor blocks");
  }

  private static String blocksText(JsonNode blocks) {
    StringBuilder sb = new StringBuilder();
    for (JsonNode b : blocks) {
      String text = b.path("text").asText("");
      if ("text".equals(b.path("type").asText())
          && !text.isEmpty()
          && !text.startsWith(BILLING_HEADER)) {
        sb.append(text);
      }
    }
    return sb.toString();
  }

  /** The text of a system message, without Claude Code's billing header. */
  private static String systemText(JsonNode m) {
    JsonNode c = m.get("content");
    if (c == null || c.isNull()) {
      return "";
    }
    if (c.isTextual()) {
      return c.asText().startsWith(BILLING_HEADER) ? "" : c.asText();
    }
    return blocksText(c);
  }

  /** vLLM's {@code _join}: the non-empty texts joined with a blank line. */
  private static String join(List<String> texts) {
    StringJoiner j = new StringJoiner("\n\n");
    for (String t : texts) {
      if (t != null && !t.isEmpty()) {
        j.add(t);
      }
    }
    return j.toString();
  }

  private static boolean hasToolUse(JsonNode m) {
    JsonNode c = m.get("content");
    if (c == null || !c.isArray()) {
      return false;
    }
    for (JsonNode b : c) {
      if ("tool_use".equals(b.path("type").asText())) {
        return true;
      }
    }
    return false;
  }

  /** vLLM's {@code _move_out_of_tool_runs}: no system message between a tool use and results. */
  private static List<ObjectNode> moveOutOfToolRuns(List<ObjectNode> messages) {
    List<ObjectNode> out = new ArrayList<>();
    List<ObjectNode> held = new ArrayList<>();
    boolean awaiting = false;
    for (ObjectNode m : messages) {
      String role = m.path("role").asText();
      if (role.equals("system")) {
        (awaiting ? held : out).add(m);
        continue;
      }
      if (role.equals("assistant")) {
        out.addAll(held);
        held.clear();
      }
      out.add(m);
      if (role.equals("user")) {
        out.addAll(held);
        held.clear();
      }
      awaiting = role.equals("assistant") && hasToolUse(m);
    }
    out.addAll(held);
    return out;
  }

  /** vLLM's {@code fold} of inline system messages into the neighbouring user turns. */
  private static List<ObjectNode> fold(List<ObjectNode> rest) {
    List<ObjectNode> out = new ArrayList<>();
    List<String> pending = new ArrayList<>();
    for (ObjectNode m : rest) {
      String role = m.path("role").asText();
      if (role.equals("system")) {
        String text = systemText(m);
        if (text.isEmpty()) {
          continue;
        }
        if (!out.isEmpty()
            && out.get(out.size() - 1).path("role").asText().equals("user")
            && pending.isEmpty()) {
          out.set(out.size() - 1, appendToUser(out.get(out.size() - 1), text));
        } else {
          pending.add(text);
        }
        continue;
      }
      ObjectNode message = m;
      if (!pending.isEmpty()) {
        String text = join(pending);
        pending.clear();
        if (role.equals("user")) {
          message = m.deepCopy();
          message.set("content", addText(m.get("content"), text, false));
        } else {
          out.add(NODES.objectNode().put("role", "user").put("content", text));
        }
      }
      out.add(message);
    }
    if (!pending.isEmpty()) {
      out.add(NODES.objectNode().put("role", "user").put("content", join(pending)));
    }
    return out;
  }

  /** vLLM's {@code _append_to_user}: to the user's own text, else to its last tool result. */
  private static ObjectNode appendToUser(ObjectNode message, String text) {
    JsonNode blocks = message.get("content");
    ObjectNode copy = message.deepCopy();
    if (blocks != null && blocks.isArray() && !blocks.isEmpty() && allToolResults(blocks)) {
      ArrayNode content = blocks.deepCopy();
      ObjectNode last = (ObjectNode) content.get(content.size() - 1);
      last.set("content", addText(last.get("content"), text, true));
      copy.set("content", content);
      return copy;
    }
    if (blocks == null || !blocks.isArray()) {
      copy.set("content", addText(blocks, text, true));
      return copy;
    }
    ArrayNode own = NODES.arrayNode();
    ArrayNode results = NODES.arrayNode();
    for (JsonNode b : blocks) {
      ("tool_result".equals(b.path("type").asText()) ? results : own).add(b.deepCopy());
    }
    JsonNode added = addText(own, text, true);
    results.addAll((ArrayNode) added);
    copy.set("content", results);
    return copy;
  }

  private static boolean allToolResults(JsonNode blocks) {
    for (JsonNode b : blocks) {
      if (!"tool_result".equals(b.path("type").asText())) {
        return false;
      }
    }
    return true;
  }

  /** vLLM's {@code _add_text}: {@code text} joined to the text at one end of {@code content}. */
  private static JsonNode addText(JsonNode content, String text, boolean atEnd) {
    if (content == null || content.isNull() || content.isTextual()) {
      String old = content == null || content.isNull() ? "" : content.asText();
      return NODES.textNode(atEnd ? join(List.of(old, text)) : join(List.of(text, old)));
    }
    ArrayNode items = content.deepCopy();
    int end = atEnd ? items.size() - 1 : 0;
    if (!items.isEmpty() && "text".equals(items.get(end).path("type").asText())) {
      ObjectNode item = (ObjectNode) items.get(end);
      String old = item.path("text").asText("");
      item.put("text", atEnd ? join(List.of(old, text)) : join(List.of(text, old)));
    } else {
      ObjectNode block = NODES.objectNode().put("type", "text").put("text", text);
      if (atEnd) {
        items.add(block);
      } else {
        items.insert(0, block);
      }
    }
    return items;
  }

  /** vLLM's {@code _convert_messages} for one message: appends it (and its tool turns). */
  private static void convertMessage(ObjectNode msg, ArrayNode out) {
    String role = msg.path("role").asText();
    if (role.equals("system")) {
      String text = systemText(msg);
      if (!text.isEmpty()) {
        out.addObject().put("role", "system").put("content", text);
      }
      return;
    }
    ObjectNode o = NODES.objectNode().put("role", role);
    JsonNode content = msg.get("content");
    if (content != null && content.isTextual()) {
      o.put("content", content.asText());
    } else if (content != null && content.isArray()) {
      convertBlocks(role, content, o, out);
    } else {
      throw new Unmirrorable("message content is neither a string nor blocks");
    }
    if (!(role.equals("user") && !o.has("content"))) {
      out.add(o);
    }
  }

  private static void convertBlocks(String role, JsonNode blocks, ObjectNode o, ArrayNode out) {
    ArrayNode parts = NODES.arrayNode();
    ArrayNode calls = NODES.arrayNode();
    StringBuilder reasoning = null;
    for (JsonNode b : blocks) {
      String type = b.path("type").asText();
      switch (type) {
        case "text":
          if (b.path("text").isTextual() && !b.get("text").asText().isEmpty()) {
            parts.addObject().put("type", "text").put("text", b.get("text").asText());
          }
          break;
        case "image":
          if (b.get("source") != null && !b.get("source").isNull()) {
            parts
                .addObject()
                .put("type", "image_url")
                .putObject("image_url")
                .put("url", imageUrl(b.get("source")));
          }
          break;
        case "thinking":
          if (b.get("thinking") != null && !b.get("thinking").isNull()) {
            reasoning = reasoning == null ? new StringBuilder() : reasoning;
            reasoning.append(b.get("thinking").asText());
          }
          break;
        case "tool_use":
          {
            ObjectNode call = calls.addObject();
            if (!b.path("id").asText("").isEmpty()) {
              call.put("id", b.get("id").asText());
            } else {
              throw new Unmirrorable("a tool_use block without an id gets a time-based id");
            }
            call.put("type", "function");
            ObjectNode fn = call.putObject("function");
            fn.put("name", b.path("name").asText(""));
            JsonNode input = b.get("input");
            boolean empty =
                input == null || input.isNull() || (input.isObject() && input.isEmpty());
            fn.put("arguments", empty ? "{}" : input.toString());
            break;
          }
        case "tool_result":
          if (role.equals("user")) {
            userToolResult(b, out);
          } else {
            JsonNode c = b.get("content");
            String text;
            if (c == null || c.isNull() || (c.isTextual() && c.asText().isEmpty())) {
              text = "";
            } else if (c.isTextual()) {
              text = c.asText();
            } else {
              throw new Unmirrorable("an assistant's tool_result is rendered with Python's str()");
            }
            parts.addObject().put("type", "text").put("text", "Tool result: " + text);
          }
          break;
        default: // redacted_thinking and tool_reference: no prompt text
          break;
      }
    }
    if (reasoning != null) {
      o.put("reasoning", reasoning.toString());
    }
    if (!calls.isEmpty()) {
      o.set("tool_calls", calls);
    }
    if (!parts.isEmpty()) {
      if (parts.size() == 1 && "text".equals(parts.get(0).path("type").asText())) {
        o.put("content", parts.get(0).get("text").asText());
      } else {
        o.set("content", parts);
      }
    }
  }

  /** vLLM's {@code _convert_user_tool_result}: a tool turn, and a user turn for its images. */
  private static void userToolResult(JsonNode b, ArrayNode out) {
    JsonNode c = b.get("content");
    String text = "";
    List<String> images = new ArrayList<>();
    if (c != null && c.isTextual()) {
      text = c.asText();
    } else if (c != null && c.isArray()) {
      StringJoiner j = new StringJoiner("\n");
      for (JsonNode item : c) {
        String type = item.path("type").asText();
        if (type.equals("text")) {
          j.add(item.path("text").asText(""));
        } else if (type.equals("image")) {
          String url = imageUrl(item.path("source"));
          if (!url.isEmpty()) {
            images.add(url);
          }
        } else if (type.equals("tool_reference")) {
          throw new Unmirrorable("tool references in a tool result");
        }
      }
      text = j.toString();
    }
    ObjectNode tool = out.addObject().put("role", "tool");
    tool.put("tool_call_id", b.path("tool_use_id").asText(""));
    tool.put("content", text);
    if (!images.isEmpty()) {
      ArrayNode parts = out.addObject().put("role", "user").putArray("content");
      for (String url : images) {
        parts.addObject().put("type", "image_url").putObject("image_url").put("url", url);
      }
    }
  }

  /** vLLM's {@code _convert_image_source_to_url}. */
  private static String imageUrl(JsonNode source) {
    if ("url".equals(source.path("type").asText())) {
      return source.path("url").asText("");
    }
    return "data:"
        + source.path("media_type").asText("image/jpeg")
        + ";base64,"
        + source.path("data").asText("");
  }

  // ------------------------------------------------------------------ Responses

  /**
   * A {@code /v1/responses} body, checked as the Responses API types check it: {@code input} a
   * string or an array of item objects, {@code instructions} a string, {@code max_output_tokens} a
   * positive integer, {@code tools} an array of objects with a string {@code type}. An item of a
   * type kvroute does not mirror is left to the engine (the request is scored without a chat form).
   *
   * @throws InvalidRequestException naming the field that is missing or malformed
   */
  static Converted responses(ObjectNode body) {
    JsonNode input = body.get("input");
    if (input == null || !(input.isTextual() || input.isArray())) {
      throw new InvalidRequestException(
          "request body field \"input\" must be a string or an array of items");
    }
    for (int i = 0; input.isArray() && i < input.size(); i++) {
      JsonNode item = input.get(i);
      if (!item.isObject()) {
        throw new InvalidRequestException(
            "request body field \"input[" + i + "]\" must be an object (an input item)");
      }
      JsonNode type = item.get("type");
      if (type != null && !type.isNull() && !type.isTextual()) {
        throw new InvalidRequestException(
            "request body field \"input[" + i + "].type\" must be a string");
      }
    }
    JsonNode instructions = body.get("instructions");
    if (instructions != null && !instructions.isNull() && !instructions.isTextual()) {
      throw new InvalidRequestException("request body field \"instructions\" must be a string");
    }
    JsonNode maxOut = body.get("max_output_tokens");
    if (maxOut != null
        && !maxOut.isNull()
        && (!maxOut.isIntegralNumber() || maxOut.asLong() <= 0)) {
      throw new InvalidRequestException(
          "request body field \"max_output_tokens\" must be a positive integer");
    }
    JsonNode tools = body.get("tools");
    if (tools != null && !tools.isNull()) {
      if (!tools.isArray()) {
        throw new InvalidRequestException("request body field \"tools\" must be an array");
      }
      for (int i = 0; i < tools.size(); i++) {
        if (!tools.get(i).isObject() || !tools.get(i).path("type").isTextual()) {
          throw new InvalidRequestException(
              "request body field \"tools[" + i + "]\" must be an object with a string type");
        }
      }
    }
    boolean stateful =
        present(body.get("previous_response_id"))
            || present(body.get("conversation"))
            || present(body.get("previous_response"));
    ObjectNode chat = null;
    if (!stateful) {
      try {
        chat = responsesToChat(body, input);
      } catch (Unmirrorable e) {
        chat = null;
      }
    }
    String render = null;
    if (!stateful) {
      ObjectNode r = body.deepCopy();
      OpenAiJson.stripTransferFields(r);
      r.remove(RESPONSES_NOT_PROMPT);
      render = r.toString();
    }
    List<SchedulingRequest.ChatMessage> view =
        chat != null ? textView(chat.get("messages")) : rawResponsesView(body, input);
    return new Converted(chat, render, view, stateful);
  }

  private static boolean present(JsonNode n) {
    return n != null && !n.isNull();
  }

  private static ObjectNode responsesToChat(ObjectNode body, JsonNode input) {
    if (present(body.get("previous_input_messages"))) {
      throw new Unmirrorable("Harmony history");
    }
    ArrayNode out = NODES.arrayNode();
    JsonNode instructions = body.get("instructions");
    if (instructions != null && instructions.isTextual() && !instructions.asText().isEmpty()) {
      out.addObject().put("role", "system").put("content", instructions.asText());
    }
    if (input.isTextual()) {
      out.addObject().put("role", "user").put("content", input.asText());
    } else {
      for (JsonNode item : input) {
        responseItem(item, out);
      }
    }
    ObjectNode chat = NODES.objectNode();
    chat.set("messages", out);
    JsonNode tools = body.get("tools");
    if (tools != null && tools.isArray() && !tools.isEmpty()) {
      ArrayNode t = NODES.arrayNode();
      for (JsonNode tool : tools) {
        String type = tool.path("type").asText();
        if (type.equals("function")) {
          ObjectNode fn = t.addObject().put("type", "function").putObject("function");
          tool.properties()
              .forEach(
                  e -> {
                    if (!e.getKey().equals("type")) {
                      fn.set(e.getKey(), e.getValue());
                    }
                  });
        } else if (type.equals("namespace")) {
          throw new Unmirrorable("namespaced tools");
        }
      }
      if (!t.isEmpty()) {
        chat.set("tools", t);
      }
    }
    boolean continueFinal = continueFinalMessage(input);
    chat.put("add_generation_prompt", !continueFinal);
    chat.put("continue_final_message", continueFinal);
    JsonNode effort = body.path("reasoning").get("effort");
    if (effort != null && !effort.isNull()) {
      chat.putObject("chat_template_kwargs").set("reasoning_effort", effort);
    }
    return chat;
  }

  /** vLLM's {@code should_continue_final_message}: a last message left in progress. */
  private static boolean continueFinalMessage(JsonNode input) {
    if (!input.isArray() || input.isEmpty()) {
      return false;
    }
    JsonNode last = input.get(input.size() - 1);
    String type = last.path("type").asText("message");
    if (!type.equals("message") && !type.equals("reasoning")) {
      return false;
    }
    String status = last.path("status").asText("");
    return status.equals("in_progress") || status.equals("incomplete");
  }

  /**
   * vLLM's {@code _construct_message_from_response_item}, appending or merging into {@code out}.
   */
  private static void responseItem(JsonNode item, ArrayNode out) {
    if (!item.isObject()) {
      throw new Unmirrorable("an input item that is not an object");
    }
    ObjectNode prev = out.isEmpty() ? null : (ObjectNode) out.get(out.size() - 1);
    ObjectNode prevAssistant =
        prev != null && "assistant".equals(prev.path("role").asText()) ? prev : null;
    String type = item.path("type").asText("");
    String role = item.path("role").asText("");
    switch (type) {
      case "function_call":
        {
          if (present(item.get("namespace"))) {
            throw new Unmirrorable("a namespaced function call");
          }
          ObjectNode call = NODES.objectNode();
          call.set("id", item.get("call_id"));
          call.putObject("function")
              .put("name", item.path("name").asText(""))
              .set("arguments", item.get("arguments"));
          call.put("type", "function");
          if (prevAssistant != null) {
            JsonNode calls = prevAssistant.get("tool_calls");
            if (calls == null || calls.isNull()) {
              prevAssistant.putArray("tool_calls").add(call);
            } else {
              ((ArrayNode) calls).add(call);
            }
            return;
          }
          ObjectNode m = out.addObject().put("role", "assistant");
          m.putArray("tool_calls").add(call);
          return;
        }
      case "function_call_output":
        {
          ObjectNode m = out.addObject().put("role", "tool");
          m.set("content", item.get("output"));
          m.set("tool_call_id", item.get("call_id"));
          return;
        }
      case "reasoning":
        {
          if (present(item.get("encrypted_content"))) {
            throw new Unmirrorable("encrypted reasoning");
          }
          String text = "";
          JsonNode content = item.get("content");
          JsonNode summary = item.get("summary");
          if (content != null && content.isArray() && !content.isEmpty()) {
            text = firstText(content.get(0));
          } else if (summary != null && summary.isArray() && !summary.isEmpty()) {
            text = firstText(summary.get(0));
          }
          if (prevAssistant != null && !present(prevAssistant.get("reasoning"))) {
            prevAssistant.put("reasoning", text);
            return;
          }
          out.addObject().put("role", "assistant").put("reasoning", text);
          return;
        }
      default:
        break;
    }
    if ((type.isEmpty() || type.equals("message")) && role.equals("assistant")) {
      JsonNode content = item.get("content");
      String text = "";
      if (content != null && content.isTextual()) {
        text = content.asText();
      } else if (content != null && content.isArray() && !content.isEmpty()) {
        text = firstText(content.get(0));
      }
      if (prevAssistant != null && !present(prevAssistant.get("content"))) {
        prevAssistant.put("content", text);
        return;
      }
      out.addObject().put("role", "assistant").put("content", text);
      return;
    }
    if ((type.isEmpty() || type.equals("message")) && !role.isEmpty()) {
      out.add(item.deepCopy()); // a user, system or developer message, as vLLM passes it
      return;
    }
    throw new Unmirrorable("input item of type " + type);
  }

  private static String firstText(JsonNode part) {
    return part.isTextual() ? part.asText() : part.path("text").asText("");
  }

  // ------------------------------------------------------------------ text views

  /** Role and text of each chat message (content parts' texts joined with a newline). */
  private static List<SchedulingRequest.ChatMessage> textView(JsonNode messages) {
    List<SchedulingRequest.ChatMessage> out = new ArrayList<>();
    for (JsonNode m : messages) {
      out.add(new SchedulingRequest.ChatMessage(m.path("role").asText("user"), text(m)));
    }
    return out;
  }

  private static String text(JsonNode m) {
    JsonNode c = m.get("content");
    if (c == null || c.isNull()) {
      return "";
    }
    if (c.isTextual()) {
      return c.asText();
    }
    StringJoiner j = new StringJoiner("\n");
    if (c.isArray()) {
      for (JsonNode p : c) {
        if (p.path("text").isTextual()) {
          j.add(p.get("text").asText());
        } else if (p.path("content").isTextual()) {
          j.add(p.get("content").asText());
        }
      }
    }
    return j.toString();
  }

  private static List<SchedulingRequest.ChatMessage> rawTextView(ObjectNode body, JsonNode msgs) {
    List<SchedulingRequest.ChatMessage> out = new ArrayList<>();
    JsonNode system = body.get("system");
    if (system != null && system.isTextual()) {
      out.add(new SchedulingRequest.ChatMessage("system", system.asText()));
    } else if (system != null && system.isArray()) {
      out.add(new SchedulingRequest.ChatMessage("system", blocksText(system)));
    }
    out.addAll(textView(msgs));
    return out;
  }

  private static List<SchedulingRequest.ChatMessage> rawResponsesView(
      ObjectNode body, JsonNode input) {
    List<SchedulingRequest.ChatMessage> out = new ArrayList<>();
    JsonNode instructions = body.get("instructions");
    if (instructions != null && instructions.isTextual()) {
      out.add(new SchedulingRequest.ChatMessage("system", instructions.asText()));
    }
    if (input.isTextual()) {
      out.add(new SchedulingRequest.ChatMessage("user", input.asText()));
    } else {
      for (JsonNode item : input) {
        out.add(new SchedulingRequest.ChatMessage(item.path("role").asText("user"), text(item)));
      }
    }
    return out;
  }
}
