package io.kvroute.router;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.ConnectorException.InvalidRequestException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.http.OpenAiJson;
import io.kvroute.scoring.LatencySlo;
import io.kvroute.scoring.SchedulingRequest;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads what the scheduler needs from a request body (model, prompt or messages, token ids, cache
 * salt): OpenAI's completions and chat, and Anthropic's Messages and OpenAI's Responses ({@link
 * ApiBodies}). The body is the request's one parse ({@link OpenAiJson#clientBody}), which the
 * connector running the request reads again without parsing; bodies that are not one JSON object,
 * repeat a key or carry trailing data are rejected with {@link InvalidRequestException}.
 *
 * <p>Stateless and thread-safe.
 */
final class OpenAiRequests {
  private OpenAiRequests() {}

  /**
   * The scheduling request for {@code request}, routed among {@code candidates}.
   *
   * @throws InvalidRequestException naming the field that is missing or malformed
   */
  static SchedulingRequest toSchedulingRequest(
      InferenceRequest request, java.util.function.Function<String, List<Endpoint>> candidates) {
    return toSchedulingRequest(request, candidates, model -> LatencySlo.NONE);
  }

  /**
   * The scheduling request for {@code request}, routed among {@code candidates}, with its latency
   * objective from its headers ({@link LatencySlo#fromHeaders}), else {@code defaultSlo} of its
   * model.
   *
   * @throws InvalidRequestException naming the field or header that is missing or malformed
   */
  static SchedulingRequest toSchedulingRequest(
      InferenceRequest request,
      java.util.function.Function<String, List<Endpoint>> candidates,
      java.util.function.Function<String, LatencySlo> defaultSlo) {
    JsonNode body = OpenAiJson.clientBody(request);
    JsonNode model = body.get("model");
    if (model == null || !model.isTextual() || model.asText().isBlank()) {
      throw new InvalidRequestException("request body field \"model\" must be a non-empty string");
    }
    SchedulingRequest.Builder b =
        SchedulingRequest.builder().model(model.asText()).headers(request.headers());
    switch (request.api()) {
      case CHAT_COMPLETIONS:
        b.messages(messages(body.get("messages")));
        b.chatTemplateInputs(chatTemplateInputs(body));
        break;
      case MESSAGES:
      case RESPONSES:
        apiBody(request.api(), body, b);
        break;
      default:
        prompt(body.get("prompt"), b);
    }
    JsonNode salt = body.get("cache_salt");
    if (salt != null && salt.isTextual()) {
      b.cacheSalt(salt.asText());
    }
    b.candidates(candidates.apply(model.asText()));
    LatencySlo slo;
    try {
      slo = LatencySlo.fromHeaders(request::header);
    } catch (IllegalArgumentException e) {
      throw new InvalidRequestException(e.getMessage());
    }
    b.slo(slo.orElse(defaultSlo.apply(model.asText())));
    try {
      return b.build();
    } catch (IllegalArgumentException e) {
      throw new InvalidRequestException(e.getMessage());
    }
  }

  /**
   * A Messages or Responses body: its chat form (kvroute's mirror of vLLM's conversion) for the
   * tokenizers that render chat templates, its render copy for vLLM's render endpoint of the API,
   * and its text for the approximate index. A Responses request that continues a stored response or
   * conversation has no known prompt: it is scheduled without one (load and affinity only) and
   * never disaggregated (a prefill pod has not stored that state).
   */
  private static void apiBody(
      InferenceRequest.Api api, JsonNode body, SchedulingRequest.Builder b) {
    ObjectNode o = (ObjectNode) body;
    ApiBodies.Converted c =
        api == InferenceRequest.Api.MESSAGES ? ApiBodies.messages(o) : ApiBodies.responses(o);
    if (c.stateful()) {
      b.disaggregation(false);
      return;
    }
    b.messages(c.textView());
    if (c.chatInputs() != null) {
      b.chatTemplateInputs(c.chatInputs().toString());
    }
    if (c.renderJson() != null) {
      b.nativeRequest(new SchedulingRequest.NativeRequest(api, c.renderJson()));
    }
  }

  /**
   * The {@code "model"} a body of any API names, when it is a JSON object (of at most 1 MiB) with a
   * non-blank string {@code model}; else null.
   */
  static String modelOf(byte[] body) {
    if (body == null || body.length == 0 || body.length > (1 << 20)) {
      return null;
    }
    int i = 0;
    while (i < body.length && Character.isWhitespace(body[i])) {
      i++;
    }
    if (i == body.length || body[i] != '{') {
      return null;
    }
    try {
      JsonNode m = OpenAiJson.readTree(body).get("model");
      return m != null && m.isTextual() && !m.asText().isBlank() ? m.asText() : null;
    } catch (java.io.IOException | RuntimeException notJson) {
      return null;
    }
  }

  private static List<SchedulingRequest.ChatMessage> messages(JsonNode messages) {
    if (messages == null || !messages.isArray() || messages.isEmpty()) {
      throw new InvalidRequestException(
          "request body field \"messages\" must be a non-empty array");
    }
    List<SchedulingRequest.ChatMessage> list = new ArrayList<>();
    for (JsonNode m : messages) {
      list.add(
          new SchedulingRequest.ChatMessage(
              m.path("role").asText("user"), content(m.get("content"))));
    }
    return list;
  }

  /** Body fields besides {@code messages} that change the rendered chat prompt. */
  private static final List<String> TEMPLATE_FIELDS =
      List.of(
          "tools",
          "documents",
          "chat_template_kwargs",
          "add_generation_prompt",
          "continue_final_message",
          "add_special_tokens");

  /**
   * The template inputs of a chat body when plain role/content messages would not render the same
   * prompt (a template field is set, or a message carries more than a role and string content);
   * else {@code null}.
   */
  static String chatTemplateInputs(JsonNode body) {
    boolean needed = false;
    for (String f : TEMPLATE_FIELDS) {
      JsonNode v = body.get(f);
      needed |= v != null && !v.isNull();
    }
    for (JsonNode m : body.get("messages")) {
      if (needed) {
        break;
      }
      for (java.util.Iterator<String> it = m.fieldNames(); it.hasNext(); ) {
        String f = it.next();
        boolean plain = f.equals("role") || (f.equals("content") && m.get(f).isTextual());
        if (!plain) {
          needed = true;
          break;
        }
      }
    }
    if (!needed) {
      return null;
    }
    com.fasterxml.jackson.databind.node.ObjectNode inputs =
        com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode();
    inputs.set("messages", body.get("messages"));
    for (String f : TEMPLATE_FIELDS) {
      JsonNode v = body.get(f);
      if (v != null && !v.isNull()) {
        inputs.set(f, v);
      }
    }
    return inputs.toString();
  }

  private static void prompt(JsonNode prompt, SchedulingRequest.Builder b) {
    if (prompt == null) {
      throw new InvalidRequestException(
          "request body field \"prompt\" is required for /v1/completions");
    }
    if (prompt.isTextual()) {
      b.prompt(prompt.asText());
    } else if (prompt.isArray() && !prompt.isEmpty() && prompt.get(0).isIntegralNumber()) {
      int[] tokens = new int[prompt.size()];
      for (int i = 0; i < tokens.length; i++) {
        JsonNode t = prompt.get(i);
        if (!t.canConvertToInt()) {
          throw new InvalidRequestException(
              "request body field \"prompt[" + i + "]\" must be a token id (int)");
        }
        tokens[i] = t.intValue();
      }
      b.tokenIds(tokens);
    } else if (prompt.isArray() && !prompt.isEmpty() && prompt.get(0).isTextual()) {
      b.prompt(prompt.get(0).asText()); // batch prompts: route by the first
    } else {
      throw new InvalidRequestException(
          "request body field \"prompt\" must be a string, a list of strings or token ids");
    }
  }

  private static String content(JsonNode c) {
    if (c == null || c.isNull()) {
      return "";
    }
    if (c.isTextual()) {
      return c.asText();
    }
    if (c.isArray()) {
      // vLLM joins a message's text parts with "\n" before applying the chat template
      java.util.StringJoiner sb = new java.util.StringJoiner("\n");
      for (JsonNode part : c) {
        if ("text".equals(part.path("type").asText()) && part.has("text")) {
          sb.add(part.get("text").asText());
        }
      }
      return sb.toString();
    }
    return c.toString();
  }
}
