package io.kvroute.service.internal;

import io.kvroute.config.Checks;
import io.kvroute.config.ConfigException;
import io.kvroute.service.ServiceConfig;
import io.kvroute.service.ServiceConfig.PodSpec;
import io.kvroute.service.ServiceConfig.TokenizerSettings;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * {@code kvroute serve}'s configuration file as it is written (snake-case keys, bound by {@link
 * io.kvroute.config.ConfigBinder#snakeCase()}); {@link #apply} turns it into a {@link
 * ServiceConfig.Builder}, whose {@code build()} checks the ranges. Every key is documented in
 * {@code docs/configuration.md}, checked against these records.
 *
 * @param model the served model's name (required)
 * @param http the HTTP server
 * @param index the block index
 * @param events the KV-event subscriptions
 * @param tokenizer how prompts are tokenized
 * @param limits request limits
 * @param pods the pods followed
 * @param podsFile a pods file, re-read when it changes (relative to the configuration file)
 * @param podsFilePollMs how often the pods file is checked
 */
public record ServiceFile(
    String model,
    Http http,
    Index index,
    Events events,
    Tokenizer tokenizer,
    Limits limits,
    List<Pod> pods,
    String podsFile,
    Integer podsFilePollMs) {

  private static final Pattern POD_ID = Pattern.compile("[A-Za-z0-9._:@/-]{1,253}");

  /** Validates the pod list. */
  public ServiceFile {
    pods = pods == null ? null : List.copyOf(pods);
    if (pods != null) {
      checkPods(pods, "pods");
    }
  }

  /**
   * Checks a pod list: at most {@link ServiceConfig#MAX_PODS}, ids distinct.
   *
   * @param path the list's path in errors ({@code pods}, or empty for a pods file's array)
   */
  public static void checkPods(List<Pod> pods, String path) {
    if (pods.size() > ServiceConfig.MAX_PODS) {
      throw new ConfigException(
          path,
          "lists " + pods.size() + " pods; at most " + ServiceConfig.MAX_PODS + " are supported");
    }
    Map<String, Integer> seen = new HashMap<>();
    for (int i = 0; i < pods.size(); i++) {
      Integer first = seen.putIfAbsent(pods.get(i).id(), i);
      if (first != null) {
        throw new ConfigException(
            path + "[" + i + "].id",
            "\"" + pods.get(i).id() + "\" is listed twice (also " + path + "[" + first + "])");
      }
    }
  }

  /**
   * Sets every key the file gives on {@code b}; a relative pods file is resolved in {@code dir}.
   */
  public void apply(ServiceConfig.Builder b, Path dir) {
    b.model(model);
    if (http != null) {
      set(http.host(), b::host);
      set(http.port(), b::port);
      set(http.maxBodyBytes(), b::maxBodyBytes);
      set(http.threads(), b::threads);
      set(http.maxConnections(), b::maxConnections);
      set(millis(http.requestTimeoutMs()), b::requestTimeout);
      set(millis(http.idleTimeoutMs()), b::idleTimeout);
    }
    if (index != null) {
      set(index.blockSize(), b::blockSize);
      set(index.hashSeed(), b::hashSeed);
      set(index.maxKeys(), b::maxKeys);
      if (index.tierWeights() != null) {
        index.tierWeights().forEach(b::tierWeight);
      }
    }
    if (events != null) {
      set(millis(events.readyTimeoutMs()), b::readyTimeout);
      set(events.topic(), b::topic);
    }
    if (tokenizer != null) {
      b.tokenizer(tokenizer.settings(dir));
    }
    if (limits != null) {
      set(limits.maxTokens(), b::maxTokens);
      set(limits.maxCandidatePods(), b::maxCandidatePods);
    }
    if (pods != null) {
      b.pods(pods.stream().map(Pod::spec).toList());
    }
    if (podsFile != null) {
      Path p = Path.of(podsFile);
      b.podsFile(p.isAbsolute() || dir == null ? p : dir.resolve(p));
    }
    set(millis(podsFilePollMs), b::podsFilePoll);
  }

  private static <T> void set(T value, java.util.function.Consumer<T> sink) {
    if (value != null) {
      sink.accept(value);
    }
  }

  private static Duration millis(Integer ms) {
    return ms == null ? null : Duration.ofMillis(ms);
  }

  /**
   * {@code http}.
   *
   * @param host bind address
   * @param port port (0: any free port)
   * @param maxBodyBytes largest request body
   * @param threads event-loop threads
   * @param maxConnections open connections allowed
   * @param requestTimeoutMs time to receive one request or write one answer
   * @param idleTimeoutMs how long an idle keep-alive connection is kept
   */
  public record Http(
      String host,
      Integer port,
      Integer maxBodyBytes,
      Integer threads,
      Integer maxConnections,
      Integer requestTimeoutMs,
      Integer idleTimeoutMs) {}

  /**
   * {@code index}.
   *
   * @param blockSize tokens per block
   * @param hashSeed seed of the request-key chain
   * @param maxKeys request keys kept
   * @param tierWeights score weight per storage tier
   */
  public record Index(
      Integer blockSize, String hashSeed, Integer maxKeys, Map<String, Double> tierWeights) {}

  /**
   * {@code events}.
   *
   * @param readyTimeoutMs how long readiness waits for a silent pod
   * @param topic ZMQ subscription topic
   */
  public record Events(Integer readyTimeoutMs, String topic) {}

  /**
   * {@code tokenizer}.
   *
   * @param url vLLM's server for {@code POST /tokenize}, or {@code "pods"}
   * @param path local tokenizer files (tokenized in process; {@code url} is then the fallback)
   * @param revision the snapshot of a Hugging Face cache directory {@code path}
   * @param timeoutMs per-call timeout
   * @param cacheEntries cached prompts
   * @param cacheMaxTokens tokens the cache holds
   */
  public record Tokenizer(
      String url,
      String path,
      String revision,
      Integer timeoutMs,
      Integer cacheEntries,
      Long cacheMaxTokens) {
    /** Validates the URL. */
    public Tokenizer {
      if (url != null && !url.equals("pods")) {
        Checks.httpUrl("url", url);
      }
    }

    TokenizerSettings settings(Path dir) {
      TokenizerSettings.Builder tb = TokenizerSettings.builder();
      if ("pods".equals(url)) {
        tb.fromPods();
      } else if (url != null) {
        tb.url(Checks.httpUrl("url", url));
      }
      if (path != null) {
        Path p = Path.of(path);
        tb.path(p.isAbsolute() || dir == null ? p : dir.resolve(p));
      }
      set(revision, tb::revision);
      set(millis(timeoutMs), tb::timeout);
      set(cacheEntries, tb::cacheEntries);
      set(cacheMaxTokens, tb::cacheMaxTokens);
      return tb.build();
    }
  }

  /**
   * {@code limits}.
   *
   * @param maxTokens largest {@code token_ids} length
   * @param maxCandidatePods largest {@code candidate_pods} length
   */
  public record Limits(Integer maxTokens, Integer maxCandidatePods) {}

  /**
   * One pod ({@code pods[]}, or an entry of a pods file).
   *
   * @param id the pod's id
   * @param events its KV-event publisher
   * @param replay its replay endpoint
   * @param http its HTTP base URL
   * @param capacityBlocks its KV capacity in blocks
   */
  public record Pod(String id, String events, String replay, String http, Long capacityBlocks) {
    /** Validates. */
    public Pod {
      Checks.required("id", id, "the pod's name, as used in candidate_pods");
      if (!POD_ID.matcher(id).matches()) {
        throw new ConfigException(
            "id", "must be 1-253 characters of [A-Za-z0-9._:@/-], was \"" + id + "\"");
      }
      Checks.zmqEndpoint("events", events);
      if (replay != null) {
        Checks.zmqEndpoint("replay", replay);
      }
      if (http != null) {
        Checks.httpUrl("http", http);
      }
      if (capacityBlocks != null && capacityBlocks < 0) {
        throw new ConfigException("capacity_blocks", "must be >= 0, was " + capacityBlocks);
      }
    }

    /** The pod as the service uses it. */
    public PodSpec spec() {
      return new PodSpec(
          id,
          events,
          Optional.ofNullable(replay),
          Optional.ofNullable(http).map(h -> Checks.httpUrl("http", h)),
          capacityBlocks == null ? 0 : capacityBlocks);
    }
  }

  /**
   * A pods file written as an object.
   *
   * @param pods the pods
   */
  public record PodsFile(List<Pod> pods) {
    /** Validates. */
    public PodsFile {
      Checks.required("pods", pods, "a list of pods");
      pods = List.copyOf(pods);
      checkPods(pods, "pods");
    }
  }

  /** The pods of a pods file's array, checked. */
  public static List<PodSpec> specs(Pod[] pods) {
    List<Pod> list = List.of(pods);
    checkPods(list, "");
    List<PodSpec> out = new ArrayList<>();
    list.forEach(p -> out.add(p.spec()));
    return out;
  }
}
