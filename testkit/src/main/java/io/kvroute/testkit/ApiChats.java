package io.kvroute.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.testkit.internal.BadRequest;
import io.kvroute.testkit.internal.SimHttp;
import java.util.ArrayList;
import java.util.List;

/**
 * The simulator's conversion of Anthropic Messages and OpenAI Responses bodies to the chat request
 * it generates for, as vLLM does before it applies its chat template ({@code
 * vllm/entrypoints/anthropic/serving.py}, {@code vllm/entrypoints/openai/responses/utils.py}): the
 * system prompt (a string, or its text blocks joined) and leading system messages (joined with a
 * blank line) become the first system message; text blocks become the content (one block a string,
 * several a part list); {@code tool_use} blocks become {@code tool_calls}; a user's {@code
 * tool_result} blocks become {@code tool} messages before it; the Responses API's {@code
 * instructions} become a system message and its {@code input} the user turn or the items' turns.
 * Sampling and transfer fields are carried over ({@code max_tokens} from Messages' {@code
 * max_tokens} or Responses' {@code max_output_tokens}; {@code stream_options.include_usage} when
 * streaming: both APIs report usage in their last events).
 *
 * <p>Simpler than kvroute's own mirror (the router's {@code ApiBodies}) on purpose: a second,
 * independent reading of vLLM, so a test comparing the two finds a difference in the common case.
 * Stateless and thread-safe.
 */
final class ApiChats {
  private ApiChats() {}

  /** The chat request a {@code /v1/messages} body becomes. */
  static ObjectNode fromMessages(JsonNode body) throws BadRequest {
    if (body == null || !body.isObject()) {
      throw new BadRequest(400, "request body must be a JSON object");
    }
    JsonNode msgs = body.get("messages");
    if (msgs == null || !msgs.isArray() || msgs.isEmpty()) {
      throw new BadRequest(400, "messages must contain at least one item");
    }
    ObjectNode chat = carry(body);
    JsonNode mt = body.get("max_tokens");
    if (mt == null || mt.isNull()) {
      throw new BadRequest(400, "max_tokens: Field required");
    }
    chat.set("max_tokens", mt);
    ArrayNode out = chat.putArray("messages");
    List<String> system = new ArrayList<>();
    JsonNode top = body.get("system");
    if (top != null && top.isTextual()) {
      system.add(top.asText());
    } else if (top != null && top.isArray()) {
      system.add(texts(top, ""));
    }
    int i = 0;
    while (i < msgs.size() && "system".equals(msgs.get(i).path("role").asText())) {
      JsonNode c = msgs.get(i).get("content");
      system.add(c != null && c.isTextual() ? c.asText() : texts(c, ""));
      i++;
    }
    String sys = String.join("\n\n", system.stream().filter(s -> !s.isEmpty()).toList());
    if (!sys.isEmpty()) {
      out.addObject().put("role", "system").put("content", sys);
    }
    for (; i < msgs.size(); i++) {
      JsonNode m = msgs.get(i);
      String role = m.path("role").asText();
      JsonNode c = m.get("content");
      if (c == null || c.isTextual()) {
        ObjectNode o = out.addObject().put("role", role);
        o.put("content", c == null ? "" : c.asText());
        continue;
      }
      if (!c.isArray() || c.isEmpty()) {
        throw new BadRequest(400, "message content must not be empty");
      }
      ArrayNode parts = SimHttp.NODES.arrayNode();
      ArrayNode calls = SimHttp.NODES.arrayNode();
      for (JsonNode block : c) {
        switch (block.path("type").asText()) {
          case "text":
            if (!block.path("text").asText("").isEmpty()) {
              parts.addObject().put("type", "text").put("text", block.get("text").asText());
            }
            break;
          case "tool_use":
            ObjectNode call = calls.addObject().put("id", block.path("id").asText());
            call.put("type", "function");
            call.putObject("function")
                .put("name", block.path("name").asText())
                .put("arguments", block.path("input").toString());
            break;
          case "tool_result":
            JsonNode rc = block.get("content");
            out.addObject()
                .put("role", "tool")
                .put("tool_call_id", block.path("tool_use_id").asText(""))
                .put("content", rc == null || rc.isTextual() ? text(rc) : texts(rc, "\n"));
            break;
          default:
            break;
        }
      }
      if (parts.isEmpty() && calls.isEmpty()) {
        if (!role.equals("user")) {
          out.addObject().put("role", role);
        }
        continue;
      }
      ObjectNode o = out.addObject().put("role", role);
      if (parts.size() == 1) {
        o.put("content", parts.get(0).get("text").asText());
      } else if (!parts.isEmpty()) {
        o.set("content", parts);
      }
      if (!calls.isEmpty()) {
        o.set("tool_calls", calls);
      }
    }
    return chat;
  }

  /** The chat request a {@code /v1/responses} body becomes. */
  static ObjectNode fromResponses(JsonNode body) throws BadRequest {
    if (body == null || !body.isObject()) {
      throw new BadRequest(400, "request body must be a JSON object");
    }
    if (body.hasNonNull("previous_response_id")) {
      throw new BadRequest(
          404,
          "Response with id '"
              + body.get("previous_response_id").asText()
              + "' not found (the simulator stores no responses).");
    }
    ObjectNode chat = carry(body);
    if (body.hasNonNull("max_output_tokens")) {
      chat.set("max_tokens", body.get("max_output_tokens"));
    }
    ArrayNode out = chat.putArray("messages");
    JsonNode instructions = body.get("instructions");
    if (instructions != null && instructions.isTextual() && !instructions.asText().isEmpty()) {
      out.addObject().put("role", "system").put("content", instructions.asText());
    }
    JsonNode input = body.get("input");
    if (input != null && input.isTextual()) {
      out.addObject().put("role", "user").put("content", input.asText());
    } else if (input != null && input.isArray()) {
      for (JsonNode item : input) {
        String type = item.path("type").asText("message");
        if (type.equals("function_call_output")) {
          out.addObject()
              .put("role", "tool")
              .put("tool_call_id", item.path("call_id").asText())
              .put("content", item.path("output").asText());
        } else if (type.equals("message") && item.path("role").isTextual()) {
          JsonNode c = item.get("content");
          out.addObject()
              .put("role", item.get("role").asText())
              .put("content", c == null || c.isTextual() ? text(c) : texts(c, "\n"));
        } else {
          throw new BadRequest(400, "the simulator does not take input items of type " + type);
        }
      }
    } else {
      throw new BadRequest(400, "input must be a string or a list of items");
    }
    return chat;
  }

  /** The fields both APIs share with a chat request. */
  private static ObjectNode carry(JsonNode body) {
    ObjectNode chat = SimHttp.NODES.objectNode();
    for (String f : List.of("model", "temperature", "cache_salt", "kv_transfer_params")) {
      if (body.has(f)) {
        chat.set(f, body.get(f));
      }
    }
    if (body.path("stream").asBoolean(false)) {
      chat.put("stream", true);
      chat.putObject("stream_options").put("include_usage", true);
    }
    return chat;
  }

  private static String text(JsonNode n) {
    return n == null || n.isNull() ? "" : n.asText();
  }

  /** The texts of text blocks (or input/output text parts), joined with {@code sep}. */
  private static String texts(JsonNode blocks, String sep) {
    List<String> out = new ArrayList<>();
    if (blocks != null && blocks.isArray()) {
      for (JsonNode b : blocks) {
        String t = b.path("text").asText("");
        if (!t.isEmpty() && !t.startsWith("x-anthropic-billing-header")) {
          out.add(t);
        }
      }
    }
    return String.join(sep, out);
  }
}
