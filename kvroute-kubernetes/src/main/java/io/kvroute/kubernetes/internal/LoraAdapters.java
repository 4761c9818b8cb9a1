package io.kvroute.kubernetes.internal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The LoRA adapters each vLLM endpoint serves, from its {@code GET /v1/models} (the entries whose
 * {@code parent} is set), kept per base URL and refreshed on demand. Thread-safe; fetches are
 * asynchronous and call back when they end.
 */
public final class LoraAdapters implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(LoraAdapters.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  private final HttpClient http;
  private final Duration timeout;
  private final Map<String, String> known = new ConcurrentHashMap<>();
  private final Map<String, Boolean> inFlight = new ConcurrentHashMap<>();

  /** Fetches with a JDK client whose callbacks run on {@code executor}. */
  public LoraAdapters(Duration timeout, Executor executor) {
    this.timeout = timeout;
    this.http =
        HttpClient.newBuilder()
            .connectTimeout(timeout)
            .executor(executor)
            .version(HttpClient.Version.HTTP_1_1)
            .build();
  }

  /**
   * The adapters of {@code baseUrl}, comma-separated (empty when none or when the last fetch
   * failed); empty Optional when no fetch has ended yet.
   */
  public Optional<String> adapters(String baseUrl) {
    return Optional.ofNullable(known.get(baseUrl));
  }

  /**
   * Fetches {@code baseUrl}'s adapters unless a fetch is under way; {@code changed} runs when the
   * answer differs from what was known.
   */
  public void fetch(String baseUrl, Runnable changed) {
    if (inFlight.putIfAbsent(baseUrl, Boolean.TRUE) != null) {
      return;
    }
    HttpRequest req =
        HttpRequest.newBuilder(URI.create(baseUrl + "/v1/models"))
            .timeout(timeout)
            .header("Accept", "application/json")
            .GET()
            .build();
    http.sendAsync(req, HttpResponse.BodyHandlers.ofByteArray())
        .handle(
            (resp, failure) -> {
              String adapters;
              if (failure != null) {
                log.debug(
                    "kvroute-kubernetes: GET {}/v1/models failed: {}", baseUrl, failure.toString());
                adapters = "";
              } else if (resp.statusCode() != 200) {
                log.debug(
                    "kvroute-kubernetes: GET {}/v1/models answered {}", baseUrl, resp.statusCode());
                adapters = "";
              } else {
                adapters = parse(resp.body());
              }
              inFlight.remove(baseUrl);
              String before = known.put(baseUrl, adapters);
              if (!adapters.equals(before)) {
                changed.run();
              }
              return null;
            });
  }

  /** Forgets every base URL not in {@code keep}. */
  public void retain(Collection<String> keep) {
    known.keySet().retainAll(keep);
  }

  /** The base URLs known. */
  public List<String> known() {
    return new ArrayList<>(known.keySet());
  }

  /**
   * The ids of the {@code data[]} entries of a {@code /v1/models} answer that have a {@code parent}
   * (vLLM's LoRA adapters), comma-separated in answer order; empty when none or malformed.
   */
  public static String parse(byte[] body) {
    try {
      JsonNode data = JSON.readTree(body).path("data");
      List<String> ids = new ArrayList<>();
      for (JsonNode m : data) {
        JsonNode parent = m.path("parent");
        String id = m.path("id").asText("");
        if (!parent.isMissingNode() && !parent.isNull() && !id.isEmpty()) {
          ids.add(id);
        }
      }
      return String.join(",", ids);
    } catch (IOException | RuntimeException e) {
      return "";
    }
  }

  @Override
  public void close() {
    // The JDK 17 HttpClient has no close(); its threads are the executor's.
  }
}
