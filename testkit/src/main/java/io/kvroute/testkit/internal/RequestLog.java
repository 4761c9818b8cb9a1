package io.kvroute.testkit.internal;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpExchange;
import io.kvroute.testkit.RecordedRequest;
import java.io.IOException;
import java.util.ArrayDeque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The requests a simulator received, newest last, bounded (the oldest is dropped).
 *
 * <p>Thread-safe: the log is guarded by its own monitor.
 */
public final class RequestLog {
  private final int max;
  private final ArrayDeque<RecordedRequest> recorded = new ArrayDeque<>();

  /**
   * An empty log.
   *
   * @param max how many requests it keeps
   */
  public RequestLog(int max) {
    this.max = max;
  }

  /**
   * Records a request whose body was read.
   *
   * @return the body parsed as JSON, or {@code null} if blank or not JSON
   */
  public JsonNode record(HttpExchange ex, String body) {
    JsonNode json = null;
    if (!body.isBlank()) {
      try {
        json = SimHttp.JSON.readTree(body);
      } catch (IOException e) {
        json = null;
      }
    }
    Map<String, List<String>> headers = new LinkedHashMap<>();
    ex.getRequestHeaders()
        .forEach((k, v) -> headers.put(k.toLowerCase(Locale.ROOT), List.copyOf(v)));
    RecordedRequest r =
        new RecordedRequest(
            ex.getRequestMethod(), ex.getRequestURI().getPath(), headers, body, json);
    synchronized (this) {
      if (recorded.size() == max) {
        recorded.removeFirst();
      }
      recorded.addLast(r);
    }
    return json;
  }

  /** The recorded requests, oldest first. */
  public synchronized List<RecordedRequest> snapshot() {
    return List.copyOf(recorded);
  }

  /** Forgets every recorded request. */
  public synchronized void clear() {
    recorded.clear();
  }
}
