package io.kvroute.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * A request a simulator received, for assertions. Immutable; thread-safe (do not modify the JSON
 * tree).
 *
 * @param method HTTP method
 * @param path request path (without query)
 * @param headers request headers, names in lower case
 * @param body the raw body text
 * @param json the body parsed as JSON, or {@code null} if empty or not JSON
 */
public record RecordedRequest(
    String method, String path, Map<String, List<String>> headers, String body, JsonNode json) {

  /** Copies the headers. */
  public RecordedRequest {
    Objects.requireNonNull(method, "method");
    Objects.requireNonNull(path, "path");
    headers = Map.copyOf(headers);
    Objects.requireNonNull(body, "body");
  }

  /** The first value of a header (name case-insensitive). */
  public Optional<String> header(String name) {
    List<String> v = headers.get(name.toLowerCase(java.util.Locale.ROOT));
    return v == null || v.isEmpty() ? Optional.empty() : Optional.of(v.get(0));
  }

  /** The JSON field at {@code name}, or a missing node. */
  public JsonNode field(String name) {
    return json == null
        ? com.fasterxml.jackson.databind.node.MissingNode.getInstance()
        : json.path(name);
  }
}
