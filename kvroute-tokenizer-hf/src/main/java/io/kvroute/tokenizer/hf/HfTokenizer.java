package io.kvroute.tokenizer.hf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.scoring.SchedulingRequest;
import io.kvroute.scoring.TokenCache;
import io.kvroute.scoring.Tokenizer;
import io.kvroute.tokenizer.hf.internal.ByteLevelBpe;
import io.kvroute.tokenizer.hf.internal.ChatRenderer;
import io.kvroute.tokenizer.hf.internal.DjlEncoder;
import io.kvroute.tokenizer.hf.internal.TextEncoder;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZonedDateTime;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.stream.Stream;

/**
 * A local {@link Tokenizer}: a model's {@code tokenizer.json} through the Hugging Face {@code
 * tokenizers} library (DJL's binding) and its chat template from {@code tokenizer_config.json} (or
 * {@code chat_template.jinja}), giving the token ids vLLM computes for the same request:
 *
 * <ul>
 *   <li>completions ({@link #encode(String)}): the prompt encoded with {@code
 *       add_special_tokens=True} (vLLM's default for {@code /v1/completions});
 *   <li>chat ({@link #encodeChat(ChatRequest)}): the messages normalised as vLLM does, the template
 *       rendered with transformers' jinja semantics, and the text encoded with {@code
 *       add_special_tokens=False} unless the request asks otherwise.
 * </ul>
 *
 * <p>Two engines produce the same ids: the native Hugging Face library through DJL, and kvroute's
 * pure-Java byte-level BPE for the {@code tokenizer.json} layouts it reproduces exactly (Llama 3,
 * Qwen 2/3, GPT-2 style; see {@link Engine}). {@link Engine#AUTO} (the default) takes the Java one
 * when it applies: on the project's machines the native call costs ≈ 1.7 µs per token.
 *
 * <p>Files are read from a model directory, a Hugging Face cache repository ({@code
 * models--org--name}, whose {@code refs/main} snapshot is used) or a snapshot directory; nothing is
 * downloaded. Results are kept in a bounded LRU (entries and total tokens), keyed by everything
 * that decides the tokens.
 *
 * <p>Thread-safe: one instance serves all threads (the native tokenizer encodes concurrently; the
 * cache lock is held only for map operations). {@link #tokenize} runs the CPU work on the
 * configured executor (by default on the caller's thread, and the returned stage is already
 * complete).
 *
 * <p>Metrics (with {@link Builder#meterRegistry}), tagged {@code model}: {@code
 * kvroute.tokenizer.local.duration} (timer, tag {@code kind} = {@code completion} | {@code chat};
 * cache misses only), {@code kvroute.tokenizer.local.cache.hits}, {@code
 * kvroute.tokenizer.local.cache.misses}, {@code kvroute.tokenizer.local.failures} (counters) and
 * {@code kvroute.tokenizer.local.cache.size} (gauge).
 */
public final class HfTokenizer implements Tokenizer, AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final Path modelDir;
  private final String modelName;
  private final TextEncoder encoder;
  private final ChatRenderer chat;
  private final Executor executor;
  private final LongSupplier nanoClock;
  private final TokenCache cache;
  private final Counter failures;
  private final Timer completionTimer;
  private final Timer chatTimer;

  /** A completion prompt as a cache key. */
  private record PromptKey(boolean addSpecialTokens, String text) {}

  /** Which implementation turns text into ids. */
  public enum Engine {
    /** The Java engine when the tokenizer qualifies, else the native library (the default). */
    AUTO,
    /** Always the native Hugging Face library (DJL). */
    NATIVE,
    /** Always the Java engine; loading fails for tokenizers it does not reproduce. */
    JAVA
  }

  private HfTokenizer(Builder b, Path dir, TextEncoder encoder, ChatRenderer chat) {
    this.modelDir = dir;
    this.modelName = b.modelName != null ? b.modelName : dir.getFileName().toString();
    this.encoder = encoder;
    this.chat = chat;
    this.executor = b.executor;
    this.nanoClock = b.nanoClock;
    this.cache = new TokenCache(b.cacheEntries, b.cacheMaxTokens);
    MeterRegistry r = b.registry;
    if (r != null) {
      this.completionTimer =
          Timer.builder("kvroute.tokenizer.local.duration")
              .tag("model", modelName)
              .tag("kind", "completion")
              .publishPercentiles(0.5, 0.99)
              .register(r);
      this.chatTimer =
          Timer.builder("kvroute.tokenizer.local.duration")
              .tag("model", modelName)
              .tag("kind", "chat")
              .publishPercentiles(0.5, 0.99)
              .register(r);
      this.failures =
          Counter.builder("kvroute.tokenizer.local.failures").tag("model", modelName).register(r);
      cache.bindTo(
          r,
          "kvroute.tokenizer.local.cache.size",
          "kvroute.tokenizer.local.cache.hits",
          "kvroute.tokenizer.local.cache.misses",
          Tags.of("model", modelName));
    } else {
      this.completionTimer = null;
      this.chatTimer = null;
      this.failures = null;
    }
  }

  /** A new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** Loads the tokenizer in {@code path} with default settings (see {@link Builder#path}). */
  public static HfTokenizer load(Path path) {
    return builder().path(path).build();
  }

  // ------------------------------------------------------------------ encoding

  /**
   * The ids vLLM computes for a {@code /v1/completions} prompt ({@code add_special_tokens=True}).
   */
  public int[] encode(String prompt) {
    return encode(prompt, true);
  }

  /** The ids of {@code text}, with or without the tokenizer's special tokens (BOS, ...). */
  public int[] encode(String text, boolean addSpecialTokens) {
    Objects.requireNonNull(text, "text");
    return encodeCached(
        new PromptKey(addSpecialTokens, text), completionTimer, text, null, addSpecialTokens);
  }

  /**
   * The chat template's text for a request (what vLLM passes to the tokenizer).
   *
   * @throws ChatTemplateException when the model has no template or the template rejects the
   *     conversation
   */
  public String renderChat(ChatRequest request) {
    return chat.render(Objects.requireNonNull(request, "request"));
  }

  /**
   * The ids vLLM computes for a {@code /v1/chat/completions} request: the rendered template,
   * encoded with the request's {@code add_special_tokens} (default false).
   *
   * @throws ChatTemplateException when the model has no template or the template rejects the
   *     conversation
   */
  public int[] encodeChat(ChatRequest request) {
    return encodeCached(
        request.canonicalJson(), chatTimer, null, request, request.addSpecialTokens());
  }

  /**
   * A copy of the ids cached under {@code key}, or of the ids of {@code text} (when null: of {@code
   * chatRequest}'s rendered template) encoded, timed on {@code timer} and cached.
   */
  private int[] encodeCached(
      Object key, Timer timer, String text, ChatRequest chatRequest, boolean addSpecialTokens) {
    int[] hit = cache.get(key);
    if (hit != null) {
      return hit.clone();
    }
    long start = nanoClock.getAsLong();
    int[] ids;
    try {
      ids = encoder.encode(text != null ? text : chat.render(chatRequest), addSpecialTokens);
    } catch (RuntimeException e) {
      fail();
      throw e;
    }
    record(timer, start);
    cache.put(key, ids);
    return ids.clone();
  }

  /**
   * Tokenizes a scheduling request: caller-supplied ids as they are, chat requests through the
   * template (the request's {@link SchedulingRequest#chatTemplateInputs() template inputs} when
   * present: tools, tool turns, {@code chat_template_kwargs}...; else its messages with a
   * generation prompt), otherwise the prompt as a completion. An Anthropic Messages or OpenAI
   * Responses request is rendered in its chat form (its template inputs); one without a chat form
   * kvroute can mirror ({@link SchedulingRequest#nativeRequest()} only) fails. Failures complete
   * the stage exceptionally.
   */
  @Override
  public CompletionStage<int[]> tokenize(SchedulingRequest request) {
    if (request.hasTokenIds()) {
      return CompletableFuture.completedFuture(request.tokenIds().orElseThrow());
    }
    CompletableFuture<int[]> f = new CompletableFuture<>();
    Runnable work =
        () -> {
          try {
            Optional<List<SchedulingRequest.ChatMessage>> msgs = request.messages();
            Optional<String> inputs = request.chatTemplateInputs();
            if (inputs.isPresent()) {
              f.complete(encodeChat(ChatRequest.fromJson(inputs.get())));
            } else if (request.nativeRequest().isPresent()) {
              // a Messages or Responses request whose chat form kvroute cannot mirror
              f.completeExceptionally(
                  new IllegalArgumentException(
                      "this "
                          + request.nativeRequest().get().api().path()
                          + " request has no chat form kvroute can mirror; only vLLM's render"
                          + " endpoint renders it"));
            } else if (msgs.isPresent()) {
              f.complete(encodeChat(ChatRequest.of(msgs.get())));
            } else if (request.prompt().isPresent()) {
              f.complete(encode(request.prompt().get()));
            } else {
              f.completeExceptionally(
                  new IllegalArgumentException("request has neither prompt nor messages"));
            }
          } catch (RuntimeException e) {
            f.completeExceptionally(e);
          }
        };
    try {
      executor.execute(work);
    } catch (RuntimeException e) {
      f.completeExceptionally(e);
    }
    return f;
  }

  /** Decodes ids to text (diagnostics; not on the request path). */
  public String decode(int[] ids, boolean skipSpecialTokens) {
    return encoder.decode(ids, skipSpecialTokens);
  }

  /** The directory the files were read from. */
  public Path modelDir() {
    return modelDir;
  }

  /** The engine in use: {@code java} or {@code native}. */
  public String engine() {
    return encoder.engine();
  }

  /** The model name used in metric tags. */
  public String modelName() {
    return modelName;
  }

  /** True when the model has a chat template. */
  public boolean hasChatTemplate() {
    return chat.hasTemplate();
  }

  /** Cache hits so far. */
  public long cacheHits() {
    return cache.hits();
  }

  /** Cache misses so far. */
  public long cacheMisses() {
    return cache.misses();
  }

  /** Entries in the cache. */
  public int cacheSize() {
    return cache.size();
  }

  /** Releases the native tokenizer; later calls fail. */
  @Override
  public void close() {
    encoder.close();
  }

  @Override
  public String toString() {
    return "HfTokenizer{" + modelName + " from " + modelDir + ", " + encoder.engine() + "}";
  }

  private void fail() {
    if (failures != null) {
      failures.increment();
    }
  }

  private void record(Timer t, long start) {
    if (t != null) {
      t.record(nanoClock.getAsLong() - start, TimeUnit.NANOSECONDS);
    }
  }

  // ------------------------------------------------------------------ model files

  /**
   * Finds the directory holding {@code tokenizer.json}: {@code path} itself, or inside a Hugging
   * Face cache repository ({@code .../models--org--name}) the snapshot {@code revision} names (a
   * branch or tag in {@code refs/}, or a commit), {@code main} by default, or the only snapshot.
   *
   * @throws TokenizerLoadException naming what was looked for
   */
  public static Path resolveModelDir(Path path, String revision) {
    Objects.requireNonNull(path, "path");
    if (Files.isRegularFile(path.resolve("tokenizer.json"))) {
      return path;
    }
    Path snapshots = path.resolve("snapshots");
    if (Files.isDirectory(snapshots)) {
      String rev = revision == null ? "main" : revision;
      Path ref = path.resolve("refs").resolve(rev);
      String commit = rev;
      if (Files.isRegularFile(ref)) {
        try {
          commit = Files.readString(ref, StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
          throw new TokenizerLoadException("cannot read " + ref + ": " + e.getMessage(), e);
        }
      }
      Path snap = snapshots.resolve(commit);
      if (Files.isRegularFile(snap.resolve("tokenizer.json"))) {
        return snap;
      }
      if (revision == null) {
        try (Stream<Path> s = Files.list(snapshots)) {
          List<Path> withTokenizer =
              s.filter(p -> Files.isRegularFile(p.resolve("tokenizer.json")))
                  .sorted(Comparator.comparing(Path::toString))
                  .toList();
          if (withTokenizer.size() == 1) {
            return withTokenizer.get(0);
          }
        } catch (IOException e) {
          throw new TokenizerLoadException("cannot list " + snapshots + ": " + e.getMessage(), e);
        }
      }
      throw new TokenizerLoadException(
          "no snapshot with tokenizer.json for revision \""
              + rev
              + "\" under "
              + snapshots
              + " (download the model with `huggingface-cli download` first; kvroute never"
              + " downloads)");
    }
    throw new TokenizerLoadException(
        "no tokenizer.json in "
            + path
            + " (give a model directory, a snapshot, or a Hugging Face cache directory"
            + " models--org--name)");
  }

  /**
   * The Hugging Face cache repository directory of {@code modelId} ({@code org/name}) under a hub
   * cache root ({@code $HF_HUB_CACHE}, {@code $HF_HOME/hub} or {@code ~/.cache/huggingface/hub}).
   */
  public static Path huggingFaceCacheDir(Path hubCache, String modelId) {
    if (!modelId.contains("/")) {
      throw new IllegalArgumentException("modelId must be org/name, was " + modelId);
    }
    return hubCache.resolve("models--" + modelId.replace("/", "--"));
  }

  /** The default Hugging Face hub cache root of this process's environment. */
  public static Path defaultHubCache() {
    String hub = System.getenv("HF_HUB_CACHE");
    if (hub != null && !hub.isBlank()) {
      return Path.of(hub);
    }
    String home = System.getenv("HF_HOME");
    if (home != null && !home.isBlank()) {
      return Path.of(home, "hub");
    }
    return Path.of(System.getProperty("user.home"), ".cache", "huggingface", "hub");
  }

  /** Configures and loads an {@link HfTokenizer}; not thread-safe. */
  public static final class Builder {
    private Path path;
    private String revision;
    private String modelName;
    private String chatTemplate;
    private String tokenizerJson;
    private int cacheEntries = 1024;
    private long cacheMaxTokens = 8L << 20;
    private MeterRegistry registry;
    private Executor executor = Runnable::run;
    private LongSupplier nanoClock = System::nanoTime;
    private Supplier<ZonedDateTime> clock = ZonedDateTime::now;
    private Engine engine = Engine.AUTO;

    private Builder() {}

    /** Which engine encodes (default {@link Engine#AUTO}). */
    public Builder engine(Engine engine) {
      this.engine = Objects.requireNonNull(engine, "engine");
      return this;
    }

    /**
     * Where the files are: a directory with {@code tokenizer.json} (and usually {@code
     * tokenizer_config.json}), a snapshot directory, or a Hugging Face cache repository directory
     * {@code models--org--name}.
     */
    public Builder path(Path path) {
      this.path = Objects.requireNonNull(path, "path");
      return this;
    }

    /** A model in a Hugging Face hub cache: {@code hubCache/models--org--name}. */
    public Builder huggingFaceCache(Path hubCache, String modelId) {
      this.path = huggingFaceCacheDir(hubCache, modelId);
      if (modelName == null) {
        modelName = modelId;
      }
      return this;
    }

    /** The snapshot of a cache repository: a branch, tag or commit (default {@code main}). */
    public Builder revision(String revision) {
      this.revision = revision;
      return this;
    }

    /** The model name for metric tags and logs (default: the directory name). */
    public Builder modelName(String name) {
      this.modelName = name;
      return this;
    }

    /** A chat template to use instead of the model's (vLLM's {@code --chat-template}). */
    public Builder chatTemplate(String template) {
      this.chatTemplate = template;
      return this;
    }

    /**
     * Replaces the model's {@code tokenizer.json} text (for example an edited post-processor);
     * {@code tokenizer_config.json} is still read from {@link #path}.
     */
    public Builder tokenizerJson(String json) {
      this.tokenizerJson = json;
      return this;
    }

    /** Cache bounds: entries (default 1024; 0 disables) and total tokens (default 8 Mi). */
    public Builder cache(int entries, long maxTokens) {
      this.cacheEntries = entries;
      this.cacheMaxTokens = maxTokens;
      return this;
    }

    /** Where the {@code kvroute.tokenizer.local.*} meters go (default: none). */
    public Builder meterRegistry(MeterRegistry registry) {
      this.registry = registry;
      return this;
    }

    /** Where {@link HfTokenizer#tokenize} runs the CPU work (default: the caller's thread). */
    public Builder executor(Executor executor) {
      this.executor = Objects.requireNonNull(executor, "executor");
      return this;
    }

    /** The clock of the duration timer (default {@link System#nanoTime}). */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /** The time {@code strftime_now} formats (default: now, in the system zone). */
    public Builder clock(Supplier<ZonedDateTime> clock) {
      this.clock = Objects.requireNonNull(clock, "clock");
      return this;
    }

    /**
     * Loads the tokenizer.
     *
     * @throws IllegalArgumentException naming a bad setting
     * @throws TokenizerLoadException when files are missing or unreadable or a template does not
     *     compile
     */
    public HfTokenizer build() {
      if (path == null) {
        throw new IllegalArgumentException("tokenizer.path must be set");
      }
      if (cacheEntries < 0 || cacheMaxTokens < 0) {
        throw new IllegalArgumentException(
            "tokenizer.cache bounds must be >= 0, were " + cacheEntries + ", " + cacheMaxTokens);
      }
      Path dir = resolveModelDir(path, revision);
      JsonNode config = null;
      Path cfg = dir.resolve("tokenizer_config.json");
      if (Files.isRegularFile(cfg)) {
        try {
          config = JSON.readTree(cfg.toFile());
        } catch (IOException e) {
          throw new TokenizerLoadException("cannot read " + cfg + ": " + e.getMessage(), e);
        }
      }
      String templateFile = null;
      Path jinja = dir.resolve("chat_template.jinja");
      if (Files.isRegularFile(jinja)) {
        try {
          templateFile = Files.readString(jinja, StandardCharsets.UTF_8);
        } catch (IOException e) {
          throw new TokenizerLoadException("cannot read " + jinja + ": " + e.getMessage(), e);
        }
      }
      ChatRenderer renderer =
          ChatRenderer.of(config, templateFile, chatTemplate, clock, dir.toString());
      String source =
          tokenizerJson != null
              ? dir + " (replaced tokenizer.json)"
              : dir.resolve("tokenizer.json").toString();
      String text = tokenizerJson;
      if (text == null) {
        try {
          text = Files.readString(dir.resolve("tokenizer.json"), StandardCharsets.UTF_8);
        } catch (IOException e) {
          throw new TokenizerLoadException("cannot read " + source + ": " + e.getMessage(), e);
        }
      }
      TextEncoder encoder = null;
      if (engine != Engine.NATIVE) {
        try {
          encoder = ByteLevelBpe.of(JSON.readTree(text)).orElse(null);
        } catch (IOException e) {
          throw new TokenizerLoadException(source + " is not valid JSON: " + e.getMessage(), e);
        }
        if (encoder == null && engine == Engine.JAVA) {
          throw new TokenizerLoadException(
              source
                  + " uses a tokenizer.json layout the Java engine does not reproduce; use"
                  + " Engine.AUTO or Engine.NATIVE");
        }
      }
      if (encoder == null) {
        encoder = DjlEncoder.fromJson(text, source);
      }
      return new HfTokenizer(this, dir, encoder, renderer);
    }
  }
}
