package io.kvroute.tokenizer.hf;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.scoring.SchedulingRequest;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The parts of a {@code /v1/chat/completions} request that decide its prompt tokens: the messages,
 * the tools, {@code add_generation_prompt}, {@code continue_final_message}, {@code documents},
 * {@code chat_template_kwargs} and {@code add_special_tokens}.
 *
 * <p>Messages are normalised as vLLM does before it renders a chat template ({@code
 * vllm/entrypoints/chat_utils.py}): content parts of type {@code text} (and {@code input_text},
 * {@code output_text}, {@code refusal}, {@code thinking}) are joined with {@code "\n"}, a missing
 * or null content becomes {@code ""}, an assistant's {@code tool_calls} arguments given as a JSON
 * string are parsed into an object (empty arguments become {@code {}}), {@code reasoning} / {@code
 * reasoning_content} are both set when either is, and {@code tool_call_id} and {@code name} are
 * kept. Tools are passed as vLLM's {@code model_dump()} writes them: {@code {"type", "function":
 * {"name", "description", "parameters"}}} with absent fields as {@code null}. Non-text parts
 * (images, audio) contribute no text: kvroute does not know the engine's placeholder tokens.
 *
 * <p>Immutable and thread-safe; values are plain Java forms of JSON ({@code null}, {@link Boolean},
 * {@link Long}, {@link Double}, {@link String}, {@link List}, {@link Map}).
 */
public final class ChatRequest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final List<Map<String, Object>> messages;
  private final List<Object> tools;
  private final List<Object> documents;
  private final boolean addGenerationPrompt;
  private final boolean continueFinalMessage;
  private final boolean addSpecialTokens;
  private final Map<String, Object> chatTemplateKwargs;

  private ChatRequest(Builder b) {
    List<Map<String, Object>> conv = new ArrayList<>();
    for (Map<String, Object> m : b.messages) {
      conv.add(Collections.unmodifiableMap(normalise(m)));
    }
    this.messages = Collections.unmodifiableList(conv);
    List<Object> t = null;
    if (b.tools != null) {
      t = new ArrayList<>();
      for (Object tool : b.tools) {
        t.add(toolDump(tool));
      }
      t = Collections.unmodifiableList(t);
    }
    this.tools = t;
    this.documents = b.documents == null ? null : Collections.unmodifiableList(b.documents);
    this.addGenerationPrompt = b.addGenerationPrompt;
    this.continueFinalMessage = b.continueFinalMessage;
    this.addSpecialTokens = b.addSpecialTokens;
    this.chatTemplateKwargs = Collections.unmodifiableMap(new LinkedHashMap<>(b.kwargs));
  }

  /** A new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Reads a {@code /v1/chat/completions} JSON body (other fields are ignored).
   *
   * @throws IllegalArgumentException if the body is not JSON or {@code messages} is not an array of
   *     objects with a string {@code role}
   */
  public static ChatRequest fromJson(byte[] body) {
    return fromJson(readJson(() -> JSON.readTree(body)));
  }

  /** Like {@link #fromJson(byte[])} for a JSON string. */
  public static ChatRequest fromJson(String body) {
    return fromJson(readJson(() -> JSON.readTree(body)));
  }

  /** One parse of a request body. */
  private interface JsonRead {
    JsonNode read() throws IOException;
  }

  /** The parsed body; a parse error becomes an {@link IllegalArgumentException}. */
  private static JsonNode readJson(JsonRead read) {
    try {
      return read.read();
    } catch (IOException e) {
      throw new IllegalArgumentException("chat request is not valid JSON: " + e.getMessage(), e);
    }
  }

  /** Like {@link #fromJson(byte[])} for a parsed body. */
  @SuppressWarnings("unchecked")
  public static ChatRequest fromJson(JsonNode root) {
    if (root == null || !root.isObject()) {
      throw new IllegalArgumentException("chat request must be a JSON object");
    }
    JsonNode msgs = root.get("messages");
    if (msgs == null || !msgs.isArray()) {
      throw new IllegalArgumentException("chat request field \"messages\" must be an array");
    }
    Builder b = builder();
    for (int i = 0; i < msgs.size(); i++) {
      JsonNode m = msgs.get(i);
      if (!m.isObject() || !m.path("role").isTextual()) {
        throw new IllegalArgumentException(
            "chat request field \"messages[" + i + "]\" must be an object with a string role");
      }
      b.message((Map<String, Object>) toJava(m));
    }
    JsonNode tools = root.get("tools");
    if (tools != null && tools.isArray()) {
      b.tools((List<Object>) toJava(tools));
    }
    JsonNode docs = root.get("documents");
    if (docs != null && docs.isArray()) {
      b.documents((List<Object>) toJava(docs));
    }
    if (root.path("add_generation_prompt").isBoolean()) {
      b.addGenerationPrompt(root.get("add_generation_prompt").booleanValue());
    }
    if (root.path("continue_final_message").isBoolean()) {
      b.continueFinalMessage(root.get("continue_final_message").booleanValue());
    }
    if (root.path("add_special_tokens").isBoolean()) {
      b.addSpecialTokens(root.get("add_special_tokens").booleanValue());
    }
    JsonNode kw = root.get("chat_template_kwargs");
    if (kw != null && kw.isObject()) {
      b.chatTemplateKwargs((Map<String, Object>) toJava(kw));
    }
    return b.build();
  }

  /**
   * The request a {@link SchedulingRequest} describes: its role/content messages with a generation
   * prompt (what {@code Tokenizers.vllm()} sends to {@code /tokenize}).
   */
  public static ChatRequest of(List<SchedulingRequest.ChatMessage> messages) {
    Builder b = builder();
    for (SchedulingRequest.ChatMessage m : messages) {
      Map<String, Object> msg = new LinkedHashMap<>();
      msg.put("role", m.role());
      msg.put("content", m.content());
      b.message(msg);
    }
    return b.build();
  }

  /** The normalised conversation the template sees. */
  public List<Map<String, Object>> messages() {
    return messages;
  }

  /** The tools as vLLM passes them to the template, if any. */
  public Optional<List<Object>> tools() {
    return Optional.ofNullable(tools);
  }

  /** The documents (RAG templates), if any. */
  public Optional<List<Object>> documents() {
    return Optional.ofNullable(documents);
  }

  /** {@code add_generation_prompt} (vLLM's default: true). */
  public boolean addGenerationPrompt() {
    return addGenerationPrompt;
  }

  /** {@code continue_final_message} (default false). */
  public boolean continueFinalMessage() {
    return continueFinalMessage;
  }

  /** {@code add_special_tokens} for encoding the rendered prompt (vLLM's chat default: false). */
  public boolean addSpecialTokens() {
    return addSpecialTokens;
  }

  /** {@code chat_template_kwargs}. */
  public Map<String, Object> chatTemplateKwargs() {
    return chatTemplateKwargs;
  }

  /** A canonical JSON form of everything that decides the tokens (a cache key). */
  public String canonicalJson() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("m", messages);
    m.put("t", tools);
    m.put("d", documents);
    m.put("g", addGenerationPrompt);
    m.put("c", continueFinalMessage);
    m.put("s", addSpecialTokens);
    m.put("k", chatTemplateKwargs);
    try {
      return JSON.writeValueAsString(m);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public String toString() {
    return "ChatRequest{messages="
        + messages.size()
        + ", tools="
        + (tools == null ? 0 : tools.size())
        + ", addGenerationPrompt="
        + addGenerationPrompt
        + "}";
  }

  // ------------------------------------------------------------------ vLLM's normalisation

  private static Map<String, Object> normalise(Map<String, Object> m) {
    Object roleValue = m.get("role");
    if (!(roleValue instanceof String role)) {
      throw new IllegalArgumentException("each chat message needs a string \"role\"");
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("role", role);
    out.put("content", joinContent(m.get("content")));
    if (role.equals("assistant")) {
      Object calls = m.get("tool_calls");
      if (calls instanceof List<?> list) {
        List<Object> parsed = new ArrayList<>();
        for (Object c : list) {
          parsed.add(parseToolCall(c));
        }
        out.put("tool_calls", Collections.unmodifiableList(parsed));
      }
      Object reasoning =
          truthy(m.get("reasoning")) ? m.get("reasoning") : m.get("reasoning_content");
      if (reasoning != null) {
        out.put("reasoning", reasoning);
        out.put("reasoning_content", reasoning);
      }
    } else if (role.equals("tool") && m.containsKey("tool_call_id")) {
      out.put("tool_call_id", m.get("tool_call_id"));
    }
    if (m.get("name") instanceof String name) {
      out.put("name", name);
    }
    return out;
  }

  private static boolean truthy(Object o) {
    return o != null && !(o instanceof String s && s.isEmpty());
  }

  private static String joinContent(Object content) {
    if (content == null) {
      return "";
    }
    if (content instanceof String s) {
      return s;
    }
    if (!(content instanceof List<?> parts)) {
      throw new IllegalArgumentException(
          "chat message content must be a string or a list of parts");
    }
    List<String> texts = new ArrayList<>();
    for (Object p : parts) {
      if (p instanceof String s) {
        texts.add(s);
        continue;
      }
      if (!(p instanceof Map<?, ?> part)) {
        continue;
      }
      Object type = part.get("type");
      Object text =
          switch (String.valueOf(type)) {
            case "text", "input_text", "output_text" -> part.get("text");
            case "refusal" -> part.get("refusal");
            case "thinking" -> part.get("thinking");
            default -> null;
          };
      if (text instanceof String s) {
        texts.add(s);
      }
    }
    return String.join("\n", texts);
  }

  @SuppressWarnings("unchecked")
  private static Object parseToolCall(Object call) {
    if (!(call instanceof Map<?, ?> c)) {
      return call;
    }
    Map<String, Object> copy = new LinkedHashMap<>((Map<String, Object>) c);
    Object fn = copy.get("function");
    if (fn instanceof Map<?, ?> f) {
      Map<String, Object> fcopy = new LinkedHashMap<>((Map<String, Object>) f);
      Object args = fcopy.get("arguments");
      if (args instanceof String s && !s.isEmpty()) {
        try {
          fcopy.put("arguments", toJava(JSON.readTree(s)));
        } catch (JsonProcessingException e) {
          throw new IllegalArgumentException(
              "tool call arguments are not valid JSON: " + e.getOriginalMessage(), e);
        }
      } else if (args == null || (args instanceof String s && s.isEmpty())) {
        fcopy.put("arguments", new LinkedHashMap<String, Object>());
      }
      copy.put("function", fcopy);
    }
    return copy;
  }

  private static Object toolDump(Object tool) {
    if (!(tool instanceof Map<?, ?> t)) {
      throw new IllegalArgumentException("each tool must be an object");
    }
    Object fn = t.get("function");
    if (!(fn instanceof Map<?, ?> f) || !(f.get("name") instanceof String)) {
      throw new IllegalArgumentException("each tool needs a \"function\" with a string \"name\"");
    }
    Map<String, Object> function = new LinkedHashMap<>();
    function.put("name", f.get("name"));
    function.put("description", f.get("description"));
    function.put("parameters", f.get("parameters"));
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("type", t.get("type") == null ? "function" : t.get("type"));
    out.put("function", function);
    return out;
  }

  /** Converts JSON to plain Java values (ordered maps, longs, doubles). */
  static Object toJava(JsonNode n) {
    if (n == null || n.isNull() || n.isMissingNode()) {
      return null;
    }
    if (n.isTextual()) {
      return n.textValue();
    }
    if (n.isBoolean()) {
      return n.booleanValue();
    }
    if (n.isIntegralNumber()) {
      return n.canConvertToLong() ? (Object) n.longValue() : n.doubleValue();
    }
    if (n.isNumber()) {
      return n.doubleValue();
    }
    if (n.isArray()) {
      List<Object> out = new ArrayList<>(n.size());
      for (JsonNode x : n) {
        out.add(toJava(x));
      }
      return out;
    }
    Map<String, Object> out = new LinkedHashMap<>();
    for (Map.Entry<String, JsonNode> e : n.properties()) {
      out.put(e.getKey(), toJava(e.getValue()));
    }
    return out;
  }

  /** Builds {@link ChatRequest}s; not thread-safe. */
  public static final class Builder {
    private final List<Map<String, Object>> messages = new ArrayList<>();
    private List<Object> tools;
    private List<Object> documents;
    private boolean addGenerationPrompt = true;
    private boolean continueFinalMessage;
    private boolean addSpecialTokens;
    private final Map<String, Object> kwargs = new LinkedHashMap<>();

    private Builder() {}

    /** Appends one OpenAI-format message ({@code role}, {@code content}, ...). */
    public Builder message(Map<String, Object> message) {
      messages.add(Objects.requireNonNull(message, "message"));
      return this;
    }

    /** Appends a {@code role}/{@code content} message. */
    public Builder message(String role, String content) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("role", Objects.requireNonNull(role, "role"));
      m.put("content", content);
      return message(m);
    }

    /** The OpenAI {@code tools} (function definitions). */
    public Builder tools(List<Object> tools) {
      this.tools = tools == null ? null : new ArrayList<>(tools);
      return this;
    }

    /** The {@code documents} for RAG templates. */
    public Builder documents(List<Object> documents) {
      this.documents = documents == null ? null : new ArrayList<>(documents);
      return this;
    }

    /** {@code add_generation_prompt} (default true, as in vLLM). */
    public Builder addGenerationPrompt(boolean v) {
      this.addGenerationPrompt = v;
      return this;
    }

    /** {@code continue_final_message} (default false). */
    public Builder continueFinalMessage(boolean v) {
      this.continueFinalMessage = v;
      return this;
    }

    /** {@code add_special_tokens} (default false, as in vLLM's chat API). */
    public Builder addSpecialTokens(boolean v) {
      this.addSpecialTokens = v;
      return this;
    }

    /** {@code chat_template_kwargs} (for example {@code enable_thinking}). */
    public Builder chatTemplateKwargs(Map<String, Object> kwargs) {
      this.kwargs.clear();
      if (kwargs != null) {
        this.kwargs.putAll(kwargs);
      }
      return this;
    }

    /**
     * Builds the request.
     *
     * @throws IllegalArgumentException when there are no messages, a message has no role, or {@code
     *     add_generation_prompt} and {@code continue_final_message} are both set
     */
    public ChatRequest build() {
      if (messages.isEmpty()) {
        throw new IllegalArgumentException("chat request needs at least one message");
      }
      boolean agp =
          kwargs.get("add_generation_prompt") instanceof Boolean v ? v : addGenerationPrompt;
      boolean cfm =
          kwargs.get("continue_final_message") instanceof Boolean v ? v : continueFinalMessage;
      if (agp && cfm) {
        throw new IllegalArgumentException(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
      }
      if (kwargs.containsKey("chat_template") || kwargs.containsKey("tokenize")) {
        throw new IllegalArgumentException(
            "Found unexpected chat template kwargs from request: chat_template/tokenize");
      }
      return new ChatRequest(this);
    }
  }
}
