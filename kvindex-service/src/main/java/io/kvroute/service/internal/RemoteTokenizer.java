package io.kvroute.service.internal;

import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.UpstreamException;
import io.kvroute.scoring.SchedulingRequest;
import io.kvroute.scoring.Tokenizers;
import io.kvroute.service.ServiceConfig.TokenizerSettings;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * Tokenizes {@code kvroute serve}'s prompt text: an in-process tokenizer first (when configured),
 * else vLLM's {@code POST /tokenize} through scoring's {@link Tokenizers.VllmTokenizer} (the same
 * client the gateway uses: one wire format, one bounded cache keyed by model and prompt, bounded
 * both in entries and in total tokens), on a fixed URL or on the pods' URLs in rotation. Failures
 * become {@link TokenizerException}s carrying the status the service answers with.
 *
 * <p>Thread-safe. Futures complete on the transport's threads (or at once on a cache hit).
 */
public final class RemoteTokenizer {
  private final TokenizerSettings settings;
  private final Supplier<List<URI>> podUrls;
  private final Tokenizers.VllmTokenizer remote;
  private final java.util.function.Function<String, int[]> local;
  private final Counter localCalls;
  private final Counter localFailures;

  /**
   * A tokenizer.
   *
   * @param settings URL or pods, timeout, cache bounds
   * @param podUrls the configured pods' HTTP URLs (used when {@code settings.fromPods()})
   * @param transport sends the {@code /tokenize} calls
   * @param registry where the {@code kvroute_service_tokenizer_*} meters go
   * @param local an in-process tokenizer tried first, or {@code null}
   */
  public RemoteTokenizer(
      TokenizerSettings settings,
      Supplier<List<URI>> podUrls,
      HttpTransport transport,
      MeterRegistry registry,
      java.util.function.Function<String, int[]> local) {
    this.settings = settings;
    this.local = local;
    this.podUrls = podUrls;
    Tokenizers.VllmBuilder b =
        Tokenizers.vllm()
            .transport(transport)
            .timeout(settings.timeout())
            .cache(settings.cacheEntries(), settings.cacheMaxTokens());
    settings.url().ifPresent(b::baseUrl);
    this.remote = b.build();
    this.localCalls = Counter.builder("kvroute.service.tokenizer.local").register(registry);
    this.localFailures =
        Counter.builder("kvroute.service.tokenizer.local.failures").register(registry);
    FunctionCounter.builder(
            "kvroute.service.tokenizer.cache.hits", remote, Tokenizers.VllmTokenizer::cacheHits)
        .register(registry);
    FunctionCounter.builder(
            "kvroute.service.tokenizer.cache.misses", remote, Tokenizers.VllmTokenizer::cacheMisses)
        .register(registry);
    FunctionCounter.builder(
            "kvroute.service.tokenizer.failures", remote, Tokenizers.VllmTokenizer::failures)
        .register(registry);
    Gauge.builder("kvroute.service.tokenizer.cache.entries", this, t -> t.cacheSize())
        .register(registry);
  }

  /** A tokenization failure: {@code status} is the HTTP status the service answers with. */
  public static final class TokenizerException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int status;

    TokenizerException(int status, String message) {
      super(message, null, false, false);
      this.status = status;
    }

    /** 502 (bad upstream answer) or 504 (timeout). */
    public int status() {
      return status;
    }
  }

  /** Cached prompts. */
  public int cacheSize() {
    return remote.cacheSize();
  }

  /** The token ids of {@code prompt} for {@code model}. */
  public CompletableFuture<int[]> tokenize(String model, String prompt) {
    if (local != null) {
      try {
        int[] ids = local.apply(prompt);
        localCalls.increment();
        return CompletableFuture.completedFuture(ids);
      } catch (RuntimeException e) {
        localFailures.increment();
        if (!settings.hasRemote()) {
          return CompletableFuture.failedFuture(
              new TokenizerException(502, "local tokenizer failed: " + e.getMessage()));
        }
      }
    }
    SchedulingRequest.Builder r = SchedulingRequest.builder().model(model).prompt(prompt);
    String target;
    if (settings.url().isPresent()) {
      target = settings.url().get().resolve("/tokenize").toString();
    } else {
      List<URI> urls = podUrls.get();
      if (urls.isEmpty()) {
        return CompletableFuture.failedFuture(
            new TokenizerException(502, "tokenizer: no configured pod has an http URL"));
      }
      List<Endpoint> pods = new ArrayList<>(urls.size());
      for (URI u : urls) {
        pods.add(Endpoint.of(u.getScheme() + "://" + u.getRawAuthority(), Endpoint.Role.BOTH));
      }
      r.candidates(pods);
      target = "the pods' /tokenize";
    }
    return remote
        .tokenize(r.build())
        .toCompletableFuture()
        .handle(
            (tokens, err) -> {
              if (err == null) {
                return tokens;
              }
              Throwable c = CancellableFutures.unwrap(err);
              if (c instanceof UpstreamException u && u.kind() == UpstreamException.Kind.TIMEOUT) {
                throw new TokenizerException(
                    504,
                    "tokenizer: "
                        + target
                        + " did not answer within "
                        + settings.timeout().toMillis()
                        + " ms");
              }
              throw new TokenizerException(
                  502,
                  "tokenizer: "
                      + target
                      + " failed: "
                      + (c instanceof Tokenizers.TokenizationException
                          ? ""
                          : c.getClass().getSimpleName() + ": ")
                      + c.getMessage());
            });
  }
}
