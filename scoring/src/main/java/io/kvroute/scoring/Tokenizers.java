package io.kvroute.scoring;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.HttpTransports;
import io.kvroute.connector.InferenceRequest;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * Built-in {@link Tokenizer}s: caller-supplied ids, and vLLM over HTTP: {@code POST /tokenize}
 * ({@link #vllm()}) or the render endpoints {@code POST /v1/chat/completions/render} and {@code
 * POST /v1/completions/render} ({@link #vllmRender()}), which {@code vllm serve} exposes and {@code
 * vllm launch render} serves without a GPU.
 */
public final class Tokenizers {
  private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(Tokenizers.class);

  private Tokenizers() {}

  /**
   * Uses only the token ids the caller put on the request; fails otherwise (so {@link
   * Scheduler#pickAsync} degrades to the approximate index).
   */
  public static Tokenizer callerSupplied() {
    return r ->
        r.hasTokenIds()
            ? CompletableFuture.completedFuture(r.tokens())
            : CompletableFuture.failedFuture(
                new TokenizationException("request carries no token ids"));
  }

  /** A builder of the vLLM {@code /tokenize} client. */
  public static VllmBuilder vllm() {
    return new VllmBuilder();
  }

  /**
   * A builder of the vLLM render client: {@code POST /v1/chat/completions/render} for chats and
   * {@code POST /v1/completions/render} for prompts ({@link #vllm()} with {@link VllmApi#RENDER}).
   */
  public static VllmBuilder vllmRender() {
    return new VllmBuilder().api(VllmApi.RENDER);
  }

  /** Which vLLM endpoints a {@link VllmTokenizer} calls. */
  public enum VllmApi {
    /**
     * {@code POST /tokenize}, with {@code {"model", "prompt"}} or {@code {"model", "messages",
     * "add_generation_prompt", ...}}; the answer's {@code tokens} array holds the ids.
     */
    TOKENIZE("/tokenize", "/tokenize", "tokens"),
    /**
     * vLLM's render endpoints ({@code vllm/entrypoints/serve/render/api_router.py}): {@code POST
     * /v1/chat/completions/render} takes a chat completion request and answers one {@code
     * GenerateRequest} ({@code {"token_ids": [...], "features": ..., "sampling_params": ...}});
     * {@code POST /v1/completions/render} takes a completion request and answers a list of them,
     * one per prompt (kvroute sends one). The same bodies as {@link #TOKENIZE}.
     */
    RENDER("/v1/chat/completions/render", "/v1/completions/render", "token_ids");

    private final String chatPath;
    private final String promptPath;
    private final String field;

    VllmApi(String chatPath, String promptPath, String field) {
      this.chatPath = chatPath;
      this.promptPath = promptPath;
      this.field = field;
    }

    /** The path a chat request is sent to. */
    public String chatPath() {
      return chatPath;
    }

    /** The path a completion prompt is sent to. */
    public String promptPath() {
      return promptPath;
    }
  }

  /** A tokenization failure (HTTP error, bad response, timeout). */
  public static final class TokenizationException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The engine's HTTP status, or 0 when the failure was not a non-200 answer. */
    final int status;

    /** An exception with a message. */
    public TokenizationException(String message) {
      this(0, message);
    }

    /** The engine answered about the request (an error object), not about a missing route. */
    final boolean aboutRequest;

    TokenizationException(int status, String message) {
      this(status, message, false);
    }

    TokenizationException(int status, String message, boolean aboutRequest) {
      super(message, null, false, false);
      this.status = status;
      this.aboutRequest = aboutRequest;
    }

    /**
     * True for 404, 405 and 501 without an error object in the body: the engine has no such
     * endpoint (vLLM's 404 for an unknown model carries an {@code error} object and is not one).
     */
    boolean unsupported() {
      return !aboutRequest && (status == 404 || status == 405 || status == 501);
    }
  }

  /**
   * Configures the vLLM tokenization client ({@code /tokenize}, or the render endpoints with {@link
   * #api(VllmApi)}). Completion prompts are sent as {@code {"model", "prompt"}}; chat requests as
   * {@code {"model", "messages", "add_generation_prompt": true}} (plus the request's template
   * inputs) so the engine applies its own chat template and the ids match what it will cache.
   * Results are kept in a bounded LRU keyed by the exact model and prompt (entries and total tokens
   * are both bounded), so repeated prompts and retries cost no round trip.
   */
  public static final class VllmBuilder {
    private VllmApi api = VllmApi.TOKENIZE;
    private URI baseUrl;
    private HttpTransport transport;
    private Duration timeout = Duration.ofSeconds(2);
    private int cacheEntries = 1024;
    private long cacheMaxTokens = 8L << 20;
    private io.micrometer.core.instrument.MeterRegistry registry;

    private VllmBuilder() {}

    /** The endpoints called (default {@link VllmApi#TOKENIZE}). */
    public VllmBuilder api(VllmApi api) {
      this.api = Objects.requireNonNull(api, "api");
      return this;
    }

    /**
     * Binds {@code kvroute.tokenizer.cache.size} (gauge), {@code kvroute.tokenizer.cache.hits},
     * {@code kvroute.tokenizer.cache.misses} and {@code kvroute.tokenizer.failures} (counters).
     */
    public VllmBuilder meterRegistry(io.micrometer.core.instrument.MeterRegistry registry) {
      this.registry = registry;
      return this;
    }

    /**
     * A fixed tokenizer server (for example {@code http://vllm:8000}); by default the request's
     * candidates are used in rotation.
     */
    public VllmBuilder baseUrl(URI baseUrl) {
      this.baseUrl = baseUrl;
      return this;
    }

    /** The HTTP transport (default: {@link HttpTransports#shared()}). */
    public VllmBuilder transport(HttpTransport transport) {
      this.transport = Objects.requireNonNull(transport, "transport");
      return this;
    }

    /** Per-call timeout (default 2 s). */
    public VllmBuilder timeout(Duration timeout) {
      this.timeout = Objects.requireNonNull(timeout, "timeout");
      return this;
    }

    /** Cache bounds: entries (default 1024; 0 disables) and total tokens (default 8 Mi). */
    public VllmBuilder cache(int entries, long maxTokens) {
      this.cacheEntries = entries;
      this.cacheMaxTokens = maxTokens;
      return this;
    }

    /**
     * Builds the client.
     *
     * @throws IllegalArgumentException naming the bad field
     */
    public VllmTokenizer build() {
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("tokenizer.timeout must be > 0, was " + timeout);
      }
      if (cacheEntries < 0 || cacheMaxTokens < 0) {
        throw new IllegalArgumentException("tokenizer.cache bounds must be >= 0");
      }
      Endpoint server = null;
      if (baseUrl != null) {
        if (baseUrl.getHost() == null) {
          throw new IllegalArgumentException("tokenizer.baseUrl has no host: " + baseUrl);
        }
        server = Endpoint.of(baseUrl.toString(), Endpoint.Role.BOTH);
      }
      HttpTransport t0 = transport != null ? transport : HttpTransports.shared();
      VllmTokenizer t = new VllmTokenizer(api, server, t0, timeout, cacheEntries, cacheMaxTokens);
      if (registry != null) {
        t.cache.bindTo(
            registry,
            "kvroute.tokenizer.cache.size",
            "kvroute.tokenizer.cache.hits",
            "kvroute.tokenizer.cache.misses",
            io.micrometer.core.instrument.Tags.empty());
        io.micrometer.core.instrument.FunctionCounter.builder(
                "kvroute.tokenizer.failures", t, VllmTokenizer::failures)
            .register(registry);
      }
      return t;
    }
  }

  /**
   * vLLM's {@code /tokenize} or render client. A non-200 answer fails the stage with a {@link
   * TokenizationException} naming the path, the status and vLLM's error message; so does an answer
   * that is not JSON or lacks the ids. Thread-safe; the cache is guarded by a lock held only for
   * map operations. Futures complete on the transport's threads.
   */
  public static final class VllmTokenizer implements Tokenizer {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int MAX_RESPONSE_BYTES = 64 << 20;
    private static final int MAX_ERROR_BYTES = 4096;

    private final VllmApi api;
    private final Endpoint server;
    private final HttpTransport transport;
    private final Duration timeout;
    private final TokenCache cache;
    private final AtomicInteger rotation = new AtomicInteger();
    private final LongAdder failures = new LongAdder();

    /**
     * By {@link InferenceRequest.Api#ordinal()}: the engine answered that it has no render endpoint
     * for the API (vLLM before 0.29), so its requests are rendered in their chat form. Racy on
     * purpose: a second request may probe again.
     */
    private final boolean[] nativeUnsupported = new boolean[InferenceRequest.Api.values().length];

    private VllmTokenizer(
        VllmApi api,
        Endpoint server,
        HttpTransport transport,
        Duration timeout,
        int entries,
        long maxTokens) {
      this.api = api;
      this.server = server;
      this.transport = transport;
      this.timeout = timeout;
      this.cache = new TokenCache(entries, maxTokens);
    }

    @Override
    public CompletionStage<int[]> tokenize(SchedulingRequest r) {
      if (r.hasTokenIds()) {
        return CompletableFuture.completedFuture(r.tokens());
      }
      SchedulingRequest.NativeRequest nat = r.nativeRequest().orElse(null);
      boolean nativeRender =
          nat != null && api == VllmApi.RENDER && !nativeUnsupported[nat.api().ordinal()];
      if (nat != null && !nativeRender && r.chatTemplateInputs().isEmpty()) {
        failures.increment();
        return CompletableFuture.failedFuture(
            new TokenizationException(
                "this "
                    + nat.api().path()
                    + " request has no chat form kvroute can mirror; only vLLM's "
                    + nativePath(nat.api())
                    + " renders it (the render tokenizer backend)"));
      }
      Object key = nativeRender ? nativeKey(r, nat) : cacheKey(r);
      if (key == null) {
        return CompletableFuture.failedFuture(
            new TokenizationException("request has neither prompt nor messages"));
      }
      int[] hit = cache.get(key);
      if (hit != null) {
        return CompletableFuture.completedFuture(hit);
      }
      Endpoint target = server;
      if (target == null) {
        List<Endpoint> c = r.candidates();
        if (c.isEmpty()) {
          return CompletableFuture.failedFuture(
              new TokenizationException("no tokenizer URL and no candidate endpoint"));
        }
        target = c.get(Math.floorMod(rotation.getAndIncrement(), c.size()));
      }
      CompletableFuture<int[]> f;
      if (nativeRender) {
        Endpoint at = target;
        f =
            call(at, nativePath(nat.api()), nat.json().getBytes(StandardCharsets.UTF_8), key)
                .exceptionallyCompose(
                    err -> {
                      Throwable cause = CancellableFutures.unwrap(err);
                      if (!(cause instanceof TokenizationException sf && sf.unsupported())
                          || r.chatTemplateInputs().isEmpty()) {
                        return CompletableFuture.failedFuture(cause);
                      }
                      // an engine without this API's render endpoint: its chat form, from now on
                      if (!nativeUnsupported[nat.api().ordinal()]) {
                        nativeUnsupported[nat.api().ordinal()] = true;
                        log.warn(
                            "kvroute: {} answered {} to {}; rendering {} requests through their"
                                + " chat form and {} from now on (vLLM serves {} from 0.29)",
                            at.baseUrl(),
                            sf.status,
                            nativePath(nat.api()),
                            nat.api().path(),
                            api.chatPath,
                            nativePath(nat.api()));
                      }
                      return chat(at, r, true);
                    });
      } else {
        f = chat(target, r, false); // its cache key was looked up above
      }
      f.whenComplete(
          (t, err) -> {
            if (err != null) {
              failures.increment();
            }
          });
      return f;
    }

    /**
     * The chat, prompt or template-input call for {@code r}; {@code lookup}: first look its key up
     * in the cache (a native request falling back to its chat form, whose key differs).
     */
    private CompletableFuture<int[]> chat(Endpoint target, SchedulingRequest r, boolean lookup) {
      Object key = cacheKey(r);
      int[] hit = lookup ? cache.get(key) : null;
      if (hit != null) {
        return CompletableFuture.completedFuture(hit);
      }
      byte[] body;
      try {
        body = JSON.writeValueAsBytes(requestBody(r));
      } catch (com.fasterxml.jackson.core.JsonProcessingException | TokenizationException e) {
        return CompletableFuture.failedFuture(e);
      }
      boolean chat = r.chatTemplateInputs().isPresent() || r.messages().isPresent();
      return call(target, chat ? api.chatPath : api.promptPath, body, key);
    }

    /** POSTs {@code body} to {@code path} and reads the ids, caching them under {@code key}. */
    private CompletableFuture<int[]> call(Endpoint target, String path, byte[] body, Object key) {
      return CancellableFutures.compose(
          transport.send(HttpTransport.Outbound.post(target, path, body).timeout(timeout).build()),
          resp -> {
            if (resp.status() != 200) {
              int status = resp.status();
              return resp.readAll(MAX_ERROR_BYTES)
                  .handle(
                      (bytes, err) -> {
                        throw new TokenizationException(
                            status,
                            path
                                + " answered HTTP "
                                + status
                                + (err == null ? errorDetail(bytes) : ""),
                            err == null && hasErrorObject(bytes));
                      });
            }
            return resp.readAll(MAX_RESPONSE_BYTES)
                .thenApply(
                    bytes -> {
                      int[] tokens = parse(VllmApi.RENDER, path, bytes, api.field);
                      cache.put(key, tokens);
                      return tokens;
                    });
          });
    }

    /** vLLM's render endpoint of {@code a}: {@code /v1/messages/render}, ... */
    static String nativePath(InferenceRequest.Api a) {
      return a.path() + "/render";
    }

    private static String nativeKey(SchedulingRequest r, SchedulingRequest.NativeRequest nat) {
      return r.model() + '\u0000' + 'N' + nat.api().name() + nat.json();
    }

    /** The endpoints this client calls. */
    public VllmApi api() {
      return api;
    }

    /** Failed remote calls so far. */
    public long failures() {
      return failures.sum();
    }

    /** Cache hits so far. */
    public long cacheHits() {
      return cache.hits();
    }

    /** Cache misses (remote calls) so far. */
    public long cacheMisses() {
      return cache.misses();
    }

    /** Entries in the cache. */
    public int cacheSize() {
      return cache.size();
    }

    private static ObjectNode requestBody(SchedulingRequest r) {
      ObjectNode n = JSON.createObjectNode();
      n.put("model", r.model());
      if (r.chatTemplateInputs().isPresent()) {
        // vLLM's /tokenize takes the chat request's template fields as they are
        JsonNode inputs;
        try {
          inputs = JSON.readTree(r.chatTemplateInputs().get());
        } catch (java.io.IOException e) {
          throw new TokenizationException("chat template inputs are not JSON");
        }
        if (inputs != null && inputs.isObject()) {
          n.setAll((ObjectNode) inputs);
        }
        if (!n.has("add_generation_prompt")) {
          n.put("add_generation_prompt", true);
        }
      } else if (r.messages().isPresent()) {
        ArrayNode msgs = n.putArray("messages");
        for (SchedulingRequest.ChatMessage m : r.messages().get()) {
          msgs.addObject().put("role", m.role()).put("content", m.content());
        }
        n.put("add_generation_prompt", true);
      } else {
        n.put("prompt", r.prompt().orElse(""));
      }
      return n;
    }

    static int[] parseTokens(byte[] body) {
      return parse(VllmApi.TOKENIZE, "/tokenize", body);
    }

    /** The ids of an answer of {@code api} from {@code path}. */
    static int[] parse(VllmApi api, String path, byte[] body) {
      return parse(api, path, body, api.field);
    }

    /**
     * The ids of an answer from {@code path}: under {@code field}, in the answer or (a list of
     * render answers, one per prompt) in its only element.
     */
    static int[] parse(VllmApi api, String path, byte[] body, String field) {
      JsonNode root;
      try {
        root = JSON.readTree(body);
      } catch (java.io.IOException e) {
        throw new TokenizationException(path + " returned invalid JSON");
      }
      if (field.equals(VllmApi.RENDER.field) && root != null && root.isArray()) {
        // /v1/completions/render: one GenerateRequest per prompt; kvroute sends one prompt
        if (root.size() != 1) {
          throw new TokenizationException(
              path + " rendered " + root.size() + " prompts, expected exactly 1");
        }
        root = root.get(0);
      }
      JsonNode t = root == null ? null : root.get(field);
      if (t == null || !t.isArray()) {
        throw new TokenizationException(path + " response has no \"" + field + "\" array");
      }
      int[] out = new int[t.size()];
      for (int i = 0; i < out.length; i++) {
        JsonNode v = t.get(i);
        if (!v.canConvertToInt()) {
          throw new TokenizationException(path + " token " + i + " is not an int");
        }
        out[i] = v.intValue();
      }
      return out;
    }

    /** vLLM's error message ({@code {"error": {"message"}}} or {@code {"message"}}), if any. */
    /** An OpenAI or Anthropic error body ({@code "error"} an object): an answer about a request. */
    private static boolean hasErrorObject(byte[] body) {
      if (body == null || body.length == 0) {
        return false;
      }
      try {
        JsonNode root = JSON.readTree(body);
        return root != null && root.path("error").isObject();
      } catch (java.io.IOException notJson) {
        return false;
      }
    }

    private static String errorDetail(byte[] body) {
      if (body == null || body.length == 0) {
        return "";
      }
      String text;
      try {
        JsonNode root = JSON.readTree(body);
        JsonNode m = root == null ? null : root.path("error").path("message");
        if (m == null || !m.isTextual()) {
          m = root == null ? null : root.path("message");
        }
        if (m == null || !m.isTextual()) {
          m = root == null ? null : root.path("detail");
        }
        text = m != null && m.isTextual() ? m.asText() : new String(body, StandardCharsets.UTF_8);
      } catch (java.io.IOException notJson) {
        text = new String(body, StandardCharsets.UTF_8);
      }
      text = text.strip().replaceAll("\\s+", " ");
      if (text.length() > 300) {
        text = text.substring(0, 300) + "...";
      }
      return text.isEmpty() ? "" : ": " + text;
    }

    /**
     * The cache key of {@code r}: the model and the prompt, conversation or template inputs, as a
     * record of the request's own strings (the prompt is not copied into a key per request); null
     * when the request has none of them.
     */
    static Object cacheKey(SchedulingRequest r) {
      if (r.chatTemplateInputs().isPresent()) {
        return new TemplateKey(r.model(), r.chatTemplateInputs().get());
      }
      if (r.messages().isPresent()) {
        return new ChatKey(r.model(), r.messages().get());
      }
      String prompt = r.prompt().orElse(null);
      return prompt == null ? null : new PromptKey(r.model(), prompt);
    }

    /** The cache key of a completion prompt. */
    record PromptKey(String model, String prompt) {}

    /** The cache key of a conversation (its messages are an immutable list). */
    record ChatKey(String model, List<SchedulingRequest.ChatMessage> messages) {}

    /** The cache key of a chat request's template inputs. */
    record TemplateKey(String model, String json) {}

    @Override
    public String toString() {
      return "VllmTokenizer{"
          + api.name().toLowerCase(java.util.Locale.ROOT)
          + ", "
          + (server == null ? "candidates" : server.baseUrl())
          + "}";
    }
  }

  /**
   * A builder of the local-first chain: caller-supplied ids, then a per-model local tokenizer, then
   * a remote fallback such as {@link #vllm()} (see {@link TokenizerChain}).
   */
  public static TokenizerChain.Builder chain() {
    return TokenizerChain.builder();
  }
}
