package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * What the {@link Scheduler} needs to know about one inference request: the model, the prompt (as
 * text, chat messages or token ids), an optional LoRA adapter and cache salt, the request headers
 * and the candidate endpoints.
 *
 * <p>Immutable and thread-safe. The token array is copied in and never exposed mutably: {@link
 * #tokenIds()} returns a copy, so the scheduler reads the array without copying only inside this
 * package.
 */
public final class SchedulingRequest {

  /**
   * One chat message as sent to {@code /v1/chat/completions}; used to tokenize with the engine's
   * chat template.
   *
   * @param role {@code system}, {@code user}, {@code assistant}, ...
   * @param content the text content
   */
  public record ChatMessage(String role, String content) {
    /** Validates that both fields are present. */
    public ChatMessage {
      Objects.requireNonNull(role, "role");
      Objects.requireNonNull(content, "content");
    }
  }

  /**
   * A request of an API whose body is not a chat or completion (Anthropic's Messages, OpenAI's
   * Responses) in the form vLLM renders natively: {@code POST /v1/messages/render} and {@code POST
   * /v1/responses/render} take it and answer the token ids the engine will compute, whatever the
   * engine's conversion of it to a chat does. Tokenizers that render a chat template locally, or
   * call {@code /tokenize}, use {@link SchedulingRequest#chatTemplateInputs()} instead (kvroute's
   * mirror of that conversion), and cannot tokenize the request when it is absent.
   *
   * @param api the API, {@link InferenceRequest.Api#MESSAGES} or {@link
   *     InferenceRequest.Api#RESPONSES}
   * @param json the body to render: the client's body without the fields that never change the
   *     prompt (sampling, streaming, transfer fields), with a one-token output budget
   */
  public record NativeRequest(InferenceRequest.Api api, String json) {
    /** Validates that both fields are present. */
    public NativeRequest {
      Objects.requireNonNull(api, "api");
      Objects.requireNonNull(json, "json");
    }
  }

  private final String model;
  private final String prompt;
  private final List<ChatMessage> messages;
  private final int[] tokenIds;
  private final String lora;
  private final String cacheSalt;
  private final Map<String, List<String>> headers;
  private final List<Endpoint> candidates;
  private final String profile;
  private final Boolean disaggregation;
  private final String chatTemplateInputs;
  private final NativeRequest nativeRequest;
  private final boolean preciseScoring;
  private final LatencySlo slo;

  private SchedulingRequest(Builder b, int[] tokens) {
    this.model = b.model;
    this.prompt = b.prompt;
    this.messages = b.messages == null ? null : List.copyOf(b.messages);
    this.tokenIds = tokens;
    this.lora = b.lora;
    this.cacheSalt = b.cacheSalt;
    this.headers = b.handOverHeaders();
    this.candidates = List.copyOf(b.candidates);
    this.profile = b.profile;
    this.disaggregation = b.disaggregation;
    this.chatTemplateInputs = b.chatTemplateInputs;
    this.nativeRequest = b.nativeRequest;
    this.preciseScoring = b.preciseScoring;
    this.slo = b.slo;
  }

  /** {@code o} with other token ids: every other (immutable) field shared, not copied. */
  private SchedulingRequest(SchedulingRequest o, int[] tokens) {
    this.model = o.model;
    this.prompt = o.prompt;
    this.messages = o.messages;
    this.tokenIds = tokens;
    this.lora = o.lora;
    this.cacheSalt = o.cacheSalt;
    this.headers = o.headers;
    this.candidates = o.candidates;
    this.profile = o.profile;
    this.disaggregation = o.disaggregation;
    this.chatTemplateInputs = o.chatTemplateInputs;
    this.nativeRequest = o.nativeRequest;
    this.preciseScoring = o.preciseScoring;
    this.slo = o.slo;
  }

  /** A new builder. {@code model} and at least one candidate are normally set. */
  public static Builder builder() {
    return new Builder();
  }

  /** A builder initialised with this request's values. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.model = model;
    b.prompt = prompt;
    b.messages = messages;
    b.tokenIds = tokenIds;
    b.lora = lora;
    b.cacheSalt = cacheSalt;
    b.headers.putAll(headers);
    b.candidates.addAll(candidates);
    b.profile = profile;
    b.disaggregation = disaggregation;
    b.chatTemplateInputs = chatTemplateInputs;
    b.nativeRequest = nativeRequest;
    b.preciseScoring = preciseScoring;
    b.slo = slo;
    return b;
  }

  /** A copy of this request with the given token ids (for example from a {@link Tokenizer}). */
  public SchedulingRequest withTokenIds(int[] tokens) {
    return new SchedulingRequest(this, tokens == null ? null : tokens.clone());
  }

  /** The model name the client asked for (the base model). */
  public String model() {
    return model;
  }

  /** The completion prompt text, if the request carries one. */
  public Optional<String> prompt() {
    return Optional.ofNullable(prompt);
  }

  /** The chat messages, if this is a chat request. */
  public Optional<List<ChatMessage>> messages() {
    return Optional.ofNullable(messages);
  }

  /** True when the request carries token ids (caller-supplied or from a tokenizer). */
  public boolean hasTokenIds() {
    return tokenIds != null;
  }

  /** A copy of the token ids, if present. */
  public Optional<int[]> tokenIds() {
    return tokenIds == null ? Optional.empty() : Optional.of(tokenIds.clone());
  }

  /** The token ids without copying; callers in this package must not modify them. */
  int[] tokens() {
    return tokenIds;
  }

  /** The LoRA adapter name, if the request targets one. */
  public Optional<String> lora() {
    return Optional.ofNullable(lora);
  }

  /** The model or LoRA name that keys KV blocks: the LoRA name when set, else the model. */
  public String cacheModelName() {
    return lora != null ? lora : model;
  }

  /** The vLLM {@code cache_salt}, if any. */
  public Optional<String> cacheSalt() {
    return Optional.ofNullable(cacheSalt);
  }

  /** Request headers; names are matched case-insensitively. */
  public Map<String, List<String>> headers() {
    return headers;
  }

  /** The first value of a header (case-insensitive name), if present. */
  public Optional<String> header(String name) {
    List<String> v = headers.get(name);
    return v == null || v.isEmpty() ? Optional.empty() : Optional.ofNullable(v.get(0));
  }

  /** The endpoints the request may go to, in the gateway's order. */
  public List<Endpoint> candidates() {
    return candidates;
  }

  /**
   * The name of a single scheduling profile to run instead of the scheduler's profile handler, if
   * the caller chose one.
   */
  public Optional<String> profile() {
    return Optional.ofNullable(profile);
  }

  /**
   * A per-request override of prefill/decode disaggregation: {@code false} forces decode-only,
   * {@code true} asks for PD whenever a prefill profile exists; empty lets the decider choose.
   */
  public Optional<Boolean> disaggregation() {
    return Optional.ofNullable(disaggregation);
  }

  /**
   * The chat request's template inputs as a JSON object, when {@link #messages()} alone does not
   * determine the rendered prompt: {@code messages} with every field ({@code tool_calls}, {@code
   * tool_call_id}, {@code name}, part lists), and {@code tools}, {@code documents}, {@code
   * chat_template_kwargs}, {@code add_generation_prompt}, {@code continue_final_message}, {@code
   * add_special_tokens} as the client sent them. Tokenizers that render the chat template (the
   * local Hugging Face tokenizer, vLLM's {@code /tokenize}) use it so that the token ids match the
   * engine's for tool calls and template options. Empty for plain role/content chats and
   * completions.
   */
  public Optional<String> chatTemplateInputs() {
    return Optional.ofNullable(chatTemplateInputs);
  }

  /**
   * The request in its own API's form, for vLLM's render endpoint of that API ({@link
   * NativeRequest}); empty for chats and completions. When present, {@link #messages()} is only a
   * text view of the conversation (for the approximate index): tokenizers render {@link
   * #chatTemplateInputs()} or this, never the bare messages.
   */
  public Optional<NativeRequest> nativeRequest() {
    return Optional.ofNullable(nativeRequest);
  }

  /**
   * Whether the precise prefix index may score this request (default true). False routes it as if
   * it had no token ids for the index: the precise prefix scorer falls back to the approximate
   * index ({@link SchedulingContext#hasPreciseMatches()} is false), while tokenizers still run and
   * the token ids stay on the request. The router sets it for a model whose KV-cache parity check
   * failed.
   */
  public boolean preciseScoring() {
    return preciseScoring;
  }

  /**
   * The request's latency objective ({@link LatencySlo#NONE} when it has none): what the {@code
   * predicted-latency-scorer} tries to meet.
   */
  public LatencySlo slo() {
    return slo;
  }

  @Override
  public String toString() {
    // Never print prompt text (it may be sensitive); sizes only.
    return "SchedulingRequest{model="
        + model
        + (lora != null ? ", lora=" + lora : "")
        + ", promptChars="
        + (prompt == null ? -1 : prompt.length())
        + ", messages="
        + (messages == null ? -1 : messages.size())
        + ", tokens="
        + (tokenIds == null ? -1 : tokenIds.length)
        + ", candidates="
        + candidates.size()
        + "}";
  }

  /** Builds {@link SchedulingRequest}s. Not thread-safe. */
  public static final class Builder {
    private String model;
    private String prompt;
    private List<ChatMessage> messages;
    private int[] tokenIds;
    private String lora;
    private String cacheSalt;
    // case-insensitive, values immutable lists; handed to the request build() makes, and copied
    // before this builder changes it again
    private Map<String, List<String>> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    private boolean headersHandedOver;
    private final List<Endpoint> candidates = new ArrayList<>();
    private String profile;
    private Boolean disaggregation;
    private String chatTemplateInputs;
    private NativeRequest nativeRequest;
    private boolean preciseScoring = true;
    private LatencySlo slo = LatencySlo.NONE;

    private Builder() {}

    /** The request's latency objective (default {@link LatencySlo#NONE}). */
    public Builder slo(LatencySlo slo) {
      this.slo = Objects.requireNonNull(slo, "slo");
      return this;
    }

    /**
     * The request in its own API's form (see {@link SchedulingRequest#nativeRequest()}); {@code
     * null} clears it.
     */
    public Builder nativeRequest(NativeRequest nativeRequest) {
      this.nativeRequest = nativeRequest;
      return this;
    }

    /**
     * Whether the precise prefix index may score the request (default true; see {@link
     * SchedulingRequest#preciseScoring()}).
     */
    public Builder preciseScoring(boolean allowed) {
      this.preciseScoring = allowed;
      return this;
    }

    /**
     * The chat request's template inputs as a JSON object (see {@link
     * SchedulingRequest#chatTemplateInputs()}); {@code null} clears them.
     */
    public Builder chatTemplateInputs(String json) {
      this.chatTemplateInputs = json;
      return this;
    }

    /** The model name (required). */
    public Builder model(String model) {
      this.model = model;
      return this;
    }

    /** The completion prompt text. */
    public Builder prompt(String prompt) {
      this.prompt = prompt;
      return this;
    }

    /** The chat messages. */
    public Builder messages(List<ChatMessage> messages) {
      this.messages = messages == null ? null : List.copyOf(messages);
      return this;
    }

    /** Token ids supplied by the caller (copied). */
    public Builder tokenIds(int[] tokenIds) {
      this.tokenIds = tokenIds == null ? null : tokenIds.clone();
      return this;
    }

    /** The LoRA adapter name. */
    public Builder lora(String lora) {
      this.lora = lora;
      return this;
    }

    /** The vLLM {@code cache_salt}. */
    public Builder cacheSalt(String cacheSalt) {
      this.cacheSalt = cacheSalt;
      return this;
    }

    /** The headers for a request being built: this builder copies them before changing them. */
    private Map<String, List<String>> handOverHeaders() {
      headersHandedOver = true;
      return Collections.unmodifiableMap(headers);
    }

    private Map<String, List<String>> ownHeaders() {
      if (headersHandedOver) {
        TreeMap<String, List<String>> copy = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
        copy.putAll(headers);
        headers = copy;
        headersHandedOver = false;
      }
      return headers;
    }

    /** Replaces all headers. */
    public Builder headers(Map<String, List<String>> headers) {
      ownHeaders().clear();
      if (headers != null) {
        headers.forEach((k, v) -> this.headers.put(k, v == null ? List.of() : List.copyOf(v)));
      }
      return this;
    }

    /** Sets one header to a single value. */
    public Builder header(String name, String value) {
      ownHeaders()
          .put(
              Objects.requireNonNull(name, "header name"),
              List.of(Objects.requireNonNull(value, "header value")));
      return this;
    }

    /** Replaces the candidate endpoints. */
    public Builder candidates(List<Endpoint> candidates) {
      this.candidates.clear();
      this.candidates.addAll(Objects.requireNonNull(candidates, "candidates"));
      return this;
    }

    /** Adds one candidate endpoint. */
    public Builder candidate(Endpoint endpoint) {
      this.candidates.add(Objects.requireNonNull(endpoint, "candidate"));
      return this;
    }

    /** Runs only the named profile (see {@link SchedulingRequest#profile()}). */
    public Builder profile(String profile) {
      this.profile = profile;
      return this;
    }

    /** Per-request PD override (see {@link SchedulingRequest#disaggregation()}). */
    public Builder disaggregation(Boolean disaggregation) {
      this.disaggregation = disaggregation;
      return this;
    }

    /**
     * Builds the request.
     *
     * @throws IllegalArgumentException when {@code model} is missing or blank, or a candidate id is
     *     duplicated
     */
    public SchedulingRequest build() {
      if (model == null || model.isBlank()) {
        throw new IllegalArgumentException("request.model must be set");
      }
      if (lora != null && lora.isBlank()) {
        throw new IllegalArgumentException("request.lora must not be blank when set");
      }
      String twice = duplicateId(candidates);
      if (twice != null) {
        throw new IllegalArgumentException(
            "request.candidates has the endpoint id \"" + twice + "\" twice");
      }
      if (profile != null && profile.isBlank()) {
        throw new IllegalArgumentException("request.profile must not be blank when set");
      }
      return new SchedulingRequest(this, tokenIds);
    }

    /** The first id that a later candidate repeats, or null: pairwise for a few, else hashed. */
    private static String duplicateId(List<Endpoint> candidates) {
      int n = candidates.size();
      if (n <= 16) {
        for (int i = 1; i < n; i++) {
          String id = candidates.get(i).id();
          for (int j = 0; j < i; j++) {
            if (candidates.get(j).id().equals(id)) {
              return id;
            }
          }
        }
        return null;
      }
      java.util.HashSet<String> ids = new java.util.HashSet<>();
      for (Endpoint e : candidates) {
        if (!ids.add(e.id())) {
          return e.id();
        }
      }
      return null;
    }
  }
}
