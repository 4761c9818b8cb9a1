package io.kvroute.service.internal;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.UpstreamException;
import io.kvroute.service.ServiceConfig.TokenizerSettings;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * Tokenizes prompt text with vLLM's {@code POST /tokenize} ({@code {"model", "prompt"}} → {@code
 * {"tokens": [...]}}), with a per-call timeout and a bounded LRU cache keyed by model and prompt
 * (bounded both in entries and in total tokens).
 *
 * <p>Thread-safe: the cache is guarded by its own monitor, held only for map operations. Futures
 * complete on the transport's threads (or at once on a cache hit).
 */
public final class RemoteTokenizer {
  private static final JsonFactory JSON = new JsonFactory();
  private static final int MAX_RESPONSE_BYTES = 64 << 20;

  private final TokenizerSettings settings;
  private final Supplier<List<URI>> podUrls;
  private final HttpTransport transport;
  private final AtomicInteger rotation = new AtomicInteger();
  private final LinkedHashMap<String, int[]> cache = new LinkedHashMap<>(64, 0.75f, true);
  private long cachedTokens;
  private final Counter hits;
  private final Counter misses;
  private final Counter failures;
  private final java.util.function.Function<String, int[]> local;
  private final Counter localCalls;

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
    this.localCalls = Counter.builder("kvroute.service.tokenizer.local").register(registry);
    this.podUrls = podUrls;
    this.transport = transport;
    this.hits = Counter.builder("kvroute.service.tokenizer.cache.hits").register(registry);
    this.misses = Counter.builder("kvroute.service.tokenizer.cache.misses").register(registry);
    this.failures = Counter.builder("kvroute.service.tokenizer.failures").register(registry);
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
  public synchronized int cacheSize() {
    return cache.size();
  }

  /** The token ids of {@code prompt} for {@code model}. */
  public CompletableFuture<int[]> tokenize(String model, String prompt) {
    if (local != null) {
      try {
        int[] ids = local.apply(prompt);
        localCalls.increment();
        return CompletableFuture.completedFuture(ids);
      } catch (RuntimeException e) {
        failures.increment();
        if (!settings.hasRemote()) {
          return CompletableFuture.failedFuture(
              new TokenizerException(502, "local tokenizer failed: " + e.getMessage()));
        }
      }
    }
    String key = model + '\u0000' + prompt;
    int[] hit = cached(key);
    if (hit != null) {
      hits.increment();
      return CompletableFuture.completedFuture(hit);
    }
    misses.increment();
    URI base;
    if (settings.url().isPresent()) {
      base = settings.url().get();
    } else {
      List<URI> urls = podUrls.get();
      if (urls.isEmpty()) {
        failures.increment();
        return CompletableFuture.failedFuture(
            new TokenizerException(502, "tokenizer: no configured pod has an http URL"));
      }
      base = urls.get(Math.floorMod(rotation.getAndIncrement(), urls.size()));
    }
    byte[] body;
    try {
      ByteArrayOutputStream out = new ByteArrayOutputStream(prompt.length() + 64);
      try (JsonGenerator g = JSON.createGenerator(out)) {
        g.writeStartObject();
        g.writeStringField("model", model);
        g.writeStringField("prompt", prompt);
        g.writeEndObject();
      }
      body = out.toByteArray();
    } catch (IOException e) {
      return CompletableFuture.failedFuture(e);
    }
    URI target = base.resolve("/tokenize");
    Endpoint server =
        Endpoint.of(base.getScheme() + "://" + base.getRawAuthority(), Endpoint.Role.BOTH);
    return CancellableFutures.compose(
            transport.send(
                HttpTransport.Outbound.post(server, "/tokenize", body)
                    .timeout(settings.timeout())
                    .build()),
            resp -> {
              if (resp.status() != 200) {
                resp.cancel();
                throw new TokenizerException(
                    502, "tokenizer: " + target + " answered HTTP " + resp.status());
              }
              return resp.readAll(MAX_RESPONSE_BYTES);
            })
        .handle(
            (bytes, err) -> {
              if (err != null) {
                failures.increment();
                Throwable c = CancellableFutures.unwrap(err);
                if (c instanceof TokenizerException te) {
                  throw te;
                }
                if (c instanceof UpstreamException u
                    && u.kind() == UpstreamException.Kind.TIMEOUT) {
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
                        + c.getClass().getSimpleName()
                        + (c.getMessage() == null ? "" : ": " + c.getMessage()));
              }
              int[] tokens;
              try {
                tokens = parseTokens(bytes);
              } catch (IOException | RuntimeException e) {
                failures.increment();
                throw new TokenizerException(
                    502, "tokenizer: " + target + " answered without a \"tokens\" array");
              }
              store(key, tokens);
              return tokens;
            });
  }

  static int[] parseTokens(byte[] body) throws IOException {
    try (JsonParser p = JSON.createParser(body)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new IOException("not an object");
      }
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken t = p.nextToken();
        if (name.equals("tokens") && t == JsonToken.START_ARRAY) {
          int[] out = new int[256];
          int n = 0;
          while (p.nextToken() == JsonToken.VALUE_NUMBER_INT) {
            if (n == out.length) {
              out = Arrays.copyOf(out, n * 2);
            }
            out[n++] = p.getIntValue();
          }
          if (p.currentToken() != JsonToken.END_ARRAY) {
            throw new IOException("non-integer token");
          }
          return Arrays.copyOf(out, n);
        }
        p.skipChildren();
      }
    }
    throw new IOException("no tokens");
  }

  private synchronized int[] cached(String key) {
    return cache.get(key);
  }

  private synchronized void store(String key, int[] tokens) {
    if (settings.cacheEntries() == 0 || tokens.length > settings.cacheMaxTokens()) {
      return;
    }
    int[] old = cache.put(key, tokens);
    if (old != null) {
      cachedTokens -= old.length;
    }
    cachedTokens += tokens.length;
    Iterator<Map.Entry<String, int[]>> it = cache.entrySet().iterator();
    while ((cache.size() > settings.cacheEntries() || cachedTokens > settings.cacheMaxTokens())
        && it.hasNext()) {
      cachedTokens -= it.next().getValue().length;
      it.remove();
    }
  }
}
