package io.kvroute.tokenizer.hf.internal;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.tokenizer.hf.ChatRequest;
import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.TokenizerLoadException;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Supplier;

/**
 * A model's chat template(s) and special tokens, rendered the way vLLM calls transformers' {@code
 * apply_chat_template(conversation, tools=..., chat_template=..., tokenize=False, **kwargs)}: the
 * template sees {@code messages}, {@code tools}, {@code documents}, {@code add_generation_prompt},
 * the tokenizer's special tokens ({@code bos_token}, {@code eos_token}, ..., {@code
 * additional_special_tokens}) and those {@code chat_template_kwargs} the template references
 * (vLLM's {@code resolve_chat_template_kwargs}); kwargs override the request's own fields. {@code
 * continue_final_message} cuts the rendered text after the final message as transformers does.
 *
 * <p>Immutable and thread-safe.
 */
public final class ChatRenderer {

  /** transformers' {@code apply_chat_template} parameters vLLM lets through even if unused. */
  private static final Set<String> HF_BASE_PARAMS =
      Set.of(
          "conversation",
          "tools",
          "documents",
          "add_generation_prompt",
          "continue_final_message",
          "padding",
          "truncation",
          "max_length",
          "return_tensors",
          "return_dict",
          "return_assistant_tokens_mask",
          "tokenizer_kwargs");

  private static final List<String> SPECIAL_TOKEN_KEYS =
      List.of(
          "bos_token",
          "eos_token",
          "unk_token",
          "sep_token",
          "pad_token",
          "cls_token",
          "mask_token");

  private final Map<String, JinjaTemplate> templates;
  private final Map<String, Object> specialTokens;

  private ChatRenderer(Map<String, JinjaTemplate> templates, Map<String, Object> specialTokens) {
    this.templates = templates;
    this.specialTokens = specialTokens;
  }

  /**
   * Reads the templates and special tokens of a {@code tokenizer_config.json}; {@code templateFile}
   * (a model's {@code chat_template.jinja}, which transformers prefers) and {@code override} (a
   * template the operator configured) take precedence in that order of increasing priority.
   *
   * @throws TokenizerLoadException naming {@code source} when a template does not compile
   */
  public static ChatRenderer of(
      JsonNode config,
      String templateFile,
      String override,
      Supplier<ZonedDateTime> clock,
      String source) {
    Map<String, String> sources = new LinkedHashMap<>();
    JsonNode ct = config == null ? null : config.get("chat_template");
    if (ct != null && ct.isTextual()) {
      sources.put("default", ct.textValue());
    } else if (ct != null && ct.isArray()) {
      for (JsonNode t : ct) {
        if (t.path("name").isTextual() && t.path("template").isTextual()) {
          sources.put(t.get("name").textValue(), t.get("template").textValue());
        }
      }
    }
    if (templateFile != null) {
      sources.put("default", templateFile);
    }
    if (override != null) {
      sources.clear();
      sources.put("default", override);
    }
    Map<String, JinjaTemplate> compiled = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : sources.entrySet()) {
      try {
        compiled.put(e.getKey(), JinjaTemplate.compile(e.getValue(), clock));
      } catch (ChatTemplateException ex) {
        throw new TokenizerLoadException(
            "chat template \"" + e.getKey() + "\" of " + source + ": " + ex.getMessage(), ex);
      }
    }
    Map<String, Object> special = new HashMap<>();
    if (config != null) {
      for (String k : SPECIAL_TOKEN_KEYS) {
        String v = tokenContent(config.get(k));
        if (v != null) {
          special.put(k, v);
        }
      }
      JsonNode extra = config.get("additional_special_tokens");
      if (extra != null && extra.isArray()) {
        List<Object> l = new ArrayList<>();
        for (JsonNode t : extra) {
          String v = tokenContent(t);
          if (v != null) {
            l.add(v);
          }
        }
        special.put("additional_special_tokens", Collections.unmodifiableList(l));
      }
    }
    return new ChatRenderer(
        Collections.unmodifiableMap(compiled), Collections.unmodifiableMap(special));
  }

  private static String tokenContent(JsonNode n) {
    if (n == null || n.isNull()) {
      return null;
    }
    if (n.isTextual()) {
      return n.textValue();
    }
    if (n.isObject() && n.path("content").isTextual()) {
      return n.get("content").textValue();
    }
    return null;
  }

  /** True when the model has a chat template. */
  public boolean hasTemplate() {
    return !templates.isEmpty();
  }

  /** The special-token strings the template sees ({@code bos_token}, ...). */
  public Map<String, Object> specialTokens() {
    return specialTokens;
  }

  /**
   * Renders a chat request to the prompt text.
   *
   * @throws ChatTemplateException when the model has no template, the template fails or raises
   */
  public String render(ChatRequest request) {
    Map<String, Object> kwargs = new LinkedHashMap<>(request.chatTemplateKwargs());
    Object tools =
        kwargs.containsKey("tools") ? kwargs.remove("tools") : request.tools().orElse(null);
    JinjaTemplate template = select(tools != null);
    Set<String> accepted = template.variableNames();
    Map<String, Object> ctx = new HashMap<>(specialTokens);
    boolean agp = request.addGenerationPrompt();
    boolean cfm = request.continueFinalMessage();
    Object documents = request.documents().orElse(null);
    for (Map.Entry<String, Object> e : kwargs.entrySet()) {
      String k = e.getKey();
      switch (k) {
        case "add_generation_prompt" -> agp = Boolean.TRUE.equals(e.getValue());
        case "continue_final_message" -> cfm = Boolean.TRUE.equals(e.getValue());
        case "documents" -> documents = e.getValue();
        default -> {
          if (accepted.contains(k) || HF_BASE_PARAMS.contains(k)) {
            ctx.put(k, e.getValue());
          }
        }
      }
    }
    List<Map<String, Object>> messages = request.messages();
    ctx.put("messages", messages);
    ctx.put("tools", tools);
    ctx.put("documents", documents);
    ctx.put("add_generation_prompt", agp);
    String rendered = template.render(ctx);
    return cfm ? continueFinal(rendered, messages) : rendered;
  }

  private JinjaTemplate select(boolean withTools) {
    if (templates.isEmpty()) {
      throw new ChatTemplateException(
          "As of transformers v4.44, default chat template is no longer allowed, so you must"
              + " provide a chat template if the tokenizer does not define one.");
    }
    if (templates.size() == 1) {
      return templates.values().iterator().next();
    }
    if (withTools && templates.containsKey("tool_use")) {
      return templates.get("tool_use");
    }
    return Optional.ofNullable(templates.get("default"))
        .orElseThrow(
            () ->
                new ChatTemplateException(
                    "this model has several chat templates ("
                        + templates.keySet()
                        + ") and none is named \"default\""));
  }

  /** transformers' {@code continue_final_message}: stop right after the final message's text. */
  static String continueFinal(String rendered, List<Map<String, Object>> messages) {
    Object last = messages.get(messages.size() - 1).get("content");
    String finalMessage = last instanceof String s ? s : Py.str(last);
    String stripped = PyStrings.strip(finalMessage, null, true, true);
    int loc = rendered.lastIndexOf(stripped);
    if (loc < 0) {
      throw new ChatTemplateException(
          "continue_final_message is set but the final message does not appear in the chat after"
              + " applying the chat template! This can happen if the chat template deletes portions"
              + " of the final message. Please verify the chat template and final message in your"
              + " chat to ensure they are compatible.");
    }
    String lstripped = PyStrings.strip(finalMessage, null, true, false);
    int end = loc + lstripped.length();
    if (end <= rendered.length() && rendered.substring(loc, end).equals(finalMessage)) {
      return rendered.substring(0, end);
    }
    return rendered.substring(0, loc + stripped.length());
  }
}
