package io.kvroute.service;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.HttpTransports;
import io.kvroute.connector.StreamingResponse;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/**
 * A client of the KV-cache manager service's API ({@code kvroute serve}) for gateways on another
 * JVM. Calls go through an {@link HttpTransport}, so the gateway's TLS, allowlist and tracing
 * decorators apply to them as to every other kvroute call.
 *
 * <pre>{@code
 * KvIndexClient client = KvIndexClient.builder(URI.create("http://kv-manager:8080"))
 *     .timeout(Duration.ofMillis(50)).build();
 * ScoreResponse r = client.score(ScoreRequest.builder()
 *     .tokenIds(tokens).candidatePods(List.of("vllm-0", "vllm-1")).build());
 * r.best().ifPresent(pod -> route(pod));
 * }</pre>
 *
 * <p>Every failure is a {@link KvIndexServiceException}: the service's status, message and the
 * field it named, or status 0 for transport failures and timeouts.
 *
 * <p>Thread-safe; share one instance. Asynchronous results complete on the transport's threads.
 */
public final class KvIndexClient {
  private static final JsonFactory JSON = new JsonFactory();
  private static final ObjectMapper MAPPER =
      new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

  private static final int MAX_ANSWER_BYTES = 64 << 20;

  private final Endpoint service;
  private final HttpTransport transport;
  private final Duration timeout;

  private KvIndexClient(Builder b) {
    this.service =
        Endpoint.of(b.base.getScheme() + "://" + b.base.getRawAuthority(), Endpoint.Role.BOTH);
    this.timeout = b.timeout;
    this.transport = b.transport != null ? b.transport : HttpTransports.shared();
  }

  /** A builder for the service at {@code baseUri} (e.g. {@code http://kv-manager:8080}). */
  public static Builder builder(URI baseUri) {
    return new Builder(baseUri);
  }

  /** Scores the candidate pods for a prompt (blocking). */
  public ScoreResponse score(ScoreRequest request) {
    return join(scoreAsync(request));
  }

  /** Scores the candidate pods for a prompt. */
  public CompletableFuture<ScoreResponse> scoreAsync(ScoreRequest request) {
    return send(
        HttpTransport.Outbound.post(service, "/api/v1/score", encode(request))
            .timeout(timeout)
            .build(),
        ScoreResponse.class);
  }

  /** Totals over the whole index. */
  public CacheState cacheState() {
    return join(send(get("/api/v1/cache/state"), CacheState.class));
  }

  /**
   * One pod's state.
   *
   * @throws KvIndexServiceException with status 404 if the service does not follow the pod
   */
  public PodState pod(String podId) {
    Objects.requireNonNull(podId, "podId");
    String path = "/api/v1/cache/pod/" + URLEncoder.encode(podId, StandardCharsets.UTF_8);
    return join(send(get(path), PodState.class));
  }

  /** All pods' states. */
  public List<PodState> pods() {
    return join(send(get("/api/v1/cache/pods"), PodList.class)).pods();
  }

  /** Whether the service answers {@code /readyz} with 200. */
  public boolean ready() {
    CompletableFuture<Boolean> f =
        transport
            .send(get("/readyz"))
            .handle(
                (resp, err) -> {
                  if (err != null) {
                    Throwable c = CancellableFutures.unwrap(err);
                    throw new KvIndexServiceException(0, "readyz: " + c, null, c);
                  }
                  resp.cancel();
                  return resp.status() == 200;
                });
    return join(f);
  }

  record PodList(@com.fasterxml.jackson.annotation.JsonProperty("pods") List<PodState> pods) {}

  private HttpTransport.Outbound get(String path) {
    return HttpTransport.Outbound.get(service, path).timeout(timeout).build();
  }

  private <T> CompletableFuture<T> send(HttpTransport.Outbound out, Class<T> type) {
    String what = out.method() + " " + out.path();
    return CancellableFutures.compose(
            transport.send(out),
            resp ->
                resp.readAll(MAX_ANSWER_BYTES)
                    .thenApply(
                        bytes -> {
                          if (resp.status() != 200) {
                            throw error(resp, bytes);
                          }
                          try {
                            return MAPPER.readValue(bytes, type);
                          } catch (IOException e) {
                            throw new KvIndexServiceException(
                                resp.status(), "unreadable answer: " + e.getMessage(), null, e);
                          }
                        }))
        .handle(
            (value, err) -> {
              if (err == null) {
                return value;
              }
              Throwable c = CancellableFutures.unwrap(err);
              if (c instanceof KvIndexServiceException k) {
                throw k;
              }
              throw new KvIndexServiceException(0, what + " failed: " + c, null, c);
            });
  }

  private static KvIndexServiceException error(StreamingResponse resp, byte[] body) {
    String message = "HTTP " + resp.status();
    String field = null;
    try {
      JsonNode n = MAPPER.readTree(body);
      if (n != null && n.hasNonNull("error")) {
        message = n.get("error").asText();
        field = n.hasNonNull("field") ? n.get("field").asText() : null;
      }
    } catch (IOException | RuntimeException ignored) {
      // not JSON: keep the status line
    }
    return new KvIndexServiceException(resp.status(), message, field, null);
  }

  private static <T> T join(CompletableFuture<T> f) {
    try {
      return f.get();
    } catch (ExecutionException e) {
      if (e.getCause() instanceof KvIndexServiceException k) {
        throw k;
      }
      throw new KvIndexServiceException(0, String.valueOf(e.getCause()), null, e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new KvIndexServiceException(0, "interrupted", null, e);
    }
  }

  static byte[] encode(ScoreRequest r) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(256);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      if (r.prompt().isPresent()) {
        g.writeStringField("prompt", r.prompt().get());
      }
      if (r.tokenIds().isPresent()) {
        int[] t = r.tokenIds().get();
        g.writeFieldName("token_ids");
        g.writeArray(t, 0, t.length);
      }
      if (r.promptBlocks().isPresent()) {
        g.writeArrayFieldStart("prompt_blocks");
        for (long k : r.promptBlocks().get()) {
          g.writeString(String.format("%016x", k));
        }
        g.writeEndArray();
      }
      if (r.model().isPresent()) {
        g.writeStringField("model", r.model().get());
      }
      if (r.lora().isPresent()) {
        g.writeStringField("lora", r.lora().get());
      }
      if (r.candidatePods().isPresent()) {
        g.writeArrayFieldStart("candidate_pods");
        for (String p : r.candidatePods().get()) {
          g.writeString(p);
        }
        g.writeEndArray();
      }
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /** Configures a {@link KvIndexClient}; not thread-safe. */
  public static final class Builder {
    private final URI base;
    private Duration timeout = Duration.ofSeconds(1);
    private HttpTransport transport;

    private Builder(URI base) {
      this.base = Objects.requireNonNull(base, "baseUri");
    }

    /** Per-request timeout (default 1 s). */
    public Builder timeout(Duration timeout) {
      this.timeout = Objects.requireNonNull(timeout, "timeout");
      return this;
    }

    /** The HTTP transport (default: {@link HttpTransports#shared()}); the caller keeps it. */
    public Builder transport(HttpTransport transport) {
      this.transport = Objects.requireNonNull(transport, "transport");
      return this;
    }

    /**
     * Builds the client.
     *
     * @throws IllegalArgumentException naming the invalid field
     */
    public KvIndexClient build() {
      if (base.getScheme() == null || base.getHost() == null) {
        throw new IllegalArgumentException("baseUri must be an absolute http URL, was " + base);
      }
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("timeout must be > 0, was " + timeout);
      }
      return new KvIndexClient(this);
    }
  }
}
